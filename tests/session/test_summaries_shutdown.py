"""Waiting for background summaries at shutdown: ``wf.wait_for_summaries`` (threads) and
``wf.await_summaries`` (tasks) return once every running summary has finished."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import windowfit as wf


class HeldManager:
    """A manager whose background summary runs until the test releases it."""

    consumer = "held"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def summarize_after(self, history: Any, state: Any) -> None:
        self.started.set()
        self.release.wait(60)
        return None  # nothing new to save

    async def asummarize_after(self, history: Any, state: Any) -> None:
        self.started.set()
        for _ in range(6000):
            if self.release.is_set():
                break
            await asyncio.sleep(0.01)
        return None


def _session() -> Any:
    session = wf.Session(wf.MemoryStore(), "shutdown")
    session.append({"role": "user", "content": "hello"})
    return session


def test_wait_for_summaries_blocks_until_the_threads_finish() -> None:
    assert wf.wait_for_summaries(timeout=0) is True  # nothing running
    cm = HeldManager()
    future = _session().summarize_after(cm)
    assert cm.started.wait(60)
    assert wf.wait_for_summaries(timeout=0) is False  # still running
    cm.release.set()
    assert wf.wait_for_summaries(timeout=60) is True
    assert future.done() and future.result() is False


def test_await_summaries_waits_for_the_tasks() -> None:
    async def main() -> tuple[bool, bool]:
        cm = HeldManager()
        task = _session().asummarize_after(cm)
        for _ in range(6000):
            if cm.started.is_set() or task.done():
                break
            await asyncio.sleep(0.01)
        assert cm.started.is_set(), task
        early = await wf.await_summaries(timeout=0)
        cm.release.set()
        done = await wf.await_summaries(timeout=60)
        return early, done and task.done()

    assert asyncio.run(main()) == (False, True)
