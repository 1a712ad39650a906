"""``faultline collect rdma``: HCA port counters (``net.rdma``) and port state (``net.port``, ``net.link``).

Reads, for every ``<root>/<dev>/ports/<port>/`` (root defaults to ``/sys/class/infiniband``):

* ``counters/*`` (InfiniBand PMA PortCounters) and ``hw_counters/*`` (driver counters, e.g.
  mlx5 ``out_of_sequence``, ``local_ack_timeout_err``, ``np_cnp_sent``) -> one ``net.rdma``
  per port, names exactly as Linux exposes them (``/work/shared/reference/rdma_counters.csv``;
  ``lifespan`` is a setting, not a counter, and is left out);
* ``state`` (``4: ACTIVE``), ``phys_state`` (``5: LinkUp``), ``rate`` (``200 Gb/sec (4X HDR)``)
  -> ``net.port`` of the host NIC (``device`` = HCA, ``port`` = port number; up = ACTIVE and
  LinkUp; errors/discards/octets from the PMA counters, ``*_data`` x 4 lanes = octets), and
  ``net.link`` when the state differs from the previous round.

Unreadable counter files (some hw_counters return EINVAL on some firmware) are skipped.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from ...config import Settings
from ...schemas import now_ms
from ...schemas.events import NetLink, NetLinkData, NetPort, NetPortData, NetRdma, NetRdmaData
from .base import Collector, hostname, new_id

NAME = "rdma"
HELP = "RDMA/RoCE HCA port counters and state from sysfs -> net.rdma, net.port, net.link"
INTERVAL_S = 10.0

log = logging.getLogger("faultline.collect.rdma")

NOT_COUNTERS = frozenset({"lifespan"})


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("ascii", "replace").strip()
    except OSError:
        return None


def read_counters(port_dir: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for sub in ("counters", "hw_counters"):
        d = os.path.join(port_dir, sub)
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for ent in entries:
            if ent.name in NOT_COUNTERS or not ent.is_file():
                continue
            raw = _read(ent.path)
            if raw is None:
                continue
            try:
                v = int(raw, 0) if raw.startswith("0x") else int(raw)
            except ValueError:
                continue
            if v >= 0:
                out[ent.name] = v
    return out


def parse_state(raw: str | None) -> str | None:
    """``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    if not raw:
        return None
    return raw.split(":", 1)[-1].strip()


def parse_rate_mbps(raw: str | None) -> int | None:
    """``200 Gb/sec (4X HDR)`` -> 200000; ``25 Gb/sec (1X EDR)`` -> 25000; ``2.5 Gb/sec`` -> 2500."""
    if not raw:
        return None
    try:
        num, unit = raw.split()[:2]
        v = float(num)
    except ValueError:
        return None
    scale = {"Gb/sec": 1000, "Mb/sec": 1, "Tb/sec": 1_000_000}.get(unit)
    return int(v * scale) if scale else None


class RdmaCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, root: str | os.PathLike[str] = "/sys/class/infiniband", *, node: str | None = None,
                 devices: list[str] | None = None) -> None:
        self.root = Path(root)
        self.node = node or hostname()
        self.source = f"rdma@{self.node}"
        self.devices = set(devices) if devices else None
        self._states: dict[tuple[str, int], str] = {}

    def ports(self) -> list[tuple[str, int, str]]:
        out = []
        try:
            devs = sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []
        for dev in devs:
            if self.devices and dev not in self.devices:
                continue
            pdir = self.root / dev / "ports"
            try:
                nums = sorted(int(p) for p in os.listdir(pdir) if p.isdigit())
            except OSError:
                continue
            out.extend((dev, n, str(pdir / str(n))) for n in nums)
        return out

    async def collect(self) -> list[NetRdma | NetPort | NetLink]:
        ts = now_ms()
        out: list[NetRdma | NetPort | NetLink] = []
        for dev, num, pdir in self.ports():
            counters = read_counters(pdir)
            state = parse_state(_read(pdir + "/state"))
            phys = parse_state(_read(pdir + "/phys_state"))
            up = "up" if state == "ACTIVE" and (phys is None or phys == "LinkUp") else "down"
            out.append(NetRdma(v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
                               data=NetRdmaData(device=dev, port=num, counters=counters)))
            c = counters.get
            octets = lambda k: c(k) * 4 if c(k) is not None else None  # noqa: E731 - PMA data is in 4-octet words
            out.append(NetPort(v=1, id=new_id(), ts=ts, source=self.source, node=self.node, data=NetPortData(
                device=dev, port=str(num), oper_status=up, speed_mbps=parse_rate_mbps(_read(pdir + "/rate")),
                in_errors=c("port_rcv_errors"), out_errors=None,  # the PMA set in sysfs has no transmit-error counter
                in_discards=None, out_discards=c("port_xmit_discards"),
                in_octets=octets("port_rcv_data"), out_octets=octets("port_xmit_data"))))
            prev = self._states.get((dev, num))
            if prev is not None and prev != up:
                out.append(NetLink(v=1, id=new_id(), ts=ts, source=self.source, node=self.node,
                                   data=NetLinkData(device=dev, port=str(num), state=up)))
            self._states[(dev, num)] = up
        return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default="/sys/class/infiniband", help="sysfs infiniband class dir (tests: a fixture tree)")
    p.add_argument("--node", help="node name in the events (default: this host)")
    p.add_argument("--device", action="append", help="only these HCAs (repeatable; default all)")


def build(args: argparse.Namespace, settings: Settings) -> RdmaCollector:
    return RdmaCollector(args.root, node=args.node, devices=args.device)
