"""``faultline collect bmc``: BMC sensors (``hw.sensor``) and system event log (``hw.sel``).

Two protocols, many BMCs polled concurrently, each with its own timeout:

* **IPMI** through ``ipmitool -I lanplus -C 3`` (cipher suite 3 = the common RAKP-HMAC-SHA1 /
  AES suite; without ``-C`` ipmitool first asks for the cipher suites, which some BMCs and
  ``ipmi_sim`` do not implement: 10 s lost per call). ``sdr elist`` gives the sensors,
  ``sel elist`` the event log. The password reaches ipmitool through ``IPMI_PASSWORD`` with
  ``-E``, never on the command line (``ps`` shows argv).
* **Redfish** through the DMTF ``redfish`` library (in a worker thread): ``Chassis/*/Thermal``
  and ``Power`` (or ``Sensors`` on newer services) and ``Systems/*/LogServices/*/Entries``.

SEL entries are emitted once: the last seen entry per BMC (record id + timestamp) is
remembered (in memory, and in ``--state-file`` across restarts); a SEL that was cleared
(the remembered record is gone and ids restarted) is read from its start. On the very first
round, entries older than ``--sel-history-hours`` are skipped.

Config (``--bmcs FILE``, TOML/JSON): ``[defaults]`` and ``[[bmc]]`` with ``node``, ``host``,
``protocol`` (``ipmi``|``redfish``), ``port``, ``user``/``user_env``/``user_file``,
``password``/``password_env``/``password_file``, ``timeout_s``, ``cipher_suite``,
``interface``, ``cafile``, ``auth`` (Redfish ``session`` or ``basic``). Credentials are never logged.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import re
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from ...config import Settings
from ...schemas import now_ms
from ...schemas.events import HwSel, HwSelData, HwSensor, HwSensorData
from .base import Collector, new_id, resolve_secret

NAME = "bmc"
HELP = "BMC sensors and SEL over IPMI (ipmitool) or Redfish -> hw.sensor, hw.sel"
INTERVAL_S = 30.0

log = logging.getLogger("faultline.collect.bmc")


class BmcConfigError(ValueError):
    """The BMC config is unusable; the message names the file, the BMC and the key."""


class BmcError(RuntimeError):
    """One BMC could not be read (timeout, auth, tool missing)."""


# ------------------------------------------------------------------ config
@dataclass
class Bmc:
    node: str
    host: str
    protocol: str = "ipmi"                   # ipmi | redfish
    port: int | None = None
    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    timeout_s: float = 15.0
    interface: str = "lanplus"
    cipher_suite: int = 3
    cafile: str | None = None                # Redfish: CA bundle for the BMC's TLS certificate
    auth: str = "session"                    # Redfish: session | basic
    sensors: bool = True
    sel: bool = True


def _secret(cfg: dict[str, Any], key: str, where: str) -> str | None:
    """``key`` inline, ``key_env`` (variable name) or ``key_file`` (path), in that order."""
    return resolve_secret(cfg, key, where, BmcConfigError)


def bmc_from_dict(cfg: dict[str, Any], defaults: dict[str, Any] | None = None, where: str = "bmc") -> Bmc:
    m = {**(defaults or {}), **cfg}
    if not m.get("node") or not m.get("host"):
        raise BmcConfigError(f"{where}: every BMC needs `node` and `host`")
    where = f"{where} {m['node']!r}"
    proto = str(m.get("protocol", "ipmi")).lower()
    if proto not in ("ipmi", "redfish"):
        raise BmcConfigError(f"{where}: protocol must be ipmi or redfish, got {proto!r}")
    user = _secret(m, "user", where)
    password = _secret(m, "password", where)
    if user is None or password is None:
        raise BmcConfigError(f"{where}: user/password missing (give user_env/password_env or *_file)")
    return Bmc(node=str(m["node"]), host=str(m["host"]), protocol=proto,
               port=int(m["port"]) if m.get("port") else None, user=user, password=password,
               timeout_s=float(m.get("timeout_s", 15.0)), interface=str(m.get("interface", "lanplus")),
               cipher_suite=int(m.get("cipher_suite", 3)), cafile=m.get("cafile"),
               auth=str(m.get("auth", "session")),
               sensors=bool(m.get("sensors", True)), sel=bool(m.get("sel", True)))


def load_bmcs(path: str | os.PathLike[str]) -> list[Bmc]:
    p = Path(path)
    try:
        raw = p.read_bytes()
        doc = orjson.loads(raw) if p.suffix == ".json" else tomllib.loads(raw.decode())
    except OSError as e:
        raise BmcConfigError(f"BMC file {p}: {e.strerror}") from None
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BmcConfigError(f"BMC file {p} does not parse: {e}") from None
    entries = doc.get("bmc") or doc.get("bmcs") or []
    if not entries:
        raise BmcConfigError(f"BMC file {p}: no [[bmc]] entries")
    return [bmc_from_dict(b, doc.get("defaults"), str(p)) for b in entries]


# ------------------------------------------------------------------ IPMI parsing
UNIT_TYPES = {"degrees c": "temperature", "degrees f": "temperature", "rpm": "fan", "volts": "voltage",
              "watts": "power", "amps": "current", "percent": "other"}
SDR_STATUS = {"ok": "ok", "nc": "warning", "lnc": "warning", "unc": "warning", "cr": "critical",
              "lcr": "critical", "ucr": "critical", "nr": "critical", "lnr": "critical", "unr": "critical"}


def parse_sdr_elist(text: str) -> list[HwSensorData]:
    """``ipmitool sdr elist``: ``MBTemp | 01h | ok | 7.1 | 48 degrees C``; analog readings only
    (discrete sensors and ``ns`` = no reading are skipped)."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5:
            continue
        name, _num, status, _entity, reading = parts[:5]
        st = SDR_STATUS.get(status.lower())
        if st is None:
            continue
        m = re.match(r"^(-?\d+(?:\.\d+)?)\s+(.+)$", reading)
        if not m:
            continue
        unit = m.group(2).strip()
        out.append(HwSensorData(sensor=name, type=UNIT_TYPES.get(unit.lower(), "other"),  # type: ignore[arg-type]
                                value=float(m.group(1)), unit=unit, status=st))  # type: ignore[arg-type]
    return out


def parse_sensor_list(text: str) -> list[HwSensorData]:
    """``ipmitool sensor``: ``MBTemp | 48.000 | degrees C | ok | na | ... thresholds``."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 4:
            continue
        name, value, unit, status = parts[:4]
        try:
            v = float(value)
        except ValueError:
            continue  # discrete (0x0100) or na
        st = SDR_STATUS.get(status.lower())
        if st is None:
            continue
        out.append(HwSensorData(sensor=name, type=UNIT_TYPES.get(unit.lower(), "other"),  # type: ignore[arg-type]
                                value=v, unit=unit, status=st))  # type: ignore[arg-type]
    return out


#: IPMI sensor type names as ipmitool prints them (IPMI 2.0 table 42-3), longest first when matched
SENSOR_TYPES = sorted([
    "Temperature", "Voltage", "Current", "Fan", "Physical Security", "Platform Security", "Processor",
    "Power Supply", "Power Unit", "Cooling Device", "Other", "Memory", "Drive Slot / Bay", "POST Memory Resize",
    "System Firmware Progress", "Event Logging Disabled", "Watchdog 1", "System Event", "Critical Interrupt",
    "Button / Switch", "Module / Board", "Microcontroller", "Add-in Card", "Chassis", "Chip Set", "Other FRU",
    "Cable / Interconnect", "Terminator", "System Boot Initiated", "Boot Error", "OS Boot", "OS Critical Stop",
    "Slot / Connector", "System ACPI Power State", "Watchdog 2", "Platform Alert", "Entity Presence",
    "Monitor ASIC", "LAN", "Management Subsys Health", "Battery", "Session Audit", "Version Change",
    "FRU State",
], key=len, reverse=True)

_CRITICAL = re.compile(r"non-recoverable|(?<!non-)critical|uncorrectable|failure|fault|ac lost|power off|"
                       r"thermal trip|ierr|machine check|bus fatal|bus uncorrectable|config error|"
                       r"presence detected.*failure|predictive failure deasserted", re.I)
_OK = re.compile(r"log area reset|cleared|timestamp clock sync|initiated by power up|"
                 r"presence detected$|device present$|oem system boot|state deasserted$", re.I)


def sel_severity(description: str, direction: str) -> str:
    if direction.lower().startswith("deasserted"):
        return "ok"
    if _CRITICAL.search(description):
        return "critical"
    if _OK.search(description):
        return "ok"
    return "warning"


def _split_sensor(s: str) -> tuple[str, str]:
    for t in SENSOR_TYPES:
        if s == t or s.startswith(t + " "):
            return t, s[len(t):].strip()
    return (s.split(" ", 1)[0] if s else "Unknown"), (s.split(" ", 1)[1] if " " in s else "")


def _sel_ts(date: str, tm: str) -> int | None:
    """``11/29/26`` + ``15:13:38 UTC`` -> epoch ms (ipmitool prints the BMC's time; no zone = UTC)."""
    tm = tm.strip()
    if "Pre-Init" in date or "Pre-Init" in tm:
        return None
    clock = tm.split()[0] if tm else ""
    for fmt in ("%m/%d/%y %H:%M:%S", "%m/%d/%Y %H:%M:%S"):
        try:
            dt = datetime.strptime(f"{date.strip()} {clock}", fmt)
            return int(dt.replace(tzinfo=timezone.utc).timestamp() * 1000)
        except ValueError:
            continue
    return None


@dataclass(slots=True)
class SelEntry:
    record: int
    ts: int | None
    data: HwSelData


def parse_sel_elist(text: str) -> list[SelEntry]:
    """``ipmitool sel elist``: ``1 | 11/29/26 | 15:13:38 UTC | Memory #0x05 | Uncorrectable ECC | Asserted``."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5:
            continue
        try:
            record = int(parts[0], 16)
        except ValueError:
            continue
        date, tm, sensor = parts[1], parts[2], parts[3]
        desc = parts[4] if len(parts) > 4 else ""
        direction = parts[5] if len(parts) > 5 else ""
        extra = " | ".join(parts[6:])
        stype, sname = _split_sensor(sensor)
        message = " ".join(x for x in (sensor + ":", desc, direction and f"({direction})", extra) if x)
        out.append(SelEntry(record, _sel_ts(date, tm), HwSelData(
            entry_id=parts[0], severity=sel_severity(desc, direction),  # type: ignore[arg-type]
            sensor_type=stype, message=message, message_id=None)))
    return out


# ------------------------------------------------------------------ Redfish parsing
_HEALTH = {"ok": "ok", "warning": "warning", "critical": "critical"}


def _health(obj: dict[str, Any]) -> str:
    st = (obj.get("Status") or {})
    return _HEALTH.get(str(st.get("Health") or "OK").lower(), "warning")


def redfish_thermal(doc: dict[str, Any]) -> list[HwSensorData]:
    """``Chassis/{id}/Thermal``: Temperatures[].ReadingCelsius, Fans[].Reading (RPM or Percent)."""
    out = []
    for t in doc.get("Temperatures", []) or []:
        if t.get("ReadingCelsius") is None or (t.get("Status") or {}).get("State") == "Absent":
            continue
        out.append(HwSensorData(sensor=t.get("Name") or t.get("MemberId") or "temp", type="temperature",
                                value=float(t["ReadingCelsius"]), unit="degrees C", status=_health(t)))  # type: ignore[arg-type]
    for f in doc.get("Fans", []) or []:
        if f.get("Reading") is None or (f.get("Status") or {}).get("State") == "Absent":
            continue
        unit = "RPM" if str(f.get("ReadingUnits", "RPM")).upper() == "RPM" else "percent"
        out.append(HwSensorData(sensor=f.get("Name") or f.get("FanName") or f.get("MemberId") or "fan", type="fan",
                                value=float(f["Reading"]), unit=unit, status=_health(f)))  # type: ignore[arg-type]
    return out


def redfish_power(doc: dict[str, Any]) -> list[HwSensorData]:
    """``Chassis/{id}/Power``: PowerControl[].PowerConsumedWatts, Voltages[].ReadingVolts,
    PowerSupplies[] (health, LastPowerOutputWatts)."""
    out = []
    for pc in doc.get("PowerControl", []) or []:
        if pc.get("PowerConsumedWatts") is not None:
            out.append(HwSensorData(sensor=pc.get("Name") or "PowerControl", type="power",
                                    value=float(pc["PowerConsumedWatts"]), unit="Watts", status=_health(pc)))  # type: ignore[arg-type]
    for v in doc.get("Voltages", []) or []:
        if v.get("ReadingVolts") is not None:
            out.append(HwSensorData(sensor=v.get("Name") or "voltage", type="voltage",
                                    value=float(v["ReadingVolts"]), unit="Volts", status=_health(v)))  # type: ignore[arg-type]
    for ps in doc.get("PowerSupplies", []) or []:
        if (ps.get("Status") or {}).get("State") == "Absent":
            continue
        val = ps.get("LastPowerOutputWatts") or ps.get("PowerOutputWatts")
        out.append(HwSensorData(sensor=ps.get("Name") or ps.get("MemberId") or "PSU", type="power",
                                value=float(val) if val is not None else None, unit="Watts", status=_health(ps)))  # type: ignore[arg-type]
    return out


_READING_TYPES = {"temperature": ("temperature", "degrees C"), "voltage": ("voltage", "Volts"),
                  "power": ("power", "Watts"), "current": ("current", "Amps"), "rotational": ("fan", "RPM")}


def redfish_sensor(doc: dict[str, Any]) -> HwSensorData | None:
    """One ``Chassis/{id}/Sensors/{sid}`` resource (Redfish 2019.4+)."""
    if doc.get("Reading") is None:
        return None
    typ, unit = _READING_TYPES.get(str(doc.get("ReadingType", "")).lower(), ("other", doc.get("ReadingUnits") or ""))
    return HwSensorData(sensor=doc.get("Name") or doc.get("Id") or "sensor", type=typ,  # type: ignore[arg-type]
                        value=float(doc["Reading"]), unit=doc.get("ReadingUnits") or unit, status=_health(doc))  # type: ignore[arg-type]


def _iso_ms(s: str | None) -> int | None:
    if not s:
        return None
    try:
        return int(datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def redfish_log_entries(doc: dict[str, Any]) -> list[SelEntry]:
    """``LogServices/{id}/Entries`` collection (expanded Members) -> entries, oldest first."""
    out = []
    for e in doc.get("Members", []) or []:
        if "Id" not in e:
            continue
        try:
            record = int(e["Id"])
        except (TypeError, ValueError):
            record = int(hashlib.blake2b(str(e["Id"]).encode(), digest_size=4).hexdigest(), 16)
        sev = _HEALTH.get(str(e.get("Severity") or "Warning").lower(), "warning")
        out.append(SelEntry(record, _iso_ms(e.get("Created")), HwSelData(
            entry_id=str(e["Id"]), severity=sev, sensor_type=str(e.get("SensorType") or e.get("EntryType") or "Unknown"),  # type: ignore[arg-type]
            message=str(e.get("Message") or ""), message_id=e.get("MessageId"))))
    out.sort(key=lambda s: ((s.ts or 0), s.record))
    return out


# ------------------------------------------------------------------ collector
def stable_id(*parts: object) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=16).hexdigest()


@dataclass
class _BmcState:
    last_record: int | None = None
    last_ts: int | None = None
    status: str = "never polled"
    duration_s: float | None = None


class BmcCollector(Collector):
    name = NAME
    interval_s = INTERVAL_S

    def __init__(self, bmcs: list[Bmc], *, concurrency: int = 32, state_file: str | os.PathLike[str] | None = None,
                 sel_history_hours: float = 24.0, ipmitool: str = "ipmitool") -> None:
        if not bmcs:
            raise BmcConfigError("no BMCs to read: give --bmcs FILE or --ipmi NODE=HOST[:PORT]")
        self.bmcs = bmcs
        self.ipmitool = ipmitool
        self._sem = asyncio.Semaphore(concurrency)
        self.state_path = Path(state_file) if state_file else None
        self.sel_history_ms = int(sel_history_hours * 3_600_000)
        self.state: dict[str, _BmcState] = {self._key(b): _BmcState() for b in bmcs}
        self._first = True
        self._redfish: dict[str, Any] = {}
        if self.state_path and self.state_path.is_file():
            try:
                for k, v in orjson.loads(self.state_path.read_bytes()).get("sel", {}).items():
                    if k in self.state:
                        self.state[k].last_record, self.state[k].last_ts = v
                self._first = False
            except (OSError, orjson.JSONDecodeError, ValueError) as e:
                log.warning("bmc state file %s unreadable (%s): SEL history may repeat", self.state_path, e,
                            extra={"collector": NAME})

    @staticmethod
    def _key(b: Bmc) -> str:
        return f"{b.protocol}://{b.host}:{b.port or ''}"

    def _save(self) -> None:
        if not self.state_path:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"v": 1, "sel": {k: [s.last_record, s.last_ts] for k, s in self.state.items()}}))
        os.replace(tmp, self.state_path)

    async def collect(self) -> list[HwSensor | HwSel]:
        results = await asyncio.gather(*(self._poll(b) for b in self.bmcs))
        self._first = False
        self._save()
        return [e for evs in results for e in evs]

    async def _poll(self, b: Bmc) -> list[HwSensor | HwSel]:
        st = self.state[self._key(b)]
        t0 = time.perf_counter()
        async with self._sem:
            try:
                if b.protocol == "ipmi":
                    sensors, sel = await self._read_ipmi(b)
                else:
                    sensors, sel = await asyncio.wait_for(asyncio.to_thread(self._read_redfish, b),
                                                          b.timeout_s * 4)
            except Exception as e:  # noqa: BLE001 - one bad BMC must not fail the round
                if not isinstance(e, (BmcError, asyncio.TimeoutError, OSError)):
                    e = BmcError(f"{type(e).__name__}: {e}")
                st.status = f"error: {e or 'timeout'}"
                st.duration_s = time.perf_counter() - t0
                log.warning("BMC of %s (%s) failed after %.1f s: %s", b.node, b.host, st.duration_s,
                            e or "timeout", extra={"collector": NAME, "node": b.node})
                return []
        st.status, st.duration_s = "ok", time.perf_counter() - t0
        ts = now_ms()
        src = f"{b.protocol}@{b.host}"
        out: list[HwSensor | HwSel] = [HwSensor(v=1, id=new_id(), ts=ts, source=src, node=b.node, data=d)
                                       for d in sensors]
        out.extend(self._new_sel(b, st, sel, ts, src))
        return out

    def _new_sel(self, b: Bmc, st: _BmcState, entries: list[SelEntry], now: int, src: str) -> list[HwSel]:
        if not entries:
            return []
        last = st.last_record
        if last is not None and not any(e.record == last for e in entries) and max(e.record for e in entries) < last:
            last = None  # SEL was cleared and numbering restarted: everything is new
        new = [e for e in entries if last is None or e.record > last]
        if last is None and self._first and st.last_record is None:
            new = [e for e in new if e.ts is None or e.ts >= now - self.sel_history_ms]
        st.last_record = max(e.record for e in entries)
        st.last_ts = max((e.ts or 0) for e in entries) or None
        return [HwSel(v=1, id=stable_id(src, e.data.entry_id, e.ts), ts=min(e.ts or now, now), source=src,
                      node=b.node, data=e.data) for e in new]

    # --------------------------------------------------------------- IPMI
    async def _ipmitool(self, b: Bmc, *args: str) -> str:
        argv = [self.ipmitool, "-I", b.interface, "-H", b.host, "-U", b.user, "-E", "-N", "1", "-R", "2"]
        if b.interface == "lanplus":
            argv += ["-C", str(b.cipher_suite)]
        if b.port:
            argv += ["-p", str(b.port)]
        argv += list(args)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "IPMI_PASSWORD": b.password})
        except FileNotFoundError:
            raise BmcError(f"`{self.ipmitool}` not found: install ipmitool") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), b.timeout_s)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise BmcError(f"ipmitool {' '.join(args)} timed out after {b.timeout_s:g} s") from None
        if proc.returncode != 0:
            msg = err.decode(errors="replace").strip().splitlines()
            raise BmcError(f"ipmitool {' '.join(args)} exited {proc.returncode}: {msg[-1] if msg else ''}")
        return out.decode(errors="replace")

    async def _read_ipmi(self, b: Bmc) -> tuple[list[HwSensorData], list[SelEntry]]:
        # one session at a time per BMC: many BMCs limit concurrent sessions
        sensors = parse_sdr_elist(await self._ipmitool(b, "sdr", "elist")) if b.sensors else []
        sel = parse_sel_elist(await self._ipmitool(b, "sel", "elist")) if b.sel else []
        return sensors, sel

    # --------------------------------------------------------------- Redfish (worker thread)
    def _client(self, b: Bmc):
        key = self._key(b)
        c = self._redfish.get(key)
        if c is None:
            import redfish

            scheme = "https" if not b.host.startswith("http") else ""
            url = b.host if not scheme else f"{scheme}://{b.host}{':' + str(b.port) if b.port else ''}"
            c = redfish.redfish_client(base_url=url, username=b.user, password=b.password,
                                       timeout=int(max(1, b.timeout_s)), max_retry=1, cafile=b.cafile)
            c.login(auth=b.auth)
            self._redfish[key] = c
        return c

    def _get(self, c, path: str) -> dict[str, Any]:
        r = c.get(path)
        if r.status != 200:
            raise BmcError(f"GET {path} -> HTTP {r.status}")
        return r.dict

    def _read_redfish(self, b: Bmc) -> tuple[list[HwSensorData], list[SelEntry]]:
        try:
            c = self._client(b)
        except Exception as e:  # the library raises its own exception types for login/connection
            raise BmcError(f"Redfish login to {b.host} failed: {type(e).__name__}") from None
        sensors: list[HwSensorData] = []
        sel: list[SelEntry] = []
        if b.sensors:
            for m in self._get(c, "/redfish/v1/Chassis").get("Members", []):
                ch = self._get(c, m["@odata.id"])
                if "Sensors" in ch:
                    for s in self._get(c, ch["Sensors"]["@odata.id"]).get("Members", []):
                        d = redfish_sensor(self._get(c, s["@odata.id"]))
                        if d:
                            sensors.append(d)
                else:
                    if "Thermal" in ch:
                        sensors += redfish_thermal(self._get(c, ch["Thermal"]["@odata.id"]))
                    if "Power" in ch:
                        sensors += redfish_power(self._get(c, ch["Power"]["@odata.id"]))
        if b.sel:
            for m in self._get(c, "/redfish/v1/Systems").get("Members", []):
                sysd = self._get(c, m["@odata.id"])
                if "LogServices" not in sysd:
                    continue
                for ls in self._get(c, sysd["LogServices"]["@odata.id"]).get("Members", []):
                    svc = self._get(c, ls["@odata.id"])
                    if "Entries" in svc and (svc.get("Id") in ("SEL", "Log1", "EventLog") or "SEL" in str(svc.get("Name", ""))):
                        entries = self._get(c, svc["Entries"]["@odata.id"])
                        if entries.get("Members") and "Id" not in entries["Members"][0]:
                            entries = {"Members": [self._get(c, x["@odata.id"]) for x in entries["Members"]]}
                        sel += redfish_log_entries(entries)
        return sensors, sel

    async def close(self) -> None:
        for c in self._redfish.values():
            try:
                await asyncio.to_thread(c.logout)
            except Exception:  # noqa: BLE001 - best effort on shutdown
                pass
        self._redfish.clear()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bmcs", metavar="FILE", help="BMCs, TOML or JSON (see docs/collectors-fabric.md)")
    p.add_argument("--ipmi", action="append", default=[], metavar="NODE=HOST[:PORT]",
                   help="an IPMI BMC; user/password from $IPMI_USER / $IPMI_PASSWORD; repeatable")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds per BMC command (default 15)")
    p.add_argument("--state-file", default=os.environ.get("FAULTLINE_BMC_STATE"),
                   help="remember the last SEL entry per BMC across restarts")
    p.add_argument("--sel-history-hours", type=float, default=24.0,
                   help="on the first round, skip SEL entries older than this (default 24)")
    p.add_argument("--concurrency", type=int, default=32, help="BMCs read at once (default 32)")


def build(args: argparse.Namespace, settings: Settings) -> BmcCollector:
    bmcs = load_bmcs(args.bmcs) if args.bmcs else []
    for spec in args.ipmi:
        node, sep, hp = spec.partition("=")
        if not sep:
            raise BmcConfigError(f"--ipmi {spec!r}: expected NODE=HOST[:PORT]")
        host, _, port = hp.partition(":")
        bmcs.append(bmc_from_dict({"node": node, "host": host, "port": port or None, "user_env": "IPMI_USER",
                                   "password_env": "IPMI_PASSWORD", "timeout_s": args.timeout}, where="--ipmi"))
    return BmcCollector(bmcs, concurrency=args.concurrency, state_file=args.state_file,
                        sel_history_hours=args.sel_history_hours)
