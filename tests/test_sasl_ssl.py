"""SASL_SSL with SCRAM-SHA-512 end to end, against a broker of ``infra/kafka/kafka.sh`` with
ONLY a SASL_SSL client listener (KAFKA_SECURITY=SASL_SSL): a CA and a broker certificate made
here (python cryptography), one SCRAM user, and faultline configured the documented way
(README "Security": FAULTLINE_KAFKA_SECURITY_PROTOCOL, _SASL_MECHANISM, _SASL_USERNAME,
_SASL_PASSWORD_FILE, _SSL_CAFILE).

Holds: `topics create`/`list`, `simulate --kafka` (the Publisher), the collectors' spooling
publisher, `replay` (reading and re-publishing), a consumer, and `worker --sink` running work;
a wrong password and an untrusted CA each give one error that names the cause (not "run make
kafka-up"): for `worker` and `sink` at start-up, and for the spool's drainer (an ERROR line
while its events stay spooled); the password is in no output, no `faultline config` line, no
broker log.

Starts one broker JVM: run it through the heavy lock (~30-60 s on the shared machine)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from conftest import KAFKA_SH, free_port
from faultline import config
from faultline.schemas import INPUT_TOPICS
from kafka_tls import make_broker_cert, make_ca

pytestmark = [pytest.mark.slow]

FAULTLINE = os.path.join(os.path.dirname(sys.executable), "faultline")
USER = "fl-client"
PREFIX = "sasl."


class SecureBroker:
    def __init__(self, var: Path, certs: Path, password: str) -> None:
        self.var = var
        self.port, self.cport = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.ca, ca_cert, ca_key = make_ca(certs)
        self.keystore = make_broker_cert(certs, ca_cert, ca_key)
        self.other_ca, _, _ = make_ca(certs, "untrusted CA")
        self.password_file = certs / "client.password"
        self.password_file.write_text(password + "\n")
        self.password_file.chmod(0o600)
        self.password = password

    def sh(self, action: str) -> str:
        env = dict(os.environ, KAFKA_PORT=str(self.port), KAFKA_CONTROLLER_PORT=str(self.cport),
                   KAFKA_VAR=str(self.var), KAFKA_WATCH_PID=str(os.getpid()),
                   KAFKA_SECURITY="SASL_SSL", KAFKA_SSL_KEYSTORE=str(self.keystore),
                   KAFKA_SSL_CAFILE=str(self.ca), KAFKA_SCRAM_USER=USER,
                   KAFKA_SCRAM_PASSWORD_FILE=str(self.password_file))
        p = subprocess.run([str(KAFKA_SH), action], env=env, capture_output=True, text=True, timeout=240)
        assert p.returncode == 0, f"kafka.sh {action}: {p.stdout}{p.stderr} (logs in {self.var}/logs)"
        assert self.password not in p.stdout + p.stderr
        return p.stdout

    def env(self, tmp: Path, **over: str) -> dict[str, str]:
        """The documented client settings (README "Security"), secrets from a file."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
        env.update(FAULTLINE_KAFKA_BOOTSTRAP=self.bootstrap, FAULTLINE_TOPIC_PREFIX=PREFIX,
                   FAULTLINE_KAFKA_SECURITY_PROTOCOL="SASL_SSL",
                   FAULTLINE_KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
                   FAULTLINE_KAFKA_SASL_USERNAME=USER,
                   FAULTLINE_KAFKA_SASL_PASSWORD_FILE=str(self.password_file),
                   FAULTLINE_KAFKA_SSL_CAFILE=str(self.ca),
                   FAULTLINE_STORE_PATH=str(tmp / "store"), FAULTLINE_SPOOL_DIR=str(tmp / "spool"))
        env.update(over)
        return env


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    # a password no output could contain by accident
    b = SecureBroker(tmp_path_factory.mktemp("sasl-broker"), tmp_path_factory.mktemp("sasl-certs"),
                     "pw-" + secrets.token_hex(12))
    b.sh("up")
    try:
        yield b
    finally:
        b.sh("down")
        logs = "".join(p.read_text(errors="replace") for p in (b.var / "logs").glob("*") if p.is_file())
        broker_secret = (b.var / ".broker-secret").read_text().strip()
        shutil.rmtree(b.var, ignore_errors=True)
        # the broker never logs the client's password, nor its own inter-broker secret
        assert logs and b.password not in logs and broker_secret not in logs


def run(env: dict[str, str], *args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([FAULTLINE, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_only_a_sasl_ssl_listener(broker):
    conf = (broker.var / "server.properties").read_text()
    assert f"listeners=SASL_SSL://127.0.0.1:{broker.port},CONTROLLER://" in conf
    assert "PLAINTEXT://127.0.0.1" not in conf and "sasl.enabled.mechanisms=SCRAM-SHA-512" in conf
    assert oct((broker.var / "server.properties").stat().st_mode & 0o777) == "0o600"


def test_topics_publisher_and_consumer_over_sasl_ssl(broker, tmp_path):
    env = broker.env(tmp_path)
    outputs = []
    p = run(env, "topics", "create", cwd=tmp_path)
    outputs.append(p.stdout + p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run(env, "topics", "list", cwd=tmp_path)
    outputs.append(p.stdout + p.stderr)
    assert p.returncode == 0 and p.stdout.count("present") == 11, p.stdout + p.stderr

    # the same simulated run to a file and through the Publisher to the secured broker
    sim = ["simulate", "--scenario", "gpu-xid79", "--seed", "3", "--nodes", "4", "--hours", "1"]
    p = run(env, *sim, "--out", str(tmp_path / "run.jsonl"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    expected = sum(1 for line in (tmp_path / "run.jsonl").open() if line.strip())
    p = run(env, *sim, "--kafka", "--as-fast-as-possible", cwd=tmp_path, timeout=180)
    outputs.append(p.stdout + p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr

    settings = config.load(env=env)
    assert settings.kafka_sasl_password == broker.password   # read from the _FILE

    assert asyncio.run(count_input(settings, expected)) == expected
    p = run(env, "config", cwd=tmp_path)
    outputs.append(p.stdout + p.stderr)
    assert p.returncode == 0 and USER in p.stdout
    assert all(broker.password not in o for o in outputs), "the SASL password leaked into output"


async def count_input(settings: config.Settings, expected: int, timeout_s: float = 40.0) -> int:
    """Records on the input topics of ``settings``' prefix, read from the start over its
    connection settings until ``expected`` or ``timeout_s``."""
    cons = AIOKafkaConsumer(*[settings.topic(t) for t in INPUT_TOPICS], **settings.kafka_kwargs(),
                            auto_offset_reset="earliest", enable_auto_commit=False)
    await cons.start()
    n = 0
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while n < expected and loop.time() < deadline:
            n += sum(len(v) for v in (await cons.getmany(timeout_ms=1000)).values())
    finally:
        await cons.stop()
    return n


def _secret_free(p: subprocess.CompletedProcess, *secrets_: str) -> str:
    out = p.stdout + p.stderr
    for s in secrets_:
        assert s not in out
    return out


def test_wrong_password_names_the_login(broker, tmp_path):
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-" + secrets.token_hex(8))
    env = broker.env(tmp_path, FAULTLINE_KAFKA_SASL_PASSWORD_FILE=str(wrong))
    # the worker and the sink fail at start-up (their topic check), before Faust starts
    for args in (["topics", "list"], ["worker"], ["sink"], ["replay", "--since", "1h", "--out", "r.jsonl"],
                 ["simulate", "--scenario", "gpu-xid79", "--seed", "1", "--nodes", "2", "--hours", "1",
                  "--kafka", "--as-fast-as-possible"]):
        p = run(env, *args, cwd=tmp_path)
        out = _secret_free(p, broker.password, wrong.read_text())
        assert p.returncode != 0, out
        assert f"refused the SASL login of user '{USER}'" in out, out
        assert "make kafka-up" not in out and "Traceback" not in out, out


def test_untrusted_ca_names_the_certificate(broker, tmp_path):
    env = broker.env(tmp_path, FAULTLINE_KAFKA_SSL_CAFILE=str(broker.other_ca))
    for args in (["topics", "create"], ["worker"]):
        p = run(env, *args, cwd=tmp_path)
        out = _secret_free(p, broker.password)
        assert p.returncode != 0, out
        assert "certificate is not trusted" in out and str(broker.other_ca) in out, out
        assert "make kafka-up" not in out and "Traceback" not in out, out


def test_plaintext_client_names_the_protocol(broker, tmp_path):
    env = broker.env(tmp_path, FAULTLINE_KAFKA_SECURITY_PROTOCOL="PLAINTEXT")
    p = run(env, "topics", "list", cwd=tmp_path)
    out = _secret_free(p, broker.password)
    assert p.returncode != 0 and "FAULTLINE_KAFKA_SECURITY_PROTOCOL" in out, out


def test_config_masks_the_password(broker, tmp_path):
    # given directly in the environment, not from a file: still never printed
    env = broker.env(tmp_path, FAULTLINE_KAFKA_SASL_PASSWORD=broker.password)
    p = run(env, "config", cwd=tmp_path)
    assert p.returncode == 0 and broker.password not in p.stdout + p.stderr
    assert "kafka_sasl_password" in p.stdout and "***" in p.stdout, p.stdout
    s = replace(config.load(env=env))
    assert broker.password not in repr(s.masked())


def test_worker_and_sink_run_over_sasl_ssl(broker, tmp_path):
    """`faultline worker --sink` over SASL_SSL: the worker's and the sink's consumer groups
    commit the end offsets of the input topic (they read everything the Publisher wrote)."""
    import signal
    import time

    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import GroupCoordinatorNotAvailableError

    env = broker.env(tmp_path)
    sim = ["simulate", "--scenario", "gpu-xid79", "--seed", "5", "--nodes", "2", "--hours", "1",
           "--kafka", "--as-fast-as-possible"]
    p = run(env, *sim, cwd=tmp_path, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    settings = config.load(env=env)
    topic = settings.topic("fl.gpu")

    async def lagging() -> dict[str, int]:
        """group -> records of fl.gpu it has not committed yet"""
        cons = AIOKafkaConsumer(**settings.kafka_kwargs(), enable_auto_commit=False)
        admin = AIOKafkaAdminClient(**settings.kafka_kwargs())
        await cons.start()
        await admin.start()
        try:
            from aiokafka import TopicPartition
            [desc] = await admin.describe_topics([topic])
            tps = [TopicPartition(topic, p["partition"]) for p in desc["partitions"]]
            assert tps, desc
            ends = await cons.end_offsets(tps)
            out = {}
            for group in (f"{PREFIX}faultline", f"{PREFIX}faultline-sink"):
                try:
                    done = await admin.list_consumer_group_offsets(group)
                except GroupCoordinatorNotAvailableError:   # offsets topic still being created
                    done = {}
                out[group] = sum(ends[tp] - (done[tp].offset if tp in done else 0) for tp in tps)
            return out
        finally:
            await admin.close()
            await cons.stop()

    assert sum(asyncio.run(lagging()).values()) > 0   # something to read
    log = (tmp_path / "worker.log").open("w+")
    w = subprocess.Popen([FAULTLINE, "worker", "--sink", "--workdir", str(tmp_path / "w")], env=env,
                         cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        lag = None
        while time.monotonic() < deadline and w.poll() is None:
            time.sleep(3)
            lag = asyncio.run(lagging())
            if not any(lag.values()):
                break
        assert w.poll() is None, "worker exited: " + (tmp_path / "worker.log").read_text()[-3000:]
        assert lag is not None and not any(lag.values()), lag
    finally:
        w.send_signal(signal.SIGTERM)
        try:
            w.wait(30)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
        log.close()
    out = (tmp_path / "worker.log").read_text()
    assert broker.password not in out, "the SASL password is in the worker's log"


def _spool_through(settings: config.Settings, lines: list[bytes], spool_dir: Path, wait_s: float) -> dict:
    """The collectors' path: every line through a ``SpoolingPublisher`` (on-disk spool, then
    the broker); waits up to ``wait_s`` for them all to be acknowledged. Its stats, plus
    ``away_cause`` (what the drainer said it could not send for)."""
    from faultline.producers.simulate.kafka import topic_key
    from faultline.producers.spool import SpoolingPublisher

    async def go() -> dict:
        pub = SpoolingPublisher(settings, spool_dir=spool_dir)
        await pub.start()
        try:
            for line in lines:
                topic, key, ts = topic_key(line)
                await pub.send_raw(topic, key, line, ts)
            await pub.flush(timeout_s=wait_s)
            return {**pub.stats, "away_cause": pub.away_cause}
        finally:
            await pub.stop(flush_timeout_s=1.0)

    return asyncio.run(go())


def test_spooling_collector_names_a_refused_login_and_replay_runs_over_sasl_ssl(broker, tmp_path, caplog):
    """The collectors' spooling publisher over SASL_SSL: with a wrong password nothing is
    acknowledged, everything stays spooled, and the drainer says once, at ERROR, that the
    login of the user was refused (no password anywhere); with the right one every event is
    acknowledged, and `faultline replay` reads them back (--out) and re-publishes them
    (--to-prefix) over the same listener."""
    import logging

    from faultline.producers.simulate import simulate

    import time

    # an hour that ended an hour ago: replay's --since 1d covers it
    lines, _ = simulate("gpu-xid79", seed=11, nodes=2, hours=1.0, start_ms=int(time.time() * 1000) - 7_200_000)
    env = broker.env(tmp_path, FAULTLINE_TOPIC_PREFIX="spooled.")   # topics of this test alone
    good = config.load(env=env)
    assert run(env, "topics", "create", cwd=tmp_path).returncode == 0
    wrong_pw = "not-" + secrets.token_hex(8)
    wrong = replace(good, kafka_sasl_password=wrong_pw)
    with caplog.at_level(logging.INFO, logger="faultline.spool"):
        refused = _spool_through(wrong, lines[:50], tmp_path / "spool-wrong", wait_s=8.0)
    said = [r for r in caplog.records if r.name == "faultline.spool" and r.levelno >= logging.ERROR]
    assert refused["sent"] == 0 and refused["spooled"] == 50, refused
    assert len(said) == 1 and f"refused the SASL login of user '{USER}'" in said[0].getMessage(), \
        [r.getMessage() for r in caplog.records]
    assert "make kafka-up" not in said[0].getMessage()
    assert all(wrong_pw not in r.getMessage() and broker.password not in r.getMessage() for r in caplog.records)

    ok = _spool_through(good, lines, tmp_path / "spool-good", wait_s=60.0)
    assert ok["sent"] == len(lines) and ok["away_cause"] is None, ok
    p = run(env, "replay", "--since", "1d", "--out", str(tmp_path / "replayed.jsonl"), cwd=tmp_path, timeout=180)
    out = _secret_free(p, broker.password)
    assert p.returncode == 0, out
    back = [ln for ln in (tmp_path / "replayed.jsonl").read_bytes().splitlines() if ln.strip()]
    assert sorted(back) == sorted(lines), (len(back), len(lines))
    p = run(env, "replay", "--since", "1d", "--to-prefix", "again.", cwd=tmp_path, timeout=180)
    out = _secret_free(p, broker.password)
    assert p.returncode == 0, out
    again = replace(good, topic_prefix="again.")
    assert asyncio.run(count_input(again, len(lines))) == len(lines)
