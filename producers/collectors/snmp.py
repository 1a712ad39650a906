"""``faultline collect snmp``: switch ports (``net.port``) and link changes (``net.link``).

Each round polls IF-MIB ``ifTable``/``ifXTable`` of every configured switch concurrently
(pysnmp 7 asyncio, one engine, GETBULK of all columns at once, SNMP v2c or v3 USM
auth/priv, per-switch timeout and retries). A switch that does not answer times out on
its own; the others are not held up.

Columns (OIDs from ``/work/shared/reference/snmp_oids.csv``, RFC 2863): ifDescr,
ifOperStatus, ifLastChange, ifInDiscards, ifInErrors, ifOutDiscards, ifOutErrors,
ifName, ifHCInOctets, ifHCOutOctets, ifHighSpeed, plus sysUpTime.0 as the time base.

``net.link`` comes from two places:

* linkDown/linkUp traps (``--trap-listen HOST:PORT``, see ``snmp_traps.py``), emitted
  as they arrive;
* ifLastChange between two polls: an oper-status change, or an ifLastChange that moved
  while the status looks unchanged (a flap shorter than the poll interval: both edges are
  emitted). Edges a trap already reported since the previous poll are not repeated.

A port maps to the node behind it through the topology (``--topology``: JSON/TOML
``{node: [{nic, switch, port, segment}]}`` or JSON lines of ``inventory.topology``
events); such events carry ``node``, the others ``node = null`` (key = switch).

Targets come from ``--targets FILE`` (TOML/JSON, see ``docs/collectors-fabric.md``) or
``--target NAME=HOST[:PORT]`` (v2c, community from ``$SNMP_COMMUNITY`` or ``public``).
Secrets (community, auth/priv keys) are read from ``*_env``/``*_file`` keys and never logged.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from ...config import Settings
from ...schemas import now_ms
from ...schemas.events import NetLink, NetLinkData, NetPort, NetPortData
from .base import Collector, add_common_args, new_id, resolve_secret, run_collector
from .snmp_ber import END_OF_MIB, EXCEPTIONS, NO_SUCH_OBJECT, SnmpTimeout, V2cClient
from .snmp_traps import LinkTrap, TrapListener

NAME = "snmp"
HELP = "switch ports over SNMP (IF-MIB, v2c/v3) -> net.port, net.link (+ linkUp/linkDown traps)"
INTERVAL_S = 30.0
CUSTOM_RUN = True  # the trap listener emits between polls

log = logging.getLogger("faultline.collect.snmp")

SYS_UPTIME = (1, 3, 6, 1, 2, 1, 1, 3)          # sysUpTime (.0 is the instance)
IF_ENTRY = (1, 3, 6, 1, 2, 1, 2, 2, 1)
IFX_ENTRY = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)
#: field -> column OID (snmp_oids.csv)
COLUMNS: dict[str, tuple[int, ...]] = {
    "descr": IF_ENTRY + (2,),
    "oper": IF_ENTRY + (8,),
    "last_change": IF_ENTRY + (9,),
    "in_discards": IF_ENTRY + (13,),
    "in_errors": IF_ENTRY + (14,),
    "out_discards": IF_ENTRY + (19,),
    "out_errors": IF_ENTRY + (20,),
    "name": IFX_ENTRY + (1,),
    "in_octets": IFX_ENTRY + (6,),
    "out_octets": IFX_ENTRY + (10,),
    "high_speed": IFX_ENTRY + (15,),
}
_COLS = list(COLUMNS.items())
_TEXT = {"descr", "name"}


class SnmpConfigError(ValueError):
    """The targets file is unusable; the message names the file, the switch and the key."""


class TargetError(RuntimeError):
    """One switch could not be polled (timeout, auth failure, error status)."""


# ------------------------------------------------------------------ configuration
@dataclass
class Target:
    """One switch. Secrets are excluded from ``repr`` so a logged target leaks nothing."""

    name: str
    host: str
    port: int = 161
    version: str = "2c"                      # "1" | "2c" | "3"
    community: str = field(default="public", repr=False)
    user: str | None = None
    auth_protocol: str = "sha"
    auth_key: str | None = field(default=None, repr=False)
    priv_protocol: str = "aes"
    priv_key: str | None = field(default=None, repr=False)
    timeout_s: float = 2.0
    retries: int = 1
    max_repetitions: int = 25
    include: str | None = None               # regex on the port name
    exclude: str | None = r"^lo$"
    trap_sources: list[str] = field(default_factory=list)  # agent IPs that send this switch's traps


_AUTH = {"none": "USM_AUTH_NONE", "md5": "USM_AUTH_HMAC96_MD5", "sha": "USM_AUTH_HMAC96_SHA",
         "sha224": "USM_AUTH_HMAC128_SHA224", "sha256": "USM_AUTH_HMAC192_SHA256",
         "sha384": "USM_AUTH_HMAC256_SHA384", "sha512": "USM_AUTH_HMAC384_SHA512"}
_PRIV = {"none": "USM_PRIV_NONE", "des": "USM_PRIV_CBC56_DES", "3des": "USM_PRIV_CBC168_3DES",
         "aes": "USM_PRIV_CFB128_AES", "aes128": "USM_PRIV_CFB128_AES", "aes192": "USM_PRIV_CFB192_AES",
         "aes256": "USM_PRIV_CFB256_AES"}


def _secret(cfg: dict[str, Any], key: str, where: str) -> str | None:
    """``key`` inline, ``key_env`` (variable name) or ``key_file`` (path), in that order."""
    return resolve_secret(cfg, key, where, SnmpConfigError)


def target_from_dict(cfg: dict[str, Any], defaults: dict[str, Any] | None = None, where: str = "target") -> Target:
    merged = {**(defaults or {}), **cfg}
    name = merged.get("name")
    host = merged.get("host")
    if not name or not host:
        raise SnmpConfigError(f"{where}: every switch needs `name` and `host`")
    where = f"{where} {name!r}"
    version = str(merged.get("version", "2c")).lower().lstrip("v")
    if version not in ("1", "2c", "2", "3"):
        raise SnmpConfigError(f"{where}: version must be 1, 2c or 3, got {merged.get('version')!r}")
    version = "2c" if version == "2" else version
    t = Target(name=str(name), host=str(host), port=int(merged.get("port", 161)), version=version,
               timeout_s=float(merged.get("timeout_s", 2.0)), retries=int(merged.get("retries", 1)),
               max_repetitions=int(merged.get("max_repetitions", 25)),
               include=merged.get("include"), exclude=merged.get("exclude", r"^lo$"),
               trap_sources=list(merged.get("trap_sources", [])))
    if version == "3":
        t.user = merged.get("user")
        if not t.user:
            raise SnmpConfigError(f"{where}: SNMPv3 needs `user`")
        t.auth_protocol = str(merged.get("auth_protocol", "sha")).lower()
        t.priv_protocol = str(merged.get("priv_protocol", "aes")).lower()
        if t.auth_protocol not in _AUTH or t.priv_protocol not in _PRIV:
            raise SnmpConfigError(f"{where}: auth_protocol one of {sorted(_AUTH)}, priv_protocol one of {sorted(_PRIV)}")
        t.auth_key = _secret(merged, "auth_key", where)
        t.priv_key = _secret(merged, "priv_key", where)
        if t.auth_protocol != "none" and not t.auth_key:
            raise SnmpConfigError(f"{where}: auth_key / auth_key_env / auth_key_file missing")
        if t.priv_protocol != "none" and not t.priv_key:
            raise SnmpConfigError(f"{where}: priv_key / priv_key_env / priv_key_file missing")
    else:
        t.community = _secret(merged, "community", where) or "public"
    for rx in (t.include, t.exclude):
        if rx:
            try:
                re.compile(rx)
            except re.error as e:
                raise SnmpConfigError(f"{where}: bad include/exclude regex {rx!r}: {e}") from None
    return t


def load_targets(path: str | os.PathLike[str]) -> list[Target]:
    """TOML or JSON: ``{defaults: {...}, switch: [{name, host, ...}, ...]}``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise SnmpConfigError(f"targets file {p}: {e.strerror}") from None
    try:
        doc = orjson.loads(raw) if p.suffix == ".json" else tomllib.loads(raw.decode())
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SnmpConfigError(f"targets file {p} is not valid {'JSON' if p.suffix == '.json' else 'TOML'}: {e}") from None
    switches = doc.get("switch") or doc.get("switches") or []
    if not switches:
        raise SnmpConfigError(f"targets file {p}: no [[switch]] entries")
    targets = [target_from_dict(s, doc.get("defaults"), f"{p}") for s in switches]
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise SnmpConfigError(f"targets file {p}: switch names must be unique")
    return targets


# ------------------------------------------------------------------ topology
def load_topology(path: str | os.PathLike[str]) -> dict[tuple[str, str], str]:
    """(switch, port) -> node, from ``{node: [{nic, switch, port, segment}]}`` (JSON or TOML)
    or from JSON lines of ``inventory.topology`` contract events."""
    p = Path(path)
    raw = p.read_bytes()
    out: dict[tuple[str, str], str] = {}
    if p.suffix in (".jsonl", ".ndjson") or raw.lstrip().startswith(b'{"') and b"\n{" in raw.strip():
        for line in raw.splitlines():
            if not line.strip():
                continue
            ev = orjson.loads(line)
            if ev.get("kind") == "inventory.topology":
                for link in ev["data"].get("links", []):
                    out[(link["switch"], str(link["port"]))] = ev["node"]
        return out
    doc = orjson.loads(raw) if p.suffix == ".json" else tomllib.loads(raw.decode())
    for node, links in doc.items():
        for link in links:
            out[(link["switch"], str(link["port"]))] = node
    return out


def topology_from_events(events: Iterable[Any]) -> dict[tuple[str, str], str]:
    """Same map from decoded ``InventoryTopology`` events (e.g. read back from fl.inventory)."""
    out: dict[tuple[str, str], str] = {}
    for ev in events:
        if getattr(ev, "kind", None) == "inventory.topology":
            for link in ev.data.links:
                out[(link.switch, link.port)] = ev.node
    return out


async def topology_from_kafka(settings: Settings, timeout_s: float = 15.0) -> dict[tuple[str, str], str]:
    """Read ``fl.inventory`` from the beginning to its current end; the latest
    ``inventory.topology`` of each node wins. Undecodable records are skipped (they are the
    dead-letter path's business, not the poller's)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from ...schemas import decode

    topic = settings.topic("fl.inventory")
    # subscribed through the constructor: its metadata (partitions) is loaded by start()
    c = AIOKafkaConsumer(topic, **settings.kafka_kwargs(), enable_auto_commit=False, auto_offset_reset="earliest")
    await c.start()
    latest: dict[str, list[tuple[str, str]]] = {}
    try:
        parts = c.partitions_for_topic(topic)
        if not parts:
            return {}
        end = await c.end_offsets([TopicPartition(topic, p) for p in parts])
        todo = {tp: off for tp, off in end.items() if off > 0}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while todo and loop.time() < deadline:
            batch = await c.getmany(timeout_ms=500)
            for tp, msgs in batch.items():
                for m in msgs:
                    try:
                        ev = decode(m.value)
                    except Exception:  # noqa: BLE001 - skip what the contract rejects
                        continue
                    if ev.kind == "inventory.topology":
                        latest[ev.node] = [(ln.switch, ln.port) for ln in ev.data.links]
                if msgs and msgs[-1].offset + 1 >= todo.get(tp, 0):
                    todo.pop(tp, None)
        if todo:
            log.warning("fl.inventory not read to its end within %.0f s: topology may be partial", timeout_s,
                        extra={"collector": NAME})
    finally:
        await c.stop()
    return {key: node for node, links in latest.items() for key in links}


# ------------------------------------------------------------------ polling
@dataclass
class PortRow:
    if_index: int
    name: str
    oper: int | None
    last_change: int | None
    values: dict[str, Any]


#: the contract's integers stop at 2^63-1 (``schemas.events.INT64_MAX``); SNMP Counter64
#: runs to 2^64-1
_INT64_MAX = 2**63 - 1


def counter_value(v: Any) -> int | None:
    """An SNMP counter as the contract carries it: None unless a non-negative integer, and
    a Counter64 past 2^63-1 kept modulo 2^63, so the event stays valid (it used to be
    dead-lettered whole) and a counter crossing 2^63 reads as a counter reset, the way
    the detectors already read a wrap."""
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        return None
    return v & _INT64_MAX


@dataclass
class _TargetState:
    uptime: int | None = None               # sysUpTime (1/100 s) at the previous poll
    polled_ms: int | None = None
    ports: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)  # ifIndex -> (oper, lastChange)
    names: dict[int, str] = field(default_factory=dict)                            # ifIndex -> port name
    trap_seen: dict[int, int] = field(default_factory=dict)                        # ifIndex -> last trap ms
    status: str = "never polled"
    duration_s: float | None = None
    finished: float | None = None           # time.monotonic() when the last poll ended


def _oper(v: int | None) -> str:
    return "up" if v == 1 else "down"   # dormant, notPresent, lowerLayerDown... cannot carry traffic


class SnmpCollector(Collector):
    """Polls many switches per round; ``on_trap_events`` receives trap-derived events."""

    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, targets: list[Target], *, topology: dict[tuple[str, str], str] | None = None,
                 concurrency: int = 64, deadline_s: float = 60.0, topology_settings: Settings | None = None,
                 topology_refresh_s: float = 300.0) -> None:
        if not targets:
            raise SnmpConfigError("no switches to poll: give --targets FILE or --target NAME=HOST[:PORT]")
        self.targets = targets
        self.topology = topology or {}
        self.state: dict[str, _TargetState] = {t.name: _TargetState() for t in targets}
        self._sem = asyncio.Semaphore(concurrency)
        self.deadline_s = deadline_s
        self._engine = None
        self._auth: dict[str, Any] = {}
        self._transport: dict[str, Any] = {}
        self._v2c: V2cClient | None = None
        self._by_agent: dict[str, Target] = {}
        for t in targets:
            for ip in [t.host, *t.trap_sources]:
                self._by_agent.setdefault(ip, t)
        self._listener: TrapListener | None = None
        self._trap_buffer: list[NetLink] = []
        self.on_trap_events: Callable[[list[NetLink]], Any] | None = None
        self.rows_polled = 0
        #: read the topology from fl.inventory (merged over the file's) every topology_refresh_s
        self.topology_settings = topology_settings
        self.topology_refresh_s = topology_refresh_s
        self._file_topology = dict(self.topology)
        self._topology_at: float | None = None

    async def refresh_topology(self) -> None:
        try:
            live = await topology_from_kafka(self.topology_settings)  # type: ignore[arg-type]
        except Exception as e:  # noqa: BLE001 - keep polling with what we have
            log.warning("topology from fl.inventory unavailable (%s): keeping the previous map", e,
                        extra={"collector": NAME})
            return
        finally:
            self._topology_at = time.monotonic()
        self.topology = {**self._file_topology, **live}

    # --------------------------------------------------------------- pysnmp plumbing
    def _hl(self):
        from pysnmp.hlapi.v3arch import asyncio as hl
        return hl

    def _eng(self):
        if self._engine is None:
            self._engine = self._hl().SnmpEngine()
        return self._engine

    def _auth_for(self, t: Target):
        a = self._auth.get(t.name)
        if a is None:
            hl = self._hl()
            if t.version == "3":
                a = hl.UsmUserData(t.user, t.auth_key, t.priv_key,
                                   authProtocol=getattr(hl, _AUTH[t.auth_protocol]),
                                   privProtocol=getattr(hl, _PRIV[t.priv_protocol]))
            else:
                a = hl.CommunityData(t.community, mpModel=0 if t.version == "1" else 1)
            self._auth[t.name] = a
        return a

    async def _transport_for(self, t: Target):
        tr = self._transport.get(t.name)
        if tr is None:
            tr = await self._hl().UdpTransportTarget.create((t.host, t.port), timeout=t.timeout_s, retries=t.retries)
            self._transport[t.name] = tr
        return tr

    async def _request(self, t: Target, oids: list[tuple[int, ...]], non_repeaters: int) -> list[tuple[tuple[int, ...], Any]]:
        """One GETBULK (GETNEXT for v1); varbinds as (oid tuple, int | bytes | sentinel).

        v1/v2c go through the BER fast path (``snmp_ber``); v3 through pysnmp's USM."""
        bulk = t.version != "1"
        if t.version != "3":
            if self._v2c is None:
                self._v2c = V2cClient()
            try:
                err, eidx, vbs = await self._v2c.request(
                    t.host, t.port, t.community.encode(), oids, version=0 if t.version == "1" else 1, bulk=bulk,
                    non_repeaters=non_repeaters, max_repetitions=t.max_repetitions, timeout=t.timeout_s,
                    retries=t.retries)
            except SnmpTimeout as e:
                raise TargetError(f"timeout: {e}") from None
            if err:
                raise TargetError(f"error status {err} at varbind {eidx}")
            return vbs
        hl = self._hl()
        eng, auth, ctx = self._eng(), self._auth_for(t), hl.ContextData()
        tr = await self._transport_for(t)
        req = [hl.ObjectType(hl.ObjectIdentity(o)) for o in oids]
        err_ind, err_stat, err_idx, vbs = await hl.bulk_cmd(
            eng, auth, tr, ctx, non_repeaters, t.max_repetitions, *req, lookupMib=False)
        if err_ind:
            raise TargetError(f"{err_ind}")
        if err_stat and int(err_stat):
            raise TargetError(f"error status {err_stat.prettyPrint()} at varbind {err_idx}")
        return [(tuple(o), _plain(v)) for o, v in vbs]

    async def walk(self, t: Target) -> tuple[int | None, list[PortRow]]:
        """sysUpTime and every ifTable/ifXTable row of one switch (GETBULK, all columns per request)."""
        pos = {f: oid for f, oid in _COLS}
        active = [f for f, _ in _COLS]
        table: dict[str, dict[int, Any]] = {f: {} for f, _ in _COLS}
        uptime = None
        first = True
        for _ in range(100_000):
            if not active:
                break
            oids = [pos[f] for f in active]
            if first and t.version != "1":
                vbs = await self._request(t, [SYS_UPTIME, *oids], 1)
                o, v = vbs[0]
                if o[:8] == SYS_UPTIME and isinstance(v, int):
                    uptime = v
                vbs = vbs[1:]
            elif first:  # v1: no GETBULK; GETNEXT returns exactly one varbind per requested OID
                vbs = await self._request(t, [SYS_UPTIME, *oids], 0)
                o, v = vbs[0]
                uptime = v if o[:8] == SYS_UPTIME and isinstance(v, int) else None
                vbs = vbs[1:]
            else:
                vbs = await self._request(t, oids, 0)
            first = False
            n = len(active)
            done: set[str] = set()
            progressed: set[str] = set()
            for i, (o, v) in enumerate(vbs):
                f = active[i % n]
                if f in done:
                    continue
                base = COLUMNS[f]
                if o[:len(base)] != base or len(o) != len(base) + 1 or v in EXCEPTIONS:
                    done.add(f)
                    continue
                if o <= pos[f]:  # agent went backwards: stop this column rather than loop
                    done.add(f)
                    continue
                pos[f] = o
                progressed.add(f)
                table[f][o[-1]] = v
            active = [f for f in active if f not in done and f in progressed]
        rows = []
        for idx, oper in table["oper"].items():
            vals: dict[str, Any] = {}
            for f in ("in_errors", "out_errors", "in_discards", "out_discards", "in_octets", "out_octets",
                      "high_speed", "last_change"):
                vals[f] = counter_value(table[f].get(idx))
            pname = _text(table["name"].get(idx)) or _text(table["descr"].get(idx)) or str(idx)
            rows.append(PortRow(idx, pname, oper if isinstance(oper, int) else None, vals["last_change"], vals))
        return uptime, rows

    # --------------------------------------------------------------- one round
    async def collect(self) -> list[NetPort | NetLink]:
        if self.topology_settings is not None and (
                self._topology_at is None or time.monotonic() - self._topology_at > self.topology_refresh_s):
            await self.refresh_topology()
        results = await asyncio.gather(*(self._poll(t) for t in self.targets))
        out: list[NetPort | NetLink] = []
        for evs in results:
            out.extend(evs)
        if self._trap_buffer:  # traps received while nobody listened live
            out.extend(self._trap_buffer)
            self._trap_buffer = []
        return out

    async def _poll(self, t: Target) -> list[NetPort | NetLink]:
        st = self.state[t.name]
        t0 = time.perf_counter()
        async with self._sem:
            try:
                uptime, rows = await asyncio.wait_for(self.walk(t), self.deadline_s)
            except Exception as e:  # noqa: BLE001 - one bad switch must not fail the round
                reason = ("timeout" if isinstance(e, asyncio.TimeoutError) or "timeout" in str(e).lower()
                          else f"{type(e).__name__}: {e}")
                st.status = f"error: {reason}"
                st.duration_s = time.perf_counter() - t0
                st.finished = time.monotonic()
                log.warning("snmp poll of %s (%s:%s) failed after %.1f s: %s", t.name, t.host, t.port,
                            st.duration_s, reason, extra={"collector": NAME, "switch": t.name})
                return []
        polled = now_ms()
        st.duration_s = time.perf_counter() - t0
        st.finished = time.monotonic()
        st.status = "ok"
        return self._events(t, st, uptime, rows, polled)

    def _wanted(self, t: Target, port: str) -> bool:
        if t.include and not re.search(t.include, port):
            return False
        return not (t.exclude and re.search(t.exclude, port))

    def _events(self, t: Target, st: _TargetState, uptime: int | None, rows: list[PortRow],
                polled: int) -> list[NetPort | NetLink]:
        src = f"snmp@{t.name}"
        out: list[NetPort | NetLink] = []
        restarted = uptime is not None and st.uptime is not None and uptime < st.uptime
        prev_poll = st.polled_ms
        for r in rows:
            st.names[r.if_index] = r.name
            if not self._wanted(t, r.name):
                continue
            node = self.topology.get((t.name, r.name))
            v = r.values
            speed = v["high_speed"]
            out.append(NetPort(v=1, id=new_id(), ts=polled, source=src, node=node, data=NetPortData(
                device=t.name, port=r.name, oper_status=_oper(r.oper), speed_mbps=speed if speed else None,
                in_errors=v["in_errors"], out_errors=v["out_errors"], in_discards=v["in_discards"],
                out_discards=v["out_discards"], in_octets=v["in_octets"], out_octets=v["out_octets"])))
            prev = st.ports.get(r.if_index)
            st.ports[r.if_index] = (r.oper, r.last_change)
            if prev is None or restarted or prev_poll is None:
                continue
            p_oper, p_change = prev
            status_moved = _oper(p_oper) != _oper(r.oper)
            change_moved = r.last_change is not None and p_change is not None and r.last_change != p_change
            if not (status_moved or change_moved):
                continue
            if st.trap_seen.get(r.if_index, 0) > prev_poll:
                continue  # the trap listener already reported this port's edges
            # when the port entered its current state, from sysUpTime - ifLastChange
            change_ts = polled
            if uptime is not None and r.last_change is not None and uptime >= r.last_change:
                change_ts = polled - (uptime - r.last_change) * 10
            change_ts = min(max(change_ts, prev_poll + 1), polled)
            now_state = _oper(r.oper)
            if not status_moved:  # a whole flap between two polls: the opposite edge first
                other = "down" if now_state == "up" else "up"
                out.append(self._link(src, node, t.name, r.name, other, max(prev_poll + 1, change_ts - 1)))
            out.append(self._link(src, node, t.name, r.name, now_state, change_ts))
        st.uptime = uptime
        st.polled_ms = polled
        self.rows_polled += len(rows)
        return out

    @staticmethod
    def _link(src: str, node: str | None, device: str, port: str, state: str, ts: int) -> NetLink:
        return NetLink(v=1, id=new_id(), ts=ts, source=src, node=node,
                       data=NetLinkData(device=device, port=port, state=state))

    # --------------------------------------------------------------- traps
    def handle_traps(self, traps: list[LinkTrap]) -> list[NetLink]:
        """Map decoded traps to ``net.link`` (unknown agents are logged and dropped)."""
        out = []
        for tr in traps:
            t = self._by_agent.get(tr.agent)
            if t is None:
                log.warning("link trap from unknown agent %s (ifIndex %s): add it as host or trap_sources",
                            tr.agent, tr.if_index, extra={"collector": NAME})
                continue
            st = self.state[t.name]
            port = st.names.get(tr.if_index, str(tr.if_index))
            if st.names and not self._wanted(t, port):
                continue
            st.trap_seen[tr.if_index] = tr.received_ms
            out.append(self._link(f"snmp@{t.name}", self.topology.get((t.name, port)), t.name, port,
                                  tr.state, tr.received_ms))
        return out

    def _on_traps(self, traps: list[LinkTrap]) -> None:
        evs = self.handle_traps(traps)
        if not evs:
            return
        if self.on_trap_events is None:
            self._trap_buffer.extend(evs)
            del self._trap_buffer[:-10_000]  # bounded while nobody drains
        else:
            res = self.on_trap_events(evs)
            if asyncio.iscoroutine(res):
                asyncio.ensure_future(res)

    async def start_traps(self, host: str, port: int, communities: set[str] | None = None) -> tuple[str, int]:
        self._listener = await TrapListener(self._on_traps, communities).start(host, port)
        return self._listener.address  # type: ignore[return-value]

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._v2c is not None:
            self._v2c.close()
            self._v2c = None
        if self._engine is not None:
            self._engine.close_dispatcher()
            self._engine = None
            self._transport.clear()


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace").strip("\x00 ").strip()
    return "" if v is None else str(v)


def _plain(v: Any) -> Any:
    """pysnmp value -> the fast path's plain types (int, bytes, tuple, sentinels)."""
    name = v.__class__.__name__
    if name == "EndOfMibView":
        return END_OF_MIB
    if name in ("NoSuchObject", "NoSuchInstance"):
        return NO_SUCH_OBJECT
    if hasattr(v, "asOctets"):
        return v.asOctets()
    try:
        return int(v)
    except (TypeError, ValueError):
        return tuple(v)


# ------------------------------------------------------------------ CLI
def _hostport(s: str, default_port: int) -> tuple[str, int]:
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit():
        return s, default_port
    return host, int(port)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", metavar="FILE", help="switches, TOML or JSON (see docs/collectors-fabric.md)")
    p.add_argument("--target", action="append", default=[], metavar="NAME=HOST[:PORT]",
                   help="a v2c switch (community from $SNMP_COMMUNITY, else 'public'); repeatable")
    p.add_argument("--topology", metavar="FILE", help="node -> [{nic, switch, port, segment}] (JSON/TOML) "
                   "or JSON lines of inventory.topology events")
    p.add_argument("--topology-kafka", action="store_true",
                   help="also map ports to nodes from the inventory.topology events on fl.inventory")
    p.add_argument("--trap-listen", metavar="HOST:PORT", help="receive linkUp/linkDown traps here (v1/v2c)")
    p.add_argument("--trap-community", action="append", default=None,
                   help="accept traps only with this community (repeatable; default any)")
    p.add_argument("--timeout", type=float, help="seconds per request for --target switches (default 2)")
    p.add_argument("--retries", type=int, help="retries per request for --target switches (default 1)")
    p.add_argument("--concurrency", type=int, default=64, help="switches polled at once (default 64)")
    add_common_args(p, INTERVAL_S)


def build(args: argparse.Namespace, settings: Settings) -> SnmpCollector:
    targets = load_targets(args.targets) if args.targets else []
    for spec in args.target:
        name, sep, hp = spec.partition("=")
        if not sep:
            raise SnmpConfigError(f"--target {spec!r}: expected NAME=HOST[:PORT]")
        host, port = _hostport(hp, 161)
        cfg: dict[str, Any] = {"name": name, "host": host, "port": port, "community_env": None}
        if os.environ.get("SNMP_COMMUNITY"):
            cfg["community"] = os.environ["SNMP_COMMUNITY"]
        if args.timeout is not None:
            cfg["timeout_s"] = args.timeout
        if args.retries is not None:
            cfg["retries"] = args.retries
        targets.append(target_from_dict(cfg, where="--target"))
    topo = load_topology(args.topology) if args.topology else None
    return SnmpCollector(targets, topology=topo, concurrency=args.concurrency,
                         topology_settings=settings if args.topology_kafka else None)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...cli import CliError

    try:
        return asyncio.run(_run(args, settings))
    except (SnmpConfigError, OSError) as e:
        raise CliError(str(e)) from None


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    import sys

    from ...schemas import encode

    collector = build(args, settings)
    pub = None
    if args.output == "-":
        out = sys.stdout.buffer

        async def emit(evs: list[Any]) -> None:
            for ev in evs:
                out.write(encode(ev) + b"\n")
            out.flush()
    else:
        try:
            from ..spool import SpoolingPublisher as _Pub  # type: ignore[attr-defined]
        except ImportError:
            from ..publish import Publisher as _Pub
        pub = await _Pub(settings).start()

        async def emit(evs: list[Any]) -> None:
            await pub.send_many(evs)
    try:
        if args.trap_listen:
            host, port = _hostport(args.trap_listen, 162)
            collector.on_trap_events = emit
            addr = await collector.start_traps(host or "0.0.0.0", port,
                                               set(args.trap_community) if args.trap_community else None)
            log.info("listening for link traps on %s:%s", *addr, extra={"collector": NAME})
        await run_collector(collector, settings, once=args.once, interval_s=args.interval, sink=emit)
    finally:
        if pub is not None:
            await pub.flush()
            await pub.stop()
    return 0
