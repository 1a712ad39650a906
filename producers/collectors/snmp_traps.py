"""SNMP linkDown/linkUp notification receiver (v1 and v2c traps) for the snmp collector.

An asyncio UDP endpoint decodes each datagram with ``pysnmp.proto`` (no engine, no MIB
files: Debian ships no IF-MIB text) and hands ``LinkTrap`` records to a callback. The snmp
collector maps the sending agent to a configured switch and ifIndex to the port name it
polled, and emits ``net.link``.

OIDs (``/work/shared/reference/snmp_oids.csv``, RFC 2863 / RFC 3418): snmpTrapOID.0 =
1.3.6.1.6.3.1.1.4.1.0, linkDown = 1.3.6.1.6.3.1.1.5.3, linkUp = 1.3.6.1.6.3.1.1.5.4,
varbinds ifIndex 1.3.6.1.2.1.2.2.1.1.N, ifAdminStatus .7.N, ifOperStatus .8.N.
SNMPv1 traps carry generic-trap 2 (linkDown) / 3 (linkUp) instead.
SNMPv3 traps are not decoded here: have ``snmptrapd`` receive them and forward as v2c
(``forward default udp:<collector>:<port>``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("faultline.collect.snmp")

SNMP_TRAP_OID = (1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0)
LINK_DOWN = (1, 3, 6, 1, 6, 3, 1, 1, 5, 3)
LINK_UP = (1, 3, 6, 1, 6, 3, 1, 1, 5, 4)
IF_INDEX = (1, 3, 6, 1, 2, 1, 2, 2, 1, 1)
IF_OPER = (1, 3, 6, 1, 2, 1, 2, 2, 1, 8)


@dataclass(slots=True)
class LinkTrap:
    """One decoded linkUp/linkDown notification."""

    agent: str          # sender IP (UDP source, or the v1 agent-addr field)
    community: str
    if_index: int
    state: str          # "up" | "down"
    oper_status: int | None
    received_ms: int


def decode_link_traps(data: bytes, sender: str, received_ms: int) -> list[LinkTrap]:
    """All linkUp/linkDown notifications in one datagram (other traps are ignored)."""
    from pyasn1.codec.ber import decoder
    from pysnmp.proto import api

    out: list[LinkTrap] = []
    while data:
        ver = int(api.decodeMessageVersion(data))
        if ver not in api.PROTOCOL_MODULES:
            raise ValueError(f"unsupported SNMP message version {ver}")
        pmod = api.PROTOCOL_MODULES[ver]
        msg, data = decoder.decode(data, asn1Spec=pmod.Message())
        community = str(pmod.apiMessage.get_community(msg))
        pdu = pmod.apiMessage.get_pdu(msg)
        agent = sender
        if ver == api.SNMP_VERSION_1:
            generic = int(pmod.apiTrapPDU.get_generic_trap(pdu))
            state = {2: "down", 3: "up"}.get(generic)
            agent = pmod.apiTrapPDU.get_agent_address(pdu).prettyPrint() or sender
            vbs = pmod.apiTrapPDU.get_varbinds(pdu)
        else:
            vbs = pmod.apiPDU.get_varbinds(pdu)
            trap_oid = next((tuple(v) for o, v in vbs if tuple(o) == SNMP_TRAP_OID), None)
            state = {LINK_DOWN: "down", LINK_UP: "up"}.get(trap_oid)  # type: ignore[arg-type]
        if state is None:
            continue
        if_index = oper = None
        for o, v in vbs:
            o = tuple(o)
            if o[:10] == IF_INDEX and len(o) == 11:
                if_index = int(v)
            elif o[:10] == IF_OPER and len(o) == 11:
                oper = int(v)
                if_index = if_index or o[10]
        if if_index is None:
            continue
        out.append(LinkTrap(agent=agent, community=community, if_index=if_index, state=state,
                            oper_status=oper, received_ms=received_ms))
    return out


class _Proto(asyncio.DatagramProtocol):
    def __init__(self, on_traps: Callable[[list[LinkTrap]], None], communities: frozenset[str] | None) -> None:
        self.on_traps = on_traps
        self.communities = communities
        self.received = 0
        self.rejected = 0

    def datagram_received(self, data: bytes, addr) -> None:  # type: ignore[override]
        from ...schemas import now_ms

        self.received += 1
        try:
            traps = decode_link_traps(data, addr[0], now_ms())
        except Exception as e:  # a malformed datagram must not stop the listener
            self.rejected += 1
            log.warning("undecodable SNMP datagram from %s: %s", addr[0], e, extra={"collector": "snmp"})
            return
        if self.communities is not None:
            ok = [t for t in traps if t.community in self.communities]
            self.rejected += len(traps) - len(ok)
            traps = ok
        if traps:
            self.on_traps(traps)


class TrapListener:
    """``await TrapListener(cb).start("0.0.0.0", 162)`` ... ``close()``."""

    def __init__(self, on_traps: Callable[[list[LinkTrap]], None],
                 communities: set[str] | None = None) -> None:
        self._proto = _Proto(on_traps, frozenset(communities) if communities else None)
        self._transport: asyncio.DatagramTransport | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, host: str, port: int) -> "TrapListener":
        loop = asyncio.get_running_loop()
        try:
            self._transport, _ = await loop.create_datagram_endpoint(lambda: self._proto, local_addr=(host, port))
        except OSError as e:
            raise OSError(f"cannot listen for SNMP traps on {host}:{port}: {e.strerror} "
                          "(port 162 needs root or CAP_NET_BIND_SERVICE; pick another --trap-listen)") from None
        self.address = self._transport.get_extra_info("sockname")[:2]
        return self

    @property
    def received(self) -> int:
        return self._proto.received

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
