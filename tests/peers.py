"""Real third-party peers for the fabric/control-plane collector tests, started by the tests
and stopped by PID (scripts in ``infra/peers/``, adapted from ``/work/shared/peers/``).

Import the fixtures into a test module: ``from peers import snmp_lab  # noqa: F401``.

- ``snmp_lab`` (module): net-snmp ``snmpd`` in a network namespace the fixture creates, with
  switch ports ``swp1``/``swp2`` (veth pairs to a second namespace) reachable from the host
  namespace over a management veth; linkUp/linkDown traps go to a host UDP port.
- ``slurm_cluster`` (session): slurmctld + slurmd + munge, one node on loopback, 4 fake GPUs,
  private to the session (state dir, munge socket, free ports).
- ``ipmi_bmc`` (module): OpenIPMI ``ipmi_sim`` on a loopback UDP port, driven with ``ipmitool``.
- ``redfish_bmc`` (function): OpenStack sushy-tools ``sushy-static`` serving a Redfish mockup
  tree the test writes (files are read per request, so the test can change them live).

Each skips with the reason when the machine cannot run it (not root, no netns, package missing).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ports import free_port

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "infra" / "peers"
BASE = os.environ.get("FAULTLINE_PEERS_DIR", "/tmp/faultline-peers")


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (network namespaces / daemons); run the tests as root")


def _script(name: str, env: dict[str, str], timeout: float = 120) -> str:
    p = subprocess.run(["bash", str(PEERS / name)], env={**os.environ, **env}, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"infra/peers/{name} failed ({p.returncode}): {p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def free_udp_port(host: str = "0.0.0.0") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- snmpd
@dataclass
class SnmpLab:
    lab: str               # switch namespace
    peer_ns: str           # namespace of the "node NICs"
    host: str              # snmpd address reachable from the host namespace
    port: int
    trap_host: str         # host-side address traps are sent to
    trap_port: int
    if_index: dict[str, int]
    v3_user: str = "fluser"
    v3_auth: str = "flauthpass1"
    v3_priv: str = "flprivpass1"
    pid: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def link(self, port: str, state: str, far_end: bool = False) -> None:
        """Set a switch port (or, with ``far_end``, the node NIC behind it) up or down."""
        if far_end:
            subprocess.run(["ip", "-n", self.peer_ns, "link", "set", "nic" + port.removeprefix("swp"), state],
                           check=True)
        else:
            subprocess.run(["ip", "-n", self.lab, "link", "set", port, state], check=True)


def start_snmp_lab(ports: int = 2, extra: int = 0, name: str | None = None) -> SnmpLab:
    if not shutil.which("snmpd"):
        pytest.skip("snmpd not installed: run infra/peers/install.sh")
    lab = name or f"fl{os.getpid() % 100000}"
    oct_ = 100 + os.getpid() % 100
    trap_port = free_udp_port()
    env = {"LAB": lab, "OCT": str(oct_), "SNMP_PORT": "1161", "TRAP_PORT": str(trap_port),
           "PORTS": str(ports), "EXTRA": str(extra), "BASE": BASE}
    try:
        out = _script("snmp_lab_up.sh", env, timeout=300)
    except RuntimeError as e:
        _script("snmp_lab_down.sh", env)
        if "Operation not permitted" in str(e) or "netns" in str(e):
            pytest.skip(f"cannot create network namespaces here: {e}")
        raise
    lines = out.strip().splitlines()
    ready = next(ln for ln in lines if ln.startswith("ready "))
    idx = {ln.split()[0]: int(ln.split()[1]) for ln in lines if ln.startswith("swp")}
    return SnmpLab(lab=lab, peer_ns=f"{lab}-p", host=f"169.254.{oct_}.2", port=1161,
                   trap_host=f"169.254.{oct_}.1", trap_port=trap_port, if_index=idx,
                   pid=int(ready.split()[-1]), env=env)


def stop_snmp_lab(lab: SnmpLab) -> None:
    _script("snmp_lab_down.sh", lab.env)
    shutil.rmtree(f"{BASE}/snmp-{lab.lab}", ignore_errors=True)


@pytest.fixture(scope="module")
def snmp_lab():
    _need_root("the snmpd lab")
    lab = start_snmp_lab()
    try:
        yield lab
    finally:
        stop_snmp_lab(lab)
        try:
            os.kill(lab.pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        assert not alive, f"snmpd pid {lab.pid} survived snmp_lab_down.sh"


# ----------------------------------------------------------------------------- slurm
@dataclass
class SlurmCluster:
    conf: str
    node: str
    env: dict[str, str]
    started_here: bool
    base: str = BASE

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> str:
        p = subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True,
                           timeout=timeout, cwd=f"{self.base}/slurm")
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr}")
        return p.stdout

    def sbatch(self, *args: str) -> str:
        return self.run("sbatch", "--parsable", *args).strip().split(";")[0]


@pytest.fixture(scope="session")
def slurm_cluster():
    """A private cluster per test session (own state dir, munge socket and ports), so two
    sessions on one machine never share or stop each other's daemons."""
    _need_root("slurmctld/slurmd/munge")
    if not shutil.which("slurmctld"):
        pytest.skip("Slurm not installed: run infra/peers/install.sh")
    base = f"{BASE}/slurm-{os.getpid()}"
    env = {"BASE": base, "FRESH": "1", "SLURMCTLD_PORT": str(free_port()), "SLURMD_PORT": str(free_port())}
    try:
        _script("slurm_up.sh", env, timeout=180)
        conf = f"{base}/slurm/slurm.conf"
        yield SlurmCluster(conf=conf, node=socket.gethostname().split(".")[0], env={"SLURM_CONF": conf},
                           started_here=True, base=base)
    finally:
        _script("slurm_down.sh", {"BASE": base}, timeout=60)
        for pidfile in ("slurm/run/slurmctld.pid", "slurm/run/slurmd.pid", "munge/run/munged.pid"):
            f = Path(base, pidfile)
            if f.is_file() and f.read_text().strip():
                assert not _alive(int(f.read_text().strip())), f"{pidfile} survived slurm_down.sh"
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm_acct_cluster():
    """Like ``slurm_cluster`` plus slurmdbd and a private MariaDB (so ``sacct`` works), with
    MinJobAge=2 so finished jobs leave slurmctld within seconds."""
    _need_root("slurmctld/slurmd/slurmdbd/mariadb")
    if not shutil.which("slurmdbd") or not shutil.which("mariadbd"):
        pytest.skip("slurmdbd/mariadb-server not installed: run infra/peers/install.sh")
    base = f"{BASE}/slurm-acct-{os.getpid()}"
    env = {"BASE": base, "FRESH": "1", "ACCT": "1", "MINJOBAGE": "2",
           "SLURMCTLD_PORT": str(free_port()), "SLURMD_PORT": str(free_port()),
           "SLURMDBD_PORT": str(free_port()), "MYSQL_PORT": str(free_port())}
    try:
        _script("slurm_up.sh", env, timeout=240)
        conf = f"{base}/slurm/slurm.conf"
        yield SlurmCluster(conf=conf, node=socket.gethostname().split(".")[0], env={"SLURM_CONF": conf},
                           started_here=True, base=base)
    finally:
        _script("slurm_down.sh", {"BASE": base}, timeout=90)
        for pidfile in ("slurm/run/slurmctld.pid", "slurm/run/slurmdbd.pid", "mysql/mysqld.pid"):
            f = Path(base, pidfile)
            if f.is_file() and f.read_text().strip():
                assert not _alive(int(f.read_text().strip())), f"{pidfile} survived slurm_down.sh"
        shutil.rmtree(base, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


# ----------------------------------------------------------------------------- ipmi_sim
@dataclass
class IpmiBmc:
    host: str
    port: int
    console_port: int
    user: str
    password: str
    pid: int

    def ipmitool(self, *args: str, timeout: float = 20) -> str:
        p = subprocess.run(["ipmitool", "-I", "lanplus", "-C", "3", "-H", self.host, "-p", str(self.port),
                            "-U", self.user, "-P", self.password, *args],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"ipmitool {' '.join(args)} failed: {p.stderr}")
        return p.stdout

    def console(self, *commands: str) -> None:
        """Emulator commands (sensor_set_value, sel_add, ...) over ipmi_sim's telnet console."""
        for cmd in commands:
            with socket.create_connection(("127.0.0.1", self.console_port), timeout=5) as s:
                s.sendall(cmd.encode() + b"\n")
                time.sleep(0.3)


@pytest.fixture(scope="module")
def ipmi_bmc():
    if not shutil.which("ipmi_sim") or not shutil.which("ipmitool"):
        pytest.skip("ipmi_sim/ipmitool not installed: run infra/peers/install.sh")
    port, cport = free_udp_port("127.0.0.1"), free_port()
    env = {"BASE": f"{BASE}/ipmi-{os.getpid()}", "IPMI_PORT": str(port), "IPMI_CONSOLE_PORT": str(cport)}
    _script("ipmi_up.sh", env, timeout=120)
    pid = int(Path(env["BASE"], "ipmi", "ipmi_sim.pid").read_text().strip())
    try:
        yield IpmiBmc("127.0.0.1", port, cport, "admin", "password", pid)
    finally:
        _script("ipmi_down.sh", env)
        assert not _alive(pid), f"ipmi_sim pid {pid} survived ipmi_down.sh"
        shutil.rmtree(env["BASE"], ignore_errors=True)


# ----------------------------------------------------------------------------- Redfish (sushy-static)
@dataclass
class RedfishBmc:
    url: str
    root: Path              # mockup tree: <root>/redfish/v1/.../index.json
    pid: int

    def put(self, path: str, doc: dict) -> None:
        """Write the resource at ``/redfish/v1/<path>`` (served from the next request on)."""
        import json

        d = self.root / "redfish" / "v1" / path.strip("/")
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "index.json.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(d / "index.json")


@pytest.fixture
def redfish_bmc(tmp_path):
    import sys

    exe = Path(sys.executable).parent / "sushy-static"
    if not exe.exists():
        pytest.skip("sushy-tools not installed (pip install sushy-tools): no Redfish emulator")
    root = tmp_path / "mockup"
    bmc = RedfishBmc(url="", root=root, pid=0)
    bmc.put("", {"@odata.id": "/redfish/v1", "Id": "RootService", "RedfishVersion": "1.6.0",
                 "Chassis": {"@odata.id": "/redfish/v1/Chassis"}, "Systems": {"@odata.id": "/redfish/v1/Systems"},
                 "SessionService": {"@odata.id": "/redfish/v1/SessionService"},
                 "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}})
    port = free_port()
    proc = subprocess.Popen([str(exe), "-i", "127.0.0.1", "-p", str(port), "-m", str(root / "redfish" / "v1")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bmc.url, bmc.pid = f"http://127.0.0.1:{port}", proc.pid
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield bmc
    finally:
        proc.terminate()
        proc.wait(timeout=10)
