"""The ClickHouse store: one small interface over embedded chDB and a ClickHouse server.

``open_store(settings)`` returns a :class:`Store` for ``settings.clickhouse_url`` when it is
set (``clickhouse-connect``), else an embedded chDB store in ``settings.store_path``. Both run
the same SQL (``sinks/sql/*.sql`` is applied on open) and take the same inserts:

- ``insert_json(table, lines)``: JSONEachRow bytes, parsed by ClickHouse (the fast path: raw
  contract events go to ``ingest_events`` this way);
- ``insert(table, rows)``: a batch of dicts (serialised to JSONEachRow; DateTime64 values are
  epoch-ms ints, converted by the caller with :func:`ms`).

chDB lets one process own a data directory, and one directory per process. Opening a
directory another process owns raises :class:`StoreLocked` (with that process's pid), which
the CLI turns into "go through the worker's HTTP API".
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence

import orjson

log = logging.getLogger("faultline.sinks")

__all__ = ["Store", "StoreError", "StoreLocked", "open_store", "ms", "migrations"]


class StoreError(RuntimeError):
    """A store operation failed; the message names the statement or table and the cause."""


class StoreLocked(StoreError):
    """The chDB directory is owned by another process (usually a running worker)."""

    def __init__(self, path: str, pid: int | None) -> None:
        who = f"process {pid}" if pid else "another process"
        super().__init__(
            f"store {path} is in use by {who} (chDB allows one process per data directory): "
            "query the running worker's API, stop that process, or pass another --store PATH"
        )
        self.path = path
        self.pid = pid


def ms(epoch_ms: int | None) -> str | None:
    """An epoch-ms int as the text ClickHouse parses into DateTime64(3) ("seconds.millis")."""
    if epoch_ms is None:
        return None
    s, r = divmod(int(epoch_ms), 1000)
    return f"{s}.{r:03d}"


# ------------------------------------------------------------------ migrations
_SPLIT = re.compile(r";\s*$", re.M)


def migrations() -> list[tuple[int, str, list[str]]]:
    """``(version, name, statements)`` of every ``sinks/sql/NNN_name.sql``, in order."""
    out = []
    files = resources.files("faultline.sinks").joinpath("sql")
    for f in sorted(files.iterdir(), key=lambda p: p.name):
        m = re.match(r"(\d+)_(\w+)\.sql$", f.name)
        if not m:
            continue
        stmts = []
        for chunk in _SPLIT.split(f.read_text()):
            code = "\n".join(ln for ln in chunk.splitlines() if not ln.strip().startswith("--")).strip()
            if code:
                stmts.append(chunk.strip())
        out.append((int(m.group(1)), m.group(2), stmts))
    return out


_MIGRATIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, name String, "
    "applied_at DateTime('UTC') DEFAULT now()) ENGINE = MergeTree ORDER BY version"
)


class Store(Protocol):
    backend: str
    location: str

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None: ...
    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]: ...
    def query_table(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]: ...
    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int: ...
    def insert_json(self, table: str, lines: bytes) -> None: ...
    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None: ...
    def migrate(self) -> list[int]: ...
    def close(self) -> None: ...


class _Base:
    backend = "?"
    location = "?"

    # subclasses implement: execute, query_table, insert_json
    def query(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        cols, rows = self.query_table(sql, params)  # type: ignore[attr-defined]
        return [dict(zip(cols, r)) for r in rows]

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        dumps = orjson.dumps
        self.insert_json(table, b"\n".join(map(dumps, rows)))  # type: ignore[attr-defined]
        return len(rows)

    def migrate(self) -> list[int]:
        """Apply every ``sinks/sql`` file not yet recorded in ``schema_migrations``."""
        self.execute(_MIGRATIONS_DDL)  # type: ignore[attr-defined]
        done = {int(r["version"]) for r in self.query("SELECT version FROM schema_migrations")}
        applied = []
        for version, name, stmts in migrations():
            if version in done:
                continue
            for stmt in stmts:
                try:
                    self.execute(stmt)  # type: ignore[attr-defined]
                except StoreError as e:
                    raise StoreError(f"migration {version:03d}_{name}.sql failed: {e}") from None
            self.insert("schema_migrations", [{"version": version, "name": name}])
            applied.append(version)
            log.info("schema migration applied", extra={"version": version, "migration": name})
        return applied


# ------------------------------------------------------------------ chDB
_lock = threading.Lock()
_sessions: dict[str, list[Any]] = {}  # realpath -> [session, refcount]


def _owner_pid(path: Path) -> int | None:
    try:
        m = re.search(r"PID:\s*(\d+)", (path / "status").read_text())
        return int(m.group(1)) if m else None
    except OSError:
        return None


def _probe_lock(path: Path) -> None:
    """Raise StoreLocked if another process holds ClickHouse's flock on ``<path>/status``."""
    status = path / "status"
    if not status.exists():
        return
    try:
        fd = os.open(status, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreLocked(str(path), _owner_pid(path)) from None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class ChdbStore(_Base):
    """Embedded chDB in a data directory (one per process; shared by every Store in it)."""

    backend = "chdb"

    def __init__(self, path: str) -> None:
        from chdb import session as chs

        real = os.path.realpath(path)
        self.location = real
        with _lock:
            if real in _sessions:
                _sessions[real][1] += 1
                self._s = _sessions[real][0]
            else:
                if _sessions:
                    other = next(iter(_sessions))
                    raise StoreError(
                        f"this process already has store {other} open; chDB opens one data "
                        f"directory per process: close it before opening {real}"
                    )
                Path(real).mkdir(parents=True, exist_ok=True)
                _probe_lock(Path(real))
                try:
                    sess = chs.Session(real)
                except Exception as e:  # chDB reports a held lock as a generic init failure
                    if "lock" in str(e).lower() or "EmbeddedServer" in str(e):
                        raise StoreLocked(real, _owner_pid(Path(real))) from None
                    raise StoreError(f"cannot open chDB store {real}: {e}") from None
                sess.query("SET output_format_json_quote_64bit_integers = 0")
                sess.query("SET output_format_json_quote_denormals = 0")
                _sessions[real] = [sess, 1]
                self._s = sess
        self._closed = False

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            self._s.query(sql, "Null", params=_chdb_params(params))
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None

    def query_table(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
        try:
            res = self._s.query(sql, "JSONCompactEachRowWithNames", params=_chdb_params(params))
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None
        raw = res.bytes() if hasattr(res, "bytes") else bytes(res)
        if not raw:
            return [], []
        lines = raw.split(b"\n")
        cols = orjson.loads(lines[0])
        return cols, [orjson.loads(ln) for ln in lines[1:] if ln]

    def insert_json(self, table: str, lines: bytes) -> None:
        if not lines:
            return
        _check_ident(table)
        try:
            self._s.query(f"INSERT INTO {table} FORMAT JSONEachRow\n" + lines.decode("utf-8"), "Null")
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        """Column-oriented insert through chDB's ``Python()`` table function (no text
        round trip: the fastest path, see bench/sink.py). Values must be str/int/float."""
        _check_ident(table)
        names = list(columns)
        if not names or not len(columns[names[0]]):
            return
        for n in names:
            _check_ident(n)
        fl_cols = dict(columns)  # noqa: F841 - chDB finds it by name in this frame
        cols = ", ".join(names)
        try:
            self._s.query(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM Python(fl_cols)", "Null")
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _lock:
            entry = _sessions.get(self.location)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del _sessions[self.location]
                entry[0].close()

    def __enter__(self) -> "ChdbStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ server
class ServerStore(_Base):
    """A ClickHouse server over HTTP (``clickhouse-connect``)."""

    backend = "clickhouse"

    def __init__(self, url: str) -> None:
        import clickhouse_connect
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.location = f"{parts.scheme}://{parts.hostname}:{parts.port or 8123}{parts.path or ''}"
        try:
            self._c = clickhouse_connect.get_client(dsn=url, settings={
                "output_format_json_quote_64bit_integers": 0,
            })
        except Exception as e:
            raise StoreError(f"cannot connect to ClickHouse at {self.location}: {e}; "
                             "check FAULTLINE_CLICKHOUSE_URL") from None

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        try:
            self._c.command(sql, parameters=dict(params) if params else None)
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None

    def query_table(self, sql: str, params: Mapping[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
        try:
            raw = self._c.raw_query(sql, parameters=dict(params) if params else None,
                                    fmt="JSONCompactEachRowWithNames")
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None
        lines = raw.split(b"\n")
        if not lines or not lines[0]:
            return [], []
        return orjson.loads(lines[0]), [orjson.loads(ln) for ln in lines[1:] if ln]

    def insert_json(self, table: str, lines: bytes) -> None:
        if not lines:
            return
        _check_ident(table)
        try:
            self._c.raw_insert(table, insert_block=lines, fmt="JSONEachRow")
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        _check_ident(table)
        names = list(columns)
        if not names or not len(columns[names[0]]):
            return
        try:
            self._c.insert(table, data=[columns[n] for n in names], column_names=names, column_oriented=True)
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def close(self) -> None:
        try:
            self._c.close()
        except Exception:  # pragma: no cover - best effort
            pass

    def __enter__(self) -> "ServerStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _literal(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(v, bool):
        return "1" if v else "0"
    if v is None:
        return "NULL"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_literal(x) for x in v) + "]"
    return str(v)


def _chdb_params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """chDB takes parameter values as text: arrays must be ClickHouse literals."""
    if not params:
        return None
    return {k: (_literal(v) if isinstance(v, (list, tuple)) else v) for k, v in params.items()}


def _head(sql: str) -> str:
    s = " ".join(sql.split())
    return s[:120] + ("..." if len(s) > 120 else "")


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def _check_ident(name: str) -> None:
    if not _IDENT.match(name):
        raise StoreError(f"bad table name {name!r}")


def open_store(settings: Any = None, *, path: str | None = None, url: str | None = None,
               migrate: bool = True) -> Store:
    """Open the store the settings point at (server URL, else chDB directory) and apply the
    schema. ``path``/``url`` override the settings (``--store PATH`` means chDB)."""
    if url is None and path is None and settings is not None:
        url = getattr(settings, "clickhouse_url", None)
    if url:
        store: Store = ServerStore(url)
    else:
        store = ChdbStore(path or getattr(settings, "store_path", None) or "var/store")
    if migrate:
        try:
            store.migrate()
        except Exception:
            store.close()
            raise
    return store


def iter_chunks(items: Iterable[Any], n: int) -> Iterable[list[Any]]:
    buf: list[Any] = []
    for it in items:
        buf.append(it)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf
