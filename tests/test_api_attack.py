"""The read-only SQL API under attack (issue 14, build 6; Must show "API attack suite",
"faultline query DROP TABLE" and the bind lines).

A real API server (a Faust web server built with ``sinks.api.web_options``, the SQL API and
the incident page over a real chDB store) runs in a child process with a fake secret in its
environment and another in a file. Every attack is refused or bounded (time, memory, bytes),
no answer carries a secret, 16 concurrent clients each get their own answer, and every
query the product itself sends through the API passes the allow-list and runs."""

from __future__ import annotations

import ast
import http.client
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import orjson
import pytest

from faultline import config
from faultline.sinks.api import MAX_RESPONSE_BYTES, REQUEST_TIMEOUT_S, web_options
from faultline.sinks.sqlcheck import check_query
from faultline.sinks.store import QueryRejected, store_tables
from ports import free_port

ROOT = Path(__file__).resolve().parent.parent
FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")
TOKEN = "tok-\u00e9-7f3a"          # non-ASCII on purpose
ENV_SECRET = "ENVSECRET-93b1c2d4"
FILE_SECRET = "FILESECRET-5e6f7a8b"

SERVER = textwrap.dedent("""
    import asyncio, sys
    import faust
    from faultline import config
    from faultline.sinks import dataset, open_store
    from faultline.streams.services import Services
    from faultline.sinks.api import register_views, web_options
    from faultline.streams.web import register_views as page_views

    path, port = sys.argv[1], int(sys.argv[2])
    settings = config.load(store_path=path)
    store = open_store(settings)
    ds = dataset.build(seed=9, n_jobs=30)
    dataset.write(store, ds)
    app = faust.App("fl-attack-test", broker="kafka://127.0.0.1:1", web_enabled=True, web_port=port,
                    autodiscover=False, **web_options(settings))
    services = Services(settings, store=store)
    register_views(app, services)
    page_views(app, services)

    async def main():
        await app.web.start()
        print(len({i.id for i in ds.incidents}), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith(field + ":"):
            return int(ln.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("attack")
    secret_file = d / "secret.txt"
    secret_file.write_text(FILE_SECRET + "\n")
    port = free_port()
    env = {**os.environ, "FAULTLINE_API_TOKEN": TOKEN, "FAULTLINE_FAKE_SECRET": ENV_SECRET}
    env.pop("FAULTLINE_WEB_BIND", None)
    p = subprocess.Popen([sys.executable, "-c", SERVER, str(d / "store"), str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=str(d))
    line = p.stdout.readline()
    if not line.strip():
        p.kill()
        pytest.fail("API server did not start: " + p.stderr.read()[-3000:])
    yield {"port": port, "pid": p.pid, "n_incidents": int(line), "store": str(d / "store"),
           "secret_file": str(secret_file)}
    p.kill()
    p.wait()


def request(port: int, path: str, body: dict | None = None, *, token: str | bytes | None = TOKEN,
            timeout: float = 60) -> tuple[int, bytes, dict, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    conn.putrequest("POST" if body is not None else "GET", path)
    for k, v in headers.items():
        conn.putheader(k, v)
    if token is not None:
        raw = token if isinstance(token, bytes) else token.encode("utf-8")
        conn.putheader("Authorization", b"Bearer " + raw)
    data = orjson.dumps(body) if body is not None else b""
    conn.putheader("Content-Length", str(len(data)))
    conn.endheaders()
    t0 = time.monotonic()
    conn.send(data)
    r = conn.getresponse()
    out = r.read()
    conn.close()
    return r.status, out, dict(r.getheaders()), time.monotonic() - t0


def sql(port: int, q: str, **kw) -> tuple[int, bytes, dict, float]:
    return request(port, "/faultline/api/sql", {"sql": q, **kw})


def no_secret(body: bytes) -> None:
    for s in (ENV_SECRET, FILE_SECRET, TOKEN.encode("utf-8").decode("latin-1"), "FAULTLINE_FAKE_SECRET"):
        assert s.encode("utf-8") not in body and s.encode("latin-1", "ignore") not in body, body[:300]


ATTACKS = [
    # scalar and table-function file reads
    "SELECT file('/proc/self/environ') AS x",
    "SELECT file('{secret}') AS x",
    "SELECT `file`('/proc/self/environ')",
    "SELECT \"file\"('/proc/self/environ')",
    "SELECT * FROM file('{secret}', 'LineAsString')",
    "SELECT * FROM file('/proc/self/environ', 'RawBLOB')",
    "WITH x AS (SELECT * FROM file('{secret}', 'LineAsString')) SELECT * FROM x",
    "SELECT id FROM incidents WHERE id IN (SELECT * FROM file('{secret}', 'LineAsString'))",
    "SELECT /* c */ fi/**/le('/etc/passwd')",
    # URLs, other databases, executables, other table functions
    "SELECT * FROM url('http://127.0.0.1:1/x', 'CSV', 'a String')",
    "SELECT * FROM remote('127.0.0.1', system.one)",
    "SELECT * FROM mysql('127.0.0.1:3306', 'db', 't', 'u', 'p')",
    "SELECT * FROM postgresql('127.0.0.1:5432', 'db', 't', 'u', 'p')",
    "SELECT * FROM s3('http://127.0.0.1:1/b/k', 'CSV')",
    "SELECT * FROM executable('cat /proc/self/environ', 'TSV', 'x String')",
    "SELECT * FROM incidents, numbers(10)",
    "SELECT * FROM input('x String')",
    "SELECT dictGet('d', 'a', toUInt64(1))",
    # settings and environment
    "SELECT getSetting('max_memory_usage')",
    "SELECT 1 SETTINGS readonly = 0",
    "SELECT count() FROM incidents SETTINGS max_memory_usage = 0, max_execution_time = 0",
    "SELECT currentUser()", "SELECT hostName()", "SELECT version()", "SELECT uptime()",
    "SELECT 1 FORMAT TSV", "SELECT 1 INTO OUTFILE '/tmp/fl-attack.txt'",
    # system tables
    "SELECT * FROM system.settings", "SELECT * FROM system.users", "SELECT * FROM `system`.`tables`",
    "SELECT * FROM information_schema.tables", "SELECT 1 FROM incidents WHERE 1 IN system.one",
    # writes and other statements
    "DROP TABLE incidents", "SELECT 1; DROP TABLE incidents", "INSERT INTO incidents SELECT * FROM incidents",
    "ALTER TABLE incidents DELETE WHERE 1", "SYSTEM SHUTDOWN", "SET readonly = 0", "$$x$$",
    "SELECT * FROM {t:Identifier}",
    # time and memory bombs
    "SELECT sum(number) FROM numbers(1e12)",
    "SELECT sleep(3)", "SELECT sleepEachRow(1) FROM incidents",
]

#: ~10^9 hashed rows: far more than the API's 5 s
SLOW = ("SELECT sum(cityHash64(a.evidence_id, b.evidence_id, c.evidence_id, d.evidence_id, e.evidence_id, "
        "f.evidence_id)) AS slow FROM incident_evidence AS a, incident_evidence AS b, incident_evidence AS c, "
        "incident_evidence AS d, incident_evidence AS e, incident_evidence AS f")

BOUNDED = [
    # allowed functions over allowed tables, but expensive: stopped by the limits
    ("SELECT length(range(400000000)) AS n", (413,)),                                    # memory
    (None, (408,)),                                                                     # time
    ("SELECT arrayMap(x -> repeat('x', 100000), range(300)) AS big FROM incidents", (413,)),   # bytes
    ("SELECT a.evidence_id AS id, repeat('y', 2000) AS pad FROM incident_evidence AS a, incident_evidence AS b, "
     "incident_evidence AS c", (413,)),                                                  # 10,001 rows x 2 kB
]


def test_attacks_are_refused_and_leak_nothing(server):
    port = server["port"]
    for q in ATTACKS:
        status, body, _, took = sql(port, q.replace("{secret}", server["secret_file"]))
        assert status == 400, (q, status, body[:300])
        assert b"error" in body
        no_secret(body)
        assert took < REQUEST_TIMEOUT_S + 2


def test_expensive_queries_are_bounded_in_time_memory_and_bytes(server):
    port, pid = server["port"], server["pid"]
    base = rss_mb(pid)
    for q, codes in BOUNDED:
        q = q or SLOW
        status, body, _, took = sql(port, q, max_rows=10_000)
        assert status in codes, (q, status, body[:300])
        assert took < REQUEST_TIMEOUT_S + 2, (q, took)
        assert len(body) < MAX_RESPONSE_BYTES
        no_secret(body)
    assert rss_mb(pid) < base + 1024, "a bounded query left the server's memory 1 GB higher"
    assert rss_mb(pid, "VmHWM") < base + 2048
    status, body, _, _ = sql(port, "SELECT count() AS n FROM incidents FINAL")
    assert status == 200 and orjson.loads(body)["rows"] == [[server["n_incidents"]]]


def test_sixteen_concurrent_clients_each_get_their_own_answer(server):
    """Some clients run queries that time out server-side (408) in between: a failed query's
    leftovers once reached the next request ("SELECT 1 AS a" came back as count())."""
    port = server["port"]
    results: dict[int, list] = {}
    slow = SLOW

    def client(i: int) -> None:
        got = []
        for k in range(4):
            if i % 4 == 0 and k % 2 == 0:
                status, body, _, took = sql(port, slow)
                got.append(("slow", status, took))
                continue
            status, body, headers, took = sql(port, f"SELECT {{v:UInt32}} AS c{i}_{k}, count() AS n FROM incidents FINAL",
                                              params={"v": i * 100 + k})
            got.append((status, orjson.loads(body) if status == 200 else body, headers, took, k))
        results[i] = got

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(results) == 16
    answered = 0
    for i, got in results.items():
        for g in got:
            if g[0] == "slow":
                assert g[1] in (408, 503, 504) and g[2] < REQUEST_TIMEOUT_S + 2, g
                continue
            status, out, headers, took, k = g
            assert took < REQUEST_TIMEOUT_S + 2
            if status == 200:
                assert out["columns"] == [f"c{i}_{k}", "n"], (i, k, out["columns"])
                assert out["rows"] == [[i * 100 + k, server["n_incidents"]]]
                answered += 1
            else:   # busy or not in time: refused with a way to retry, never someone else's answer
                assert status in (503, 504) and "Retry-After" in headers, (status, out)
    assert answered >= 16 * 3 // 2


def test_a_flood_of_slow_queries_is_refused_or_bounded_and_the_api_recovers(server):
    """40 clients at once, each a query that runs into the 5 s limit: one runs, 32 wait, the
    rest are refused at once (503 + Retry-After); a waiting one gets 504 at the 10 s request
    timeout at the latest. Right after, a normal query answers."""
    port = server["port"]
    got: list[tuple[int, float, dict]] = []
    lock = threading.Lock()

    def client() -> None:
        status, _, headers, took = sql(port, SLOW)
        with lock:
            got.append((status, took, headers))

    threads = [threading.Thread(target=client) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(got) == 40
    assert all(s in (408, 503, 504) for s, _, _ in got), sorted({s for s, _, _ in got})
    assert all(took < REQUEST_TIMEOUT_S + 2 for _, took, _ in got), max(t for _, t, _ in got)
    busy = [(took, h) for s, took, h in got if s == 503]
    assert busy and all("Retry-After" in h and took < 2 for took, h in busy), busy[:3]
    assert all("Retry-After" in h for s, _, h in got if s == 504)
    status, body, _, took = sql(port, "SELECT 7 AS after_flood")
    deadline = time.monotonic() + 30
    while status != 200 and time.monotonic() < deadline:   # the abandoned slow queries finish (<= 5 s each)
        time.sleep(1)
        status, body, _, took = sql(port, "SELECT 7 AS after_flood")
    assert status == 200 and orjson.loads(body)["rows"] == [[7]]


def test_every_route_needs_the_token_and_faust_views_are_off(server):
    port = server["port"]
    for path in ("/incidents", "/incidents/x", "/faultline/api/health", "/", "/router/", "/table/", "/graph/",
                 "/stats/", "/performance/", "/nope"):
        for token in (None, "wrong", "t\u00f6k\u00e9n-\u2603".encode("utf-8"), b"\xff\xfe-x"):
            status, body, _, _ = request(port, path, token=token)
            assert status == 401, (path, token, status, body[:200])
            no_secret(body)
    for path in ("/router/", "/table/", "/graph/", "/stats/", "/performance/"):
        status, body, _, _ = request(port, path)
        assert status == 404, (path, status, body[:200])
    # Faust's production index has no switch: behind the token, it says only "OK"
    assert request(port, "/")[:2] == (200, b'{"status":"OK"}')
    status, body, _, _ = request(port, "/incidents")
    assert status == 200 and body.count(b'href="/incidents/') == server["n_incidents"]
    assert request(port, "/faultline/api/health")[0] == 200
    status, body, _, _ = sql(port, "SELECT 1 AS one")
    assert status == 200 and orjson.loads(body)["rows"] == [[1]]


# ------------------------------------------------------------------ /fleet and /history
def page_get(port: int, path: str, query: dict[str, str]) -> tuple[int, bytes, dict, float]:
    return request(port, path + ("?" + urlencode(query) if query else ""))


def raw_get(port: int, target: bytes, timeout: float = 30) -> tuple[int, bytes]:
    """GET ``target`` as raw bytes (a request line http.client would refuse to send); status 0
    when the server reset the connection instead of answering (it refused to read on)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
                      b"\r\nConnection: close\r\n\r\n")
            out = b""
            while chunk := s.recv(65536):
                out += chunk
    except ConnectionResetError:
        return 0, b""
    head, _, body = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def rows_of(body: bytes, cls: str) -> int:
    return body.count(f'<tr class="{cls}"'.encode())


#: page parameters that must be refused (400), each with the words the answer names it by
BAD_PAGE_PARAMS = [
    ("/fleet", {"live": "0"}, "live"), ("/fleet", {"live": "10081"}, "live"), ("/fleet", {"live": "-5"}, "live"),
    ("/fleet", {"live": "1e3"}, "live"), ("/fleet", {"live": "9" * 400}, "live"), ("/fleet", {"live": "15 OR 1=1"}, "live"),
    ("/fleet", {"refresh": "3601"}, "refresh"), ("/fleet", {"refresh": "x\u2603"}, "refresh"),
    ("/history", {}, "give one of"), ("/history", {"node": "n07", "gpu": "n07/3"}, "give one of"),
    ("/history", {"host": "n07"}, "give one of"), ("/history", {"node": "   "}, "give one of"),
    ("/history", {"node": "n" * 201}, "at most 200"), ("/history", {"port": "\u00e9" * 201}, "at most 200"),
]

#: names that try to leave their SQL parameter: each must match nothing (the name is data)
INJECTED_NAMES = ["n07' OR '1'='1", "n07') OR 1=1 --", "n07' UNION SELECT file('/proc/self/environ') --",
                  "{name:String}", "n07\x00", "n07; DROP TABLE incidents", "\u00e9\u2603\U0001f525",
                  "<script>alert(1)</script>", "%27%20OR%201=1"]


def test_fleet_and_history_refuse_bad_parameters_and_leak_nothing(server):
    port = server["port"]
    for path, query, words in BAD_PAGE_PARAMS:
        status, body, _, took = page_get(port, path, query)
        assert status == 400 and words.encode() in body, (path, query, status, body[-300:])
        no_secret(body)
        assert took < REQUEST_TIMEOUT_S + 2, (path, query, took)
    for path in ("/fleet", "/history?node=n07"):
        for token in (None, "wrong", b"\xff\xfe-x"):
            status, body, _, _ = request(port, path, token=token)
            assert status == 401, (path, token, status)
            no_secret(body)


def test_history_names_are_data_never_sql_or_markup(server):
    port = server["port"]
    status, body, _, _ = page_get(port, "/history", {"node": "n07"})
    assert status == 200 and rows_of(body, "incident") > 0 and rows_of(body, "alert") > 0, body[-500:]
    for name in INJECTED_NAMES:
        for kind in ("node", "gpu", "port"):
            status, body, _, took = page_get(port, "/history", {kind: name})
            assert status == 200, (kind, name, status, body[-300:])
            assert rows_of(body, "incident") == rows_of(body, "alert") == rows_of(body, "finding") == 0, (kind, name)
            assert b"<script>" not in body and took < REQUEST_TIMEOUT_S + 2, (kind, name, took)
            no_secret(body)
    status, body, _, _ = sql(port, "SELECT count() AS n FROM incidents FINAL")
    assert status == 200 and orjson.loads(body)["rows"] == [[server["n_incidents"]]]


def test_huge_malformed_and_slow_page_requests_are_bounded(server):
    port = server["port"]
    status, body = raw_get(port, b"/history?node=" + b"x" * 100_000)   # over aiohttp's 8,190-byte line
    assert status in (0, 400, 414) and len(body) < 10_000, (status, body[:200])
    status, body = raw_get(port, b"/history?" + b"&".join(b"node=n%d" % i for i in range(600)))
    assert status == 200 and rows_of(body, "incident") == 0, status     # 600 repeats: one name (the last)
    status, body = raw_get(port, b"/history?node=%FF%FE%00")            # not UTF-8
    assert status in (200, 400) and rows_of(body, "incident") == 0, (status, body[-300:])
    no_secret(body)
    idle = []   # slow clients: 20 connections that never finish their request line hold nothing up
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /fleet?live=")
        idle.append(s)
    try:
        status, body, _, took = page_get(port, "/fleet", {"live": str(7 * 24 * 60)})   # the widest window allowed
        assert status == 200 and took < REQUEST_TIMEOUT_S + 2 and len(body) < 2_000_000, (status, took, len(body))
        assert body.count(b'class="alert"') <= 100
        no_secret(body)
    finally:
        for s in idle:
            s.close()


def test_a_backslash_in_a_parameter_is_taken_literally(server):
    """chDB reads a parameter's text as TSV-escaped: unescaped, "\\x41" matched "A" and "a\\"
    answered the page with 503 "store unavailable" (sinks/store.py _escaped fixes it)."""
    port = server["port"]
    for v in ("a\\", "\\x41", "x\\'", "\\N", "a\tb"):
        status, body, _, _ = sql(port, "SELECT {v:String} AS v", params={"v": v})
        assert status == 200 and orjson.loads(body)["rows"] == [[v]], (v, status, body[:300])
    status, body, _, _ = page_get(port, "/history", {"node": "n07\\"})
    assert status == 200 and rows_of(body, "incident") == 0, (status, body[-300:])


def fl(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([FAULTLINE, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_drop_table_exits_2_through_the_api_and_the_table_is_intact(server):
    env = {"FAULTLINE_WEB_PORT": str(server["port"]), "FAULTLINE_API_TOKEN": TOKEN}
    for q in ("DROP TABLE incidents", "drop table incidents", "TRUNCATE TABLE incidents",
              "SELECT 1; DROP TABLE incidents", "/* x */ DROP TABLE incidents"):
        r = fl("query", q, "--store", server["store"], env=env)
        assert r.returncode == 2 and "only SELECT or WITH" in r.stderr or "one statement" in r.stderr, (q, r.stderr)
    r = fl("query", "SELECT count() AS n FROM incidents FINAL", "--store", server["store"], "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert orjson.loads(r.stdout)["n"] == server["n_incidents"]


def test_drop_table_exits_2_on_the_store_itself(tmp_path):
    from faultline.sinks import dataset, open_store

    path = str(tmp_path / "store")
    store = open_store(path=path)
    dataset.write(store, dataset.build(seed=4, n_jobs=10))
    n = store.query("SELECT count() AS n FROM incidents FINAL")[0]["n"]
    store.close()
    for q in ("DROP TABLE incidents", "SELECT 1; DROP TABLE incidents", "SELECT 1 SETTINGS readonly = 0",
              "SELECT * FROM incidents INTO OUTFILE 'x.csv'"):
        r = fl("query", q, "--store", path)
        assert r.returncode == 2 and "query refused" in r.stderr, (q, r.returncode, r.stderr)
    r = fl("query", "SELECT count() AS n FROM incidents FINAL", "--store", path, "--format", "json")
    assert r.returncode == 0 and orjson.loads(r.stdout)["n"] == n, r.stderr
    r = fl("store", "migrate", "--store", path)
    assert r.returncode == 0 and "up to date" in r.stdout, r.stderr
    r = fl("store", "optimize", "--table", "incidents", "--store", path)
    assert r.returncode == 0 and "optimized incidents" in r.stdout, r.stderr


def test_bind_is_loopback_by_default_and_a_public_bind_needs_a_token(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = config.load(env={})
    assert s.web_bind == "127.0.0.1" and web_options(s)["web_bind"] == "127.0.0.1"
    from faultline.streams.app import create_app

    app = create_app(s, install=False, web_enabled=True)
    assert app.conf.web_bind == "127.0.0.1"
    assert not app.conf.web_router_enabled and not app.conf.web_tables_enabled
    public = config.load(env={"FAULTLINE_WEB_BIND": "0.0.0.0"})
    with pytest.raises(config.ConfigError, match="FAULTLINE_API_TOKEN"):
        create_app(public, install=False, web_enabled=True)
    with pytest.raises(config.ConfigError, match="FAULTLINE_API_TOKEN"):
        web_options(config.load(env={"FAULTLINE_WEB_BIND": "10.1.2.3"}))
    ok = config.load(env={"FAULTLINE_WEB_BIND": "0.0.0.0", "FAULTLINE_API_TOKEN": "t"})
    assert create_app(ok, install=False, web_enabled=True).conf.web_bind == "0.0.0.0"
    assert web_options(config.load(env={"FAULTLINE_WEB_BIND": "::1"}))["web_bind"] == "::1"


def listening_addresses(port: int) -> set[str]:
    """Local addresses in LISTEN state on ``port`` (from /proc/net/tcp and tcp6)."""
    out = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            local, state = ln.split()[1], ln.split()[3]
            addr, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:
                out.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr)[::-1]) if len(addr) == 8 else addr)
    return out


def test_sink_listens_on_loopback_only_by_default(settings, tmp_path):
    from faultline.streams.faust_harness import SinkProcess

    port = free_port()
    with SinkProcess(settings, tmp_path / "sink", app_id="fl-bind-test", web_port=port,
                     env={"FAULTLINE_WEB_BIND": "", "FAULTLINE_API_TOKEN": ""}) as sink:
        deadline = time.monotonic() + 90
        while not listening_addresses(port) and time.monotonic() < deadline:
            assert sink.alive(), sink.log()
            time.sleep(0.5)
        assert listening_addresses(port) == {"127.0.0.1"}, (listening_addresses(port), sink.log())
        assert request(port, "/faultline/api/health", token=None)[0] == 200   # loopback, no token set


@pytest.mark.parametrize("command", [["worker", "--sink"], ["sink"]])
def test_worker_and_sink_refuse_a_public_bind_without_a_token(command, faultline_env):
    env = {**faultline_env, "FAULTLINE_WEB_BIND": "0.0.0.0"}
    r = subprocess.run([FAULTLINE, *command, "--web-port", str(free_port())], capture_output=True, text=True,
                       timeout=90, env=env)
    assert r.returncode == 2, (r.returncode, r.stderr[-1500:])
    assert "FAULTLINE_API_TOKEN" in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]


# ------------------------------------------------------------------ the product's own SQL
def product_queries() -> dict[str, tuple[str, dict]]:
    """Every query the product sends through the API (CLI commands, trends, the notebook) and
    the page's (which reads the store itself), with parameters to run it."""
    from faultline.commands import explain, findings, incidents
    from faultline.sinks.trends import load_queries
    from faultline.streams import web

    out: dict[str, tuple[str, dict]] = {}
    for name, q in load_queries().items():
        out[f"trend {name}"] = (q.sql, q.bind({}))
    from faultline.sinks.trends import WITHDRAWN_STATE

    out["incidents"] = (incidents.SQL, {"job": "", "since_ms": 0, "category": "", "limit": 100,
                                        "withdrawn": WITHDRAWN_STATE})
    out["explain"] = (explain.SQL, {"key": "x", "withdrawn": WITHDRAWN_STATE})
    for key, name in ((None, "page index"), ("x", "page incident")):
        q, params = web._incidents_query(key, 200)   # the page reads the store itself, with its own
        out[name] = (q.split(" SETTINGS ")[0], params or {})   # time limit; its SQL must pass too
    src = Path(findings.__file__).read_text()
    assert "FROM findings FINAL" in src   # the findings query below is the one the command builds
    out["findings"] = ("SELECT id, toUnixTimestamp64Milli(ts) AS ts, kind, dimension, subject, "
                       "toUnixTimestamp64Milli(window_start) AS window_start, toUnixTimestamp64Milli(window_end) AS window_end, "
                       "count, exposure, exposure_unit, fleet_rate, score, severity, summary, action, incidents "
                       "FROM findings FINAL WHERE kind = {kind:String} AND dimension = {dim:String} "
                       "ORDER BY score ASC, ts DESC LIMIT {lim:UInt32}", {"kind": "k", "dim": "d", "lim": 10})
    nb = json.loads((ROOT / "notebooks" / "trends.ipynb").read_text())
    k = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "\n".join(ln for ln in "".join(cell["source"]).splitlines() if not ln.startswith("%"))
        for node in ast.walk(ast.parse(code)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "query"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                k += 1
                out[f"notebook {k}"] = (node.args[0].value, {"pick": "", "lo": 0, "hi": 1, "job": "", "id": "",
                                                             "nodes": ["n01"]})
    assert k >= 2, "the notebook's store.query calls were not found"
    return out


def test_every_product_query_passes_the_allow_list_and_runs(tmp_path):
    from faultline.sinks import dataset, open_store
    from faultline.sinks.api import run_sql

    queries = product_queries()
    tables = store_tables()
    for name, (q, _) in queries.items():
        try:
            check_query(q, tables)
        except QueryRejected as e:
            pytest.fail(f"{name}: the product's own query is refused: {e}")
    store = open_store(path=str(tmp_path / "s"))
    try:
        dataset.write(store, dataset.build(seed=3, n_jobs=20))
        for name, (q, params) in queries.items():
            used = {p: v for p, v in params.items() if "{" + p + ":" in q}
            out = run_sql(store, q, used, max_rows=10_000)
            assert isinstance(out["rows"], list), name
    finally:
        store.close()


# ------------------------------------------------------------------ faultline config
def test_config_masks_every_secret_name_and_url_credential(tmp_path):
    cfg = tmp_path / "faultline.toml"
    cfg.write_text(textwrap.dedent("""
        clickhouse_url = "http://default:CHPASS-1@ch.local:8123/fl?password=CHPASS-2&database=fl"
        bmc_password = "BMCPASS-3"
        snmp_auth_key = "SNMPKEY-4"
        snmp_community = "COMMUNITY-5"
        [collectors.bmc]
        hosts = ["10.0.0.1"]
        Secret_Token = "NESTED-6"
        endpoint = "https://ops:URLPASS-7@bmc.local/redfish?token=URLTOK-8&x=1"
        [[collectors.snmp]]
        privKey = "PRIV-9"
    """))
    r = fl("--config", str(cfg), "config", env={"FAULTLINE_API_TOKEN": "APITOK-10",
                                                 "FAULTLINE_KAFKA_SASL_PASSWORD": "SASL-11"})
    assert r.returncode == 0, r.stderr
    for secret in ("CHPASS-1", "CHPASS-2", "BMCPASS-3", "SNMPKEY-4", "COMMUNITY-5", "NESTED-6", "URLPASS-7",
                   "URLTOK-8", "PRIV-9", "APITOK-10", "SASL-11"):
        assert secret not in r.stdout, secret
    out = orjson.loads(r.stdout)
    assert out["clickhouse_url"] == "http://default:***@ch.local:8123/fl?password=***&database=fl"
    assert out["extra"]["collectors"]["bmc"]["hosts"] == ["10.0.0.1"]
    assert out["extra"]["collectors"]["bmc"]["endpoint"] == "https://ops:***@bmc.local/redfish?token=***&x=1"
    assert out["extra"]["bmc_password"] == "***" and out["web_bind"] == "127.0.0.1"
