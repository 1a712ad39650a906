"""TCP ports for test servers (brokers, peers, web pages, torch rendezvous).

``free_port`` hands each xdist worker ports from its own slice below the kernel's ephemeral
range: ``bind(("127.0.0.1", 0))`` gets a port from that range, where every client socket
(Kafka clients, HTTP, srun) takes its local port too, so a port probed free could be held by a
client in the seconds before the server binds it (the real-jobs suite's torch rendezvous
failed with "Address already in use" on one so chosen)."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path


#: first port of free_port's range; it ends below the kernel's ephemeral range, where client
#: sockets (Kafka clients, HTTP) get their local ports from
PORT_BASE = 20_000
_handed_out: set[int] = set()
_rng = random.Random()  # its own generator: a test seeding the global one must not pin our ports


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _port_slice() -> range:
    """This process's ports: the xdist worker's own slice of [PORT_BASE, ephemeral low)."""
    lo, hi = PORT_BASE, _ephemeral_low()
    if hi - lo < 1_000:  # an unusual ip_local_port_range: fall back to ports above it
        lo, hi = 61_000, 65_535
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")        # gw0, gw1, ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    size = (hi - lo) // max(count, 1)
    return range(lo + index * size, lo + (index + 1) * size)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing is bound to, not handed out before by this process.

    Not ``bind(0)``: the kernel picks those from the ephemeral range, so another xdist worker
    could get the same one, or a client socket could take it in the seconds before a broker
    binds it. Each worker draws from its own slice below that range (``_port_slice``)."""
    ports = _port_slice()
    for _ in range(200):
        port = _rng.choice(ports)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free TCP port in {ports.start}-{ports.stop - 1} after 200 tries")
