"""NVIDIA XID catalog: XID number -> triage category, severity, recommended action.

Source: ``streams/data/xid_catalog.csv``, a copy of ``shared/reference/xid_catalog.csv``,
itself a subset of NVIDIA's "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, 2025-10 snapshot,
as re-published in leptonai/gpud and NVIDIA/NVSentinel) plus the legacy possible-cause
table (https://docs.nvidia.com/deploy/xid-errors/index.html). The CSV's ``category`` column
lists NVIDIA's possible causes; ``action`` is NVIDIA's immediate / investigatory bucket.

Our mapping to the contract's root-cause categories (shared/spec/events.md):
- NVLink among the causes -> ``gpu_nvlink`` (XID 74, 136, 144-150, 155);
- memory-ECC or hardware as first cause -> ``gpu_hardware`` (48, 63, 64, 79, 92, 94, 95, ...);
- the contract's driver/GSP list (13, 31, 43, 119, 120) and other driver-first XIDs ->
  ``driver_software``; user-application-first XIDs the contract does not name -> ``application``.
``fatal`` is False when NVIDIA's immediate action is IGNORE (the XID alone does not stop a
job); ``app_induced`` is True when NVIDIA lists the user application as a possible cause,
so an XID that follows an application crash is read as its echo, not its cause.
"""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from importlib import resources

from msgspec import Struct


class XidInfo(Struct, frozen=True, kw_only=True):
    xid: int
    mnemonic: str
    meaning: str
    causes: tuple[str, ...]
    category: str          # gpu_hardware | gpu_nvlink | driver_software | application
    severity: str          # info | warning | critical
    action: str            # NVIDIA's bucket text, e.g. "RESET_GPU / investigatory: CONTACT_SUPPORT"
    fatal: bool
    app_induced: bool
    known: bool = True


# The contract names these explicitly; they win over the derived mapping.
_CONTRACT_CATEGORY = {
    48: "gpu_hardware", 63: "gpu_hardware", 64: "gpu_hardware", 79: "gpu_hardware",
    92: "gpu_hardware", 94: "gpu_hardware", 95: "gpu_hardware", 74: "gpu_nvlink",
    13: "driver_software", 31: "driver_software", 43: "driver_software",
    119: "driver_software", 120: "driver_software",
}


# Follow-on / informational XIDs: they report the consequence of another error.
# 45: "Preemptive cleanup, due to previous errors" (catalog: Not Solo -> IGNORE, follow other Xid);
# 154: "GPU Recovery Action Changed" (informational, points at another Xid).
_FOLLOW_ON = {45: "driver_software", 154: "driver_software"}


def _category(xid: int, causes: tuple[str, ...]) -> str:
    if xid in _CONTRACT_CATEGORY:
        return _CONTRACT_CATEGORY[xid]
    low = [c.lower() for c in causes]
    if any("nvlink" in c for c in low):
        return "gpu_nvlink"
    first = low[0] if low else ""
    if "memory-ecc" in low or first in ("hardware", "memory-ecc") or first.startswith("thermal"):
        return "gpu_hardware"
    if first == "user-application":
        return "application"
    return "driver_software"


def _severity(action: str, category: str) -> str:
    immediate = action.split("/", 1)[0].strip().upper()
    if immediate.startswith("IGNORE") or immediate.startswith("XID_154"):
        return "info" if category != "gpu_hardware" else "warning"
    if immediate.startswith("RESTART_APP") or immediate.startswith("CHECK_APP"):
        return "warning"
    return "critical"


@lru_cache(maxsize=1)
def catalog() -> dict[int, XidInfo]:
    """The XID catalog, loaded once from the package data."""
    text = resources.files("faultline.streams").joinpath("data/xid_catalog.csv").read_text("utf-8")
    rows = csv.DictReader(io.StringIO("".join(l for l in text.splitlines(True) if not l.startswith("#"))))
    out: dict[int, XidInfo] = {}
    for row in rows:
        xid = int(row["xid"])
        mnemonic, _, meaning = row["meaning"].partition(": ")
        causes = tuple(c.strip() for c in row["category"].split(";") if c.strip())
        cat = _category(xid, causes)
        action = row["action"].strip()
        sev = _severity(action, cat)
        fatal = not action.upper().startswith("IGNORE")
        if xid in _FOLLOW_ON:
            cat, sev, fatal = _FOLLOW_ON[xid], "info", False
        out[xid] = XidInfo(
            xid=xid, mnemonic=mnemonic.strip(), meaning=meaning.strip() or mnemonic.strip(),
            causes=causes, category=cat, severity=sev, action=action,
            fatal=fatal,
            app_induced=any(c.lower() == "user-application" for c in causes),
        )
    return out


def lookup(xid: int) -> XidInfo:
    """Catalog entry of ``xid``; an XID not in the catalog gets a conservative
    ``driver_software`` / warning entry with ``known=False``."""
    info = catalog().get(xid)
    if info is not None:
        return info
    return XidInfo(xid=xid, mnemonic="UNKNOWN_XID", meaning=f"XID {xid} (not in the catalog)", causes=(),
                   category="driver_software", severity="warning",
                   action="CONTACT_SUPPORT / investigatory: look the XID up in NVIDIA's catalog",
                   fatal=True, app_induced=False, known=False)
