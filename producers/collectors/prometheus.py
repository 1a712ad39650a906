"""``faultline collect prometheus``: scrape exporters a site already runs, map to contract kinds.

``--target URL`` (repeatable) is scraped every interval (Prometheus text format 0.0.4). The
exporter is recognised by its metric names, so node_exporter and dcgm-exporter targets can be
mixed:

| exporter metrics | contract kind |
|---|---|
| ``node_disk_*`` (per device) joined with ``node_filesystem_*`` (device -> mountpoint) | ``storage.sample`` per mount (rates from two scrapes) |
| ``node_filesystem_readonly``, ``device_error``, ``avail/size`` | ``storage.mount`` (readonly / stale / full / ok) |
| ``node_network_{carrier,speed_bytes,receive_*,transmit_*}`` | ``net.port`` (device = node, port = interface) |
| ``DCGM_FI_DEV_*`` (per ``gpu`` label) | ``gpu.sample`` |
| ``DCGM_FI_DEV_XID_ERRORS`` (the last XID, a gauge) | ``gpu.xid`` when it changes to a non-zero value (the first scrape is the baseline) |

Parsing: ``prometheus_client.parser`` (the client library's text-format parser), fed only the
lines of the prefixes above and their ``# HELP``/``# TYPE``: on a real node_exporter 1.5.0 page (Debian)
(1,071 lines, 161 wanted samples) it takes 4.8 ms per scrape against 0.5 ms for the regex
parser it replaced (10.8 ms for the whole page unfiltered), which is nothing at one scrape per
15 s, and it reads escapes as Prometheus does (``C:\\\\new`` is ``C:\\new``; the regex read a
newline). A page the parser refuses is parsed again line by line: each malformed line is
skipped and counted (``stats["bad_lines"]``), the others are kept.

``--once`` exits 2 naming the target when a scrape fails, and naming the broker when it did
not acknowledge the events within ``--flush-timeout`` (they stay spooled); a running
collector only counts failed scrapes (``stats["scrape_errors"]``, the node agent's /metrics).

DCGM field names: dcgm-exporter's default counters CSV (``DCGM_FI_DEV_GPU_UTIL``, ``..._FB_USED``,
``..._ECC_DBE_VOL_TOTAL``, ``..._NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL``, ...). Missing fields are null.
"""

from __future__ import annotations

import argparse
import logging
import re

from ...config import Settings
from ...schemas import Envelope, now_ms
from ...schemas.events import (
    GpuSample, GpuSampleData, GpuXid, GpuXidData, NetPort, NetPortData, StorageMount, StorageMountData,
    StorageSample, StorageSampleData,
)
from .base import Collector, hostname, new_id
from .nvml import norm_pci

NAME = "prometheus"
HELP = "scrape node_exporter / dcgm-exporter and map their metrics to contract events"
INTERVAL_S = 15.0

log = logging.getLogger("faultline.collect.prometheus")

PREFIXES = ("node_disk_", "node_filesystem_", "node_network_", "DCGM_FI_")
DEFAULT_NIC_EXCLUDE = r"^(lo|veth.*|docker.*|br-.*|virbr.*|cni.*|flannel.*|cali.*|ifb\d+|tun.*|tap.*)$"
FS_EXCLUDE = frozenset({"tmpfs", "devtmpfs", "overlay", "squashfs", "proc", "sysfs", "cgroup", "cgroup2", "devpts"})
THROTTLE_BITS = ((8, "hw_slowdown"), (32, "sw_thermal"), (64, "hw_thermal"), (128, "power_brake"), (4, "sw_power_cap"))

Samples = dict[str, list[tuple[dict[str, str], float]]]


def _wanted(text: str, prefixes: tuple[str, ...]) -> list[str]:
    """The sample lines of metrics named with ``prefixes`` and their ``# HELP`` / ``# TYPE``
    lines: what the parser needs to see, so the rest of a node_exporter page is not parsed."""
    return [ln for ln in text.splitlines()
            if ln.startswith(prefixes) or (ln.startswith(("# HELP ", "# TYPE ")) and ln[7:].startswith(prefixes))]


def parse_text(text: str, prefixes: tuple[str, ...] = PREFIXES, stats: dict[str, int] | None = None) -> Samples:
    """Prometheus text format -> sample name -> [(labels, value)], only names with ``prefixes``
    (``prometheus_client.parser``: escapes, NaN/+Inf and timestamps as Prometheus reads them).

    A page the parser refuses is parsed again line by line, so one malformed line costs only
    itself: each such line is counted in ``stats["bad_lines"]`` and the first one logged."""
    from prometheus_client.parser import text_string_to_metric_families

    lines = _wanted(text, prefixes)
    out: Samples = {}
    try:
        for fam in text_string_to_metric_families("\n".join(lines) + "\n"):
            for smp in fam.samples:
                out.setdefault(smp.name, []).append((smp.labels, smp.value))
        return out
    except ValueError:
        out = {}
    bad: list[str] = []
    for ln in lines:
        if ln.startswith("#"):
            continue
        try:
            for fam in text_string_to_metric_families(ln + "\n"):
                for smp in fam.samples:
                    out.setdefault(smp.name, []).append((smp.labels, smp.value))
        except ValueError:
            bad.append(ln)
    if bad:
        if stats is not None:
            stats["bad_lines"] = stats.get("bad_lines", 0) + len(bad)
        log.warning("%d malformed exposition line(s) skipped, first: %.200s", len(bad), bad[0],
                    extra={"bad_lines": len(bad)})
    return out


def _by(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {lb.get(label, ""): v for lb, v in samples.get(name, ())}


def _int(v: float | None) -> int | None:
    return int(v) if v is not None and v >= 0 else None


class PrometheusCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, targets: list[str], node: str | None = None, *, timeout_s: float = 5.0,
                 nic_exclude: str = DEFAULT_NIC_EXCLUDE, full_pct: float = 98.0) -> None:
        self.targets = targets
        self.node = node or hostname()
        self.timeout_s = timeout_s
        self.nic_exclude = re.compile(nic_exclude)
        self.full_pct = full_pct
        self._session = None
        self._prev_disk: dict[tuple[str, str], tuple[int, dict[str, float]]] = {}
        self._prev_xid: dict[tuple[str, str], float] = {}
        self.stats = {"scrapes": 0, "scrape_errors": 0}
        self._failed: list[str] = []  # this round's failed scrapes

    # ------------------------------------------------------------------ mapping
    def map_samples(self, s: Samples, ts: int, target: str = "") -> list[Envelope]:
        out: list[Envelope] = []
        if any(k.startswith("DCGM_FI_") for k in s):
            out += self._dcgm(s, ts, target)
        if "node_network_receive_bytes_total" in s or "node_network_up" in s:
            out += self._net(s, ts)
        if "node_filesystem_size_bytes" in s:
            out += self._storage(s, ts, target)
        return out

    def _net(self, s: Samples, ts: int) -> list[Envelope]:
        src = f"node_exporter@{self.node}"
        carrier = _by(s, "node_network_carrier", "device")
        up = _by(s, "node_network_up", "device")
        speed = _by(s, "node_network_speed_bytes", "device")
        fields = {
            "in_errors": _by(s, "node_network_receive_errs_total", "device"),
            "out_errors": _by(s, "node_network_transmit_errs_total", "device"),
            "in_discards": _by(s, "node_network_receive_drop_total", "device"),
            "out_discards": _by(s, "node_network_transmit_drop_total", "device"),
            "in_octets": _by(s, "node_network_receive_bytes_total", "device"),
            "out_octets": _by(s, "node_network_transmit_bytes_total", "device"),
        }
        devices = set(carrier) | set(up) | set(fields["in_octets"])
        out: list[Envelope] = []
        for dev in sorted(devices):
            if not dev or self.nic_exclude.match(dev):
                continue
            state = carrier.get(dev, up.get(dev))
            sp = speed.get(dev)
            out.append(NetPort(v=1, id=new_id(), ts=ts, source=src, node=self.node, data=NetPortData(
                device=self.node, port=dev, oper_status="up" if state and state >= 1 else "down",
                speed_mbps=int(sp * 8 / 1e6) if sp is not None and sp > 0 else None,
                **{k: _int(v.get(dev)) for k, v in fields.items()})))
        return out

    def _storage(self, s: Samples, ts: int, target: str) -> list[Envelope]:
        src = f"node_exporter@{self.node}"
        mounts: dict[str, dict[str, str]] = {}
        for lb, _ in s.get("node_filesystem_size_bytes", ()):
            mp = lb.get("mountpoint")
            if mp and lb.get("fstype") not in FS_EXCLUDE:
                mounts[mp] = lb
        size = _by(s, "node_filesystem_size_bytes", "mountpoint")
        avail = _by(s, "node_filesystem_avail_bytes", "mountpoint")
        free = _by(s, "node_filesystem_free_bytes", "mountpoint")
        ro = _by(s, "node_filesystem_readonly", "mountpoint")
        derr = _by(s, "node_filesystem_device_error", "mountpoint")
        disk_names = ("node_disk_reads_completed_total", "node_disk_writes_completed_total",
                      "node_disk_read_bytes_total", "node_disk_written_bytes_total",
                      "node_disk_read_time_seconds_total", "node_disk_write_time_seconds_total",
                      "node_disk_io_time_weighted_seconds_total")
        disk = {n: _by(s, n, "device") for n in disk_names}
        out: list[Envelope] = []
        for mp, lb in sorted(mounts.items()):
            dev = lb.get("device", "").rsplit("/", 1)[-1]
            used = None
            if size.get(mp):
                u = size[mp] - free.get(mp, 0.0)
                denom = u + avail.get(mp, 0.0)
                used = round(100.0 * u / denom, 2) if denom > 0 else None
            if derr.get(mp):
                state, err = "stale", "node_exporter could not statfs the mount (device_error=1)"
            elif ro.get(mp):
                state, err = "readonly", "mounted read-only"
            elif used is not None and used >= self.full_pct:
                state, err = "full", f"{used:.1f}% used"
            else:
                state, err = "ok", None
            out.append(StorageMount(v=1, id=new_id(), ts=ts, source=src, node=self.node,
                                    data=StorageMountData(path=mp, state=state, error=err)))
            data = StorageSampleData(path=mp, fs_type=lb.get("fstype"), used_pct=used)
            cur = {n: disk[n][dev] for n in disk_names if dev in disk[n]}
            if cur:
                key = (target, mp)
                prev = self._prev_disk.get(key)
                self._prev_disk[key] = (ts, cur)
                if prev is not None and ts > prev[0]:
                    dt = (ts - prev[0]) / 1000
                    d = {n: cur[n] - prev[1][n] for n in cur if n in prev[1]}
                    if d and min(d.values()) >= 0:
                        r = d.get("node_disk_reads_completed_total")
                        w = d.get("node_disk_writes_completed_total")
                        rb = d.get("node_disk_read_bytes_total")
                        wb = d.get("node_disk_written_bytes_total")
                        rt = d.get("node_disk_read_time_seconds_total")
                        wt = d.get("node_disk_write_time_seconds_total")
                        q = d.get("node_disk_io_time_weighted_seconds_total")
                        data.read_iops = round(r / dt, 3) if r is not None else None
                        data.write_iops = round(w / dt, 3) if w is not None else None
                        data.read_mbps = round(rb / dt / 1e6, 3) if rb is not None else None
                        data.write_mbps = round(wb / dt / 1e6, 3) if wb is not None else None
                        data.read_lat_ms = round(rt * 1000 / r, 3) if r and rt is not None else None
                        data.write_lat_ms = round(wt * 1000 / w, 3) if w and wt is not None else None
                        data.queue_depth = round(q / dt, 3) if q is not None else None
            out.append(StorageSample(v=1, id=new_id(), ts=ts, source=src, node=self.node, data=data))
        return out

    def _dcgm(self, s: Samples, ts: int, target: str) -> list[Envelope]:
        gpus: dict[str, dict[str, str]] = {}
        vals: dict[str, dict[str, float]] = {}
        for name, rows in s.items():
            if not name.startswith("DCGM_FI_"):
                continue
            for lb, v in rows:
                g = lb.get("gpu")
                if g is None or not g.isdigit():
                    continue
                gpus.setdefault(g, lb)
                vals.setdefault(g, {})[name[8:]] = v
        out: list[Envelope] = []
        for g in sorted(gpus, key=int):
            lb, v = gpus[g], vals[g]
            node = lb.get("Hostname") or self.node
            src = f"dcgm-exporter@{node}"
            used, free = v.get("DEV_FB_USED"), v.get("DEV_FB_FREE")
            total = used + free + v.get("DEV_FB_RESERVED", 0.0) if used is not None and free is not None else None
            reasons = v.get("DEV_CLOCKS_EVENT_REASONS", v.get("DEV_CLOCK_THROTTLE_REASONS"))
            nvl = [v[k] for k in ("DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                                  "DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL")
                   if k in v]
            ret = [v[k] for k in ("DEV_RETIRED_SBE", "DEV_RETIRED_DBE") if k in v]
            sbe = v.get("DEV_ECC_SBE_VOL_TOTAL", v.get("DEV_ECC_SBE_AGG_TOTAL"))
            dbe = v.get("DEV_ECC_DBE_VOL_TOTAL", v.get("DEV_ECC_DBE_AGG_TOTAL"))
            util = v.get("DEV_GPU_UTIL")
            out.append(GpuSample(v=1, id=new_id(), ts=ts, source=src, node=node, data=GpuSampleData(
                gpu=int(g), uuid=lb.get("UUID", ""),
                util_pct=min(100.0, max(0.0, util)) if util is not None else None,
                mem_used_mib=used, mem_total_mib=total, temp_c=v.get("DEV_GPU_TEMP"),
                power_w=v.get("DEV_POWER_USAGE"), sm_clock_mhz=v.get("DEV_SM_CLOCK"),
                throttle=[n for bit, n in THROTTLE_BITS if reasons and int(reasons) & bit],
                ecc_sbe=_int(sbe), ecc_dbe=_int(dbe), nvlink_errors=_int(sum(nvl)) if nvl else None,
                pcie_replay=_int(v.get("DEV_PCIE_REPLAY_COUNTER")),
                retired_pages=_int(sum(ret)) if ret else None,
                remapped_rows_pending=_int(v.get("DEV_ROW_REMAP_PENDING")))))
            xid = v.get("DEV_XID_ERRORS")
            if xid is not None:
                key = (target, f"{node}/{g}")
                prev = self._prev_xid.get(key)
                self._prev_xid[key] = xid
                if prev is not None and xid != prev and xid > 0:
                    out.append(GpuXid(v=1, id=new_id(), ts=ts, source=src, node=node, data=GpuXidData(
                        gpu=int(g), pci=norm_pci(lb.get("pci_bus_id")), xid=int(xid), pid=None,
                        message=f"dcgm-exporter: DCGM_FI_DEV_XID_ERRORS={int(xid)} on GPU {g} ({lb.get('UUID', '')})")))
        return out

    # ------------------------------------------------------------------ scraping
    async def scrape(self, url: str) -> str | None:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))
        try:
            async with self._session.get(url) as r:
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}")
                return await r.text()
        except Exception as e:
            self.stats["scrape_errors"] += 1
            why = str(e) or type(e).__name__
            self._failed.append(f"scrape of {url} failed: {why}; is the exporter running there?")
            log.warning("scrape of %s failed: %s; is the exporter running?", url, why, extra={"target": url})
            return None

    def round_problems(self) -> list[str]:
        return list(self._failed)

    async def collect(self) -> list[Envelope]:
        out: list[Envelope] = []
        self._failed = []
        for url in self.targets:
            text = await self.scrape(url)
            if text is None:
                continue
            self.stats["scrapes"] += 1
            out += self.map_samples(parse_text(text, stats=self.stats), now_ms(), url)
        return out

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", action="append", dest="targets", required=True, metavar="URL",
                   help="exporter URL, e.g. http://127.0.0.1:9100/metrics (repeatable)")
    p.add_argument("--node", help="node name (default: this host; DCGM's Hostname label wins)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="scrape timeout")
    p.add_argument("--nic-exclude", default=DEFAULT_NIC_EXCLUDE, metavar="REGEX",
                   help="interfaces not reported as net.port")


def build(args: argparse.Namespace, settings: Settings) -> PrometheusCollector:
    return PrometheusCollector(args.targets, args.node, timeout_s=args.timeout, nic_exclude=args.nic_exclude)
