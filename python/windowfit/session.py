"""`Session`: one conversation's full, append-only history and its context-manager state.

A Session is a light handle on a store (SQLite, Redis or memory): every read goes to the store,
so several workers holding handles on the same id see one history. Reads are incremental: the
handle caches what it has read and fetches only newer messages (history is append-only).

Sub-agents: ``child = session.child(task)`` creates session ``subagent-xxxxxxxx`` with
its own history (the task as first user message), state and budget, stored in the same store.
The sub-agent's tool calls and outputs stay in the child. ``child.finish(result)`` hands back
exactly one message to the parent, atomically with marking the child finished:

* a ``{"role": "tool", "tool_call_id": ..., "content": result}`` message when the child was
  created for a tool call (``child(task, tool_call_id=call.id)``), so the parent's tool call
  gets its answer;
* otherwise ``{"role": "assistant", "name": <child id>, "content": result}`` (the sub-agent
  did work on the parent's behalf), or another ``role=`` if given.

``finish`` without a result takes the child's last assistant message text.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from windowfit.counting import Counter
from windowfit.errors import InvalidMessageError, MessageTypeError
from windowfit.messages import content_text, copy_json
from windowfit.store.base import (
    ConflictError,
    SessionInfo,
    encode_message,
    new_child_id,
    to_plain_message,
    validate_session_id,
)

if TYPE_CHECKING:
    from windowfit.store.base import BaseStore

__all__ = ["Session"]

logger = logging.getLogger(__name__)

# Checks messages by the counting rules (no vocabulary needed: the rules are the core's).
_RULES = Counter.heuristic(cache_entries=0)


def _checked(messages: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``messages`` as a list, after the store's encoding and the counting rules accepted
    every chat message among them (a Responses API item, with a ``type`` and no ``role``, is
    the adapters' shape: stored as it is)."""
    batch = list(messages)
    for m in batch:
        encode_message(m)  # the store's own errors first: not a mapping, not JSON
    chat = [p for p in map(to_plain_message, batch) if "role" in p or "type" not in p]
    _RULES.count_each_message(chat)  # raises naming the index and field
    return batch


def _invalid(messages: list[dict[str, Any]], *, offset: int) -> list[int]:
    """Indices (plus ``offset``) of the messages the counting rules reject: no request can
    carry them (a role-less Responses API item included: convert those with the adapters)."""
    try:
        _RULES.count_each_message(messages)
        return []
    except (InvalidMessageError, MessageTypeError):
        pass
    bad = []
    for i, m in enumerate(messages):
        try:
            _RULES.count_message(m)
        except (InvalidMessageError, MessageTypeError):
            bad.append(i + offset)
    return bad


def _report(prepared: Any, skipped: list[int]) -> Any:
    """``prepared`` with ``stats["invalid_skipped"]``: the stored messages left out as invalid."""
    stats = getattr(prepared, "stats", None)
    if skipped and isinstance(stats, dict):
        stats["invalid_skipped"] = skipped
    return prepared


# Attempts at a fresh sub-agent id before giving up (8 hex digits collide rarely, but do).
_CHILD_ID_ATTEMPTS = 16


class Session:
    """The history and state of session ``id`` in ``store``. Get one with ``store.session(id)``.

    ``messages`` returns the full history (plain dicts; treat them as read-only: they are shared
    with the handle's cache). ``append``/``extend`` write through atomically. ``state`` is the
    summary state of a ContextManager; ``save_state`` uses optimistic concurrency.
    """

    def __init__(self, store: BaseStore, session_id: str) -> None:
        self.store = store
        self.id = validate_session_id(session_id)
        self._lock = threading.Lock()
        self._epoch: str | None = None
        self._cache: list[dict[str, Any]] = []
        # the state version this handle last read or wrote: save_state's default expectation
        self._seen_version = 0
        self._parent_id: str | bool | None = False  # False: not looked up yet (it never changes)
        # invalid stored messages found so far, for the epoch and prefix already checked
        self._checked_epoch: str | None = None
        self._checked_upto = 0
        self._invalid: list[int] = []

    def __repr__(self) -> str:
        return f"Session({self.id!r}, store={self.store!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Session) and other.store is self.store and other.id == self.id

    def __hash__(self) -> int:
        return hash((id(self.store), self.id))

    # ------------------------------------------------------------------ history

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The full history, oldest first (a new list; the dicts are shared, don't mutate them)."""
        return self.load()

    def load(self, *, copy: bool = False) -> list[dict[str, Any]]:
        """The full history, fetching only messages this handle has not read yet.

        ``copy=True`` returns deep copies, for callers that modify the messages they get.
        """
        history = self._load()
        return copy_json(history) if copy else history

    async def aload(self, *, copy: bool = False) -> list[dict[str, Any]]:
        history = await self._aload()
        return copy_json(history) if copy else history

    def _load(self) -> list[dict[str, Any]]:
        while True:
            with self._lock:
                start, known = len(self._cache), self._epoch
            epoch, new = self.store.read(self.id, start)
            if start and epoch != known:
                # the session was deleted (and maybe its id reused): read it all again
                epoch, new = self.store.read(self.id, 0)
                start = 0
            merged = self._merge(epoch, start, new)
            if merged is not None:
                return merged

    async def _aload(self) -> list[dict[str, Any]]:
        while True:
            with self._lock:
                start, known = len(self._cache), self._epoch
            epoch, new = await self.store.aread(self.id, start)
            if start and epoch != known:
                epoch, new = await self.store.aread(self.id, 0)
                start = 0
            merged = self._merge(epoch, start, new)
            if merged is not None:
                return merged

    def _merge(
        self, epoch: str | None, start: int, new: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | None:
        with self._lock:
            if epoch == self._epoch and start <= len(self._cache):
                # another thread may have extended the cache meanwhile: add only what is past it
                self._cache.extend(new[len(self._cache) - start :])
                return list(self._cache)
            if start == 0:
                self._cache, self._epoch = list(new), epoch
                return list(self._cache)
        return None  # another thread reset the cache under us: read again

    def append(self, message: Mapping[str, Any]) -> int:
        """Append one message (one transaction); its index in the history.

        The message is checked first, by the rules counting applies (``InvalidMessageError``,
        ``MessageTypeError``): the history is append-only, so a message no request can carry
        must never get in.
        """
        return self.store.append(self.id, _checked([message]))

    def extend(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Append messages atomically and contiguously; the index of the first (checked as
        ``append`` checks: one bad message and none is stored)."""
        return self.store.append(self.id, _checked(messages))

    async def aappend(self, message: Mapping[str, Any]) -> int:
        return await self.store.aappend(self.id, _checked([message]))

    async def aextend(self, messages: Iterable[Mapping[str, Any]]) -> int:
        return await self.store.aappend(self.id, _checked(messages))

    def _sendable(self, history: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
        """``history`` without the messages no request can carry, and their indices.

        Such a message got in before appends were checked, or by a direct store write; it is
        skipped, never sent, so the session stays usable. Each message is checked once per
        handle (the history is append-only), and the rule is deterministic, so every worker
        skips the same messages and the state's indices always refer to the same list.
        """
        with self._lock:
            if self._checked_epoch != self._epoch or self._checked_upto > len(history):
                self._checked_epoch, self._checked_upto, self._invalid = self._epoch, 0, []
            start = self._checked_upto
        bad = _invalid(history[start:], offset=start)
        with self._lock:
            if self._checked_upto == start:
                self._invalid = self._invalid + bad
                self._checked_upto = len(history)
            invalid = [i for i in self._invalid if i < len(history)]
        if not invalid:
            return history, []
        logger.warning("session %r: skipping invalid stored messages %s", self.id, invalid)
        skip = set(invalid)
        return [m for i, m in enumerate(history) if i not in skip], invalid

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> dict[str, Any] | None:
        """The stored context-manager state (None if none was saved)."""
        return self.load_state()[0]

    @property
    def state_version(self) -> int:
        """The stored state version: 0 before the first save, +1 per save."""
        return self.load_state()[1]

    def load_state(self) -> tuple[dict[str, Any] | None, int]:
        """``(state, version)``; the version becomes this handle's expectation for save_state."""
        state, version = self.store.load_state(self.id)
        self._seen_version = version
        return state, version

    async def aload_state(self) -> tuple[dict[str, Any] | None, int]:
        state, version = await self.store.aload_state(self.id)
        self._seen_version = version
        return state, version

    def save_state(
        self, state: Mapping[str, Any] | None, expected_version: int | None = None
    ) -> int:
        """Save ``state`` if nobody saved since ``expected_version``; the new version.

        ``expected_version`` defaults to the version this handle last read or wrote (0 if it
        never did, so a blind write over an existing state is a conflict too). A stale writer
        gets ConflictError and nothing is overwritten.
        """
        expected = self._seen_version if expected_version is None else expected_version
        version = self.store.save_state(self.id, state, expected)
        self._seen_version = version
        return version

    async def asave_state(
        self, state: Mapping[str, Any] | None, expected_version: int | None = None
    ) -> int:
        expected = self._seen_version if expected_version is None else expected_version
        version = await self.store.asave_state(self.id, state, expected)
        self._seen_version = version
        return version

    # ------------------------------------------------------------------ context manager

    def prepare(self, cm: Any, *, tools: Any = None, retries: int = 2, **kwargs: Any) -> Any:
        """``cm.prepare`` on the full history and stored state; saves the new state.

        If another worker saved a state meanwhile (ConflictError), prepares again from the
        fresh state, up to ``retries`` times. Returns the Prepared (``.messages``, ``.stats``,
        ``.state``). A Prepared without state (None) leaves the stored state alone.
        """
        attempt = 0
        while True:
            # state before messages: history is append-only, so the messages read second
            # always include everything the state was computed from
            state, version = self.load_state()
            messages, skipped = self._sendable(self.load())
            prepared = _report(cm.prepare(messages, state=state, tools=tools, **kwargs), skipped)
            if self._persist(prepared, state, version, attempt, retries):
                return prepared
            attempt += 1

    async def aprepare(self, cm: Any, *, tools: Any = None, retries: int = 2, **kwargs: Any) -> Any:
        """Async ``prepare``: awaits ``cm.aprepare``."""
        attempt = 0
        while True:
            state, version = await self.aload_state()
            messages, skipped = self._sendable(await self.aload())
            prepared = _report(
                await cm.aprepare(messages, state=state, tools=tools, **kwargs), skipped
            )
            new_state = getattr(prepared, "state", None)
            if new_state is None or new_state == state:
                return prepared
            try:
                await self.asave_state(new_state, version)
                return prepared
            except ConflictError as exc:
                self._on_conflict(exc, attempt, retries)
            attempt += 1

    def _persist(
        self, prepared: Any, state: dict[str, Any] | None, version: int, attempt: int, retries: int
    ) -> bool:
        new_state = getattr(prepared, "state", None)
        # None means "no summary state": never erase a stored summary by accident
        if new_state is None or new_state == state:
            return True
        try:
            self.save_state(new_state, version)
            return True
        except ConflictError as exc:
            self._on_conflict(exc, attempt, retries)
            return False

    def _on_conflict(self, exc: ConflictError, attempt: int, retries: int) -> None:
        if attempt >= retries:
            raise exc
        logger.info(
            "session %r: state saved by another worker during prepare; preparing again (%d/%d)",
            self.id,
            attempt + 1,
            retries,
        )

    # ------------------------------------------------------------------ metadata

    def info(self) -> SessionInfo | None:
        """Metadata (length, times, parent, status...), None if nothing was written yet."""
        return self.store.info(self.id)

    async def ainfo(self) -> SessionInfo | None:
        return await self.store.ainfo(self.id)

    def exists(self) -> bool:
        return self.store.info(self.id) is not None

    def delete(self) -> bool:
        """Remove this session from the store (its children stay, as their own sessions)."""
        with self._lock:
            self._cache, self._epoch = [], None
        return self.store.delete(self.id)

    @property
    def parent_id(self) -> str | None:
        """The id of the session this sub-agent belongs to (None for a top-level session)."""
        if self._parent_id is False:
            info = self.store.info(self.id)
            if info is None:
                return None  # not created yet: look again next time
            self._parent_id = info.parent_id
        return self._parent_id  # type: ignore[return-value]

    def parent(self) -> Session | None:
        pid = self.parent_id
        return None if pid is None else Session(self.store, pid)

    # ------------------------------------------------------------------ sub-agents

    def _child_messages(self, task: str, system: str | None) -> list[dict[str, Any]]:
        if not isinstance(task, str) or not task:
            raise ValueError("a sub-agent needs a non-empty task (str)")
        messages: list[dict[str, Any]] = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": task})
        return messages

    def child(
        self,
        task: str,
        *,
        system: str | None = None,
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        child_id: str | None = None,
    ) -> Session:
        """A new sub-agent session under this one, its history starting with ``task``.

        ``system`` prepends a system message; ``tool_call_id`` (the parent's tool call that
        started the sub-agent) makes ``finish`` answer that call; ``meta`` is stored with it.
        """
        messages = self._child_messages(task, system)
        for _ in range(_CHILD_ID_ATTEMPTS):
            cid = validate_session_id(child_id) if child_id is not None else new_child_id()
            created = self.store.create_child(
                self.id, cid, task=task, messages=messages, tool_call_id=tool_call_id, meta=meta
            )
            if created:
                return self._child_handle(cid)
            if child_id is not None:
                raise ValueError(f"session {child_id!r} already exists")
        raise RuntimeError("could not find a free sub-agent id")  # pragma: no cover

    async def achild(
        self,
        task: str,
        *,
        system: str | None = None,
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        child_id: str | None = None,
    ) -> Session:
        messages = self._child_messages(task, system)
        for _ in range(_CHILD_ID_ATTEMPTS):
            cid = validate_session_id(child_id) if child_id is not None else new_child_id()
            created = await self.store.acreate_child(
                self.id, cid, task=task, messages=messages, tool_call_id=tool_call_id, meta=meta
            )
            if created:
                return self._child_handle(cid)
            if child_id is not None:
                raise ValueError(f"session {child_id!r} already exists")
        raise RuntimeError("could not find a free sub-agent id")  # pragma: no cover

    def _child_handle(self, cid: str) -> Session:
        child = Session(self.store, cid)
        child._parent_id = self.id
        return child

    def children(self) -> list[Session]:
        """The sub-agent sessions created under this one, oldest first."""
        return [self._child_handle(i.id) for i in self.store.children(self.id)]

    async def achildren(self) -> list[Session]:
        return [self._child_handle(i.id) for i in await self.store.achildren(self.id)]

    def finish(self, result: Any = None, *, role: str | None = None) -> dict[str, Any]:
        """End this sub-agent: its parent receives ``result`` as ONE message (returned).

        ``result``: text, or any JSON-serializable value (sent as JSON text); None takes the
        content of this session's last assistant message. Raises ConflictError if already
        finished, ValueError if this session is not a sub-agent.
        """
        info = self._check_child(self.store.info(self.id))
        text = self._result_text(result, self.load() if result is None else None)
        message = self._result_message(info, text, role)
        self.store.finish_child(self.id, text, message)
        return message

    async def afinish(self, result: Any = None, *, role: str | None = None) -> dict[str, Any]:
        info = self._check_child(await self.store.ainfo(self.id))
        history = await self.aload() if result is None else None
        text = self._result_text(result, history)
        message = self._result_message(info, text, role)
        await self.store.afinish_child(self.id, text, message)
        return message

    def _result_text(self, result: Any, history: list[dict[str, Any]] | None) -> str:
        if result is None:
            for msg in reversed(history or []):
                if msg.get("role") == "assistant" and not msg.get("tool_calls"):
                    return content_text(msg.get("content"))
            raise ValueError(
                f"sub-agent {self.id!r} has no final assistant message: pass finish(result)"
            )
        if isinstance(result, str):
            return result
        try:
            return json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"sub-agent result must be str or JSON-serializable: {exc}") from None

    def _check_child(self, info: SessionInfo | None) -> SessionInfo:
        if info is None or info.parent_id is None:
            raise ValueError(f"session {self.id!r} is not a sub-agent session")
        if info.status == "finished":
            raise ConflictError(f"sub-agent {self.id!r} is already finished", session_id=self.id)
        return info

    def _result_message(self, info: SessionInfo, text: str, role: str | None) -> dict[str, Any]:
        if role is None:
            role = "tool" if info.tool_call_id else "assistant"
        if role == "tool":
            if not info.tool_call_id:
                raise ValueError(
                    f"sub-agent {self.id!r} was not created for a tool call: "
                    "pass child(task, tool_call_id=...) or another role"
                )
            return {"role": "tool", "tool_call_id": info.tool_call_id, "content": text}
        if role == "assistant":
            return {"role": "assistant", "name": self.id, "content": text}
        return {"role": role, "content": text}
