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

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from windowfit.counting import Counter
from windowfit.errors import InvalidMessageError, MessageTypeError
from windowfit.messages import content_text, copy_json
from windowfit.store.base import (
    BaseStore,
    ConflictError,
    SessionInfo,
    encode_message,
    new_child_id,
    to_plain_message,
    validate_session_id,
)

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
        self._pending: dict[str, Any] = {}  # consumer -> its running background summary
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

    def append(self, message: Mapping[str, Any], *, summarize: Any = None) -> int:
        """Append one message (one transaction); its index in the history.

        The message is checked first, by the rules counting applies (``InvalidMessageError``,
        ``MessageTypeError``): the history is append-only, so a message no request can carry
        must never get in. ``summarize=cm`` (a ContextManager) then makes the next summary in
        the background (:meth:`summarize_after`), so the next request does not wait for it.
        """
        index = self.store.append(self.id, _checked([message]))
        if summarize is not None:
            self.summarize_after(summarize)
        return index

    def extend(self, messages: Iterable[Mapping[str, Any]], *, summarize: Any = None) -> int:
        """Append messages atomically and contiguously; the index of the first (checked as
        ``append`` checks: one bad message and none is stored)."""
        index = self.store.append(self.id, _checked(messages))
        if summarize is not None:
            self.summarize_after(summarize)
        return index

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

        Each consumer (``ContextManager(consumer=...)``: an agent, a router, a classifier) has
        its own state in the session, so managers with different budgets over one history never
        reset each other; a consumer without a summary yet starts from another consumer's
        summary when it fits its own summary budget instead of summarizing again.

        If another worker saved a state meanwhile (ConflictError), prepares again from the
        fresh state, up to ``retries`` times. Returns the Prepared (``.messages``, ``.stats``,
        ``.state``). A Prepared without state (None) leaves the stored state alone.
        """
        attempt = 0
        while True:
            # state before messages: history is append-only, so the messages read second
            # always include everything the state was computed from
            stored, version = self.load_state()
            messages, skipped = self._sendable(self.load())
            own = own_state(cm, stored)
            if self._summarizing(cm):
                kwargs["summarize"] = False  # never wait for the background summary
            prepared = _report(cm.prepare(messages, state=own, tools=tools, **kwargs), skipped)
            new = getattr(prepared, "state", None)
            # None means "no summary state": never erase a stored summary by accident
            if new is None or new == own:
                return prepared
            try:
                self.save_state(with_consumer_state(cm, stored, new), version)
                return prepared
            except ConflictError as exc:
                self._on_conflict(exc, attempt, retries)
            attempt += 1

    async def aprepare(self, cm: Any, *, tools: Any = None, retries: int = 2, **kwargs: Any) -> Any:
        """Async ``prepare``: awaits ``cm.aprepare``."""
        attempt = 0
        while True:
            stored, version = await self.aload_state()
            messages, skipped = self._sendable(await self.aload())
            own = own_state(cm, stored)
            if self._summarizing(cm):
                kwargs["summarize"] = False
            prepared = _report(
                await cm.aprepare(messages, state=own, tools=tools, **kwargs), skipped
            )
            new = getattr(prepared, "state", None)
            if new is None or new == own:
                return prepared
            try:
                await self.asave_state(with_consumer_state(cm, stored, new), version)
                return prepared
            except ConflictError as exc:
                self._on_conflict(exc, attempt, retries)
            attempt += 1

    # ------------------------------------------------------------------ summaries after the reply

    def summarize_after(self, cm: Any) -> concurrent.futures.Future[bool]:
        """Make ``cm``'s next summary in a background thread; a future of whether it was saved.

        The result is saved with compare-and-set on the state version read before
        summarizing: if anything saved a state meanwhile (a request, another worker) the
        background result is stale and dropped, never written over the newer state.
        While it runs, :meth:`prepare` with the same consumer does not summarize (it fits
        plainly, as today when a summary is not ready) and never waits for it.
        """
        future = _background().submit(self._summarize_after, cm)
        self._track(cm, future)
        return future

    def asummarize_after(self, cm: Any) -> asyncio.Task[bool]:
        """:meth:`summarize_after` as an asyncio task (call it from a running loop)."""
        task = asyncio.ensure_future(self._asummarize_after(cm))
        self._track(cm, task)
        return task

    def _track(self, cm: Any, job: Any) -> None:
        name = _consumer(cm)
        with self._lock:
            self._pending[name] = job

        def done(_: Any) -> None:
            with self._lock:
                if self._pending.get(name) is job:
                    del self._pending[name]

        job.add_done_callback(done)

    def _summarizing(self, cm: Any) -> bool:
        with self._lock:
            job = self._pending.get(_consumer(cm))
        return job is not None and not job.done()

    def _summarize_after(self, cm: Any) -> bool:
        stored, version = self.store.load_state(self.id)
        own = own_state(cm, stored)
        new = cm.summarize_after(self.load(), own)
        for _ in range(_SAVE_ATTEMPTS):
            record = _record_after(cm, stored, own, new)
            if record is None:
                return False
            try:
                # the store's own compare-and-set: this handle's expectation is left alone
                self.store.save_state(self.id, record, version)
                return True
            except ConflictError:
                stored, version = self.store.load_state(self.id)
        logger.info("session %r: a newer summary was saved; background summary dropped", self.id)
        return False

    async def _asummarize_after(self, cm: Any) -> bool:
        stored, version = await self.store.aload_state(self.id)
        own = own_state(cm, stored)
        new = await cm.asummarize_after(await self.aload(), own)
        for _ in range(_SAVE_ATTEMPTS):
            record = _record_after(cm, stored, own, new)
            if record is None:
                return False
            try:
                await self.store.asave_state(self.id, record, version)
                return True
            except ConflictError:
                stored, version = await self.store.aload_state(self.id)
        logger.info("session %r: a newer summary was saved; background summary dropped", self.id)
        return False

    def consumer_state(self, consumer: str) -> dict[str, Any] | None:
        """The stored state of one consumer (``"default"`` is the top-level state)."""
        return _slot(self.state, consumer)

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


# ---------------------------------------------------------------------- per-consumer state

_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _background() -> concurrent.futures.ThreadPoolExecutor:
    """The threads background summaries run in (created on first use, shared)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            workers = int(os.environ.get("WINDOWFIT_SUMMARY_WORKERS", "2") or 2)
            _EXECUTOR = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, workers), thread_name_prefix="windowfit-summary"
            )
        return _EXECUTOR


DEFAULT_CONSUMER = "default"
_CONSUMERS = "consumers"

# Fields a borrowed summary keeps: what it holds and where it ends. The rest (cut, scan,
# backoff, turn counters) belongs to the consumer that made it.
_BORROWED = (
    "version",
    "summary",
    "summary_tokens",
    "summarized_until",
    "summarized_messages",
    "evicted_tokens",
    "language",
    "created_at",
    "anchor",
    "next_anchor",
)


def _consumer(cm: Any) -> str:
    return str(getattr(cm, "consumer", None) or DEFAULT_CONSUMER)


def _slot(stored: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """One consumer's state inside the stored record: the default consumer's is the record
    itself (as before consumers existed), the others' under ``"consumers"``."""
    if not stored:
        return None
    if name == DEFAULT_CONSUMER:
        own = {k: v for k, v in stored.items() if k != _CONSUMERS}
        return own or None
    others = stored.get(_CONSUMERS)
    state = others.get(name) if isinstance(others, Mapping) else None
    return dict(state) if isinstance(state, Mapping) else None


def _names(stored: Mapping[str, Any] | None) -> list[str]:
    if not stored:
        return []
    others = stored.get(_CONSUMERS)
    return [DEFAULT_CONSUMER, *(others if isinstance(others, Mapping) else ())]


def own_state(cm: Any, stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The state ``cm`` continues from: its own, else another consumer's summary that fits."""
    name = _consumer(cm)
    own = _slot(stored, name)
    if own is not None and own.get("summary"):
        return own
    cap = _summary_room(cm)
    best: dict[str, Any] | None = None
    for other in _names(stored):
        state = _slot(stored, other) if other != name else None
        if not state or not state.get("summary"):
            continue
        tokens = state.get("summary_tokens")
        if not isinstance(tokens, int) or tokens > cap:
            continue
        # a summary made for a smaller window cut earlier than this consumer needs to
        window = state.get("context_window")
        if isinstance(window, int) and window < getattr(cm, "context_window", 0):
            continue
        if best is None or state.get("summarized_until", 0) > best.get("summarized_until", 0):
            best = state
    if best is None:
        return own
    borrowed = {k: best[k] for k in _BORROWED if k in best}
    borrowed["cut"] = borrowed.get("summarized_until", 0)
    logger.info("consumer %r starts from another consumer's summary", name)
    return borrowed


def _summary_room(cm: Any) -> int:
    """The largest summary ``cm`` could hold: its absolute cap and its summary budget."""
    cap = getattr(cm, "summary_max_tokens", None)
    budget = getattr(cm, "_budget", None)
    room = cap if isinstance(cap, int) else 0
    if callable(budget):
        try:
            room = min(room, int(budget(0, 0).summary_budget))
        except Exception:  # noqa: BLE001 - a manager without budgets borrows nothing
            return 0
    return room


_SAVE_ATTEMPTS = 3

# What a background summary changes in a consumer's state.
_SUMMARY_FIELDS = (
    *(k for k in _BORROWED if k != "version"),
    "summaries",
    "summary_turns",
    "failures",
    "retry_turn",
    "last_error",
)


def _record_after(
    cm: Any, stored: Any, base: Any, new: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The record to save after a background summary made from ``base``, or None.

    ``stored`` is the record as it is now. When requests saved states meanwhile without a
    new summary (they fitted plainly while this one ran), the summary is carried onto the
    newest state; when anything else summarized meanwhile, this result is stale: None.
    """
    if new is None or new == base:
        return None
    current = _slot(stored, _consumer(cm))
    if current is None or current == base:
        return with_consumer_state(cm, stored, new)
    before = base or {}
    # "" / 0 / missing all mean "no summary yet"
    if any(
        (current.get(k) or None) != (before.get(k) or None) for k in ("summary", "summarized_until")
    ):
        return None
    merged = dict(current)
    merged.update({k: new[k] for k in _SUMMARY_FIELDS if k in new})
    if int(new.get("cut", 0)) >= int(current.get("cut", 0)):
        merged.update(cut=new.get("cut", 0), cut_tokens=new.get("cut_tokens", 0), head_user=None)
    return with_consumer_state(cm, stored, merged)


def with_consumer_state(
    cm: Any, stored: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> dict[str, Any]:
    """The stored record with ``cm``'s state replaced by ``new``, the others untouched."""
    name = _consumer(cm)
    others = dict(stored.get(_CONSUMERS) or {}) if stored else {}
    if name == DEFAULT_CONSUMER:
        out = {k: v for k, v in new.items() if k != _CONSUMERS}
    else:
        out = {k: v for k, v in (stored or {}).items() if k != _CONSUMERS}
        others[name] = dict(new)
    if others:
        out[_CONSUMERS] = others
    return out


# `store.session(id)` makes Session handles; the store package must not import this module
BaseStore.session_factory = Session
