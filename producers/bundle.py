"""Portable incident bundles: the events behind one incident plus the incident, as JSON lines.

Line 1 is a header ``{"faultline_bundle": 1, "incident": {...}, "since": ms, "until": ms}``;
every further line is one contract event exactly as it was on the topic. A ``.zst`` name
compresses with zstd. ``faultline diagnose BUNDLE`` reads the events and skips the header,
so the incident is reproduced offline with no broker.
"""

from __future__ import annotations

import io
from typing import IO, Iterator

import orjson

BUNDLE_KEY = "faultline_bundle"


def open_writer(path: str) -> IO[bytes]:
    """A binary writer; zstd-compressed when the name ends in ``.zst``."""
    fh = open(path, "wb")
    if path.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor(level=6).stream_writer(fh, closefd=True)
    return fh


def open_lines(path: str) -> Iterator[bytes]:
    """Raw lines (without newline) of a JSON-lines file, ``-`` for stdin, ``.zst`` decompressed."""
    import sys

    if path == "-":
        src: IO[bytes] = sys.stdin.buffer
    else:
        src = open(path, "rb")
    try:
        if path.endswith(".zst"):
            import zstandard

            src = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(src, closefd=True))
        for line in src:
            yield line.rstrip(b"\r\n")
    finally:
        if path != "-":
            src.close()


def header(incident: dict, since: int, until: int) -> bytes:
    return orjson.dumps({BUNDLE_KEY: 1, "incident": incident, "since": since, "until": until})


def is_header(line: bytes) -> bool:
    return line.startswith(b'{"' + BUNDLE_KEY.encode())


def read_header(path: str) -> dict | None:
    for line in open_lines(path):
        return orjson.loads(line) if is_header(line) else None
    return None
