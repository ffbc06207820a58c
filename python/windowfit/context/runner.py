"""The summarizer runner: calls the summarizer for one job, bounded by ``summary_timeout``,
from sync code (a daemon thread) or async code (awaited, or a worker thread), and checks what
it returned. Any failure becomes an ``Outcome`` with an error: summarizing is transactional.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

from windowfit.context.config import Settings
from windowfit.context.plan import Job, Outcome

__all__ = ["Runner"]


class Runner(Settings):
    """Runs a planned summarization and validates its result."""

    def _call_args(self, job: Job) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (job.messages,), {
            "previous_summary": job.previous,
            "target_tokens": job.target,
            "language": job.language,
        }

    def _run_job(self, job: Job) -> Outcome:
        fn = self.summarizer
        args, kwargs = self._call_args(job)
        t0 = time.perf_counter()
        if getattr(fn, "inline", False):
            try:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):
                    value = _run_awaitable(value, self.summary_timeout)
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
        thread.join(self.summary_timeout)
        elapsed = (time.perf_counter() - t0) * 1000
        if thread.is_alive():
            return Outcome(None, f"timed out after {self.summary_timeout:g}s", elapsed)
        if "error" in box:
            return Outcome(None, _describe(box["error"]), elapsed)
        return Outcome(box.get("value"), None, elapsed)

    async def a_run_job(self, job: Job) -> Outcome:
        """``_run_job`` for async code (named as ``call`` names the async twin)."""
        fn = self.summarizer
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
            value = await asyncio.wait_for(_as_coroutine(awaitable), self.summary_timeout)
            return Outcome(value, None, (time.perf_counter() - t0) * 1000)
        except asyncio.TimeoutError:
            return Outcome(
                None,
                f"timed out after {self.summary_timeout:g}s",
                (time.perf_counter() - t0) * 1000,
            )
        except Exception as exc:  # noqa: BLE001 - any summarizer failure is recoverable
            return Outcome(None, _describe(exc), (time.perf_counter() - t0) * 1000)

    def _validate(self, job: Job, outcome: Outcome) -> tuple[str | None, int, str | None]:
        """The accepted summary text and its tokens, or the reason it is rejected."""
        if outcome.error is not None:
            return None, 0, outcome.error
        value = outcome.text
        if not isinstance(value, str):
            return None, 0, f"summarizer returned {type(value).__name__}, expected str"
        text = value.strip()
        if not text:
            return None, 0, "summarizer returned an empty summary"
        tokens = self.counter.count(text)
        if tokens > job.limit:
            return (
                None,
                tokens,
                (
                    f"summary of {tokens} tokens is oversize (target {job.target}, limit {job.limit})"
                ),
            )
        return text, tokens, None


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
