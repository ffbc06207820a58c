"""`Session`: one conversation's full, append-only history and its context-manager state.

A Session is a light handle on a store (SQLite, Redis or memory): every read goes to the store,
so several workers holding handles on the same id see one history. Reads are incremental: the
handle caches what it has read and fetches only newer messages (history is append-only).

Each operation is written once, as a generator of store and manager calls
(``windowfit._twins``): the sync method makes the calls, its ``a``-prefixed twin awaits
them. The per-consumer state record is `windowfit.session.state`, summaries made after the
reply `windowfit.session.summaries`, sub-agents `windowfit.session.children`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.counting import Counter
from windowfit.errors import InvalidMessageError, MessageTypeError
from windowfit.messages import copy_json
from windowfit.session.children import SubAgents
from windowfit.session.state import (
    DEFAULT_CONSUMER,
    own_state,
    slot,
    with_consumer_state,
)
from windowfit.session.summaries import HookWhen, SummaryJobs
from windowfit.store.base import (
    UNREADABLE,
    BaseStore,
    ConflictError,
    SessionInfo,
    encode_message,
    is_unreadable,
    to_plain_message,
    validate_session_id,
)

if TYPE_CHECKING:
    from windowfit.context import ContextManager, Prepared

__all__ = ["DEFAULT_CONSUMER", "Session", "own_state", "with_consumer_state"]

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
        if not any(map(is_unreadable, messages)):
            _RULES.count_each_message(messages)
            return []
    except (InvalidMessageError, MessageTypeError):
        pass
    bad = []
    for i, m in enumerate(messages):
        if is_unreadable(m):  # a stored record no decoder could read
            bad.append(i + offset)
            continue
        try:
            _RULES.count_message(m)
        except (InvalidMessageError, MessageTypeError):
            bad.append(i + offset)
    return bad


def _report(prepared: Prepared, skipped: list[int], unreadable: list[int]) -> Prepared:
    """``prepared`` with ``stats["invalid_skipped"]``: the stored messages left out as invalid
    (``stats["unreadable_skipped"]``: those of them whose record could not be decoded)."""
    stats: Any = getattr(prepared, "stats", None)
    if skipped and isinstance(stats, dict):
        stats["invalid_skipped"] = skipped
        if unreadable:
            stats["unreadable_skipped"] = unreadable
    return prepared


def _saved(prepared: Prepared, saved: bool, error: str | None = None) -> Prepared:
    """``prepared`` with ``stats["state_saved"]`` (whether its state was written) and, when a
    concurrent save kept it from being written, ``stats["state_save_error"]``."""
    stats: Any = getattr(prepared, "stats", None)
    if isinstance(stats, dict):
        stats["state_saved"] = saved
        if error is not None:
            stats["state_save_error"] = error
    return prepared


class Session(SubAgents):
    """The history and state of session ``id`` in ``store``. Get one with ``Session(store, id)``.

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
        self._jobs = SummaryJobs(self)
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

    def _handle(self, session_id: str) -> Session:
        return Session(self.store, session_id)

    # ------------------------------------------------------------------ history

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The full history, oldest first (a new list; the dicts are shared, don't mutate them)."""
        return self.load()

    def _op_load(self, *, copy: bool = False) -> CallOp[list[dict[str, Any]]]:
        """The full history, fetching only messages this handle has not read yet.

        ``copy=True`` returns deep copies, for callers that modify the messages they get.
        """
        history = yield from self._load_op()
        return copy_json(history) if copy else history

    load = blocking(_op_load)
    aload = awaitable(_op_load)

    def _load_op(self) -> CallOp[list[dict[str, Any]]]:
        while True:
            with self._lock:
                start, known = len(self._cache), self._epoch
            epoch, new = yield call(self.store, "read", self.id, start)
            if start and epoch != known:
                # the session was deleted (and maybe its id reused): read it all again
                epoch, new = yield call(self.store, "read", self.id, 0)
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

    def _op_extend(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        summarize: Any = None,
        op_id: str | None = None,
    ) -> CallOp[int]:
        """Append messages atomically and contiguously; the index of the first.

        Every message is checked first, by the rules counting applies
        (``InvalidMessageError``, ``MessageTypeError``): the history is append-only, so a
        message no request can carry must never get in (one bad message and none is stored).
        ``summarize=cm`` (a ContextManager) then makes the next summary in the background
        (:meth:`summarize_after`), as do the hooks of :meth:`after_reply`, so the next request
        does not wait for it. ``op_id`` retries an append whose outcome was unknown
        (``StoreOutcomeUnknownError.op_id``): applied at most once.
        """
        batch = _checked(messages)
        index = yield call(self.store, "append", self.id, batch, op_id=op_id)
        yield call(self._jobs, "after_append", batch, summarize)
        return int(index)

    def _op_append(
        self, message: Mapping[str, Any], *, summarize: Any = None, op_id: str | None = None
    ) -> CallOp[int]:
        """Append one message (one transaction); its index in the history. Checked, and
        summarized after with ``summarize=cm`` or a hook, as :meth:`extend` does."""
        return (yield from self._op_extend([message], summarize=summarize, op_id=op_id))

    append = blocking(_op_append)
    aappend = awaitable(_op_append)
    extend = blocking(_op_extend)
    aextend = awaitable(_op_extend)

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

    @property
    def unreadable(self) -> list[tuple[int, str]]:
        """``(index, why)`` of each stored record that could not be decoded. Such a record
        keeps its place in ``messages`` as a stand-in (role ``"windowfit_unreadable"``), is
        never sent, and every other message stays readable."""
        return [(i, str(m[UNREADABLE])) for i, m in enumerate(self.load()) if is_unreadable(m)]

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> dict[str, Any] | None:
        """The stored context-manager state (None if none was saved)."""
        return self.load_state()[0]

    @property
    def state_version(self) -> int:
        """The stored state version: 0 before the first save, +1 per save."""
        return self.load_state()[1]

    def _op_load_state(self) -> CallOp[tuple[dict[str, Any] | None, int]]:
        """``(state, version)``; the version becomes this handle's expectation for save_state."""
        state, version = yield call(self.store, "load_state", self.id)
        self._seen_version = version
        return state, version

    load_state = blocking(_op_load_state)
    aload_state = awaitable(_op_load_state)

    def _op_save_state(
        self, state: Mapping[str, Any] | None, expected_version: int | None = None
    ) -> CallOp[int]:
        """Save ``state`` if nobody saved since ``expected_version``; the new version.

        ``expected_version`` defaults to the version this handle last read or wrote (0 if it
        never did, so a blind write over an existing state is a conflict too). A stale writer
        gets ConflictError and nothing is overwritten.
        """
        expected = self._seen_version if expected_version is None else expected_version
        version = yield call(self.store, "save_state", self.id, state, expected)
        self._seen_version = version
        return int(version)

    save_state = blocking(_op_save_state)
    asave_state = awaitable(_op_save_state)

    def consumer_state(self, consumer: str) -> dict[str, Any] | None:
        """The stored state of one consumer (``"default"`` is the top-level state)."""
        return slot(self.state, consumer)

    # ------------------------------------------------------------------ context manager

    def _op_prepare(
        self, cm: ContextManager, *, tools: Any = None, retries: int = 2, **kwargs: Any
    ) -> CallOp[Prepared]:
        """``cm.prepare`` on the full history and stored state; saves the new state.

        Each consumer (``ContextManager(consumer=...)``: an agent, a router, a classifier) has
        its own state in the session, so managers with different budgets over one history never
        reset each other; a consumer without a summary yet starts from another consumer's
        summary when it fits its own summary budget instead of summarizing again.

        If another worker saved a state meanwhile (ConflictError), prepares again from the
        fresh state, up to ``retries`` times; when every attempt lost that race the last
        prompt (valid either way) is returned unsaved, with ``stats["state_saved"]`` False and
        ``stats["state_save_error"]`` saying why. Returns the Prepared (``.messages``, ``.stats``,
        ``.state``; ``stats["state_saved"]``: whether its state was written). A Prepared without state (None) leaves the stored state alone. While a
        background summary of this consumer runs, prepares without summarizing (never waits).
        """
        attempt = 0
        while True:
            # state before messages: history is append-only, so the messages read second
            # always include everything the state was computed from
            stored, version = yield from self._op_load_state()
            history = yield from self._load_op()
            messages, skipped = self._sendable(history)
            own = own_state(cm, stored)
            if self._jobs.running(cm):
                kwargs["summarize"] = False  # never wait for the background summary
            prepared: Prepared = yield call(
                cm, "prepare", messages, state=own, tools=tools, **kwargs
            )
            unreadable = [i for i in skipped if is_unreadable(history[i])]
            prepared = _report(prepared, skipped, unreadable)
            new = getattr(prepared, "state", None)
            # None means "no summary state": never erase a stored summary by accident
            if new is None or new == own:
                return _saved(prepared, False)
            try:
                yield from self._op_save_state(with_consumer_state(cm, stored, new), version)
                return _saved(prepared, True)
            except ConflictError as exc:
                if attempt >= retries:
                    # the prompt is valid whoever saved the state: send it, and say the state
                    # was not saved (the next prepare starts from the other worker's state)
                    logger.warning(
                        "session %r: state saved by other workers during %d prepares; "
                        "returning the prompt without saving its state",
                        self.id,
                        attempt + 1,
                    )
                    return _saved(prepared, False, f"{exc} (after {attempt + 1} attempts)")
                logger.info(
                    "session %r: state saved by another worker during prepare; "
                    "preparing again (%d/%d)",
                    self.id,
                    attempt + 1,
                    retries,
                )
            attempt += 1

    prepare = blocking(_op_prepare)
    aprepare = awaitable(_op_prepare)

    # ------------------------------------------------------------------ summaries after the reply

    def summarize_after(self, cm: ContextManager) -> concurrent.futures.Future[bool]:
        """Make ``cm``'s next summary in a background thread; a future of whether it was saved.

        The result is saved with compare-and-set on the state version read before
        summarizing: if anything saved a state meanwhile (a request, another worker) the
        background result is stale and dropped, never written over the newer state.
        While it runs, :meth:`prepare` with the same consumer does not summarize (it fits
        plainly, as when a summary is not ready) and never waits for it.
        """
        return self._jobs.start(cm)

    def asummarize_after(self, cm: ContextManager) -> asyncio.Task[bool]:
        """:meth:`summarize_after` as an asyncio task (call it from a running loop)."""
        return self._jobs.start_task(cm)

    def after_reply(self, cm: ContextManager, *, when: HookWhen = "reply") -> Callable[[], None]:
        """Register ``cm`` once: every later append through this handle that ends on the
        assistant's reply (``when="append"``: every append) starts ``cm``'s next summary in
        the background, a thread after ``append``/``extend``, a task after
        ``aappend``/``aextend``. The next ``prepare`` uses it once saved and never waits for
        it. One hook per consumer (registering again replaces it); returns a function that
        removes the hook.
        """
        return self._jobs.add_hook(cm, when)

    # ------------------------------------------------------------------ metadata

    def _op_info(self) -> CallOp[SessionInfo | None]:
        """Metadata (length, times, parent, status...), None if nothing was written yet."""
        return (yield call(self.store, "info", self.id))

    info = blocking(_op_info)
    ainfo = awaitable(_op_info)

    def exists(self) -> bool:
        return self.store.info(self.id) is not None

    def delete(self) -> bool:
        """Remove this session from the store (its children stay, as their own sessions)."""
        with self._lock:
            self._cache, self._epoch = [], None
        return self.store.delete(self.id)
