"""A store on Redis, for several workers on several machines sharing sessions.

Layout (``P`` is the prefix, default ``windowfit``), one set of keys per session id::

    P:m:<id>   list   message envelopes (JSON), in append order
    P:h:<id>   hash   epoch, created_at, updated_at, state, state_version, parent_id, task,
                      tool_call_id, meta, status, result, schema
    P:c:<id>   zset   sub-agent ids, scored by creation time
    P:sessions zset   every session id, scored by last write (listing, cleanup)
    P:u:d:<day>, P:u:s:<id>, P:u:days   usage counters per day/model and per session

Every write is one Lua script, so it is atomic and totally ordered with the others: concurrent
appends are all kept, each call's messages contiguous, each writer's calls in its own order.
Times come from the Redis server clock (workers' clocks may disagree). State saves compare and
increment ``state_version`` inside the script (optimistic concurrency). Writes carry a random
operation id remembered for ten minutes, so a command that redis-py retries after a lost reply
is not applied twice (no duplicated messages).

The keys of one operation are named in the script (the parent's too), but the ``P:sessions``
index is shared by all sessions: use a single Redis server (or a primary with replicas /
Sentinel), not Redis Cluster.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
import weakref
from collections.abc import Generator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from windowfit.store._redis_scripts import _CORRUPT, _METRICS_INT, _OP_TTL, _SCRIPTS
from windowfit.store.base import (
    BaseStore,
    ConflictError,
    SessionInfo,
    StoreCorruptError,
    StoreError,
    UsageRecord,
    UsageRow,
    arun_steps,
    decode_messages,
    decode_meta,
    decode_state,
    encode_message,
    encode_meta,
    encode_state,
    info_float,
    info_int,
    new_epoch,
    run_steps,
    sort_rows,
    ttl_seconds,
    validate_session_id,
)

__all__ = ["RedisStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# A request an operation yields to its driver: a script call or a (transactional) pipeline.
_Request = tuple[Any, ...]
_Op = Generator[_Request, Any, _T]


def _text(value: Any, session_id: str | None, what: str) -> str:
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        raise StoreCorruptError(f"{what} is not UTF-8 text", session_id=session_id) from None


def _op_id() -> str:
    return secrets.token_hex(12)


class RedisStore(BaseStore):
    """Sessions and usage in Redis at ``url`` (``redis://host:port/db``, ``rediss://``...).

    ``prefix`` namespaces the keys (several apps or tests on one server). ``ttl`` sets an
    expiry on a session's keys, renewed by every write (Redis removes idle sessions itself;
    ``cleanup()`` also works). ``client`` / ``async_client``: ready ``redis.Redis`` /
    ``redis.asyncio.Redis`` objects to use instead of connecting to ``url``; extra keyword
    arguments go to ``from_url``. Requires the ``redis`` package (``windowfit[redis]``).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "windowfit",
        ttl: float | timedelta | None = None,
        client: Any = None,
        async_client: Any = None,
        **redis_kwargs: Any,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "RedisStore needs the 'redis' package: pip install 'windowfit[redis]'"
            ) from exc
        if not prefix or not isinstance(prefix, str):
            raise ValueError("prefix must be a non-empty str")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl_seconds(ttl)
        self._expire = 0 if self.ttl is None else max(1, math.ceil(self.ttl))
        self._redis_kwargs = redis_kwargs
        self._own_client = client is None
        self._client = client if client is not None else redis.Redis.from_url(url, **redis_kwargs)
        self._scripts = {n: self._client.register_script(s) for n, s in _SCRIPTS.items()}
        self._given_async = async_client
        # redis.asyncio clients are bound to the event loop they first ran on: one per loop
        self._async: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, dict[str, Any]]
        ]
        self._async = weakref.WeakKeyDictionary()
        self._errors = (redis.exceptions.ResponseError, redis.exceptions.RedisError)
        self._response_error = redis.exceptions.ResponseError

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"

    # ------------------------------------------------------------------ keys

    def _k(self, kind: str, session_id: str) -> str:
        return f"{self.prefix}:{kind}:{session_id}"

    @property
    def _index(self) -> str:
        return f"{self.prefix}:sessions"

    def _opkey(self) -> str:
        return f"{self.prefix}:op:{_op_id()}"

    # ------------------------------------------------------------------ drivers

    def _async_client(self) -> tuple[Any, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        entry = self._async.get(loop)
        if entry is None:
            if self._given_async is not None:
                client = self._given_async
            else:
                import redis.asyncio

                client = redis.asyncio.Redis.from_url(self.url, **self._redis_kwargs)
            scripts = {n: client.register_script(s) for n, s in _SCRIPTS.items()}
            entry = self._async[loop] = (client, scripts)
        return entry

    def _map_error(self, exc: Exception, session_id: str | None) -> Exception:
        if isinstance(exc, self._response_error):
            text = str(exc)
            if _CORRUPT in text:
                detail = text.split(_CORRUPT, 1)[-1].strip()
                # our scripts name the bad key: blame the session it belongs to
                for kind in ("m", "h", "c"):
                    head = f"key {self.prefix}:{kind}:"
                    if detail.startswith(head) and " holds a " in detail:
                        session_id = detail[len(head) : detail.rindex(" holds a ")]
                        break
                return StoreCorruptError(
                    f"foreign data in Redis: {detail}", session_id=session_id, where=self.url
                )
            if "WRONGTYPE" in text:
                return StoreCorruptError(
                    "foreign data in Redis: a key of this session holds the wrong type of value",
                    session_id=session_id,
                    where=self.url,
                )
        if isinstance(exc, UnicodeDecodeError):
            return StoreCorruptError("data is not UTF-8 text", session_id=session_id)
        return StoreError(f"Redis error at {self.url}: {exc}")

    def _drive(self, op: _Op[_T], session_id: str | None) -> _T:
        def execute(request: _Request) -> Any:
            try:
                return self._execute(self._client, self._scripts, request)
            except (*self._errors, UnicodeDecodeError) as exc:
                raise self._map_error(exc, session_id) from exc

        return run_steps(op, execute)

    async def _adrive(self, op: _Op[_T], session_id: str | None) -> _T:
        client, scripts = self._async_client()

        async def execute(request: _Request) -> Any:
            try:
                result = self._execute(client, scripts, request)
                if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                    result = await result
            except (*self._errors, UnicodeDecodeError) as exc:
                raise self._map_error(exc, session_id) from exc
            return result

        return await arun_steps(op, execute)

    @staticmethod
    def _execute(client: Any, scripts: dict[str, Any], request: _Request) -> Any:
        kind = request[0]
        if kind == "script":
            _, name, keys, args = request
            return scripts[name](keys=keys, args=args, client=client)
        if kind == "pipe":
            _, commands = request
            pipe = client.pipeline(transaction=True)
            for command in commands:
                pipe.execute_command(*command)
            return pipe.execute()
        raise AssertionError(kind)  # pragma: no cover

    # ------------------------------------------------------------------ operations (generators)

    def _op_append(self, session_id: str, messages: Sequence[Any]) -> _Op[int]:
        validate_session_id(session_id)
        now = time.time()
        records = [encode_message(m, now=now) for m in messages]
        if not records:
            (length,) = yield ("pipe", [("LLEN", self._k("m", session_id))])
            return int(length)
        keys = [
            self._k("m", session_id),
            self._k("h", session_id),
            self._index,
            self._opkey(),
            self._k("c", session_id),
        ]
        args = [session_id, new_epoch(), self._expire, _OP_TTL, *records]
        start = yield ("script", "append", keys, args)
        return int(start)

    def _op_read(self, session_id: str, start: int) -> _Op[tuple[str | None, list[dict[str, Any]]]]:
        epoch, raw = yield (
            "pipe",
            [
                ("HGET", self._k("h", session_id), "epoch"),
                ("LRANGE", self._k("m", session_id), max(0, start), -1),
            ],
        )
        messages = decode_messages(raw, session_id, max(0, start))
        return (None if epoch is None else _text(epoch, session_id, "epoch")), messages

    def _info_from(self, session_id: str, fields: Mapping[Any, Any], length: int) -> SessionInfo:
        h = {_text(k, session_id, "field"): v for k, v in fields.items()}

        def s(name: str) -> str | None:
            value = h.get(name)
            return None if value is None else _text(value, session_id, name)

        return SessionInfo(
            id=session_id,
            length=int(length),
            created_at=info_float(s("created_at") or 0, session_id, "created_at"),
            updated_at=info_float(s("updated_at") or 0, session_id, "updated_at"),
            parent_id=s("parent_id"),
            task=s("task"),
            tool_call_id=s("tool_call_id"),
            status=s("status") or "open",
            result=s("result"),
            state_version=info_int(s("state_version") or 0, session_id, "state_version"),
            meta=decode_meta(h.get("meta"), session_id),
            epoch=s("epoch") or "",
        )

    def _op_info(self, session_id: str) -> _Op[SessionInfo | None]:
        fields, length = yield (
            "pipe",
            [("HGETALL", self._k("h", session_id)), ("LLEN", self._k("m", session_id))],
        )
        if not fields:
            return None
        return self._info_from(session_id, fields, length)

    def _op_state(self, session_id: str) -> _Op[tuple[dict[str, Any] | None, int]]:
        (values,) = yield ("pipe", [("HMGET", self._k("h", session_id), "state", "state_version")])
        raw, version = values
        if version is None:
            return decode_state(raw, session_id), 0
        return decode_state(raw, session_id), info_int(
            _text(version, session_id, "state_version"), session_id, "state_version"
        )

    def _op_save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> _Op[int]:
        validate_session_id(session_id)
        encoded = encode_state(state)
        keys = [
            self._k("h", session_id),
            self._index,
            self._k("m", session_id),
            self._k("c", session_id),
        ]
        args = [
            session_id,
            new_epoch(),
            self._expire,
            int(expected_version),
            "0" if encoded is None else "1",
            encoded or "",
            _op_id(),
        ]
        status, version = yield ("script", "save_state", keys, args)
        if int(status) == 1:
            raise ConflictError(
                f"session {session_id!r}: state version is {int(version)}, not {expected_version}: "
                "another writer saved first; reload and retry",
                session_id=session_id,
                current_version=int(version),
            )
        return int(version)

    def _op_create_child(
        self,
        parent_id: str,
        child_id: str,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None,
        meta: Mapping[str, Any] | None,
    ) -> _Op[bool]:
        validate_session_id(parent_id)
        validate_session_id(child_id)
        now = time.time()
        records = [encode_message(m, now=now) for m in messages]
        keys = [
            self._k("h", child_id),
            self._k("m", child_id),
            self._k("h", parent_id),
            self._k("c", parent_id),
            self._index,
            self._opkey(),
            self._k("m", parent_id),
        ]
        args = [
            child_id,
            parent_id,
            new_epoch(),
            new_epoch(),
            self._expire,
            _OP_TTL,
            task or "",
            tool_call_id or "",
            encode_meta(meta) or "",
            *records,
        ]
        created = yield ("script", "create_child", keys, args)
        return bool(int(created))

    def _op_finish(self, child_id: str, result: str, message: Mapping[str, Any]) -> _Op[int]:
        record = encode_message(message)
        (parent,) = yield ("pipe", [("HGET", self._k("h", child_id), "parent_id")])
        if parent is None:
            raise ValueError(f"session {child_id!r} is not a sub-agent session")
        parent_id = _text(parent, child_id, "parent_id")
        keys = [
            self._k("h", child_id),
            self._k("h", parent_id),
            self._k("m", parent_id),
            self._index,
            self._opkey(),
            self._k("c", parent_id),
        ]
        args = [child_id, parent_id, new_epoch(), result, record, self._expire, _OP_TTL]
        status, index = yield ("script", "finish", keys, args)
        if int(status) == 1:
            raise ConflictError(f"sub-agent {child_id!r} is already finished", session_id=child_id)
        if int(status) == 2:
            raise ValueError(f"session {child_id!r} is not a sub-agent session")
        return int(index)

    def _op_infos(self, ids: list[str]) -> _Op[list[SessionInfo]]:
        commands: list[tuple[Any, ...]] = []
        for sid in ids:
            commands += [("HGETALL", self._k("h", sid)), ("LLEN", self._k("m", sid))]
        results = (yield ("pipe", commands)) if commands else []
        infos = []
        for i, sid in enumerate(ids):
            fields, length = results[2 * i], results[2 * i + 1]
            if fields:  # expired or removed meanwhile: skip
                infos.append(self._info_from(sid, fields, length))
        return infos

    def _op_children(self, session_id: str) -> _Op[list[SessionInfo]]:
        (raw,) = yield ("pipe", [("ZRANGE", self._k("c", session_id), 0, -1)])
        ids = [_text(r, session_id, "child id") for r in raw]
        infos = yield from self._op_infos(ids)
        return sorted(infos, key=lambda i: i.created_at)

    def _op_list(self, limit: int | None) -> _Op[list[SessionInfo]]:
        stop = -1 if limit is None else max(0, int(limit) - 1)
        if limit is not None and limit <= 0:
            return []
        (raw,) = yield ("pipe", [("ZREVRANGE", self._index, 0, stop)])
        ids = [_text(r, None, "session id") for r in raw]
        return (yield from self._op_infos(ids))

    def _op_delete(self, session_id: str, cutoff: str = "") -> _Op[bool]:
        (parent,) = yield ("pipe", [("HGET", self._k("h", session_id), "parent_id")])
        keys = [
            self._k("h", session_id),
            self._k("m", session_id),
            self._k("c", session_id),
            self._index,
        ]
        existed = yield ("script", "delete", keys, [session_id, cutoff])
        if int(existed) and parent is not None:
            parent_id = _text(parent, session_id, "parent_id")
            yield ("pipe", [("ZREM", self._k("c", parent_id), session_id)])
        return bool(int(existed))

    def _op_cleanup(self, cutoff: float) -> _Op[int]:
        removed = 0
        while True:
            (raw,) = yield (
                "pipe",
                [("ZRANGEBYSCORE", self._index, "-inf", f"({cutoff:.6f}", "LIMIT", 0, 200)],
            )
            if not raw:
                return removed
            for r in raw:
                sid = _text(r, None, "session id")
                if (yield from self._op_delete(sid, f"{cutoff:.6f}")):
                    removed += 1
            if len(raw) < 200:
                return removed

    def _op_record_usage(self, record: UsageRecord) -> _Op[None]:
        day_key = f"{self.prefix}:u:d:{record.day}"
        keys = [self._opkey(), f"{self.prefix}:u:days", day_key]
        amounts: dict[str, Any] = {
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "cached_tokens": record.cached_tokens,
            "cache_write_tokens": record.cache_write_tokens,
            "calls": 1,
            "unpriced_calls": 1 if record.cost is None else 0,
        }
        targets = [(3, f"{record.model}")]
        if record.session_id is not None:
            keys.append(f"{self.prefix}:u:s:{record.session_id}")
            targets.append((4, f"{record.day}:{record.model}"))
        args: list[Any] = [_OP_TTL, self._expire, record.day]
        for index, suffix in targets:
            for metric, amount in amounts.items():
                if amount:
                    args += [index, f"{metric}:{suffix}", "i", int(amount)]
            if record.cost is not None:
                args += [index, f"cost:{suffix}", "f", repr(float(record.cost))]
        yield ("script", "usage", keys, args)

    def _op_usage_rows(
        self, model: str | None, day: str | None, session_id: str | None
    ) -> _Op[list[UsageRow]]:
        rows: dict[tuple[str, str], UsageRow] = {}

        def add(row_day: str, row_model: str, metric: str, value: Any) -> None:
            if (model is not None and row_model != model) or (day is not None and row_day != day):
                return
            row = rows.setdefault((row_day, row_model), UsageRow(row_day, row_model))
            text = _text(value, session_id, "usage counter")
            try:
                if metric == "cost":
                    row.cost += float(text)
                elif metric in _METRICS_INT:
                    setattr(row, metric, getattr(row, metric) + int(text))
            except ValueError:
                raise StoreCorruptError(
                    f"usage counter {metric} is {text!r}", session_id=session_id
                ) from None

        if session_id is not None:
            (fields,) = yield ("pipe", [("HGETALL", f"{self.prefix}:u:s:{session_id}")])
            for k, v in fields.items():
                metric, _, rest = _text(k, session_id, "usage field").partition(":")
                row_day, _, row_model = rest.partition(":")
                add(row_day, row_model, metric, v)
        else:
            if day is not None:
                days = [day]
            else:
                (raw,) = yield ("pipe", [("SMEMBERS", f"{self.prefix}:u:days")])
                days = sorted(_text(d, None, "day") for d in raw)
            if days:
                results = yield ("pipe", [("HGETALL", f"{self.prefix}:u:d:{d}") for d in days])
                for d, fields in zip(days, results, strict=True):
                    for k, v in fields.items():
                        metric, _, row_model = _text(k, None, "usage field").partition(":")
                        add(d, row_model, metric, v)
        return sort_rows(list(rows.values()))

    # ------------------------------------------------------------------ protocol (sync)

    def append(self, session_id: str, messages: Sequence[Any]) -> int:
        return self._drive(self._op_append(session_id, messages), session_id)

    def read(self, session_id: str, start: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
        return self._drive(self._op_read(session_id, start), session_id)

    def info(self, session_id: str) -> SessionInfo | None:
        return self._drive(self._op_info(session_id), session_id)

    def load_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        return self._drive(self._op_state(session_id), session_id)

    def save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        return self._drive(self._op_save_state(session_id, state, expected_version), session_id)

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
        op = self._op_create_child(parent_id, child_id, task, messages, tool_call_id, meta)
        return self._drive(op, child_id)

    def finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        return self._drive(self._op_finish(child_id, result, message), child_id)

    def children(self, session_id: str) -> list[SessionInfo]:
        return self._drive(self._op_children(session_id), session_id)

    def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        return self._drive(self._op_list(limit), None)

    def delete(self, session_id: str) -> bool:
        return self._drive(self._op_delete(session_id), session_id)

    def cleanup(self, older_than: float | timedelta | None = None) -> int:
        return self._drive(self._op_cleanup(self._server_cutoff(older_than)), None)

    def _server_cutoff(self, older_than: float | timedelta | None) -> float:
        # session times are the server's clock: measure the age against it too
        seconds_ago = time.time() - self._cutoff(older_than)
        sec, usec = self._client.time()
        return float(sec) + float(usec) / 1e6 - seconds_ago

    def record_usage(self, record: UsageRecord) -> None:
        self._drive(self._op_record_usage(record), record.session_id)

    def usage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        return self._drive(self._op_usage_rows(model, day, session_id), session_id)

    def ping(self) -> bool:
        """True if the server answers (raises StoreError otherwise)."""
        try:
            return bool(self._client.ping())
        except self._errors as exc:
            raise self._map_error(exc, None) from exc

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    # ------------------------------------------------------------------ protocol (async)

    async def aappend(self, session_id: str, messages: Sequence[Any]) -> int:
        return await self._adrive(self._op_append(session_id, messages), session_id)

    async def aread(
        self, session_id: str, start: int = 0
    ) -> tuple[str | None, list[dict[str, Any]]]:
        return await self._adrive(self._op_read(session_id, start), session_id)

    async def ainfo(self, session_id: str) -> SessionInfo | None:
        return await self._adrive(self._op_info(session_id), session_id)

    async def aload_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        return await self._adrive(self._op_state(session_id), session_id)

    async def asave_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        op = self._op_save_state(session_id, state, expected_version)
        return await self._adrive(op, session_id)

    async def acreate_child(
        self,
        parent_id: str,
        child_id: str,
        *,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        op = self._op_create_child(parent_id, child_id, task, messages, tool_call_id, meta)
        return await self._adrive(op, child_id)

    async def afinish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        return await self._adrive(self._op_finish(child_id, result, message), child_id)

    async def achildren(self, session_id: str) -> list[SessionInfo]:
        return await self._adrive(self._op_children(session_id), session_id)

    async def alist_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        return await self._adrive(self._op_list(limit), None)

    async def adelete(self, session_id: str) -> bool:
        return await self._adrive(self._op_delete(session_id), session_id)

    async def acleanup(self, older_than: float | timedelta | None = None) -> int:
        client, _ = self._async_client()
        seconds_ago = time.time() - self._cutoff(older_than)
        sec, usec = await client.time()
        return await self._adrive(self._op_cleanup(sec + usec / 1e6 - seconds_ago), None)

    async def arecord_usage(self, record: UsageRecord) -> None:
        await self._adrive(self._op_record_usage(record), record.session_id)

    async def ausage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        return await self._adrive(self._op_usage_rows(model, day, session_id), session_id)

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover
            loop = None
        entry = self._async.pop(loop, None) if loop is not None else None
        if entry is not None and self._given_async is None:
            await entry[0].aclose()
        self.close()
