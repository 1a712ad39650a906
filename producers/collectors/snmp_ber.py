"""Fast path for SNMP v1/v2c table polling: a minimal BER codec and an asyncio UDP client.

pysnmp decodes each varbind through pyasn1 objects (~0.8 ms per varbind measured here, see
``bench/collectors_snmp.py``), which caps one collector at a few hundred ports per second.
Community-based requests need no security processing, so for v1/v2c the snmp collector
encodes GETBULK/GETNEXT and decodes responses itself: SEQUENCE {version, community, PDU
{request-id, error-status, error-index, SEQUENCE OF {OID, value}}} (RFC 3416, X.690 BER).
SNMPv3 (USM auth/priv) stays on pysnmp.

Values come back as ``int`` (INTEGER, Counter32/64, Gauge32, TimeTicks), ``bytes``
(OCTET STRING, IpAddress, Opaque), ``tuple`` (OID), ``None`` (NULL) or one of the
``NO_SUCH_OBJECT`` / ``NO_SUCH_INSTANCE`` / ``END_OF_MIB`` sentinels.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any


class _Exc:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_SUCH_OBJECT = _Exc("noSuchObject")
NO_SUCH_INSTANCE = _Exc("noSuchInstance")
END_OF_MIB = _Exc("endOfMibView")
EXCEPTIONS = (NO_SUCH_OBJECT, NO_SUCH_INSTANCE, END_OF_MIB)

GET_NEXT, GET_BULK, RESPONSE = 0xA1, 0xA5, 0xA2


class SnmpTimeout(TimeoutError):
    """No response before the timeout, after all retries."""


class BerError(ValueError):
    """A datagram that is not a well-formed SNMP v1/v2c message."""


# ------------------------------------------------------------------ encoding
def _len(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(b),)) + b


def _tlv(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _len(len(body)) + body


def _int(v: int, tag: int = 0x02) -> bytes:
    return _tlv(tag, v.to_bytes(max(1, (v.bit_length() + 8) // 8), "big", signed=True))


def _oid(oid: tuple[int, ...]) -> bytes:
    out = bytearray((40 * oid[0] + oid[1],))
    for sub in oid[2:]:
        if sub < 0x80:
            out.append(sub)
            continue
        chunk = []
        while sub:
            chunk.append(sub & 0x7F)
            sub >>= 7
        chunk.reverse()
        out.extend(c | 0x80 for c in chunk[:-1])
        out.append(chunk[-1])
    return _tlv(0x06, bytes(out))


def encode_request(version: int, community: bytes, pdu_tag: int, request_id: int,
                   oids: list[tuple[int, ...]], non_repeaters: int = 0, max_repetitions: int = 0) -> bytes:
    """GETNEXT (v1/v2c) or GETBULK (v2c) request; ``version`` 0 = v1, 1 = v2c."""
    vbs = b"".join(_tlv(0x30, _oid(o) + b"\x05\x00") for o in oids)
    pdu = _int(request_id) + _int(non_repeaters) + _int(max_repetitions) + _tlv(0x30, vbs)
    return _tlv(0x30, _int(version) + _tlv(0x04, community) + _tlv(pdu_tag, pdu))


# ------------------------------------------------------------------ decoding
def _hdr(buf: bytes, i: int) -> tuple[int, int, int]:
    """(tag, value start, value end) of the TLV at ``i``."""
    tag = buf[i]
    n = buf[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(buf[i:i + k], "big")
        i += k
    end = i + n
    if end > len(buf):
        raise BerError("truncated BER value")
    return tag, i, end


def _dec_oid(b: bytes) -> tuple[int, ...]:
    first = b[0]
    out = [first // 40 if first < 80 else 2, first % 40 if first < 80 else first - 80]
    v = 0
    for c in b[1:]:
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            out.append(v)
            v = 0
    return tuple(out)


_UNSIGNED = frozenset((0x41, 0x42, 0x43, 0x46, 0x47))  # Counter32 Gauge32 TimeTicks Counter64 UInteger32


def _value(tag: int, b: bytes) -> Any:
    if tag == 0x02:
        return int.from_bytes(b, "big", signed=True)
    if tag in _UNSIGNED:
        return int.from_bytes(b, "big")
    if tag in (0x04, 0x40, 0x44):
        return b
    if tag == 0x06:
        return _dec_oid(b)
    if tag == 0x05:
        return None
    if tag == 0x80:
        return NO_SUCH_OBJECT
    if tag == 0x81:
        return NO_SUCH_INSTANCE
    if tag == 0x82:
        return END_OF_MIB
    return b


def decode_response(buf: bytes) -> tuple[int, int, int, list[tuple[tuple[int, ...], Any]]]:
    """(request-id, error-status, error-index, varbinds) of a v1/v2c Response-PDU."""
    try:
        tag, i, end = _hdr(buf, 0)
        if tag != 0x30:
            raise BerError("not an SNMP message")
        _, s, e = _hdr(buf, i)            # version
        _, s, i = _hdr(buf, e)            # community
        tag, i, pend = _hdr(buf, i)       # PDU
        if tag != RESPONSE:
            raise BerError(f"PDU type 0x{tag:02x} is not a Response")
        _, s, e = _hdr(buf, i)
        rid = int.from_bytes(buf[s:e], "big", signed=True)
        _, s, e = _hdr(buf, e)
        err = int.from_bytes(buf[s:e], "big", signed=True)
        _, s, e = _hdr(buf, e)
        eidx = int.from_bytes(buf[s:e], "big", signed=True)
        _, i, vend = _hdr(buf, e)         # varbind list
        vbs = []
        while i < vend:
            _, vs, ve = _hdr(buf, i)      # one varbind
            _, os_, oe = _hdr(buf, vs)
            vtag, xs, xe = _hdr(buf, oe)
            vbs.append((_dec_oid(buf[os_:oe]), _value(vtag, buf[xs:xe])))
            i = ve
        return rid, err, eidx, vbs
    except IndexError:
        raise BerError("truncated SNMP message") from None


# ------------------------------------------------------------------ client
class _Proto(asyncio.DatagramProtocol):
    def __init__(self, pending: dict[int, asyncio.Future]) -> None:
        self.pending = pending
        self.bad = 0

    def datagram_received(self, data: bytes, addr) -> None:  # type: ignore[override]
        try:
            rid, err, eidx, vbs = decode_response(data)
        except BerError:
            self.bad += 1
            return
        fut = self.pending.pop(rid, None)
        if fut is not None and not fut.done():
            fut.set_result((err, eidx, vbs))

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable etc.: wait for the timeout
        pass


class V2cClient:
    """One UDP socket for any number of agents; requests matched to responses by request-id."""

    def __init__(self) -> None:
        self._pending: dict[int, asyncio.Future] = {}
        self._transport: asyncio.DatagramTransport | None = None
        self._ids = itertools.count(random.randrange(1, 1 << 30))

    async def _ensure(self) -> asyncio.DatagramTransport:
        if self._transport is None:
            loop = asyncio.get_running_loop()
            self._transport, _ = await loop.create_datagram_endpoint(lambda: _Proto(self._pending),
                                                                     local_addr=("0.0.0.0", 0))
        return self._transport

    async def request(self, host: str, port: int, community: bytes, oids: list[tuple[int, ...]], *,
                      version: int = 1, bulk: bool = True, non_repeaters: int = 0, max_repetitions: int = 25,
                      timeout: float = 2.0, retries: int = 1) -> tuple[int, int, list[tuple[tuple[int, ...], Any]]]:
        tr = await self._ensure()
        loop = asyncio.get_running_loop()
        for _attempt in range(retries + 1):
            rid = next(self._ids) & 0x7FFFFFFF
            msg = encode_request(version, community, GET_BULK if bulk else GET_NEXT, rid, oids,
                                 non_repeaters if bulk else 0, max_repetitions if bulk else 0)
            fut = loop.create_future()
            self._pending[rid] = fut
            tr.sendto(msg, (host, port))
            try:
                return await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                continue
            finally:
                self._pending.pop(rid, None)
        raise SnmpTimeout(f"no SNMP response from {host}:{port} after {retries + 1} tries of {timeout:g} s")

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
