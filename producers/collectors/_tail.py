"""Polling file follower shared by the kernel and logs collectors (``tail -F`` semantics).

``FileTail`` follows one path across rotation (the path now names another inode: the old
file is read to its end first, then the new one from its start) and truncation (the file
got shorter than the read offset: start again from 0). ``GlobTail`` follows every file a
set of glob patterns matches, picking up new files as they appear. Only whole lines are
returned; a partial last line waits for its newline (or ``max_line`` bytes).
"""

from __future__ import annotations

import glob
import logging
import os
import time

log = logging.getLogger("faultline.collect.tail")


class FileTail:
    def __init__(self, path: str, *, from_start: bool = False, max_read: int = 4 << 20,
                 max_line: int = 64 * 1024, resume: tuple[int, int, int] | None = None) -> None:
        self.path = path
        self.max_read = max_read
        self.max_line = max_line
        self._fh = None
        self._ino: tuple[int, int] | None = None
        self._off = 0
        self._partial = b""
        self._tailsig = b""  # last bytes before the offset (truncate-and-rewrite detection)
        self.rotations = 0
        self.truncations = 0
        self._open(seek_end=not from_start, resume=resume)

    def position(self) -> tuple[int, int, int] | None:
        """(dev, inode, offset of the last whole line) to resume from after a restart."""
        if self._ino is None:
            return None
        return (self._ino[0], self._ino[1], self._off - len(self._partial))

    def _open(self, *, seek_end: bool, resume: tuple[int, int, int] | None = None) -> bool:
        try:
            fh = open(self.path, "rb")
        except OSError:
            self._fh = None
            self._ino = None
            return False
        st = os.fstat(fh.fileno())
        self._fh = fh
        self._ino = (st.st_dev, st.st_ino)
        self._off = st.st_size if seek_end else 0
        if resume is not None and (resume[0], resume[1]) == self._ino and resume[2] <= st.st_size:
            self._off = resume[2]  # same file as before the restart: go on where we were
        fh.seek(self._off)
        self._tailsig = os.pread(fh.fileno(), min(32, self._off), self._off - min(32, self._off)) if self._off else b""
        self._partial = b""
        return True

    def _same_tail(self) -> bool:
        """The bytes just before the read offset are still what we read there; if not, the
        file was truncated and rewritten past our offset between two polls (copytruncate)."""
        if not self._tailsig:
            return True
        n = len(self._tailsig)
        try:
            return os.pread(self._fh.fileno(), n, self._off - n) == self._tailsig  # type: ignore[union-attr]
        except OSError:
            return True

    def _read_all(self) -> bytes:
        chunks = []
        budget = self.max_read
        while budget > 0:
            b = self._fh.read(min(budget, 1 << 20))  # type: ignore[union-attr]
            if not b:
                break
            chunks.append(b)
            budget -= len(b)
            self._off += len(b)
        data = b"".join(chunks)
        if data:
            self._tailsig = (self._tailsig + data)[-32:]
        return data

    def poll(self) -> list[str]:
        """New complete lines since the last poll (without the newline)."""
        data = b""
        if self._fh is None:
            if not self._open(seek_end=False):
                return []
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) != self._ino:
            data = self._read_all()  # rest of the rotated file
            self._fh.close()  # type: ignore[union-attr]
            self.rotations += 1
            tail = self._partial + data
            self._partial = b""
            lines = self._split(tail, final=True)
            self._open(seek_end=False)
            return lines + self._split(self._read_all())
        if st is not None and (st.st_size < self._off or not self._same_tail()):
            self.truncations += 1
            self._fh.seek(0)  # type: ignore[union-attr]
            self._off = 0
            self._partial = b""
            self._tailsig = b""
        return self._split(self._read_all())

    def _split(self, data: bytes, final: bool = False) -> list[str]:
        if not data and not (final and self._partial):
            return []
        buf = self._partial + data
        parts = buf.split(b"\n")
        last = parts.pop()
        if final and last:
            parts.append(last)
            last = b""
        if len(last) > self.max_line:
            parts.append(last)
            last = b""
        self._partial = last
        return [p.rstrip(b"\r").decode("utf-8", "replace") for p in parts]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class GlobTail:
    """Follow every file matching ``patterns``; files already there at start are read from
    their end unless ``from_start``; files that appear later are read from their start."""

    def __init__(self, patterns: list[str], *, from_start: bool = False, rescan_s: float = 5.0,
                 state_path: str | None = None) -> None:
        self.patterns = patterns
        self.rescan_s = rescan_s  # globbing big trees every poll is the expensive part
        self._scanned = time.monotonic()
        self.state_path = state_path
        self._saved: dict[str, list[int]] = self._load()
        self.tails: dict[str, FileTail] = {}
        for path in self._match():
            r = self._saved.get(path)
            self.tails[path] = FileTail(path, from_start=from_start, resume=tuple(r) if r else None)

    def _load(self) -> dict[str, list[int]]:
        if not self.state_path:
            return {}
        try:
            import orjson

            with open(self.state_path, "rb") as fh:
                return {str(k): list(v) for k, v in orjson.loads(fh.read()).items()}
        except (OSError, ValueError, AttributeError, TypeError):
            return {}

    def save(self) -> None:
        """Persist every file's position (only when something moved)."""
        if not self.state_path:
            return
        cur = {p: list(pos) for p, t in self.tails.items() if (pos := t.position()) is not None}
        if cur == self._saved:
            return
        import orjson

        d = os.path.dirname(self.state_path)
        if d:
            os.makedirs(d, exist_ok=True)
        tmp = self.state_path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(orjson.dumps(cur))
        os.replace(tmp, self.state_path)
        self._saved = cur

    def _match(self) -> list[str]:
        seen: list[str] = []
        for pat in self.patterns:
            for p in sorted(glob.glob(pat, recursive=True)):
                if os.path.isfile(p) and p not in seen:
                    seen.append(p)
        return seen

    def poll(self) -> list[tuple[str, list[str]]]:
        """[(path, new lines)] for files with new lines."""
        now = time.monotonic()
        if now - self._scanned >= self.rescan_s or not self.tails:
            self._scanned = now
            for path in self._match():
                if path not in self.tails:
                    self.tails[path] = FileTail(path, from_start=True)
        out = []
        for path, t in self.tails.items():
            lines = t.poll()
            if lines:
                out.append((path, lines))
        return out

    def close(self) -> None:
        for t in self.tails.values():
            t.close()
