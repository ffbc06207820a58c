"""A store on PostgreSQL (``psycopg`` 3 with a connection pool), for teams that keep their data
in Postgres.

Tables are prefixed ``windowfit_`` (a ``schema=`` may hold them apart). Every write is one
transaction. An append reserves its sequence numbers by bumping the session row's ``length``
in one ``INSERT .. ON CONFLICT DO UPDATE .. RETURNING`` (the row lock orders concurrent
appends: all kept, each call's messages contiguous, each writer's calls in its own order).
State saves compare ``state_version`` under that lock (optimistic concurrency).

Every write carries an operation id made by the client and recorded in ``windowfit_ops`` in the
same transaction. When a connection dies mid-call (server restart, ``pg_terminate_backend``) the
store retries on a fresh connection: if the lost transaction had committed, the retry finds its
id and returns the recorded result instead of writing twice.

Each operation is written once as a generator of SQL steps (see ``run_steps``), driven by a
blocking pool for the sync methods and an asyncio pool for the async twins.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Generator, Sequence
from datetime import timedelta
from typing import Any, TypeVar, overload

from windowfit.errors import ArgumentTypeError, InternalError, InvalidArgumentError
from windowfit.store._common import already_finished, encode_child, not_a_child, state_conflict
from windowfit.store._steps import Operation, StepStore, new_op_id, run_steps
from windowfit.store.base import (
    SCHEMA_VERSION,
    SessionInfo,
    StoreCorruptError,
    StoreError,
    StoreOutcomeUnknownError,
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
from windowfit.store.schema import MIGRATIONS, ddl, required_columns

__all__ = ["PostgresStore"]

logger = logging.getLogger(__name__)

_COLUMNS = required_columns("postgres")

_INFO = (
    "SELECT id, epoch, parent_id, task, tool_call_id, meta, created_at, updated_at, "
    "state_version, status, result, length FROM windowfit_sessions "
)

# Reserve `n` sequence numbers of a session (creating it), returning the first.
_RESERVE = (
    "INSERT INTO windowfit_sessions AS s (id, epoch, created_at, updated_at, length) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE "
    "SET updated_at = EXCLUDED.updated_at, length = s.length + EXCLUDED.length "
    "RETURNING s.length - %s"
)
_INSERT_MESSAGES = (
    "INSERT INTO windowfit_messages (session_id, seq, data) "
    "SELECT %s, %s + t.ord - 1, t.data FROM unnest(%s::text[]) WITH ORDINALITY AS t(data, ord)"
)

_T = TypeVar("_T")
# A step: (fetch, sql, params) with fetch "all", "one" or "none".
_Step = tuple[str, str, Any]
_Op = Generator[_Step, Any, _T]

# How long an operation id is remembered (a retry comes within seconds; keep a wide margin).
_OP_TTL = 600.0
# Attempts at an operation whose connection died (each on a fresh connection).
_ATTEMPTS = 4
# Every this many writes a store forgets expired operation ids (cleanup() does too).
_PRUNE_EVERY = 500


@overload
def _db(text: str) -> str: ...
@overload
def _db(text: None) -> None: ...
def _db(text: str | None) -> str | None:
    """``text`` as Postgres can store it: its text type cannot hold NUL, which ids and tasks may
    contain. Backslash escapes keep the mapping one-to-one (``_py`` reverses it)."""
    if text is None or ("\\" not in text and "\x00" not in text):
        return text
    return text.replace("\\", "\\\\").replace("\x00", "\\0")


_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _py(text: str | None) -> str | None:
    if text is None or "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else m.group(1), text)


def _info(row: Sequence[Any]) -> SessionInfo:
    # id, parent_id, task, tool_call_id and result went through _db
    r = list(row)
    for i in (0, 2, 3, 4, 10):
        r[i] = _py(r[i])
    return info_from_row(r)


def _where(dsn: str) -> str:
    """The server a DSN names, without its password (for error messages)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - a malformed DSN still needs a name in the error
        return "PostgreSQL (malformed DSN)"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or 5432
    db = parts.get("dbname") or parts.get("user") or ""
    return f"PostgreSQL at {host}:{port}/{db}"


#: PostgreSQL cuts identifiers at 63 bytes (NAMEDATALEN - 1) without an error, so two
#: longer schema names sharing their first 63 bytes would share tables.
MAX_IDENTIFIER_BYTES = 63


def _check_schema(schema: Any) -> None:
    """``schema`` is None or a plain ASCII SQL identifier PostgreSQL keeps whole."""
    if schema is None:
        return
    if not isinstance(schema, str):
        raise ArgumentTypeError(f"schema must be a str or None, not {type(schema).__name__}")
    if not (schema.isidentifier() and schema.isascii()):
        raise InvalidArgumentError(f"schema must be a plain SQL identifier, got {schema!r}")
    if len(schema) > MAX_IDENTIFIER_BYTES:
        raise InvalidArgumentError(
            f"schema must be at most {MAX_IDENTIFIER_BYTES} characters (PostgreSQL would cut "
            f"it there), got {len(schema)}: {schema!r}"
        )


class PostgresStore(StepStore):
    """Sessions and usage in PostgreSQL at ``dsn`` (``postgresql://user@host:port/db`` or a
    ``key=value`` conninfo string).

    The store creates its tables (and upgrades them from older windowfit versions) on first
    use. ``schema``: a Postgres schema to keep them in (created if missing). ``ttl``: sessions
    not written for that long are removed by ``cleanup()``. ``pool_size``: connections per
    process (the async methods run on worker threads over the same pool). ``timeout``: seconds to wait for a
    connection before raising StoreError. Requires ``psycopg[pool]`` (``windowfit[postgres]``).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        ttl: float | timedelta | None = None,
        pool_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "PostgresStore needs psycopg 3 and psycopg-pool: pip install 'windowfit[postgres]'"
            ) from exc
        if not isinstance(dsn, str) or not dsn:
            raise StoreError("PostgresStore needs a DSN string (postgresql://user@host/db)")
        self.where = _where(dsn)
        try:
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise StoreError(f"invalid PostgreSQL DSN: {exc}") from None
        _check_schema(schema)
        if not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgumentError(f"pool_size must be a positive int, got {pool_size!r}")
        self.dsn = dsn
        self.schema = schema
        self.ttl = ttl_seconds(ttl)
        self._pool_size = pool_size
        self._timeout = float(timeout)
        self._psycopg = psycopg
        self._pool_mod = psycopg_pool
        self._pool: Any = None
        self._pool_pid = os.getpid()
        self._writes = 0
        self._schema_ready = False
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    # ------------------------------------------------------------------ connections

    def _configure(self) -> Callable[[Any], None] | None:
        if self.schema is None:
            return None
        schema = self.schema

        def configure(conn: Any) -> None:
            conn.execute(f'SET search_path TO "{schema}"')
            conn.commit()

        return configure

    def _sync_pool(self) -> Any:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._pool is None or self._pool_pid != os.getpid():
            # a pool inherited through fork() has no worker threads and shares sockets
            self._pool_pid = os.getpid()
            self._pool = self._pool_mod.ConnectionPool(
                self.dsn,
                min_size=1,
                max_size=self._pool_size,
                timeout=self._timeout,
                configure=self._configure(),
                open=False,
                name="windowfit",
            )
            self._pool.open(wait=False)
        return self._pool

    def _map_error(self, exc: BaseException, session_id: str | None) -> StoreError:
        pg = self._psycopg
        about = f" (session {session_id!r})" if session_id is not None else ""
        if isinstance(exc, self._pool_mod.PoolTimeout):
            return StoreError(
                f"cannot get a connection to {self.where} within {self._timeout:g}s{about}: "
                f"{self._why_unreachable()}"
            )
        if isinstance(exc, pg.errors.UndefinedTable | pg.errors.UndefinedColumn):
            return StoreCorruptError(
                f"windowfit's tables are missing or foreign: {exc}",
                session_id=session_id,
                where=self.where,
            )
        if isinstance(exc, pg.DataError | pg.IntegrityError):
            return StoreCorruptError(
                f"unexpected data: {exc}", session_id=session_id, where=self.where
            )
        return StoreError(f"{self.where}{about}: {exc}")

    def _why_unreachable(self) -> str:
        # the pool only says it timed out; one direct attempt tells the caller why
        try:
            self._psycopg.connect(self.dsn, connect_timeout=2).close()
        except self._psycopg.Error as exc:
            return str(exc).strip() or type(exc).__name__
        return "the pool is exhausted (raise pool_size?)"

    def _retryable(self, exc: BaseException) -> bool:
        # a dead connection (killed backend, restarted server): retry on a fresh one. A pool
        # timeout is not retried: the server is unreachable and the caller should hear so.
        pg = self._psycopg
        if isinstance(exc, self._pool_mod.PoolTimeout):
            return False
        return isinstance(exc, pg.OperationalError | pg.InterfaceError)

    def _drive(self, make: Operation, session_id: str | None) -> Any:
        pool = self._sync_pool()
        lost = False  # a connection died under an attempt: it may have committed
        for attempt in range(_ATTEMPTS):
            try:
                if not self._schema_ready:
                    with pool.connection() as conn:
                        run_steps(self._op_schema(), lambda step: _execute(conn, step))
                    self._schema_ready = True
                with pool.connection() as conn:
                    return run_steps(make(), lambda step: _execute(conn, step))
            except self._psycopg.Error as exc:
                retryable = self._retryable(exc)
                lost = lost or retryable
                if attempt + 1 < _ATTEMPTS and retryable:
                    logger.warning("%r: %s; retrying on a new connection", self, exc)
                    time.sleep(0.05 * 2**attempt)
                    pool.check()  # the other idle connections may have died with this one
                    continue
                retry_with = getattr(make, "retry_with", None)
                if lost and retry_with is not None:
                    raise StoreOutcomeUnknownError(
                        f"PostgreSQL at {self.where} lost the connection under a write ({exc}): "
                        "it may or may not be applied",
                        op_id=retry_with,
                        session_id=session_id,
                    ) from exc
                raise self._map_error(exc, session_id) from exc
        raise InternalError("unreachable")  # pragma: no cover

    async def _adrive(self, make: Operation, session_id: str | None) -> Any:
        # The async twins run the one sync body on a worker thread over the thread-safe pool.
        # A pool per event loop left psycopg's worker tasks behind when a loop ended
        # (asyncio.run then waited on their cancellation for good).
        return await asyncio.to_thread(self._drive, make, session_id)

    def close(self) -> None:
        self._closed = True
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    # ------------------------------------------------------------------ operations (generators)

    def _op_schema(self) -> _Op[None]:
        # one creator at a time across processes: the lock is released at commit
        yield ("none", "SELECT pg_advisory_xact_lock(hashtext('windowfit_schema'))", None)
        if self.schema is not None:
            yield ("none", f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"', None)
        rows = yield (
            "all",
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name LIKE 'windowfit_%'",
            None,
        )
        have: dict[str, set[str]] = {}
        for table, column in rows:
            have.setdefault(table, set()).add(column)
        version = SCHEMA_VERSION
        if "windowfit_meta" in have:
            row = yield ("one", "SELECT value FROM windowfit_meta WHERE key = 'schema'", None)
            if row is not None:
                if not str(row[0]).isdigit():
                    raise StoreCorruptError(
                        f"windowfit_meta holds schema {row[0]!r}", where=self.where
                    )
                version = int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreCorruptError(
                    f"the tables were written by a newer windowfit (schema {version}, this one "
                    f"knows {SCHEMA_VERSION}); upgrade windowfit",
                    where=self.where,
                )
        for old in range(version, SCHEMA_VERSION):
            yield ("none", MIGRATIONS["postgres"][old], None)
        for table, needed in _COLUMNS.items():
            if table in have and version == SCHEMA_VERSION and not needed <= have[table]:
                raise StoreCorruptError(
                    f"table {table} was not created by windowfit "
                    f"(missing columns {sorted(needed - have[table])})",
                    where=self.where,
                )
        for statement in ddl("postgres"):
            yield ("none", statement, None)
        yield (
            "none",
            "INSERT INTO windowfit_meta (key, value) VALUES ('schema', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(SCHEMA_VERSION),),
        )

    def _once(
        self, op_id: str, body: _Op[_T], encode: Callable[[_T], Any], prune: bool, retry: bool
    ) -> _Op[_T]:
        """Run the write ``body`` unless operation ``op_id`` already committed (then its result).

        ``encode`` makes the JSON form of the result that a retry gets back; ``prune`` also
        forgets operation ids older than any retry could be. Only a ``retry`` can find its id
        recorded (the id is new to the first attempt), so only a retry looks it up.
        """
        if retry:
            row = yield ("one", "SELECT result FROM windowfit_ops WHERE id = %s", (op_id,))
            if row is not None:
                done: _T = json.loads(row[0])
                return done
        result = yield from body
        yield (
            "none",
            "INSERT INTO windowfit_ops (id, result, at) VALUES (%s, %s, %s)",
            (op_id, json.dumps(encode(result)), time.time()),
        )
        if prune:
            yield ("none", "DELETE FROM windowfit_ops WHERE at < %s", (time.time() - _OP_TTL,))
        return result

    def _op_append(self, session_id: str, records: list[str], now: float) -> _Op[int]:
        if not records:
            row = yield (
                "one",
                "SELECT length FROM windowfit_sessions WHERE id = %s",
                (session_id,),
            )
            return 0 if row is None else int(row[0])
        (start,) = yield (
            "one",
            _RESERVE,
            (session_id, new_epoch(), now, now, len(records), len(records)),
        )
        yield ("none", _INSERT_MESSAGES, (session_id, int(start), records))
        return int(start)

    def _op_read(self, session_id: str, start: int) -> _Op[tuple[str | None, list[dict[str, Any]]]]:
        # one statement, one snapshot: the epoch and the messages belong together
        rows = yield (
            "all",
            "SELECT s.epoch, m.seq, m.data FROM windowfit_sessions s "
            "LEFT JOIN windowfit_messages m ON m.session_id = s.id AND m.seq >= %s "
            "WHERE s.id = %s ORDER BY m.seq",
            (start, session_id),
        )
        if not rows:
            return None, []
        found = [(seq, data) for _, seq, data in rows if seq is not None]
        for expected, (seq, _) in enumerate(found, start=start):
            if seq != expected:
                raise StoreCorruptError(
                    f"message {expected} is missing (found {seq})", session_id=session_id
                )
        return str(rows[0][0]), decode_messages([d for _, d in found], session_id, start)

    def _op_info(self, session_id: str) -> _Op[SessionInfo | None]:
        row = yield ("one", _INFO + "WHERE id = %s", (session_id,))
        return None if row is None else _info(row)

    def _op_state(self, session_id: str) -> _Op[tuple[dict[str, Any] | None, int]]:
        row = yield (
            "one",
            "SELECT state, state_version FROM windowfit_sessions WHERE id = %s",
            (session_id,),
        )
        if row is None:
            return None, 0
        return decode_state(row[0], session_id), info_int(row[1], session_id, "state_version")

    def _op_save_state(
        self, session_id: str, encoded: str | None, expected_version: int, now: float
    ) -> _Op[int]:
        # create-or-lock the row, then compare under the lock
        yield (
            "none",
            "INSERT INTO windowfit_sessions (id, epoch, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (session_id, new_epoch(), now, now),
        )
        (current,) = yield (
            "one",
            "SELECT state_version FROM windowfit_sessions WHERE id = %s FOR UPDATE",
            (session_id,),
        )
        if int(current) != expected_version:
            raise state_conflict(session_id, int(current), expected_version)
        yield (
            "none",
            "UPDATE windowfit_sessions SET state = %s, state_version = %s, updated_at = %s "
            "WHERE id = %s",
            (encoded, int(current) + 1, now, session_id),
        )
        return int(current) + 1

    def _op_create_child(
        self,
        parent_id: str,
        child_id: str,
        task: str | None,
        records: list[str],
        tool_call_id: str | None,
        meta_json: str | None,
        now: float,
    ) -> _Op[bool]:
        yield (
            "none",
            "INSERT INTO windowfit_sessions AS s (id, epoch, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET updated_at = %s",
            (parent_id, new_epoch(), now, now, now),
        )
        created = yield (
            "one",
            "INSERT INTO windowfit_sessions (id, epoch, parent_id, task, tool_call_id, meta, "
            "created_at, updated_at, length) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING RETURNING id",
            (child_id, new_epoch(), parent_id, task, tool_call_id, meta_json, now, now,
             len(records)),
        )  # fmt: skip
        if created is None:
            return False
        # leftovers of a removed session with this id must not shift the new history
        yield ("none", "DELETE FROM windowfit_messages WHERE session_id = %s", (child_id,))
        if records:
            yield ("none", _INSERT_MESSAGES, (child_id, 0, records))
        return True

    def _op_finish(self, child_id: str, result: str, record: str, now: float) -> _Op[int]:
        row = yield (
            "one",
            "SELECT parent_id, status FROM windowfit_sessions WHERE id = %s FOR UPDATE",
            (child_id,),
        )
        if row is None or row[0] is None:
            raise not_a_child(child_id)
        parent_id, status = row
        if status == "finished":
            raise already_finished(child_id)
        index = yield from self._op_append(parent_id, [record], now)
        yield (
            "none",
            "UPDATE windowfit_sessions SET status = 'finished', result = %s, updated_at = %s "
            "WHERE id = %s",
            (result, now, child_id),
        )
        return index

    def _op_list(self, where: str, params: tuple[Any, ...]) -> _Op[list[SessionInfo]]:
        rows = yield ("all", _INFO + where, params)
        return [_info(r) for r in rows]

    def _op_delete(self, session_id: str) -> _Op[bool]:
        yield ("none", "DELETE FROM windowfit_messages WHERE session_id = %s", (session_id,))
        row = yield (
            "one",
            "DELETE FROM windowfit_sessions WHERE id = %s RETURNING id",
            (session_id,),
        )
        return row is not None

    def _op_cleanup(self, cutoff: float) -> _Op[int]:
        ids = yield (
            "all",
            "DELETE FROM windowfit_sessions WHERE updated_at < %s RETURNING id",
            (cutoff,),
        )
        if ids:
            yield (
                "none",
                "DELETE FROM windowfit_messages WHERE session_id = ANY(%s)",
                ([r[0] for r in ids],),
            )
        yield ("none", "DELETE FROM windowfit_ops WHERE at < %s", (time.time() - _OP_TTL,))
        return len(ids)

    def _op_record_usage(self, r: UsageRecord) -> _Op[None]:
        yield (
            "none",
            "INSERT INTO windowfit_usage (ts, day, model, session_id, prompt_tokens, "
            "completion_tokens, cached_tokens, cache_write_tokens, cost) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (r.ts, r.day, r.model, r.session_id, r.prompt_tokens, r.completion_tokens,
             r.cached_tokens, r.cache_write_tokens, r.cost),
        )  # fmt: skip

    def _op_usage_rows(
        self, model: str | None, day: str | None, session_id: str | None
    ) -> _Op[list[UsageRow]]:
        where, params = [], []
        for column, value in (("model", model), ("day", day), ("session_id", session_id)):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        rows = yield (
            "all",
            "SELECT day, model, SUM(prompt_tokens), SUM(completion_tokens), SUM(cached_tokens), "
            "SUM(cache_write_tokens), COALESCE(SUM(cost), 0.0), COUNT(*), "
            "COUNT(*) - COUNT(cost) FROM windowfit_usage"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " GROUP BY day, model ORDER BY day, model",
            tuple(params),
        )
        return [
            UsageRow(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]),
                     int(r[7]), int(r[8]))
            for r in rows
        ]  # fmt: skip

    # ------------------------------------------------------------------ the calls, built once

    def _operation(self, name: str, *args: Any, **kwargs: Any) -> Operation:
        """The operation of protocol method ``name``.

        Arguments are validated and payloads encoded here, once, before any I/O; writes get
        their operation id here so every retry of the call reuses it.
        """
        now = time.time()
        if name == "append":
            session_id, messages = args
            sid = _db(validate_session_id(session_id))
            op_id = validate_op_id(kwargs.get("op_id"))
            records = [encode_message(m, now=now) for m in messages]
            if not records:
                return lambda: self._op_append(sid, [], now)
            make = self._write(lambda: self._op_append(sid, records, now), int, op_id)
            make.retry_with = make.op_id  # type: ignore[attr-defined]  # the caller may retry
            return make
        if name == "read":
            session_id, start = args
            sid = _db(session_id)
            return lambda: self._op_read(sid, max(0, int(start)))
        if name == "info":
            (session_id,) = args
            sid = _db(session_id)
            return lambda: self._op_info(sid)
        if name == "load_state":
            (session_id,) = args
            sid = _db(session_id)
            return lambda: self._op_state(sid)
        if name == "save_state":
            session_id, state, expected = args
            sid = _db(validate_session_id(session_id))
            encoded = encode_state(state)
            expected = int(expected)
            op = self._write(lambda: self._op_save_state(sid, encoded, expected, now), int)
            return op
        if name == "create_child":
            parent_id, child_id = args
            records, meta_json = encode_child(
                parent_id, child_id, kwargs["messages"], kwargs.get("meta"), now
            )
            pid, cid = _db(parent_id), _db(child_id)
            task, tool_call_id = _db(kwargs["task"]), _db(kwargs.get("tool_call_id"))
            op = self._write(
                lambda: self._op_create_child(
                    pid, cid, task, records, tool_call_id, meta_json, now
                ),
                bool,
            )
            return op
        if name == "finish_child":
            child_id, result, message = args
            record = encode_message(message, now=now)
            cid, text = _db(child_id), _db(result)
            return self._write(lambda: self._op_finish(cid, text, record, now), int)
        if name == "children":
            (session_id,) = args
            sid = _db(session_id)
            where = "WHERE parent_id = %s ORDER BY created_at, created_seq"
            return lambda: self._op_list(where, (sid,))
        if name == "list_sessions":
            (limit,) = args
            if limit is None:
                return lambda: self._op_list("ORDER BY updated_at DESC", ())
            where = "ORDER BY updated_at DESC LIMIT %s"
            return lambda: self._op_list(where, (max(0, int(limit)),))
        if name == "delete":
            (session_id,) = args
            sid = _db(session_id)
            return self._write(lambda: self._op_delete(sid), bool)
        if name == "cleanup":
            (older_than,) = args
            cutoff = self._cutoff(older_than)
            return lambda: self._op_cleanup(cutoff)
        if name == "record_usage":
            (record,) = args
            record = dataclasses.replace(record, session_id=_db(record.session_id))
            return self._write(lambda: self._op_record_usage(record), _none)
        if name == "usage_rows":
            model, day = kwargs["model"], kwargs["day"]
            sid = _db(kwargs["session_id"])
            return lambda: self._op_usage_rows(model, day, sid)
        raise InternalError(name)  # pragma: no cover

    def _write(
        self, body: Callable[[], _Op[_T]], encode: Callable[[_T], Any], op_id: str | None = None
    ) -> Callable[[], _Op[_T]]:
        # a caller's op_id retries an earlier call: even its first attempt may find it applied
        given = op_id is not None
        op = op_id or new_op_id()
        self._writes += 1
        prune = self._writes % _PRUNE_EVERY == 0
        attempts = itertools.count()

        def run() -> _Op[_T]:
            return self._once(op, body(), encode, prune, given or next(attempts) > 0)

        run.op_id = op  # type: ignore[attr-defined]
        return run


def _none(_: None) -> None:
    return None


def _execute(conn: Any, step: _Step) -> Any:
    fetch, sql, params = step
    cur = conn.execute(sql, params) if params is not None else conn.execute(sql)
    if fetch == "all":
        return cur.fetchall()
    if fetch == "one":
        return cur.fetchone()
    return None
