"""The summarizer runner: calls the summarizer for one job, bounded by ``summary_timeout``,
from sync code (a daemon thread) or async code (awaited, or a worker thread), and checks what
it returned. Any failure becomes an ``Outcome`` with an error: summarizing is transactional.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from windowfit.context.config import Settings
from windowfit.context.plan import Job, Outcome, Plan
from windowfit.context.state import MAX_BACKOFF_TURNS, now
from windowfit.messages import fingerprint
from windowfit.summarize import Summarizer

__all__ = ["Accepted", "SummaryRunner"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Accepted:
    """A summarizer's result checked: the summary and its tokens, or why it is rejected."""

    text: str | None
    tokens: int
    error: str | None


class SummaryRunner:
    """Runs a planned summarization (``run``, or ``arun`` from async code) and checks its result."""

    def __init__(self, settings: Settings) -> None:
        self.timeout = settings.summary_timeout
        self.counter = settings.counter

    @staticmethod
    def _call_args(job: Job) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (job.messages,), {
            "previous_summary": job.previous,
            "target_tokens": job.target,
            "language": job.language,
        }

    def run(self, job: Job, fn: Summarizer) -> Outcome:
        """The summarizer's result for ``job`` (a daemon thread bounded by the timeout)."""
        args, kwargs = self._call_args(job)
        t0 = time.perf_counter()
        if getattr(fn, "inline", False):
            try:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):
                    value = _run_awaitable(value, self.timeout)
                return Outcome(value, None, (time.perf_counter() - t0) * 1000)
            except Exception as exc:  # noqa: BLE001 - any summarizer failure is recoverable
                return Outcome(None, _describe(exc), (time.perf_counter() - t0) * 1000)
        box: dict[str, Any] = {}

        def runner() -> None:
            try:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):
                    value = asyncio.run(_as_coroutine(value))
                box["value"] = value
            except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
                box["error"] = exc

        # A daemon thread, so a summarizer that hangs can neither block this turn past the
        # deadline nor keep the interpreter alive at exit.
        thread = threading.Thread(target=runner, name="windowfit-summarizer", daemon=True)
        thread.start()
        thread.join(self.timeout)
        elapsed = (time.perf_counter() - t0) * 1000
        if thread.is_alive():
            return Outcome(None, f"timed out after {self.timeout:g}s", elapsed)
        if "error" in box:
            return Outcome(None, _describe(box["error"]), elapsed)
        return Outcome(box.get("value"), None, elapsed)

    async def arun(self, job: Job, fn: Summarizer) -> Outcome:
        """``run`` for async code: async summarizers awaited, sync ones run in a thread."""
        args, kwargs = self._call_args(job)
        t0 = time.perf_counter()
        try:
            if hasattr(fn, "asummarize"):
                awaitable = fn.asummarize(*args, **kwargs)
            elif getattr(fn, "inline", False):
                awaitable = _ready(fn(*args, **kwargs))
            elif _is_async_callable(fn):
                awaitable = fn(*args, **kwargs)
            else:
                awaitable = asyncio.to_thread(_call_and_resolve, fn, args, kwargs)
            value = await asyncio.wait_for(_as_coroutine(awaitable), self.timeout)
            return Outcome(value, None, (time.perf_counter() - t0) * 1000)
        except asyncio.TimeoutError:
            return Outcome(
                None,
                f"timed out after {self.timeout:g}s",
                (time.perf_counter() - t0) * 1000,
            )
        except Exception as exc:  # noqa: BLE001 - any summarizer failure is recoverable
            return Outcome(None, _describe(exc), (time.perf_counter() - t0) * 1000)

    def check(self, job: Job, outcome: Outcome) -> Accepted:
        """The accepted summary text and its tokens, or the reason it is rejected."""
        if outcome.error is not None:
            return Accepted(None, 0, outcome.error)
        value = outcome.text
        if not isinstance(value, str):
            return Accepted(None, 0, f"summarizer returned {type(value).__name__}, expected str")
        text = value.strip()
        if not text:
            return Accepted(None, 0, "summarizer returned an empty summary")
        tokens = self.counter.count(text)
        if tokens > job.limit:
            why = f"summary of {tokens} tokens is oversize (target {job.target}, limit {job.limit})"
            return Accepted(None, tokens, why)
        return Accepted(text, tokens, None)

    def settle(self, plan: Plan, outcome: Outcome | None) -> tuple[str, str | None]:
        """Apply a summarization's outcome to the plan's state: the new summary advances it,
        a failure changes nothing but the backoff (transactional). The summary and its
        language to send."""
        st, stats, job = plan.state, plan.stats, plan.job
        if job is None or outcome is None:
            if plan.cut != plan.start_cut:
                stats["compacted"] = True
            return st["summary"], st.get("language")
        accepted = self.check(job, outcome)
        stats["summary_triggered"] = True
        stats["summary_ms"] = round(outcome.elapsed_ms, 3)
        if accepted.error is not None:
            self._back_off(plan, accepted.error)
            return st["summary"], st.get("language")
        self._advance(plan, job, accepted)
        logger.info(
            "summarized %d messages (%d tokens) into %d tokens in %.1f ms",
            job.fold_count,
            job.fold_tokens,
            accepted.tokens,
            outcome.elapsed_ms,
        )
        return st["summary"], job.language

    @staticmethod
    def _advance(plan: Plan, job: Job, accepted: Accepted) -> None:
        st, msgs = plan.state, plan.msgs
        st.update(
            summary=accepted.text or "",
            summary_tokens=accepted.tokens,
            summarized_until=job.hi,
            summarized_messages=int(st["summarized_messages"]) + job.fold_count,
            evicted_tokens=int(st["evicted_tokens"]) + job.fold_tokens,
            language=job.language,
            created_at=now(),
            summaries=int(st["summaries"]) + 1,
            failures=0,
            retry_turn=0,
            last_error=None,
            anchor=fingerprint(msgs[job.hi - 1]),
            next_anchor=fingerprint(msgs[job.hi]) if job.hi < len(msgs) else None,
        )
        st["summary_turns"] = [*st["summary_turns"], st["turn"]][-10:]
        plan.cut = job.new_cut
        plan.stats["compacted"] = True

    @staticmethod
    def _back_off(plan: Plan, error: str) -> None:
        """Nothing advances, the previous summary stays; retry after a growing pause."""
        st = plan.state
        failures = int(st["failures"]) + 1
        backoff = min(2 ** (failures - 1), MAX_BACKOFF_TURNS)
        st.update(failures=failures, retry_turn=st["turn"] + backoff, last_error=error[:500])
        plan.stats.update(
            {
                "summary_failed": True,
                "summary_error": error,
                "strategy": "fallback",
                "strategy_reason": f"summarizer failed ({error}); fitting plainly, retry at turn {st['retry_turn']}",
            }
        )
        logger.warning("summarization failed (%s); falling back to plain fitting", error)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_async_callable(fn: Any) -> bool:
    """An ``async def`` function, or an object whose class defines ``async def __call__``."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


async def _ready(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _call_and_resolve(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    value = fn(*args, **kwargs)
    if inspect.isawaitable(value):
        return asyncio.run(_as_coroutine(value))
    return value


def _run_awaitable(value: Any, timeout: float | None) -> Any:
    # timeout None: no limit (asyncio.wait_for takes None so)
    async def bounded() -> Any:
        return await asyncio.wait_for(_as_coroutine(value), timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(bounded())
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
