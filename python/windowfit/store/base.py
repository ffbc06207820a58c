"""The store protocol shared by SQLite, Redis and in-memory stores.

A store keeps, per session id: an append-only list of messages, the context manager's summary
state with a version number (optimistic concurrency), a little metadata (parent, task, status,
result of a sub-agent) and, store-wide, the usage records of a `UsageTracker`.

Every operation has a sync and an async twin (``append`` / ``aappend``). Subclasses implement the
sync methods; the async ones default to running them in a worker thread (``asyncio.to_thread``),
RedisStore overrides them with ``redis.asyncio``.

Records are JSON, never pickle. Each message is stored as an envelope
``{"_wf": 1, "t": <unix time>, "m": <message>}``; the schema number lets a later windowfit read
records written by this one. A bare JSON object (no envelope) is read as a message as-is.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import math
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from windowfit.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    MessageTypeError,
    WindowfitError,
)
from windowfit.messages import plain_message

if TYPE_CHECKING:
    # typing_extensions is not a run-time dependency: Self is only read by type checkers
    from typing_extensions import Self

__all__ = [
    "MAX_SESSION_ID_LENGTH",
    "SCHEMA_VERSION",
    "UNREADABLE",
    "BaseStore",
    "ConflictError",
    "SessionInfo",
    "StoreCorruptError",
    "StoreError",
    "StoreOutcomeUnknownError",
    "UsageRecord",
    "UsageRow",
    "decode_message",
    "decode_messages",
    "decode_state",
    "encode_message",
    "encode_state",
    "is_unreadable",
    "new_child_id",
    "unreadable_message",
    "validate_op_id",
    "validate_session_id",
]

logger = logging.getLogger(__name__)

#: Version of the record format written by this windowfit.
SCHEMA_VERSION = 1
#: Session ids are arbitrary strings up to this many characters.
MAX_SESSION_ID_LENGTH = 1024

T = TypeVar("T")
_S = TypeVar("_S", bound="BaseStore")
_P = ParamSpec("_P")


def _in_thread(
    method: Callable[Concatenate[_S, _P], T],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, T]]:
    """The default async twin of a sync store method: the store's ``_run`` makes the call of
    the method (a subclass's override included) off the event loop. Made from the method
    itself, so a twin's signature is never written twice."""
    name = method.__name__

    async def twin(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> T:
        return await self._run(getattr(self, name), *args, **kwargs)

    twin.__name__ = twin.__qualname__ = "a" + name
    twin.__doc__ = f"Async ``{name}``."
    return twin


# --------------------------------------------------------------------------- errors


class StoreError(WindowfitError, RuntimeError):
    """Base class of the errors raised by windowfit stores (a ``RuntimeError``: the call was
    valid, the storage failed)."""


class ConflictError(StoreError):
    """A write based on a stale read: another writer changed the session first.

    Raised by ``save_state`` when the stored state version is not the expected one, and by
    ``finish`` on a sub-agent that was already finished. It is a ``RuntimeError`` (the operation
    was valid, the timing was not): reload and retry. ``current_version`` holds the version found.
    """

    def __init__(self, message: str, *, session_id: str, current_version: int | None = None):
        super().__init__(message)
        self.session_id = session_id
        self.current_version = current_version


class StoreOutcomeUnknownError(StoreError):
    """A write whose outcome is unknown: the connection was lost after it was sent, and every
    resend failed too, so the store may or may not have applied it.

    ``op_id`` is the write's operation id: retry with ``append(..., op_id=error.op_id)``
    (``Session.append`` / ``extend`` take it too) and a store that applied the first attempt
    returns its result without applying it again (ids are remembered ten minutes).
    """

    def __init__(self, message: str, *, op_id: str, session_id: str | None = None):
        super().__init__(f"{message}; retry with op_id={op_id!r} to apply it at most once")
        self.op_id = op_id
        self.session_id = session_id


#: Longest operation id a caller may pass (``secrets.token_hex(12)`` ids are 24 characters).
MAX_OP_ID_LENGTH = 64
_OP_ID_RE = re.compile(r"[A-Za-z0-9_.:-]+")


def validate_op_id(op_id: Any) -> str | None:
    """``op_id`` if it is None or a plain id (letters, digits, ``_.:-``, at most 64)."""
    if op_id is None:
        return None
    if not isinstance(op_id, str):
        raise ArgumentTypeError(f"op_id must be a str or None, not {type(op_id).__name__}")
    if len(op_id) > MAX_OP_ID_LENGTH or not _OP_ID_RE.fullmatch(op_id):
        raise InvalidArgumentError(
            f"op_id must be 1-{MAX_OP_ID_LENGTH} letters, digits or '_.:-', got {op_id!r}"
        )
    return op_id


class RecentOps:
    """The results of the latest appends that carried an operation id, for the in-process
    stores: a retried append with one of them returns the first result and applies nothing."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._done: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str, op_id: str | None) -> int | None:
        if op_id is None:
            return None
        with self._lock:
            return self._done.get((session_id, op_id))

    def put(self, session_id: str, op_id: str | None, result: int) -> None:
        if op_id is None:
            return
        with self._lock:
            self._done[(session_id, op_id)] = result
            while len(self._done) > self._size:
                self._done.popitem(last=False)


class StoreCorruptError(StoreError):
    """Data in the store that windowfit cannot read: corrupt, foreign, or from a newer version.

    ``session_id`` names the session (None when the whole store is unreadable), ``detail`` says
    what was wrong. The store itself stays usable for other sessions.
    """

    def __init__(self, detail: str, *, session_id: str | None = None, where: str | None = None):
        self.session_id = session_id
        self.detail = detail
        self.where = where
        if session_id is not None:
            msg = f"session {session_id!r}: {detail}"
        else:
            msg = detail
        if where:
            msg = f"{msg} ({where})"
        super().__init__(msg)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SessionInfo:
    """What a store knows about one session besides its messages."""

    id: str
    length: int
    created_at: float
    updated_at: float
    parent_id: str | None = None
    task: str | None = None
    tool_call_id: str | None = None
    status: str = "open"  # "open" or "finished" (a sub-agent that returned its result)
    result: str | None = None
    state_version: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    epoch: str = ""  # random token set at creation; changes if the id is deleted and reused

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "parent_id": self.parent_id,
            "task": self.task,
            "tool_call_id": self.tool_call_id,
            "status": self.status,
            "result": self.result,
            "length": self.length,
            "state_version": self.state_version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "meta": dict(self.meta),
        }


@dataclass(frozen=True)
class UsageRecord:
    """One LLM call's usage, normalized: ``prompt_tokens`` counts every input token.

    ``cached_tokens`` (cache reads) and ``cache_write_tokens`` (Anthropic cache creation) are
    parts of ``prompt_tokens``. ``cost`` is USD, None when the model's prices are unknown.
    """

    ts: float
    day: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    session_id: str | None = None


@dataclass
class UsageRow:
    """Usage summed over the calls of one (day, model)."""

    day: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0  # sum of the known costs
    calls: int = 0
    unpriced_calls: int = 0  # calls whose cost is unknown (no price in the registry)

    def add(self, other: UsageRow | UsageRecord) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        if isinstance(other, UsageRow):
            self.cost += other.cost
            self.calls += other.calls
            self.unpriced_calls += other.unpriced_calls
        else:
            self.calls += 1
            if other.cost is None:
                self.unpriced_calls += 1
            else:
                self.cost += other.cost


# --------------------------------------------------------------------------- codec


def _dumps(obj: Any) -> str:
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except RecursionError:
        # json recurses per nesting level; a payload nested thousands deep is not storable
        raise MessageTypeError("not JSON-serializable: nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise MessageTypeError(f"not JSON-serializable: {exc}") from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates cannot be UTF-8 encoded; ASCII escapes keep them exact.
        text = json.dumps(obj, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return text


def to_plain_message(message: Any) -> dict[str, Any]:
    """A message as a plain dict: mappings as-is, SDK objects read by ``plain_message``."""
    plain = plain_message(message)
    if isinstance(plain, Mapping):
        return plain if isinstance(plain, dict) else dict(plain)
    raise MessageTypeError(
        f"a message must be a mapping (OpenAI chat format dict), not {type(message).__name__}"
    )


def encode_message(message: Any, *, now: float | None = None) -> str:
    """The stored form (a JSON envelope string) of one message."""
    plain = to_plain_message(message)
    for key in plain:
        if not isinstance(key, str):
            raise MessageTypeError(f"message keys must be str, got {key!r}")
    env = {"_wf": SCHEMA_VERSION, "t": round(time.time() if now is None else now, 6), "m": plain}
    try:
        return _dumps(env)
    except TypeError as exc:
        raise MessageTypeError(f"message is {exc}") from None


def _as_text(raw: Any, session_id: str | None, where: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray, memoryview)):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise StoreCorruptError(
                "record is not UTF-8 text", session_id=session_id, where=where
            ) from None
    raise StoreCorruptError(
        f"record has type {type(raw).__name__}, expected JSON text",
        session_id=session_id,
        where=where,
    )


def _decode_v1(env: dict[str, Any], session_id: str | None, where: str) -> dict[str, Any]:
    msg = env.get("m")
    if not isinstance(msg, dict):
        raise StoreCorruptError(
            "envelope has no message object", session_id=session_id, where=where
        )
    return msg


class _NewerRecordError(StoreCorruptError):
    """A record in a format this windowfit does not know yet (upgrade, nothing is damaged)."""


# Readers for every schema version ever written; add one when the format changes.
_DECODERS: dict[int, Callable[[dict[str, Any], str | None, str], dict[str, Any]]] = {1: _decode_v1}


def decode_envelope(raw: Any, session_id: str | None, where: str) -> dict[str, Any]:
    """The parsed envelope of one stored message, with ``m`` a dict and ``t`` a float or None."""
    text = _as_text(raw, session_id, where)
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoreCorruptError(
            f"record is not valid JSON: {exc}", session_id=session_id, where=where
        ) from None
    if not isinstance(obj, dict):
        raise StoreCorruptError(
            f"record is a JSON {type(obj).__name__}, expected an object",
            session_id=session_id,
            where=where,
        )
    if "_wf" not in obj:
        return {"m": obj, "t": None}  # a bare message (written without envelope)
    version = obj["_wf"]
    decoder = _DECODERS.get(version) if isinstance(version, int) else None
    if decoder is None:
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise _NewerRecordError(
                f"record has schema version {version}, written by a newer windowfit "
                f"(this one reads up to {SCHEMA_VERSION}); upgrade windowfit",
                session_id=session_id,
                where=where,
            )
        raise StoreCorruptError(
            f"record has unknown schema version {version!r}", session_id=session_id, where=where
        )
    ts = obj.get("t")
    return {"m": decoder(obj, session_id, where), "t": ts if isinstance(ts, (int, float)) else None}


def decode_message(raw: Any, session_id: str | None, where: str = "") -> dict[str, Any]:
    """The message stored in ``raw``; StoreCorruptError naming the session if unreadable."""
    message: dict[str, Any] = decode_envelope(raw, session_id, where)["m"]
    return message


def decode_messages(
    rows: Sequence[Any], session_id: str | None, start: int = 0
) -> list[dict[str, Any]]:
    """Decode many stored messages; row ``i`` is message ``start + i`` (named in errors).

    Parses all rows as one JSON array (about twice as fast as row by row); if anything is off,
    decodes row by row so the error names the bad message.
    """
    if not rows:
        return []
    try:
        if all(isinstance(r, str) for r in rows):
            envs = json.loads("[" + ",".join(rows) + "]")
        elif all(isinstance(r, bytes) for r in rows):
            envs = json.loads(b"[" + b",".join(rows) + b"]")
        else:
            envs = None
    except (ValueError, RecursionError):
        envs = None
    if isinstance(envs, list) and len(envs) == len(rows):
        out = []
        for env in envs:
            if not (
                isinstance(env, dict) and env.get("_wf") == 1 and isinstance(env.get("m"), dict)
            ):
                break
            out.append(env["m"])
        else:
            return out
    return [_decode_or_mark(r, session_id, start + i) for i, r in enumerate(rows)]


#: The key of the stand-in for a stored record no decoder can read (its value says why). The
#: stand-in keeps the record's place, so every other message keeps its index; sessions skip it
#: (never sent) and list it in ``Session.unreadable``.
UNREADABLE = "windowfit_unreadable"


def unreadable_message(reason: str) -> dict[str, Any]:
    """The stand-in for an undecodable record: a message no request can carry."""
    return {"role": UNREADABLE, "content": None, UNREADABLE: reason}


def is_unreadable(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == UNREADABLE and UNREADABLE in message


def _decode_or_mark(raw: Any, session_id: str | None, index: int) -> dict[str, Any]:
    """The message in ``raw``, or, when the record cannot be decoded, its stand-in: one bad
    record must not make the whole history unreadable (logged, and reported by the session)."""
    try:
        return decode_message(raw, session_id, f"message {index}")
    except _NewerRecordError:
        raise  # not damage: this windowfit is too old for the session's newer records
    except StoreCorruptError as exc:
        logger.warning("skipping an unreadable stored record: %s", exc)
        return unreadable_message(str(exc))


def encode_state(state: Mapping[str, Any] | None) -> str | None:
    """The stored form of a context-manager state (a JSON object), None for no state."""
    if state is None:
        return None
    if not isinstance(state, Mapping):
        raise MessageTypeError(
            f"state must be a JSON-serializable dict or None, not {type(state).__name__}"
        )
    try:
        return _dumps({"_wf": SCHEMA_VERSION, "s": dict(state)})
    except TypeError as exc:
        raise MessageTypeError(f"state is {exc}") from None


def decode_state(raw: Any, session_id: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    text = _as_text(raw, session_id, "state")
    if text == "":
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StoreCorruptError(
            f"state is not valid JSON: {exc}", session_id=session_id, where="state"
        ) from None
    if isinstance(obj, dict) and "_wf" in obj:
        version = obj["_wf"]
        if version == 1 and (obj.get("s") is None or isinstance(obj.get("s"), dict)):
            return obj.get("s")
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise StoreCorruptError(
                f"state has schema version {version}, written by a newer windowfit; upgrade",
                session_id=session_id,
                where="state",
            )
        raise StoreCorruptError("state envelope is malformed", session_id=session_id, where="state")
    if isinstance(obj, dict):
        return obj
    raise StoreCorruptError(
        f"state is a JSON {type(obj).__name__}, expected an object",
        session_id=session_id,
        where="state",
    )


def decode_meta(raw: Any, session_id: str) -> dict[str, Any]:
    if raw is None or raw == "" or raw == b"":
        return {}
    text = _as_text(raw, session_id, "meta")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise StoreCorruptError(
            f"metadata is not valid JSON: {exc}", session_id=session_id, where="meta"
        ) from None
    if not isinstance(obj, dict):
        raise StoreCorruptError(
            "metadata is not a JSON object", session_id=session_id, where="meta"
        )
    return obj


def encode_meta(meta: Mapping[str, Any] | None) -> str | None:
    if not meta:
        return None
    try:
        return _dumps(dict(meta))
    except TypeError as exc:
        raise MessageTypeError(f"session meta is {exc}") from None


def validate_session_id(session_id: Any) -> str:
    """``session_id`` if it is a usable id: a non-empty str of UTF-8 encodable characters."""
    if not isinstance(session_id, str):
        raise ArgumentTypeError(f"session id must be str, not {type(session_id).__name__}")
    if not session_id:
        raise InvalidArgumentError("session id must not be empty")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise InvalidArgumentError(f"session id is longer than {MAX_SESSION_ID_LENGTH} characters")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            "session id contains characters that are not valid Unicode (lone surrogates)"
        ) from None
    return session_id


def new_child_id() -> str:
    """A fresh sub-agent id, ``subagent-`` and 8 hex digits (short, readable in logs)."""
    return f"subagent-{secrets.token_hex(4)}"


def new_epoch() -> str:
    return secrets.token_hex(8)


def ttl_seconds(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgumentError(f"a TTL must be a positive number of seconds, got {value!r}")
    return seconds


def info_int(value: Any, session_id: str, name: str) -> int:
    return _info_number(int, "an integer", value, session_id, name)


def info_float(value: Any, session_id: str, name: str) -> float:
    return _info_number(float, "a number", value, session_id, name)


def _info_number(
    convert: Callable[[Any], T], kind: str, value: Any, session_id: str, name: str
) -> T:
    """Field ``name`` of a stored session as a number; one that is not was stored corrupt."""
    try:
        return convert(value)
    except (TypeError, ValueError):
        raise StoreCorruptError(f"{name} is not {kind}: {value!r}", session_id=session_id) from None


# --------------------------------------------------------------------------- the protocol


class BaseStore(abc.ABC):
    """One protocol for every store. Subclasses implement the sync methods below.

    Messages are appended, never changed or deleted (only ``delete`` and TTL ``cleanup`` remove
    whole sessions). A session exists once something was written to it; reading a missing session
    gives no messages and no state.
    """

    #: Seconds after its last write a session may be removed by ``cleanup`` (None: kept forever).
    ttl: float | None = None

    # ---- sessions

    @abc.abstractmethod
    def append(self, session_id: str, messages: Sequence[Any], *, op_id: str | None = None) -> int:
        """Append ``messages`` atomically (all or none, contiguous); the index of the first.

        ``op_id``: the id of an earlier append to retry (``StoreOutcomeUnknownError.op_id``):
        a store that already applied it returns that append's first index and stores nothing
        again. Networked stores (Redis, PostgreSQL) remember ids ten minutes; the in-process
        stores, whose outcome is never unknown, remember the latest ids they applied."""

    @abc.abstractmethod
    def read(self, session_id: str, start: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
        """``(epoch, messages[start:])`` read in one snapshot; epoch None if no such session."""

    @abc.abstractmethod
    def info(self, session_id: str) -> SessionInfo | None:
        """The session's metadata, None if it does not exist."""

    @abc.abstractmethod
    def load_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        """``(state, version)``; ``(None, 0)`` for a session that never saved one."""

    @abc.abstractmethod
    def save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        """Store ``state`` if the stored version is ``expected_version``; the new version.

        Raises ConflictError (with ``current_version``) if another writer saved first.
        """

    @abc.abstractmethod
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
        """Create session ``child_id`` under ``parent_id`` with its first ``messages``.

        False (nothing written) if ``child_id`` already exists.
        """

    @abc.abstractmethod
    def finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        """Mark a child finished with ``result`` and append ``message`` to its parent, atomically.

        Returns the index of the message in the parent. ConflictError if already finished.
        """

    @abc.abstractmethod
    def children(self, session_id: str) -> list[SessionInfo]:
        """The sub-agent sessions of ``session_id``, oldest first."""

    @abc.abstractmethod
    def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        """Sessions, most recently updated first."""

    @abc.abstractmethod
    def delete(self, session_id: str) -> bool:
        """Remove a session (messages, state, metadata). True if it existed."""

    @abc.abstractmethod
    def cleanup(self, older_than: float | timedelta | None = None) -> int:
        """Remove sessions not written for ``older_than`` (default: the store's ttl); the count."""

    # ---- usage

    @abc.abstractmethod
    def record_usage(self, record: UsageRecord) -> None:
        """Persist one call's usage (shared by every worker using the store)."""

    @abc.abstractmethod
    def usage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        """Usage summed per (day, model), filtered; sorted by day then model."""

    # ---- lifecycle

    def close(self) -> None:  # noqa: B027 - stores without connections need no close
        """Release connections. The store must not be used afterwards."""

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- async twins: run the sync method off the event loop unless overridden

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    aappend = _in_thread(append)
    aread = _in_thread(read)
    ainfo = _in_thread(info)
    aload_state = _in_thread(load_state)
    asave_state = _in_thread(save_state)
    acreate_child = _in_thread(create_child)
    afinish_child = _in_thread(finish_child)
    achildren = _in_thread(children)
    alist_sessions = _in_thread(list_sessions)
    adelete = _in_thread(delete)
    acleanup = _in_thread(cleanup)
    arecord_usage = _in_thread(record_usage)
    ausage_rows = _in_thread(usage_rows)

    # ---- helpers for subclasses

    def _cutoff(self, older_than: float | timedelta | None) -> float:
        seconds = ttl_seconds(older_than) if older_than is not None else self.ttl
        if seconds is None:
            raise InvalidArgumentError("cleanup needs older_than, or a store created with ttl=")
        return time.time() - seconds


def info_from_row(row: Sequence[Any]) -> SessionInfo:
    """A SessionInfo from an SQL row of (id, epoch, parent_id, task, tool_call_id, meta,
    created_at, updated_at, state_version, status, result, length)."""
    sid = row[0]
    return SessionInfo(
        id=sid,
        epoch=str(row[1]),
        parent_id=row[2],
        task=row[3],
        tool_call_id=row[4],
        meta=decode_meta(row[5], sid),
        created_at=info_float(row[6], sid, "created_at"),
        updated_at=info_float(row[7], sid, "updated_at"),
        state_version=info_int(row[8], sid, "state_version"),
        status=str(row[9]),
        result=row[10],
        length=int(row[11]),
    )


def sort_rows(rows: list[UsageRow]) -> list[UsageRow]:
    return sorted(rows, key=lambda r: (r.day, r.model))
