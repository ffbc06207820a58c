"""Summaries after the reply: a session's next summary made off the request path.

An agent's request must not wait for an LLM summary. After the reply is stored, the next
summary is made in a background thread (or an asyncio task) and saved with compare-and-set on
the state version read before summarizing, so a result that a newer state overtook is dropped,
never written over it. While a consumer's summary runs, ``Session.prepare`` for that consumer
fits plainly instead of summarizing (and never waits); the next request uses the summary once
it is saved. `SummaryJobs` tracks the running job per consumer; `after_reply` hooks start one
whenever an append ends a turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from windowfit._twins import CallOp, arun_calls, call, run_calls
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.messages import tool_units
from windowfit.session.state import consumer_name, own_state, record_after
from windowfit.store.base import ConflictError, to_plain_message

__all__ = [
    "HookWhen",
    "SummaryJobs",
    "await_summaries",
    "background",
    "ends_turn",
    "summarize_op",
    "wait_for_summaries",
]

logger = logging.getLogger("windowfit.session")

_J = TypeVar("_J", concurrent.futures.Future[bool], asyncio.Task[bool])

_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()

# Compare-and-set attempts to place a background summary on states saved meanwhile.
_SAVE_ATTEMPTS = 3

#: When an ``after_reply`` hook starts a summary: after an assistant reply that ends the
#: turn (no tool calls pending), or after every append.
HookWhen = Literal["reply", "append"]


def background() -> concurrent.futures.ThreadPoolExecutor:
    """The threads background summaries run in (created on first use, shared)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            workers = int(os.environ.get("WINDOWFIT_SUMMARY_WORKERS", "2") or 2)
            _EXECUTOR = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(1, workers), thread_name_prefix="windowfit-summary"
            )
        return _EXECUTOR


# Every background summary still running, in any session: what shutdown waits for.
_RUNNING: set[Any] = set()
_RUNNING_LOCK = threading.Lock()


def _running(kind: type) -> list[Any]:
    with _RUNNING_LOCK:
        return [job for job in _RUNNING if isinstance(job, kind)]


def wait_for_summaries(timeout: float | None = None) -> bool:
    """Block until every background summary thread has finished (saved or dropped its
    result); False if some are still running after ``timeout`` seconds. Call it at shutdown,
    before closing the store, so that a summary in flight is saved rather than lost."""
    pending = _running(concurrent.futures.Future)
    _, not_done = concurrent.futures.wait(pending, timeout=timeout)
    return not not_done


async def await_summaries(timeout: float | None = None) -> bool:
    """:func:`wait_for_summaries` for the tasks ``aappend`` / ``asummarize_after`` started in
    the running loop (and, without blocking it, for background threads)."""
    tasks = [t for t in _running(asyncio.Task) if not t.done()]
    futures = [asyncio.wrap_future(f) for f in _running(concurrent.futures.Future)]
    if not tasks and not futures:
        return True
    _, not_done = await asyncio.wait([*tasks, *futures], timeout=timeout)
    return not not_done


def ends_turn(batch: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an appended ``batch`` ends on the assistant's reply: an assistant message with
    no tool calls, after which the user speaks next (the moment to summarize for)."""
    if not batch:
        return False
    last = to_plain_message(batch[-1])  # an SDK message object is stored as its dict
    # no calls in either shape (OpenAI tool_calls, Anthropic tool_use): the core's unit rule
    return last.get("role") == "assistant" and tool_units([last])[0][2] == "message"


def summarize_op(session: Any, cm: Any) -> CallOp[bool]:
    """Make and save ``cm``'s next summary for ``session``; whether it was saved.

    One body for the thread and the task: the state is read before the history (append-only,
    so the history read second holds everything the state came from).
    """
    stored, version = yield call(session.store, "load_state", session.id)
    own = own_state(cm, stored)
    # the messages prepare sends (invalid and unreadable records left out), so the state's
    # indices mean the same list in both
    history, _ = session._sendable((yield from session._load_op()))
    new = yield call(cm, "summarize_after", history, own)
    for _ in range(_SAVE_ATTEMPTS):
        record = record_after(cm, stored, own, new)
        if record is None:
            return False
        try:
            # the store's own compare-and-set: the handle's expectation is left alone
            yield call(session.store, "save_state", session.id, record, version)
            return True
        except ConflictError:
            stored, version = yield call(session.store, "load_state", session.id)
    logger.info("session %r: a newer summary was saved; background summary dropped", session.id)
    return False


class SummaryJobs:
    """A session handle's running background summaries (one per consumer) and its hooks."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._lock = threading.Lock()
        self._pending: dict[str, Any] = {}  # consumer -> its running future or task
        self._hooks: dict[str, tuple[Any, HookWhen]] = {}  # consumer -> (manager, when)

    def get(self, consumer: str) -> Any:
        with self._lock:
            return self._pending.get(consumer)

    def start(self, cm: Any) -> concurrent.futures.Future[bool]:
        """Make ``cm``'s next summary in a background thread."""
        return self._track(cm, background().submit(run_calls, summarize_op(self._session, cm)))

    def start_task(self, cm: Any) -> asyncio.Task[bool]:
        """Make ``cm``'s next summary in a task of the running loop."""
        return self._track(cm, asyncio.ensure_future(arun_calls(summarize_op(self._session, cm))))

    def after_append(self, batch: Sequence[Mapping[str, Any]], explicit: Any) -> None:
        """Start the summaries due after appending ``batch`` in threads."""
        for cm in self._due(batch, explicit):
            self.start(cm)

    async def aafter_append(self, batch: Sequence[Mapping[str, Any]], explicit: Any) -> None:
        """Start the summaries due after appending ``batch`` as tasks (never awaited here)."""
        for cm in self._due(batch, explicit):
            self.start_task(cm)

    def _track(self, cm: Any, job: _J) -> _J:
        name = consumer_name(cm)
        with self._lock:
            self._pending[name] = job
        with _RUNNING_LOCK:
            _RUNNING.add(job)

        def done(_: Any) -> None:
            with self._lock:
                if self._pending.get(name) is job:
                    del self._pending[name]
            with _RUNNING_LOCK:
                _RUNNING.discard(job)

        job.add_done_callback(done)
        return job

    def running(self, cm: Any) -> bool:
        job = self.get(consumer_name(cm))
        return job is not None and not job.done()

    def add_hook(self, cm: Any, when: HookWhen) -> Callable[[], None]:
        if when not in ("reply", "append"):
            raise InvalidArgumentError(f"when must be 'reply' or 'append', not {when!r}")
        if not callable(getattr(cm, "summarize_after", None)):
            raise ArgumentTypeError(
                f"after_reply needs a ContextManager (with summarize_after), not "
                f"{type(cm).__name__}"
            )
        name = consumer_name(cm)
        entry = (cm, when)
        with self._lock:
            self._hooks[name] = entry

        def remove() -> None:
            with self._lock:
                if self._hooks.get(name) is entry:
                    del self._hooks[name]

        return remove

    def _due(self, batch: Sequence[Mapping[str, Any]], explicit: Any) -> list[Any]:
        """The managers to summarize for after appending ``batch``: ``explicit`` (an append's
        ``summarize=cm``) and the hooks whose moment it is, one per consumer."""
        with self._lock:
            hooks = list(self._hooks.values())
        if not hooks:
            return [] if explicit is None else [explicit]
        reply = ends_turn(batch)
        due = [cm for cm, when in hooks if when == "append" or reply]
        if explicit is not None and consumer_name(explicit) not in map(consumer_name, due):
            due.append(explicit)
        return due
