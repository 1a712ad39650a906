"""How many switch ports per second one snmp collector polls, against a real net-snmp snmpd.

Starts the lab of ``infra/peers/snmp_lab_up.sh`` with EXTRA veth pairs (2 ports each) in the
switch namespace, then measures, for the same ifTable+ifXTable data:

* baseline: ``snmpbulkwalk`` (net-snmp's C tool, max-repetitions 25) of the 11 columns the
  collector reads, one process per column, sequential;
* faultline: ``SnmpCollector.collect()`` (v2c BER fast path, all columns per GETBULK) on 1
  switch, and on 8 "switches" (the same snmpd listed 8 times) polled concurrently per round;
* the same table through pysnmp (SNMPv3 authPriv user), the path v3 targets take.

Prints ports/s for each and the ratio against the baseline. Needs root (netns). Usage:
``python bench/collectors_snmp.py [EXTRA=200] [ROUNDS=5]``.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from faultline.producers.collectors.snmp import COLUMNS, SnmpCollector, Target  # noqa: E402

EXTRA = int(sys.argv[1]) if len(sys.argv) > 1 else 200
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
LAB = f"flb{os.getpid() % 10000}"
OCT = 240
ENV = {**os.environ, "LAB": LAB, "OCT": str(OCT), "EXTRA": str(EXTRA), "PORTS": "2", "TRAP_PORT": "1162",
       "BASE": "/tmp/faultline-peers", "MIBS": "", "IFCACHE": os.environ.get("IFCACHE", "keep")}
HOST = f"169.254.{OCT}.2"


def sh(script: str) -> str:
    return subprocess.run(["bash", str(ROOT / "infra" / "peers" / script)], env=ENV, check=True,
                          capture_output=True, text=True).stdout


def baseline() -> tuple[float, int]:
    t0 = time.perf_counter()
    rows = 0
    for oid in COLUMNS.values():
        out = subprocess.run(["snmpbulkwalk", "-v2c", "-c", "public", "-Cr25", "-Oqn", "-t", "5", f"{HOST}:1161",
                              "." + ".".join(map(str, oid))], env=ENV, check=True, capture_output=True, text=True).stdout
        if oid == COLUMNS["oper"]:
            rows = len(out.splitlines())
    return time.perf_counter() - t0, rows


async def collector(n_targets: int, v3: bool = False) -> tuple[float, int]:
    targets = [Target(name=f"sw{i}", host=HOST, port=1161, timeout_s=5, retries=1, exclude=None)
               for i in range(n_targets)]
    if v3:  # the pysnmp path (USM authPriv): what every request cost before the BER fast path
        for t in targets:
            t.version, t.user, t.auth_key, t.priv_key = "3", "fluser", "flauthpass1", "flprivpass1"
    col = SnmpCollector(targets)
    try:
        await col.collect()  # warm-up: engine, ARP, first request
        t0 = time.perf_counter()
        ports = 0
        for _ in range(ROUNDS):
            ports += sum(1 for e in await col.collect() if e.kind == "net.port")
        return time.perf_counter() - t0, ports
    finally:
        await col.close()


def main() -> None:
    t0 = time.perf_counter()
    sh("snmp_lab_up.sh")
    print(f"lab: snmpd in netns {LAB}, {2 * EXTRA + 3} interfaces, up in {time.perf_counter() - t0:.1f} s")
    try:
        baseline()  # warm-up
        bt = []
        for _ in range(ROUNDS):
            dt, rows = baseline()
            bt.append(dt)
        base_pps = rows / (sum(bt) / len(bt))
        print(f"baseline snmpbulkwalk x{len(COLUMNS)} columns: {rows} ports in {sum(bt) / len(bt) * 1000:.0f} ms "
              f"-> {base_pps:,.0f} ports/s")
        for n in (1, 8):
            dt, ports = asyncio.run(collector(n))
            pps = ports / dt
            print(f"faultline snmp collector, {n} switch{'es' if n > 1 else ''} x {ROUNDS} rounds: {ports} ports "
                  f"in {dt:.2f} s -> {pps:,.0f} ports/s ({pps / base_pps:.2f}x baseline)")
        dt, ports = asyncio.run(collector(1, v3=True))
        pps = ports / dt
        print(f"same through pysnmp (SNMPv3 authPriv), 1 switch x {ROUNDS} rounds: {ports} ports in {dt:.2f} s "
              f"-> {pps:,.0f} ports/s ({pps / base_pps:.2f}x baseline)")
    finally:
        sh("snmp_lab_down.sh")


if __name__ == "__main__":
    main()
