"""The embedded default store: one SQLite file (stdlib ``sqlite3``), WAL mode.

Safe for several threads and several processes on one machine: each thread of each process has
its own connection, every write is one ``BEGIN IMMEDIATE`` transaction (the append's index is
computed inside it, so concurrent appends never collide or interleave within one call), and a
process killed mid-write leaves only whole transactions behind (WAL recovery on next open).

Tables are prefixed ``windowfit_`` so the file may be shared with an application's own tables.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from windowfit.errors import InvalidArgumentError
from windowfit.store._common import already_finished, encode_child, not_a_child, state_conflict
from windowfit.store.base import (
    SCHEMA_VERSION,
    BaseStore,
    RecentOps,
    SessionInfo,
    StoreCorruptError,
    StoreError,
    UsageRecord,
    UsageRow,
    decode_messages,
    decode_state,
    encode_message,
    encode_state,
    info_from_row,
    info_int,
    new_epoch,
    ttl_seconds,
    validate_op_id,
    validate_session_id,
)
from windowfit.store.schema import ddl, required_columns

__all__ = ["SQLiteStore"]

logger = logging.getLogger(__name__)

_COLUMNS = required_columns("sqlite")

_INFO_COLUMNS = (
    "s.id, s.epoch, s.parent_id, s.task, s.tool_call_id, s.meta, s.created_at, s.updated_at, "
    "s.state_version, s.status, s.result, "
    "(SELECT COALESCE(MAX(m.seq) + 1, 0) FROM windowfit_messages m WHERE m.session_id = s.id)"
)

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


class _Conn:
    """Holds one thread's connection. sqlite3.Connection cannot be weakly referenced; this can,
    so a thread's connection is released (and closed) when the thread ends."""

    __slots__ = ("__weakref__", "conn", "pid")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.pid = os.getpid()


# How many sessions one cleanup transaction removes, so other writers are not blocked long.
_CLEANUP_BATCH = 200


class SQLiteStore(BaseStore):
    """Sessions and usage in the SQLite file ``path`` (created if missing; ``":memory:"`` works).

    ``ttl``: sessions not written for that many seconds (or a timedelta) are removed by
    ``cleanup()``, which also runs when the store opens and then at most every ``ttl/2`` (capped
    at an hour) after a write. ``timeout``: seconds a writer waits for another's lock.
    ``synchronous``: SQLite's durability level. ``"FULL"`` (default) syncs the WAL on every
    commit, so an acknowledged append survives a power loss; ``"NORMAL"`` is several times
    faster per append and still never loses or corrupts data when a process crashes, only the
    last commits on a power loss or OS crash.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "sessions.db",
        *,
        ttl: float | timedelta | None = None,
        timeout: float = 30.0,
        synchronous: str = "FULL",
    ) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.ttl = ttl_seconds(ttl)
        if synchronous.upper() not in _SYNCHRONOUS:
            raise InvalidArgumentError(
                f"synchronous must be one of {_SYNCHRONOUS}, got {synchronous!r}"
            )
        self._synchronous = synchronous.upper()
        self._timeout = float(timeout)
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._conns: weakref.WeakSet[_Conn] = weakref.WeakSet()
        self._conns_lock = threading.Lock()
        # ":memory:" is one database per connection: share one, serialized by a lock
        self._mem_lock = threading.RLock()
        self._mem_conn: sqlite3.Connection | None = None
        self._closed = False
        self._next_cleanup = 0.0
        self._ops = RecentOps()
        self._init_schema()
        if self.ttl is not None:
            self._maybe_cleanup()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # ------------------------------------------------------------------ connections

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        try:
            conn = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            self._use_wal(conn)
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
        except sqlite3.DatabaseError as exc:
            raise self._open_error(exc) from exc
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Put the file in WAL mode: readers never block the writer nor each other, and commits
        are atomic under crashes. The mode is the file's: once it is WAL there is nothing to
        switch, and reading it waits on locks as any read does (":memory:" stays "memory").
        Switching needs the file alone, and two processes that each hold a read lock while
        asking for it deadlock: SQLite answers one of them "locked" at once, its busy handler
        never run. Several processes opening one new store together failed so (4 of 20 rounds
        of 8). So the switch is retried, its locks let go between tries, until the store's
        timeout."""
        deadline = time.monotonic() + self._timeout
        pause = 0.001
        while True:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode in ("wal", "memory"):
                return
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _open_error(self, exc: sqlite3.DatabaseError) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            return StoreError(f"SQLite database {self.path!r} is locked: {exc}")
        if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
            return StoreError(f"cannot open SQLite database {self.path!r}: {exc}")
        return StoreCorruptError(
            f"{self.path!r} is not a readable windowfit SQLite database: {exc}"
        )

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._memory:
            if self._mem_conn is None:
                self._mem_conn = self._connect()
            return self._mem_conn
        holder: _Conn | None = getattr(self._local, "holder", None)
        # a connection inherited through fork() must not be used by the child
        if holder is None or holder.pid != os.getpid():
            holder = self._local.holder = _Conn(self._connect())
            with self._conns_lock:
                self._conns.add(holder)
        return holder.conn

    @contextmanager
    def _tx(self, write: bool, session_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """One transaction; SQLite errors become StoreError or StoreCorruptError (naming the
        session)."""
        with self._mem_lock if self._memory else nullcontext():
            try:
                conn = self._conn()
                # IMMEDIATE takes the write lock up front: no deadlock upgrading a read lock
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.DatabaseError as exc:
                raise self._db_error(exc, session_id) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:  # pragma: no cover - rollback of a dead connection
                        logger.debug("rollback failed", exc_info=True)
                if isinstance(exc, sqlite3.DatabaseError):
                    raise self._db_error(exc, session_id) from exc
                raise

    def _db_error(self, exc: sqlite3.DatabaseError, session_id: str | None) -> StoreError:
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            return StoreError(
                f"SQLite database {self.path!r} stayed locked for {self._timeout:g}s: {exc}"
            )
        if isinstance(exc, sqlite3.ProgrammingError) or (
            isinstance(exc, sqlite3.OperationalError) and "closed" in str(exc)
        ):
            return StoreError(f"{self!r}: {exc}")
        return StoreCorruptError(f"SQLite error: {exc}", session_id=session_id, where=self.path)

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            holders = list(self._conns)
            self._conns = weakref.WeakSet()
        conns = [h.conn for h in holders if h.pid == os.getpid()]
        if self._mem_conn is not None:
            conns.append(self._mem_conn)
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover
                logger.debug("closing a connection failed", exc_info=True)
        self._mem_conn = None

    # ------------------------------------------------------------------ schema

    def _init_schema(self) -> None:
        with self._tx(write=True) as c:
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "windowfit_meta" in tables:
                row = c.execute("SELECT value FROM windowfit_meta WHERE key='schema'").fetchone()
                version = int(row[0]) if row and str(row[0]).isdigit() else None
                if version is not None and version > SCHEMA_VERSION:
                    raise StoreCorruptError(
                        f"{self.path!r} was written by a newer windowfit (schema {version}, "
                        f"this one knows {SCHEMA_VERSION}); upgrade windowfit"
                    )
            for table, needed in _COLUMNS.items():
                if table in tables:
                    have = {r[1] for r in c.execute(f"PRAGMA table_info({table})")}
                    if not needed <= have:
                        raise StoreCorruptError(
                            f"{self.path!r} has a table {table} that windowfit did not create "
                            f"(missing columns {sorted(needed - have)})"
                        )
            for statement in ddl("sqlite"):
                c.execute(statement)
            c.execute(
                "INSERT OR IGNORE INTO windowfit_meta (key, value) VALUES ('schema', ?)",
                (str(SCHEMA_VERSION),),
            )

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _touch(c: sqlite3.Connection, session_id: str, now: float) -> None:
        c.execute(
            "INSERT INTO windowfit_sessions (id, epoch, created_at, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at",
            (session_id, new_epoch(), now, now),
        )

    @staticmethod
    def _row(c: sqlite3.Connection, columns: str, session_id: str) -> Any:
        """The ``columns`` (constant SQL) of session ``session_id``'s row, None if it has none."""
        sql = f"SELECT {columns} FROM windowfit_sessions WHERE id = ?"
        return c.execute(sql, (session_id,)).fetchone()

    @staticmethod
    def _next_seq(c: sqlite3.Connection, session_id: str) -> int:
        row = c.execute(
            "SELECT COALESCE(MAX(seq) + 1, 0) FROM windowfit_messages WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return int(row[0])

    @staticmethod
    def _insert(c: sqlite3.Connection, session_id: str, start: int, records: list[str]) -> None:
        c.executemany(
            "INSERT INTO windowfit_messages (session_id, seq, data) VALUES (?, ?, ?)",
            [(session_id, start + i, r) for i, r in enumerate(records)],
        )

    def _maybe_cleanup(self) -> None:
        if self.ttl is None or time.time() < self._next_cleanup:
            return
        self._next_cleanup = time.time() + min(self.ttl / 2, 3600.0)
        try:
            removed = self.cleanup()
            if removed:
                logger.info("%r: removed %d sessions idle for over %gs", self, removed, self.ttl)
        except StoreError:
            # cleanup is housekeeping: it must never fail the write that triggered it
            logger.warning("%r: TTL cleanup failed", self, exc_info=True)

    # ------------------------------------------------------------------ protocol

    def append(self, session_id: str, messages: Sequence[Any], *, op_id: str | None = None) -> int:
        validate_session_id(session_id)
        validate_op_id(op_id)
        done = self._ops.get(session_id, op_id)
        if done is not None:
            return done
        now = time.time()
        records = [encode_message(m, now=now) for m in messages]
        if not records:
            with self._tx(write=False, session_id=session_id) as c:
                return self._next_seq(c, session_id)
        with self._tx(write=True, session_id=session_id) as c:
            self._touch(c, session_id, now)
            start = self._next_seq(c, session_id)
            self._insert(c, session_id, start, records)
        self._ops.put(session_id, op_id, start)
        self._maybe_cleanup()
        return start

    def read(self, session_id: str, start: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
        with self._tx(write=False, session_id=session_id) as c:
            row = self._row(c, "epoch", session_id)
            rows = c.execute(
                "SELECT seq, data FROM windowfit_messages WHERE session_id = ? AND seq >= ? "
                "ORDER BY seq",
                (session_id, max(0, start)),
            ).fetchall()
        first = max(0, start)
        for expected, (seq, _) in enumerate(rows, start=first):
            if seq != expected:
                raise StoreCorruptError(
                    f"message {expected} is missing (found {seq})", session_id=session_id
                )
        messages = decode_messages([data for _, data in rows], session_id, first)
        return (None if row is None else str(row[0])), messages

    def info(self, session_id: str) -> SessionInfo | None:
        with self._tx(write=False, session_id=session_id) as c:
            row = c.execute(
                f"SELECT {_INFO_COLUMNS} FROM windowfit_sessions s WHERE s.id = ?", (session_id,)
            ).fetchone()
        return None if row is None else info_from_row(row)

    def load_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        with self._tx(write=False, session_id=session_id) as c:
            row = self._row(c, "state, state_version", session_id)
        if row is None:
            return None, 0
        return decode_state(row[0], session_id), info_int(row[1], session_id, "state_version")

    def save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        validate_session_id(session_id)
        encoded = encode_state(state)
        now = time.time()
        with self._tx(write=True, session_id=session_id) as c:
            row = self._row(c, "state_version", session_id)
            current = 0 if row is None else info_int(row[0], session_id, "state_version")
            if current != expected_version:
                raise state_conflict(session_id, current, expected_version)
            self._touch(c, session_id, now)
            c.execute(
                "UPDATE windowfit_sessions SET state = ?, state_version = ? WHERE id = ?",
                (encoded, current + 1, session_id),
            )
        self._maybe_cleanup()
        return current + 1

    def create_child(
        self,
        parent_id: str,
        child_id: str,
        *,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        now = time.time()
        records, meta_json = encode_child(parent_id, child_id, messages, meta, now)
        with self._tx(write=True, session_id=child_id) as c:
            if self._row(c, "1", child_id):
                return False
            self._touch(c, parent_id, now)
            c.execute(
                "INSERT INTO windowfit_sessions (id, epoch, parent_id, task, tool_call_id, meta, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (child_id, new_epoch(), parent_id, task, tool_call_id, meta_json, now, now),
            )
            # leftovers of a removed session with this id must not shift the new history
            c.execute("DELETE FROM windowfit_messages WHERE session_id = ?", (child_id,))
            self._insert(c, child_id, 0, records)
        return True

    def finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        record = encode_message(message)
        now = time.time()
        with self._tx(write=True, session_id=child_id) as c:
            row = self._row(c, "parent_id, status", child_id)
            if row is None or row[0] is None:
                raise not_a_child(child_id)
            parent_id, status = row
            if status == "finished":
                raise already_finished(child_id)
            self._touch(c, parent_id, now)
            index = self._next_seq(c, parent_id)
            self._insert(c, parent_id, index, [record])
            c.execute(
                "UPDATE windowfit_sessions SET status = 'finished', result = ?, updated_at = ? "
                "WHERE id = ?",
                (result, now, child_id),
            )
        return index

    def children(self, session_id: str) -> list[SessionInfo]:
        with self._tx(write=False, session_id=session_id) as c:
            rows = c.execute(
                f"SELECT {_INFO_COLUMNS} FROM windowfit_sessions s WHERE s.parent_id = ? "
                "ORDER BY s.created_at, s.rowid",
                (session_id,),
            ).fetchall()
        return [info_from_row(r) for r in rows]

    def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        with self._tx(write=False) as c:
            rows = c.execute(
                f"SELECT {_INFO_COLUMNS} FROM windowfit_sessions s "
                "ORDER BY s.updated_at DESC LIMIT ?",
                (-1 if limit is None else int(limit),),
            ).fetchall()
        return [info_from_row(r) for r in rows]

    def delete(self, session_id: str) -> bool:
        with self._tx(write=True, session_id=session_id) as c:
            c.execute("DELETE FROM windowfit_messages WHERE session_id = ?", (session_id,))
            cur = c.execute("DELETE FROM windowfit_sessions WHERE id = ?", (session_id,))
            return cur.rowcount > 0

    def cleanup(self, older_than: float | timedelta | None = None) -> int:
        cutoff = self._cutoff(older_than)
        removed = 0
        while True:
            with self._tx(write=True) as c:
                ids = [
                    r[0]
                    for r in c.execute(
                        "SELECT id FROM windowfit_sessions WHERE updated_at < ? LIMIT ?",
                        (cutoff, _CLEANUP_BATCH),
                    )
                ]
                for sid in ids:
                    c.execute("DELETE FROM windowfit_messages WHERE session_id = ?", (sid,))
                    c.execute("DELETE FROM windowfit_sessions WHERE id = ?", (sid,))
            removed += len(ids)
            if len(ids) < _CLEANUP_BATCH:
                return removed

    def record_usage(self, record: UsageRecord) -> None:
        with self._tx(write=True, session_id=record.session_id) as c:
            c.execute(
                "INSERT INTO windowfit_usage (ts, day, model, session_id, prompt_tokens, "
                "completion_tokens, cached_tokens, cache_write_tokens, cost) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.ts,
                    record.day,
                    record.model,
                    record.session_id,
                    record.prompt_tokens,
                    record.completion_tokens,
                    record.cached_tokens,
                    record.cache_write_tokens,
                    record.cost,
                ),
            )

    def usage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        where, params = [], []
        for column, value in (("model", model), ("day", day), ("session_id", session_id)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = (
            "SELECT day, model, SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_tokens), "
            "SUM(cache_write_tokens), COALESCE(SUM(cost), 0.0), COUNT(*), "
            "SUM(CASE WHEN cost IS NULL THEN 1 ELSE 0 END) FROM windowfit_usage"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " GROUP BY day, model ORDER BY day, model"
        )
        with self._tx(write=False, session_id=session_id) as c:
            rows = c.execute(sql, params).fetchall()
        return [
            UsageRow(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]),
                     int(r[7]), int(r[8]))
            for r in rows
        ]  # fmt: skip


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
