"""While a process owns the chDB store and serves the SQL API as Faust web views
(sinks/api.py, the way the worker does), the CLI reads through the API: same answers,
read-only, bearer token enforced."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import orjson
import pytest
from ports import free_port

FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")

SERVER = textwrap.dedent("""
    import asyncio, sys
    import faust
    from faultline import config
    from faultline.sinks import dataset, open_store
    from faultline.streams.services import Services
    from faultline.sinks.api import register_views

    path, port = sys.argv[1], int(sys.argv[2])
    settings = config.load(store_path=path)
    store = open_store(settings)
    ds = dataset.build(seed=9, n_jobs=30)
    dataset.write(store, ds)
    app = faust.App("fl-api-test", broker="kafka://127.0.0.1:1", web_enabled=True, web_port=port,
                    web_bind="127.0.0.1", autodiscover=False)
    services = Services(settings, store=store)
    register_views(app, services)

    async def main():
        await app.web.start()
        print(len(ds.incidents), flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("api") / "store")
    port = free_port()
    env = {**os.environ, "FAULTLINE_API_TOKEN": "s3cret"}
    p = subprocess.Popen([sys.executable, "-c", SERVER, path, str(port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if not line.strip():
        p.kill()
        pytest.fail("API server did not start: " + p.stderr.read()[-2000:])
    yield path, port, int(line)
    p.kill()
    p.wait()


def fl(path: str, port: int, *args: str, token: str = "s3cret") -> subprocess.CompletedProcess:
    env = {**os.environ, "FAULTLINE_WEB_PORT": str(port), "FAULTLINE_API_TOKEN": token}
    return subprocess.run([FAULTLINE, *args, "--store", path], capture_output=True, text=True, env=env, timeout=120)


def test_cli_reads_through_the_worker_api(worker):
    path, port, n_incidents = worker
    r = fl(path, port, "incidents", "--json", "--limit", "1000")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == n_incidents
    r = fl(path, port, "trends", "repeat-offenders", "--json")
    assert r.returncode == 0, r.stderr
    top = {x["dimension"]: x["subject"] for x in map(orjson.loads, r.stdout.splitlines()) if x["rank"] == 1}
    assert top["node"] == "n07"
    inc = orjson.loads(fl(path, port, "incidents", "--json", "--limit", "1").stdout)
    r = fl(path, port, "explain", inc["job"])
    assert r.returncode == 0 and "because of" in r.stdout, r.stderr


def test_api_is_read_only_and_token_protected(worker):
    path, port, _ = worker
    r = fl(path, port, "query", "DROP TABLE incidents")
    assert r.returncode == 2 and "only SELECT or WITH" in r.stderr
    r = fl(path, port, "query", "SELECT * FROM file('/etc/passwd', 'LineAsString')")
    assert r.returncode == 2 and "readonly" in r.stderr.lower()
    r = fl(path, port, "query", "SELECT count() AS n FROM incidents", token="wrong")
    assert r.returncode == 2 and "401" in r.stderr
    r = fl(path, port, "query", "SELECT count() AS n FROM incidents FINAL", "--format", "csv")
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "n"
