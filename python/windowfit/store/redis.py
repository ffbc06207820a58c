"""A store on Redis, for several workers on several machines sharing sessions.

Layout (``P`` is the prefix, default ``windowfit``; ``B`` the session's bucket, 0-63, from a
CRC32 of its id), one set of keys per session id::

    P:{bB}:m:<id>    list   message envelopes (JSON), in append order
    P:{bB}:h:<id>    hash   epoch, created_at, updated_at, state, state_version, parent_id, task,
                            tool_call_id, meta, status, result, schema, done:<child>,
                            length (messages written: a shorter list lost some)
    P:{bB}:c:<id>    zset   sub-agent ids, scored by creation time
    P:{bB}:sessions  zset   the bucket's session ids, scored by last write (listing, cleanup)
    P:{u}:d:<day>, P:{u}:s:<id>, P:{u}:days   usage counters per day/model and per session

The ``{...}`` hash tag puts a session's keys and its bucket's index in one hash slot, so every
script touches one slot and the store runs unchanged on Redis Cluster. Keys are unambiguous: the
prefix may not contain braces, so ``app`` + ``m:x`` and ``app:m`` + ``x`` never share a key.

Every write is one Lua script, so it is atomic and totally ordered with the others: concurrent
appends are all kept, each call's messages contiguous, each writer's calls in its own order.
Times come from the Redis server clock (workers' clocks may disagree). State saves compare and
increment ``state_version`` inside the script (optimistic concurrency). Writes carry a random
operation id remembered for ten minutes, so a command that redis-py retries after a lost reply
is not applied twice (no duplicated messages).

Reads are plain pipelines, never MULTI/EXEC (a server at ``maxmemory`` refuses every queued
command, reads included): a read of several keys checks the session's epoch before and after,
so it never mixes two incarnations of a session. A server that evicts keys (an ``allkeys-*`` or
``volatile-*`` policy) can drop part of a session; a read finding messages missing (the list
shorter than the number of messages the writes recorded) or a listed session without its
record raises ``StoreCorruptError`` rather than returning a silently shortened or empty history,
and an append to a listed session whose record is gone is refused the same way (it would start a
new, shorter history under the same id). A session evicted whole, its index entry with it, leaves
nothing to tell it existed: so the first call asks the server's ``INFO memory`` and refuses to run
(or warns, ``on_evicting_server="warn"``) where its memory limit and policy can evict this
store's keys. A write whose
every resend lost its connection raises ``StoreOutcomeUnknownError`` with its operation id;
``append(..., op_id=...)`` retries it at most once.

Sub-agent operations span two sessions (two slots): they run as ordered single-slot steps, each
idempotent, so a client that dies between two leaves a state the next call completes.

Keys written by earlier windowfit versions (``P:m:<id>``, ``P:sessions``...) are moved to this
layout, session by session, the first time a store with their prefix runs (``migrate_legacy``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import weakref
import zlib
from collections.abc import Generator, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar

from windowfit.errors import InternalError, InvalidArgumentError
from windowfit.store._common import already_finished, encode_child, not_a_child, state_conflict
from windowfit.store._redis_scripts import _CORRUPT, _EVICTED, _METRICS_INT, _OP_TTL, _SCRIPTS
from windowfit.store._steps import Operation, StepStore, arun_steps, new_op_id, run_steps
from windowfit.store.base import (
    SessionInfo,
    StoreCorruptError,
    StoreError,
    StoreOutcomeUnknownError,
    UsageRecord,
    UsageRow,
    decode_messages,
    decode_meta,
    decode_state,
    encode_message,
    encode_state,
    info_float,
    info_int,
    new_epoch,
    sort_rows,
    ttl_seconds,
    validate_op_id,
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


# Attempts at a request whose connection was lost, and the first pause between them (doubling).
_ATTEMPTS = 6
_BACKOFF = 0.05

#: Session buckets: each bucket's sessions and index share a hash slot (spread over the cluster).
_BUCKETS = 64
_BAD_KEY = re.compile(r"^key (?P<key>.*) holds a ")
#: What a history the server evicted keys of is told with.
_EVICTION_HINT = (
    "the server evicted keys of this session (set maxmemory-policy noeviction, or "
    "give Redis more memory): the history cannot be trusted"
)


def eviction_risk(info: Mapping[str, Any], expiring: bool) -> str | None:
    """Why a server with ``INFO memory`` ``info`` may evict this store's keys (``expiring``:
    they carry a TTL), or None. Without a memory limit nothing is evicted; ``allkeys-*`` evicts
    any key, ``volatile-*`` only keys with a TTL."""
    policy = str(info.get("maxmemory_policy", "noeviction"))
    limit = int(info.get("maxmemory", 0) or 0)
    if limit <= 0 or not (
        policy.startswith("allkeys") or (policy.startswith("volatile") and expiring)
    ):
        return None
    return f"maxmemory {limit} bytes with maxmemory-policy {policy}"


def _node_infos(reply: Any) -> list[Mapping[str, Any]]:
    """The ``INFO`` reply of a server, or each node's of a cluster's (a mapping by node);
    none for no reply (``INFO`` refused)."""
    if not isinstance(reply, Mapping):
        return []
    nodes = list(reply.values())
    return nodes if nodes and all(isinstance(v, Mapping) for v in nodes) else [reply]


def _op_id_of(request: _Request) -> str | None:
    """The operation id of an append request (its op key, ``KEYS[4]``); None for any other
    request (only appends can be retried by the caller with their id)."""
    if request[0] != "script" or request[1] != "append":
        return None
    return str(request[2][3]).rpartition(":op:")[2]


class RedisStore(StepStore):
    """Sessions and usage in Redis at ``url`` (``redis://host:port/db``, ``rediss://``...).

    ``prefix`` namespaces the keys (several apps or tests on one server). ``ttl`` sets an
    expiry on a session's keys, renewed by every write (Redis removes idle sessions itself;
    ``cleanup()`` also works). ``client`` / ``async_client``: ready ``redis.Redis`` /
    ``redis.asyncio.Redis`` objects to use instead of connecting to ``url``; extra keyword
    arguments go to ``from_url``. Requires the ``redis`` package (``windowfit[redis]``).

    ``on_evicting_server``: what the first call does where the server's memory limit and
    ``maxmemory-policy`` can evict this store's keys (``allkeys-*``; ``volatile-*`` with a
    ``ttl``), which could drop a whole session without a trace: ``"raise"`` (every call raises
    ``StoreError`` saying why) or ``"warn"`` (one logged warning; evictions that leave a trace are
    still reported as ``StoreCorruptError``).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "windowfit",
        ttl: float | timedelta | None = None,
        client: Any = None,
        async_client: Any = None,
        cluster: bool | None = None,
        on_evicting_server: Literal["raise", "warn"] = "raise",
        **redis_kwargs: Any,
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "RedisStore needs the 'redis' package: pip install 'windowfit[redis]'"
            ) from exc
        if not prefix or not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            # braces would move the hash tag and make two prefixes' keys collide
            raise InvalidArgumentError(
                f"prefix must be a non-empty str without braces, got {prefix!r}"
            )
        if on_evicting_server not in ("raise", "warn"):
            raise InvalidArgumentError(
                f"on_evicting_server must be 'raise' or 'warn', got {on_evicting_server!r}"
            )
        self.url = url
        self.prefix = prefix
        self.on_evicting_server = on_evicting_server
        self.ttl = ttl_seconds(ttl)
        self._expire = 0 if self.ttl is None else max(1, math.ceil(self.ttl))
        self._redis_kwargs = redis_kwargs
        self._own_client = client is None
        from redis.cluster import RedisCluster

        if client is None:
            try:
                if cluster is None:
                    cluster = self._probe_cluster(redis, url, redis_kwargs)
                client = (RedisCluster if cluster else redis.Redis).from_url(url, **redis_kwargs)
            except (ValueError, redis.exceptions.RedisError) as exc:
                raise StoreError(f"invalid Redis URL {url!r}: {exc}") from None
        self.cluster = isinstance(client, RedisCluster)
        self._client = client
        self._scripts = {n: self._client.register_script(s) for n, s in _SCRIPTS.items()}
        self._given_async = async_client
        # redis.asyncio clients are bound to the event loop they first ran on: one per loop
        self._async: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[Any, dict[str, Any]]
        ]
        self._async = weakref.WeakKeyDictionary()
        self._errors = (redis.exceptions.ResponseError, redis.exceptions.RedisError)
        self._response_error = redis.exceptions.ResponseError
        # a connection lost mid-call (server restart, failover): every request is safe to send
        # again, since each write carries its operation id and the scripts skip a known one
        self._lost = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self._legacy_checked = self.cluster  # the previous layout never ran on a cluster
        # why the server may evict this store's keys ("" it may not, None not known yet)
        self._eviction: str | None = None

    def _probe_cluster(self, redis: Any, url: str, kwargs: dict[str, Any]) -> bool:
        """Whether ``url`` is a Redis Cluster node (asked once, at construction). A server that
        does not answer yet is taken as a single one: the first call reports the error."""
        probe = redis.Redis.from_url(url, **kwargs)
        try:
            return bool(probe.info("cluster").get("cluster_enabled"))
        except redis.exceptions.RedisError:
            return False
        finally:
            probe.close()

    def __repr__(self) -> str:
        return f"RedisStore({self.url!r}, prefix={self.prefix!r})"

    # ------------------------------------------------------------------ keys

    def _tag(self, session_id: str) -> str:
        bucket = zlib.crc32(session_id.encode("utf-8", "surrogatepass")) % _BUCKETS
        return f"{self.prefix}:{{b{bucket}}}"

    def _k(self, kind: str, session_id: str) -> str:
        """The key of ``session_id``'s ``kind`` (m, h, c) record."""
        return f"{self._tag(session_id)}:{kind}:{session_id}"

    def _index(self, session_id: str) -> str:
        return f"{self._tag(session_id)}:sessions"

    def _indexes(self) -> list[str]:
        return [f"{self.prefix}:{{b{b}}}:sessions" for b in range(_BUCKETS)]

    def _opkey(self, session_id: str, op_id: str | None = None) -> str:
        return f"{self._tag(session_id)}:op:{op_id or new_op_id()}"

    def _keys(self, session_id: str, *kinds: str) -> list[str]:
        """A script's KEYS for ``session_id``, in the order its header lists them: ``m``, ``h``,
        ``c`` (its records), ``index`` (its bucket's index), ``op`` (a fresh operation id)."""
        special = {"index": self._index, "op": self._opkey}
        return [special[k](session_id) if k in special else self._k(k, session_id) for k in kinds]

    def _u(self, rest: str) -> str:
        return f"{self.prefix}:{{u}}:{rest}"

    # ------------------------------------------------------------------ drivers

    def _async_client(self) -> tuple[Any, dict[str, Any]]:
        loop = asyncio.get_running_loop()
        entry = self._async.get(loop)
        if entry is None:
            if self._given_async is not None:
                client = self._given_async
            else:
                import redis.asyncio
                import redis.asyncio.cluster

                kind = redis.asyncio.cluster.RedisCluster if self.cluster else redis.asyncio.Redis
                client = kind.from_url(self.url, **self._redis_kwargs)
            scripts = {n: client.register_script(s) for n, s in _SCRIPTS.items()}
            entry = self._async[loop] = (client, scripts)
        return entry

    def _map_error(self, exc: Exception, session_id: str | None) -> Exception:
        if isinstance(exc, self._response_error):
            text = str(exc)
            if _EVICTED in text:
                detail = text.split(_EVICTED, 1)[-1].strip()
                return StoreCorruptError(
                    f"{detail}: {_EVICTION_HINT}", session_id=session_id, where=self.url
                )
            if _CORRUPT in text:
                detail = text.split(_CORRUPT, 1)[-1].strip()
                # our scripts name the bad key: blame the session it belongs to
                found = _BAD_KEY.match(detail)
                head = f"{self.prefix}:{{b"
                if found and found["key"].startswith(head):
                    parts = found["key"][len(head) :].split(":", 2)
                    if len(parts) == 3 and parts[1] in ("m", "h", "c"):
                        session_id = parts[2]
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

    def _lost_error(self, exc: Exception, request: _Request, session_id: str | None) -> Exception:
        """The error for a request whose every attempt lost its connection: for a write that
        carries an operation id its outcome is unknown (any attempt may have been applied)."""
        op_id = _op_id_of(request)
        if op_id is None:
            return self._map_error(exc, session_id)
        return StoreOutcomeUnknownError(
            f"Redis at {self.url} did not answer a write ({exc}): it may or may not be applied",
            op_id=op_id,
            session_id=session_id,
        )

    def _drive(self, make: Operation, session_id: str | None) -> Any:
        def execute(request: _Request) -> Any:
            for attempt in range(_ATTEMPTS):
                try:
                    return self._execute(self._client, self._scripts, request)
                except self._lost as exc:
                    if attempt + 1 == _ATTEMPTS:
                        raise self._lost_error(exc, request, session_id) from exc
                    logger.warning("%r: %s; retrying", self, exc)
                    time.sleep(_BACKOFF * 2**attempt)
                except (*self._errors, UnicodeDecodeError) as exc:
                    return self._answered_with_error(request, exc, session_id)
            raise InternalError("unreachable")  # pragma: no cover

        return run_steps(self._op_ready(make), execute)

    async def _adrive(self, make: Operation, session_id: str | None) -> Any:
        client, scripts = self._async_client()

        async def execute(request: _Request) -> Any:
            for attempt in range(_ATTEMPTS):
                try:
                    result = self._execute(client, scripts, request)
                    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                        result = await result
                    return result
                except self._lost as exc:
                    if attempt + 1 == _ATTEMPTS:
                        raise self._lost_error(exc, request, session_id) from exc
                    logger.warning("%r: %s; retrying", self, exc)
                    await asyncio.sleep(_BACKOFF * 2**attempt)
                except (*self._errors, UnicodeDecodeError) as exc:
                    return self._answered_with_error(request, exc, session_id)
            raise InternalError("unreachable")  # pragma: no cover

        return await arun_steps(self._op_ready(make), execute)

    def _answered_with_error(
        self, request: _Request, exc: Exception, session_id: str | None
    ) -> None:
        """A request the server refused: ``INFO`` (some managed servers rename it) tells
        nothing, None; any other raises its mapped error."""
        if request[0] == "info" and isinstance(exc, self._response_error):
            logger.debug("%r: INFO refused (%s): eviction not checked", self, exc)
            return None
        raise self._map_error(exc, session_id) from exc

    def _execute(self, client: Any, scripts: dict[str, Any], request: _Request) -> Any:
        kind = request[0]
        if kind == "info":
            # a cluster client asks every primary (each has its own memory limit)
            where = {"target_nodes": client.PRIMARIES} if self.cluster else {}
            return client.info(request[1], **where)
        if kind == "script":
            _, name, keys, args = request
            return scripts[name](keys=keys, args=args, client=client)
        if kind in ("pipe", "spread"):
            # "pipe": one session's keys; "spread": keys of many slots. Never MULTI/EXEC: at
            # maxmemory the server refuses every queued command, reads included (each command
            # is still atomic; reads that must agree check the session's epoch around them)
            _, commands = request
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return pipe.execute()
        raise InternalError(kind)  # pragma: no cover

    # ------------------------------------------------------------------ operations (generators)

    def _op_append(
        self, session_id: str, messages: Sequence[Any], op_id: str | None = None
    ) -> _Op[int]:
        validate_session_id(session_id)
        validate_op_id(op_id)
        now = time.time()
        records = [encode_message(m, now=now) for m in messages]
        if not records:
            (length,) = yield ("pipe", [("LLEN", self._k("m", session_id))])
            return int(length)
        keys = self._keys(session_id, "m", "h", "index", "c")
        keys.insert(3, self._opkey(session_id, op_id))
        args = [session_id, new_epoch(), self._expire, _OP_TTL, *records]
        start = yield ("script", "append", keys, args)
        return int(start)

    def _op_read(self, session_id: str, start: int) -> _Op[tuple[str | None, list[dict[str, Any]]]]:
        start = max(0, start)
        meta = self._k("h", session_id)
        while True:
            # the epoch before and after: equal, the messages are of that one incarnation
            before, raw, listed, (after, length), clock = yield (
                "pipe",
                [
                    ("HGET", meta, "epoch"),
                    ("LRANGE", self._k("m", session_id), start, -1),
                    ("ZSCORE", self._index(session_id), session_id),
                    ("HMGET", meta, "epoch", "length"),
                    ("TIME",),
                ],
            )
            if before == after:
                break
        self._check_not_evicted(session_id, before, start + len(raw), length, listed, clock)
        messages = decode_messages(raw, session_id, start)
        return (None if before is None else _text(before, session_id, "epoch")), messages

    def _check_not_evicted(
        self,
        session_id: str,
        epoch: Any,
        found: int,
        length: Any,
        listed: Any,
        clock: Any,
    ) -> None:
        """Raise StoreCorruptError when keys of the session are gone though nothing removed
        it: fewer messages than its writes recorded, or listed in its bucket's index (and not
        expired) without its record. Messages pushed by other tools (no record) still load."""
        hint = _EVICTION_HINT
        if epoch is not None:
            if length is not None and found < info_int(
                _text(length, session_id, "length"), session_id, "length"
            ):
                missing = f"{int(length) - found} of {int(length)} messages are missing"
                raise StoreCorruptError(f"{missing}: {hint}", session_id=session_id, where=self.url)
            return
        if listed is None:
            return  # never written by windowfit, or deleted: no such session
        now = float(clock[0]) + float(clock[1]) / 1e6
        if self._expire and float(listed) + self._expire <= now + 1:
            return  # its TTL ran out: expired as asked, the index entry awaits cleanup
        raise StoreCorruptError(
            f"listed in the session index but its record is gone: {hint}",
            session_id=session_id,
            where=self.url,
        )

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
        meta = self._k("h", session_id)
        while True:
            fields, length, after = yield (
                "pipe",
                [("HGETALL", meta), ("LLEN", self._k("m", session_id)), ("HGET", meta, "epoch")],
            )
            # the same epoch after: the length belongs to the record read
            if (fields.get(b"epoch", fields.get("epoch")) if fields else None) == after:
                break
        if not fields:
            return None
        return self._info_from(session_id, fields, length)

    def _op_load_state(self, session_id: str) -> _Op[tuple[dict[str, Any] | None, int]]:
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
        keys = self._keys(session_id, "h", "index", "m", "c")
        args = [
            session_id,
            new_epoch(),
            self._expire,
            int(expected_version),
            "0" if encoded is None else "1",
            encoded or "",
            new_op_id(),
        ]
        status, version = yield ("script", "save_state", keys, args)
        if int(status) == 1:
            raise state_conflict(session_id, int(version), expected_version)
        return int(version)

    def _op_create_child(
        self,
        parent_id: str,
        child_id: str,
        *,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> _Op[bool]:
        now = time.time()
        records, meta_json = encode_child(parent_id, child_id, messages, meta, now)
        keys = self._keys(child_id, "h", "m", "index", "op")
        args = [
            child_id,
            parent_id,
            new_epoch(),
            self._expire,
            _OP_TTL,
            task or "",
            tool_call_id or "",
            meta_json or "",
            *records,
        ]
        created = yield ("script", "create_child", keys, args)
        if not int(created):
            return False
        # then list it under its parent (a crash between leaves an unlisted child, never a
        # listed child that does not exist)
        yield from self._op_adopt(parent_id, child_id)
        return True

    def _op_adopt(self, parent_id: str, child_id: str) -> _Op[None]:
        keys = self._keys(parent_id, "h", "c", "index", "m")
        yield ("script", "adopt", keys, [parent_id, child_id, new_epoch(), self._expire])

    def _op_finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> _Op[int]:
        record = encode_message(message)
        (fields,) = yield ("pipe", [("HMGET", self._k("h", child_id), "parent_id", "status")])
        parent, status = fields
        if parent is None:
            raise not_a_child(child_id)
        if status is not None and _text(status, child_id, "status") == "finished":
            raise already_finished(child_id)
        parent_id = _text(parent, child_id, "parent_id")
        keys = self._keys(parent_id, "h", "m", "index", "op", "c")
        args = [parent_id, child_id, new_epoch(), record, f":{result}", self._expire, _OP_TTL]
        conflict, index, prior = yield ("script", "hand_back", keys, args)
        if int(conflict):
            # the parent has this child's answer: a finish raced this one, or was cut short
            # before marking the child; complete the mark from what the parent recorded
            done_index, _, done_result = _text(prior, parent_id, "done").partition(":")
            yield from self._op_mark_finished(child_id, done_result, done_index)
            raise already_finished(child_id)
        yield from self._op_mark_finished(child_id, result, str(int(index)))
        return int(index)

    def _op_mark_finished(self, child_id: str, result: str, index: str) -> _Op[None]:
        keys = self._keys(child_id, "h", "index")
        yield ("script", "mark_finished", keys, [child_id, result, index])

    def _op_infos(self, ids: list[str]) -> _Op[list[SessionInfo]]:
        commands: list[tuple[Any, ...]] = []
        for sid in ids:
            commands += [("HGETALL", self._k("h", sid)), ("LLEN", self._k("m", sid))]
        results = (yield ("spread", commands)) if commands else []
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

    def _op_list_sessions(self, limit: int | None = 100) -> _Op[list[SessionInfo]]:
        stop = -1 if limit is None else max(0, int(limit) - 1)
        if limit is not None and limit <= 0:
            return []
        # the most recent of each bucket, merged: the overall most recent `limit`
        raw = yield ("spread", [("ZREVRANGE", k, 0, stop, "WITHSCORES") for k in self._indexes()])
        scored = [(float(score), _text(r, None, "session id")) for part in raw for r, score in part]
        scored.sort(reverse=True)
        ids = [sid for _, sid in (scored if limit is None else scored[:limit])]
        return (yield from self._op_infos(ids))

    def _op_delete(self, session_id: str, cutoff: str = "") -> _Op[bool]:
        (parent,) = yield ("pipe", [("HGET", self._k("h", session_id), "parent_id")])
        keys = self._keys(session_id, "h", "m", "c", "index")
        existed = yield ("script", "delete", keys, [session_id, cutoff])
        if int(existed) and parent is not None:
            parent_id = _text(parent, session_id, "parent_id")
            yield ("pipe", [("ZREM", self._k("c", parent_id), session_id)])
        return bool(int(existed))

    def _op_cleanup(self, older_than: float | timedelta | None = None) -> _Op[int]:
        # session times are the server's clock: measure the age against it too
        seconds_ago = time.time() - self._cutoff(older_than)
        sec, usec = yield ("script", "clock", [self._indexes()[0]], [])
        cutoff = float(sec) + float(usec) / 1e6 - seconds_ago
        removed = 0
        for index in self._indexes():
            while True:
                (raw,) = yield (
                    "pipe",
                    [("ZRANGEBYSCORE", index, "-inf", f"({cutoff:.6f}", "LIMIT", 0, 200)],
                )
                for r in raw:
                    sid = _text(r, None, "session id")
                    if (yield from self._op_delete(sid, f"{cutoff:.6f}")):
                        removed += 1
                if len(raw) < 200:
                    break
        return removed

    def _op_record_usage(self, record: UsageRecord) -> _Op[None]:
        # every usage key shares the {u} slot: one script updates them together
        keys = [self._u(f"op:{new_op_id()}"), self._u("days"), self._u(f"d:{record.day}")]
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
            keys.append(self._u(f"s:{record.session_id}"))
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
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
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
            (fields,) = yield ("pipe", [("HGETALL", self._u(f"s:{session_id}"))])
            for k, v in fields.items():
                metric, _, rest = _text(k, session_id, "usage field").partition(":")
                row_day, _, row_model = rest.partition(":")
                add(row_day, row_model, metric, v)
        else:
            if day is not None:
                days = [day]
            else:
                (raw,) = yield ("pipe", [("SMEMBERS", self._u("days"))])
                days = sorted(_text(d, None, "day") for d in raw)
            if days:
                results = yield ("pipe", [("HGETALL", self._u(f"d:{d}")) for d in days])
                for d, fields in zip(days, results, strict=True):
                    for k, v in fields.items():
                        metric, _, row_model = _text(k, None, "usage field").partition(":")
                        add(d, row_model, metric, v)
        return sort_rows(list(rows.values()))

    def _op_ready(self, make: Operation) -> _Op[Any]:
        """``make``'s operation, after what a store checks before its calls run. Until the
        server has said whether it may evict this store's keys, every call asks (concurrent
        first calls too: none runs unasked), and where it may, calls are refused unless
        ``on_evicting_server="warn"``; the first call moves keys of the previous layout."""
        if self._eviction is None:
            self._learn_eviction((yield ("info", "memory")))
        if self._eviction and self.on_evicting_server == "raise":
            raise StoreError(
                f"{self._eviction}, or pass on_evicting_server='warn' to accept the risk"
            )
        if not self._legacy_checked:
            self._legacy_checked = True
            yield from self._op_migrate_legacy()
        return (yield from make())

    def _learn_eviction(self, reply: Any) -> None:
        """Keep why the server answering ``INFO memory`` with ``reply`` may evict this store's
        keys ("" where it may not, or did not say); the first risk found is logged, as a
        warning, where the store runs on."""
        risks = [r for i in _node_infos(reply) if (r := eviction_risk(i, self.ttl is not None))]
        why = (
            f"Redis at {self.url} may evict this store's keys ({risks[0]}): a session evicted "
            "whole, its index entry with it, would be lost without a trace. Set "
            "maxmemory-policy noeviction (or no maxmemory)"
            if risks
            else ""
        )
        if self._eviction is None and why and self.on_evicting_server == "warn":
            logger.warning("%s; going on as on_evicting_server='warn' asks", why)
        self._eviction = why

    def _op_migrate_legacy(self) -> _Op[int]:
        old_index, old_days = f"{self.prefix}:sessions", f"{self.prefix}:u:days"
        has_index, has_days = yield ("pipe", [("EXISTS", old_index), ("EXISTS", old_days)])
        moved = 0
        while int(has_index):
            # the old index lists exactly this prefix's sessions (children included)
            (raw,) = yield ("pipe", [("ZRANGE", old_index, 0, 199)])
            for r in raw:
                sid = _text(r, None, "session id")
                old = [f"{self.prefix}:{kind}:{sid}" for kind in ("h", "m", "c")]
                new = [self._k(kind, sid) for kind in ("h", "m", "c")]
                keys = [*old, old_index, *new, self._index(sid)]
                moved += int((yield ("script", "migrate", keys, [sid])))
            if not raw:
                break
        if int(has_days):
            (days,) = yield ("pipe", [("SMEMBERS", old_days)])
            for d in days:
                day = _text(d, None, "day")
                old_key, new_key = f"{self.prefix}:u:d:{day}", self._u(f"d:{day}")
                yield ("script", "merge_usage", [old_key, new_key], [])
                yield ("pipe", [("SADD", self._u("days"), day), ("SREM", old_days, day)])
            cursor: Any = 0
            while True:
                pattern = f"{self.prefix}:u:s:*"
                ((cursor, found),) = yield ("pipe", [("SCAN", cursor, "MATCH", pattern)])
                for k in found:
                    key = _text(k, None, "usage key")
                    sid = key[len(f"{self.prefix}:u:s:") :]
                    yield ("script", "merge_usage", [key, self._u(f"s:{sid}")], [])
                if int(cursor) == 0:
                    break
        if moved:
            logger.warning("%r: moved %d sessions from the previous key layout", self, moved)
        return moved

    def migrate_legacy(self) -> int:
        """Move sessions and usage written by windowfit's previous key layout (``P:m:<id>``...)
        to the current one; the number of sessions moved. A store does this by itself on its
        first call; running it again, or from several workers at once, is safe."""
        self._legacy_checked = True
        return int(self._drive(self._op_migrate_legacy, None))

    # ------------------------------------------------------------------ protocol

    def _operation(self, name: str, *args: Any, **kwargs: Any) -> Operation:
        method = getattr(self, f"_op_{name}")
        return lambda: method(*args, **kwargs)

    def ping(self) -> bool:
        """True if the server answers (raises StoreError otherwise)."""
        try:
            return bool(self._client.ping())
        except self._errors as exc:
            raise self._map_error(exc, None) from exc

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    async def aclose(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover
            loop = None
        entry = self._async.pop(loop, None) if loop is not None else None
        if entry is not None and self._given_async is None:
            await entry[0].aclose()
        self.close()
