"""The ClickHouse store: one small interface over embedded chDB and a ClickHouse server.

``open_store(settings)`` returns a :class:`Store` for ``settings.clickhouse_url`` when it is
set (``clickhouse-connect``), else an embedded chDB store in ``settings.store_path``. Both run
the same SQL (``sinks/sql/*.sql`` is applied on open) and take the same inserts:

- ``insert_json(table, lines)``: JSONEachRow bytes, parsed by ClickHouse (the fast path: raw
  contract events go to ``ingest_events`` this way);
- ``insert(table, rows)``: a batch of dicts (serialised to JSONEachRow; DateTime64 values are
  epoch-ms ints, converted by the caller with :func:`ms`).

One owner. Every call into the engine (inserts, queries, migrations, close) runs on the
store's :class:`StoreOwner`: ONE dedicated thread for chDB (a small pool for a server),
whatever thread or event loop calls it. Callers block on (or ``await``) a future:

- writes (``insert*``, ``execute``, ``migrate``) go before queued reads (but after each
  write one waiting read may run, so a sink that is behind cannot starve the page) and
  wait for their result (the sink must know its rows are stored before it commits offsets);
- reads (``query``, ``query_table``) wait at most ``timeout_s`` (default
  ``read_timeout_s``, 60 s) and then raise :class:`StoreTimeout`; their answer is dropped
  with the abandoned future, so it can never reach another caller. At most
  ``max_queued_reads`` reads wait at once; one more raises :class:`StoreBusy` (HTTP 503);
- asyncio code uses ``await store.aquery(...)`` / ``aquery_table(...)``: the event loop never
  blocks on the store.

Errors (the one exception tree of the store and the SQL API; all are :class:`StoreError`):

- :class:`StoreError`: a store operation failed; the message names the statement and cause;
- :class:`StoreLocked`: the chDB directory is owned by another process;
- :class:`StoreTimeout`: a read did not answer within its limit (names the query, the limit);
- :class:`StoreBusy`: too many reads are queued; ``retry_after_s`` says when to retry;
- :class:`QueryRejected`: the SQL was refused before it ran (not a read-only SELECT/WITH,
  or, through the API, outside its allow-list: ``sinks/api.py``).

chDB lets one process own a data directory, and one directory per process. Opening a
directory another process owns raises :class:`StoreLocked` (with that process's pid), which
the CLI turns into "go through the worker's HTTP API".
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import fcntl
import functools
import logging
import os
import re
import threading
from collections import deque
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import orjson

log = logging.getLogger("faultline.sinks")

__all__ = ["Store", "StoreError", "StoreLocked", "StoreTimeout", "StoreBusy", "QueryRejected",
           "StoreOwner", "DeferredStore", "open_store", "ms", "migrations"]

#: a read waits at most this long (queue + run) unless the caller gives its own limit
READ_TIMEOUT_S = 60.0
#: reads waiting for the owner at once; one more is refused with StoreBusy
MAX_QUEUED_READS = 32


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


class StoreTimeout(StoreError):
    """A read did not answer within its time limit (queued behind other work or running)."""

    def __init__(self, what: str, limit_s: float) -> None:
        super().__init__(f"store read timed out after {limit_s:g} s: {_head(what)}; "
                         "retry later or narrow the query (a time range, a LIMIT)")
        self.limit_s = limit_s


class StoreBusy(StoreError):
    """Too many reads are already waiting for the store; retry after ``retry_after_s``."""

    def __init__(self, queued: int, retry_after_s: int = 1) -> None:
        super().__init__(f"store busy: {queued} reads already waiting; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class QueryRejected(StoreError):
    """The SQL was refused before it ran; the message says why and what is allowed."""


def ms(epoch_ms: int | None) -> str | None:
    """An epoch-ms int as the text ClickHouse parses into DateTime64(3) ("seconds.millis")."""
    if epoch_ms is None:
        return None
    s, r = divmod(int(epoch_ms), 1000)
    return f"{s}.{r:03d}"


# ------------------------------------------------------------------ the owner
class StoreOwner:
    """Runs store calls on its own thread(s): writes before queued reads, but after a write
    at most ONE waiting read goes next, so reads are never starved by a sink that is behind
    (a read waits for at most about one write, not for the whole backlog).

    ``call(fn, write=..., what=..., timeout_s=...)`` runs ``fn()`` on an owner thread and
    returns its result (a call made *on* an owner thread runs inline, so ``migrate`` may
    call ``execute``). ``submit`` returns the ``concurrent.futures.Future``.
    """

    def __init__(self, name: str, threads: int = 1, max_queued_reads: int = MAX_QUEUED_READS) -> None:
        self.name = name
        self.max_queued_reads = max_queued_reads
        self._writes: deque[tuple[cf.Future, Callable[[], Any]]] = deque()
        self._reads: deque[tuple[cf.Future, Callable[[], Any]]] = deque()
        self._cv = threading.Condition()
        self._read_turn = False   # the last item taken was a write: a waiting read goes next
        self._idents: set[int] = set()
        self._closed = False
        self._threads = [threading.Thread(target=self._run, name=f"{name}-owner-{i}", daemon=True)
                         for i in range(max(1, threads))]
        for t in self._threads:
            t.start()

    def on_owner(self) -> bool:
        return threading.get_ident() in self._idents

    @property
    def owner_idents(self) -> frozenset[int]:
        """Thread idents of the owner thread(s) (tests assert every call ran on them)."""
        return frozenset(self._idents)

    def submit(self, fn: Callable[[], Any], *, write: bool) -> cf.Future:
        fut: cf.Future = cf.Future()
        with self._cv:
            if self._closed:
                raise StoreError(f"store {self.name} is closed")
            if write:
                self._writes.append((fut, fn))
            else:
                if len(self._reads) >= self.max_queued_reads:
                    raise StoreBusy(len(self._reads))
                self._reads.append((fut, fn))
            self._cv.notify()
        return fut

    def call(self, fn: Callable[[], Any], *, write: bool, what: str, timeout_s: float | None = None) -> Any:
        if self.on_owner():
            return fn()
        fut = self.submit(fn, write=write)
        try:
            return fut.result(timeout=timeout_s)
        except cf.TimeoutError:
            fut.cancel()   # still queued: never runs; running: its answer is dropped with it
            raise StoreTimeout(what, timeout_s or 0) from None

    async def acall(self, fn: Callable[[], Any], *, write: bool, what: str,
                    timeout_s: float | None = None) -> Any:
        fut = self.submit(fn, write=write)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout_s)
        except asyncio.TimeoutError:
            fut.cancel()
            raise StoreTimeout(what, timeout_s or 0) from None

    def _take(self) -> tuple[cf.Future, Callable[[], Any]] | None:
        """The next item (None: closed and nothing left). Called with the lock held."""
        while True:
            if self._reads and (self._read_turn or not self._writes):
                self._read_turn = False
                return self._reads.popleft()
            if self._writes:
                self._read_turn = True
                return self._writes.popleft()
            if self._closed:
                return None
            self._cv.wait()

    def _run(self) -> None:
        self._idents.add(threading.get_ident())
        while True:
            with self._cv:
                item = self._take()
            if item is None:
                return
            fut, fn = item
            if not fut.set_running_or_notify_cancel():
                continue   # the caller gave up while it was queued
            try:
                fut.set_result(fn())
            except BaseException as e:  # noqa: BLE001 - delivered to the caller
                fut.set_exception(e)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop once the work already queued is done."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        if not self.on_owner():
            for t in self._threads:
                t.join(timeout_s)


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

_OBJECT = re.compile(r"\bCREATE\s+(?:TABLE|(?:MATERIALIZED\s+)?VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                     r"`?([A-Za-z_][A-Za-z0-9_]*)`?", re.I)


@functools.lru_cache(maxsize=1)
def store_tables() -> frozenset[str]:
    """Every table and view the migrations create (and ``schema_migrations``); read once."""
    names = {"schema_migrations"}
    for _, _, stmts in migrations():
        for st in stmts:
            names.update(m.group(1) for m in _OBJECT.finditer(st))
    return frozenset(names)


class Store(Protocol):
    backend: str
    location: str

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None: ...
    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              timeout_s: float | None = None) -> list[dict[str, Any]]: ...
    def query_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                    timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]: ...
    async def aquery(self, sql: str, params: Mapping[str, Any] | None = None, *,
                     timeout_s: float | None = None) -> list[dict[str, Any]]: ...
    async def aquery_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                           timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]: ...
    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int: ...
    def insert_json(self, table: str, lines: bytes) -> None: ...
    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None: ...
    def migrate(self) -> list[int]: ...
    def close(self) -> None: ...


class _Base:
    """The public methods; each runs its ``_*_now`` twin on the owner (``self._owner``).
    Subclasses implement ``_execute_now``, ``_query_table_now``, ``_insert_json_now``,
    ``_insert_columns_now`` and ``_close_now``, which only the owner thread calls."""

    backend = "?"
    location = "?"
    read_timeout_s: float = READ_TIMEOUT_S
    _owner: StoreOwner

    # -- writes (before every queued read; wait for completion)
    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._owner.call(lambda: self._execute_now(sql, params), write=True, what=sql)  # type: ignore[attr-defined]

    def insert_json(self, table: str, lines: bytes) -> None:
        if not lines:
            return
        _check_ident(table)
        self._owner.call(lambda: self._insert_json_now(table, lines), write=True,  # type: ignore[attr-defined]
                         what=f"insert into {table}")

    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        """Column-oriented insert (values must be str/int/float; see the backends)."""
        _check_ident(table)
        names = list(columns)
        if not names or not len(columns[names[0]]):
            return
        for n in names:
            _check_ident(n)
        self._owner.call(lambda: self._insert_columns_now(table, columns), write=True,  # type: ignore[attr-defined]
                         what=f"insert into {table}")

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        if not rows:
            return 0
        dumps = orjson.dumps
        self.insert_json(table, b"\n".join(map(dumps, rows)))
        return len(rows)

    # -- reads (bounded queue, time limit)
    def query_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                    timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]:
        return self._owner.call(lambda: self._query_table_now(sql, params), write=False,  # type: ignore[attr-defined]
                                what=sql, timeout_s=timeout_s or self.read_timeout_s)

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              timeout_s: float | None = None) -> list[dict[str, Any]]:
        cols, rows = self.query_table(sql, params, timeout_s=timeout_s)
        return [dict(zip(cols, r)) for r in rows]

    async def aquery_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                           timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]:
        return await self._owner.acall(lambda: self._query_table_now(sql, params), write=False,  # type: ignore[attr-defined]
                                       what=sql, timeout_s=timeout_s or self.read_timeout_s)

    async def aquery(self, sql: str, params: Mapping[str, Any] | None = None, *,
                     timeout_s: float | None = None) -> list[dict[str, Any]]:
        cols, rows = await self.aquery_table(sql, params, timeout_s=timeout_s)
        return [dict(zip(cols, r)) for r in rows]

    # -- schema
    def migrate(self) -> list[int]:
        """Apply every ``sinks/sql`` file not yet recorded in ``schema_migrations`` (one write
        on the owner: nothing else runs between its statements)."""
        return self._owner.call(self._migrate_now, write=True, what="schema migration")

    def _migrate_now(self) -> list[int]:
        self.execute(_MIGRATIONS_DDL)
        done = {int(r["version"]) for r in self.query("SELECT version FROM schema_migrations")}
        applied = []
        for version, name, stmts in migrations():
            if version in done:
                continue
            for stmt in stmts:
                try:
                    self.execute(stmt)
                except StoreError as e:
                    raise StoreError(f"migration {version:03d}_{name}.sql failed: {e}") from None
            self.insert("schema_migrations", [{"version": version, "name": name}])
            applied.append(version)
            log.info("schema migration applied", extra={"version": version, "migration": name})
        return applied

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()  # type: ignore[attr-defined]


# ------------------------------------------------------------------ chDB
_lock = threading.Lock()
_sessions: dict[str, list[Any]] = {}  # realpath -> [session, owner, refcount]


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


def _open_session(real: str) -> Any:
    """The chDB session of ``real`` (runs on its owner thread: chDB is only touched there)."""
    from chdb import session as chs

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
    return sess


class ChdbStore(_Base):
    """Embedded chDB in a data directory (one per process; every Store of it shares one
    session and one owner thread)."""

    backend = "chdb"

    def __init__(self, path: str, *, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        real = os.path.realpath(path)
        self.location = real
        self.read_timeout_s = read_timeout_s
        with _lock:
            if real in _sessions:
                _sessions[real][2] += 1
                self._s, self._owner = _sessions[real][0], _sessions[real][1]
            else:
                if _sessions:
                    other = next(iter(_sessions))
                    raise StoreError(
                        f"this process already has store {other} open; chDB opens one data "
                        f"directory per process: close it before opening {real}"
                    )
                owner = StoreOwner("chdb", threads=1)
                try:
                    sess = owner.call(lambda: _open_session(real), write=True, what=f"open {real}")
                except BaseException:
                    owner.close()
                    raise
                _sessions[real] = [sess, owner, 1]
                self._s, self._owner = sess, owner
        self._closed = False

    def _execute_now(self, sql: str, params: Mapping[str, Any] | None) -> None:
        try:
            self._s.query(sql, "Null", params=_chdb_params(params))
        except Exception as e:
            self._drain()
            raise StoreError(f"{_head(sql)}: {e}") from None

    def _query_table_now(self, sql: str, params: Mapping[str, Any] | None) -> tuple[list[str], list[list[Any]]]:
        try:
            res = self._s.query(sql, "JSONCompactEachRowWithNames", params=_chdb_params(params))
        except Exception as e:
            self._drain()
            raise StoreError(f"{_head(sql)}: {e}") from None
        raw = res.bytes() if hasattr(res, "bytes") else bytes(res)
        if not raw:
            return [], []
        lines = raw.split(b"\n")
        cols = orjson.loads(lines[0])
        return cols, [orjson.loads(ln) for ln in lines[1:] if ln]

    def _drain(self) -> None:
        """After a query failed mid-way (a timeout, a memory limit), chDB 4.4 keeps what it
        had written (the column names) and prepends it to the NEXT query's answer: one
        request got another's columns that way. A throw-away query takes it out."""
        try:
            self._s.query("SELECT 1", "Null")
        except Exception:  # noqa: BLE001 - best effort; the next answer is checked anyway
            pass

    def _insert_json_now(self, table: str, lines: bytes) -> None:
        try:
            self._s.query(f"INSERT INTO {table} FORMAT JSONEachRow\n" + lines.decode("utf-8"), "Null")
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def _insert_columns_now(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        """Through chDB's ``Python()`` table function (no text round trip: the fastest path,
        see bench/sink.py). chDB finds ``fl_cols`` by name in this frame."""
        fl_cols = dict(columns)  # noqa: F841 - read by chDB from this frame
        cols = ", ".join(columns)
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
            entry[2] -= 1
            if entry[2] > 0:
                return
            del _sessions[self.location]
        sess, owner = entry[0], entry[1]
        try:
            owner.call(sess.close, write=True, what=f"close {self.location}")
        finally:
            owner.close()


# ------------------------------------------------------------------ server
class ServerStore(_Base):
    """A ClickHouse server over HTTP (``clickhouse-connect``): a small owner pool, since a
    server serves concurrent queries (no session state is shared between them)."""

    backend = "clickhouse"
    POOL = 4

    def __init__(self, url: str, *, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        import clickhouse_connect
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.location = f"{parts.scheme}://{parts.hostname}:{parts.port or 8123}{parts.path or ''}"
        self.read_timeout_s = read_timeout_s
        try:
            self._c = clickhouse_connect.get_client(dsn=url, autogenerate_session_id=False, settings={
                "output_format_json_quote_64bit_integers": 0,
            })
        except Exception as e:
            raise StoreError(f"cannot connect to ClickHouse at {self.location}: {e}; "
                             "check FAULTLINE_CLICKHOUSE_URL") from None
        self._owner = StoreOwner("clickhouse", threads=self.POOL)

    def _execute_now(self, sql: str, params: Mapping[str, Any] | None) -> None:
        try:
            self._c.command(sql, parameters=dict(params) if params else None)
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None

    def _query_table_now(self, sql: str, params: Mapping[str, Any] | None) -> tuple[list[str], list[list[Any]]]:
        try:
            raw = self._c.raw_query(sql, parameters=dict(params) if params else None,
                                    fmt="JSONCompactEachRowWithNames")
        except Exception as e:
            raise StoreError(f"{_head(sql)}: {e}") from None
        lines = raw.split(b"\n")
        if not lines or not lines[0]:
            return [], []
        return orjson.loads(lines[0]), [orjson.loads(ln) for ln in lines[1:] if ln]

    def _insert_json_now(self, table: str, lines: bytes) -> None:
        try:
            self._c.raw_insert(table, insert_block=lines, fmt="JSONEachRow")
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def _insert_columns_now(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        names = list(columns)
        try:
            self._c.insert(table, data=[columns[n] for n in names], column_names=names, column_oriented=True)
        except Exception as e:
            raise StoreError(f"insert into {table}: {e}") from None

    def close(self) -> None:
        try:
            self._owner.call(self._c.close, write=True, what="close")
        except Exception:  # pragma: no cover - best effort
            pass
        finally:
            self._owner.close()


class DeferredStore:
    """A store that could not be opened yet (its chDB directory owned by another process,
    its server refusing connections): every call first tries ``opener()`` again and, until
    it succeeds, raises that attempt's :class:`StoreError`. The sink hands one to its writer
    so that an unavailable store is a failed flush it retries with backoff (offsets stay
    uncommitted, the group's lag rises), not a sink that refuses to start.

    ``aquery``/``aquery_table`` never open the store from the event loop (opening applies
    the schema): before the first successful open they raise at once."""

    def __init__(self, opener: Callable[[], Store], *, backend: str, location: str, error: StoreError) -> None:
        self._opener = opener
        self.backend = backend
        self.location = location
        self.read_timeout_s = READ_TIMEOUT_S
        self._store: Store | None = None
        self._error: StoreError = error
        self._lock = threading.Lock()
        self.attempts = 0          # opens tried after the first one (tests, logs)

    @property
    def opened(self) -> bool:
        return self._store is not None

    def _get(self) -> Store:
        with self._lock:
            if self._store is None:
                self.attempts += 1
                try:
                    self._store = self._opener()
                except StoreError as e:
                    self._error = e
                    raise
                log.warning("store available again", extra={"store": self.location, "attempts": self.attempts})
            return self._store

    def _opened_or_raise(self) -> Store:
        if self._store is None:
            raise StoreError(f"store {self.location} not open yet: {self._error}")
        return self._store

    def execute(self, sql: str, params: Mapping[str, Any] | None = None) -> None:
        self._get().execute(sql, params)

    def query(self, sql: str, params: Mapping[str, Any] | None = None, *,
              timeout_s: float | None = None) -> list[dict[str, Any]]:
        return self._get().query(sql, params, timeout_s=timeout_s)

    def query_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                    timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]:
        return self._get().query_table(sql, params, timeout_s=timeout_s)

    async def aquery(self, sql: str, params: Mapping[str, Any] | None = None, *,
                     timeout_s: float | None = None) -> list[dict[str, Any]]:
        return await self._opened_or_raise().aquery(sql, params, timeout_s=timeout_s)

    async def aquery_table(self, sql: str, params: Mapping[str, Any] | None = None, *,
                           timeout_s: float | None = None) -> tuple[list[str], list[list[Any]]]:
        return await self._opened_or_raise().aquery_table(sql, params, timeout_s=timeout_s)

    def insert(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        return self._get().insert(table, rows)

    def insert_json(self, table: str, lines: bytes) -> None:
        self._get().insert_json(table, lines)

    def insert_columns(self, table: str, columns: Mapping[str, list[Any]]) -> None:
        self._get().insert_columns(table, columns)

    def migrate(self) -> list[int]:
        return self._get().migrate()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    def __enter__(self) -> Any:
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
    """chDB takes parameter values as text: arrays must be ClickHouse literals, and a string
    is read as TSV-escaped text (so its backslashes, tabs and newlines are escaped here,
    else ``a\\`` is refused and ``\\x41`` read as ``A``)."""
    if not params:
        return None
    return {k: (_literal(v) if isinstance(v, (list, tuple)) else _escaped(v) if isinstance(v, str) else v)
            for k, v in params.items()}


def _escaped(v: str) -> str:
    """``v`` as the TSV-escaped text chDB parses a query parameter's value from."""
    return v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


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
