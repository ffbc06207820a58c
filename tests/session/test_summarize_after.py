"""Summaries off the request path: ``cm.summarize_after`` / ``Session.summarize_after``.

The summarizer is held by events, so "prepare never waits" is shown by prepare returning
while the summarizer is still blocked (a waiting prepare could only return after the release,
which the test checks has not happened) — no wall-clock assertion.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import windowfit as wf
from _manager_checks import check_prompt, conversation
from _summarizers import Recorder, small_manager

SAFETY = 120  # seconds: only so a broken build fails instead of hanging


class Held:
    """A summarizer that blocks until released; counts its calls."""

    inline = True

    def __init__(self, tag: str = "BG") -> None:
        self.tag = tag
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0
        self._timer = threading.Timer(SAFETY, self.release.set)
        self._timer.daemon = True
        self._timer.start()

    def __call__(self, messages: list[Any], **kw: Any) -> str:
        self.calls += 1
        self.entered.set()
        self.release.wait()
        return f"{self.tag}-{self.calls}: earlier questions and tickets."


HISTORY = conversation(40, words=200, tools_every=0)


def test_prepare_never_waits_for_the_background_summary() -> None:
    held = Held()
    cm = small_manager(held)
    session = wf.Session(wf.MemoryStore(), "bg")
    session.extend(HISTORY)
    future = session.summarize_after(cm)
    assert held.entered.wait(SAFETY)
    p = session.prepare(cm)  # the summarizer is blocked: this must not wait for it
    assert not held.release.is_set(), "prepare waited for the background summary"
    check_prompt(cm, session.messages, p)
    assert p.stats["summary_deferred"] is True and held.calls == 1
    held.release.set()
    assert future.result(SAFETY) is True
    state = session.state
    assert state["summary"].startswith("BG-1")
    # the next request uses the ready summary without calling the summarizer
    p2 = session.prepare(cm)
    check_prompt(cm, session.messages, p2)
    assert held.calls == 1
    assert any("BG-1" in str(m.get("content")) for m in p2.messages)


def test_a_stale_background_result_never_overwrites_a_newer_state() -> None:
    held = Held()
    session = wf.Session(wf.MemoryStore(), "stale")
    session.extend(HISTORY)
    future = session.summarize_after(small_manager(held))
    assert held.entered.wait(SAFETY)
    # meanwhile another worker (its own handle, no knowledge of the background job)
    # prepares and saves a newer state
    other = wf.Session(session.store, "stale")
    newer = other.prepare(small_manager(Recorder("FG")))
    assert newer.state["summary"].startswith("FG-1")
    held.release.set()
    assert future.result(SAFETY) is False
    assert session.state == newer.state  # compare-and-set kept the newer state


def test_append_with_summarize_runs_in_the_background() -> None:
    quick = Recorder("AP")
    cm = small_manager(quick)
    session = wf.Session(wf.MemoryStore(), "ap")
    session.extend(HISTORY[:-1])
    session.append(HISTORY[-1], summarize=cm)
    job = session._jobs.get("default")
    if job is not None:  # it may already be done
        assert job.result(SAFETY) is True
    assert session.state["summary"].startswith("AP-")


def test_manager_summarize_after_makes_the_state_the_next_prepare_uses() -> None:
    quick = Recorder("CM")
    cm = small_manager(quick)
    state = cm.summarize_after(HISTORY)
    assert state["summary"].startswith("CM-1") and quick.calls == 1
    p = cm.prepare(HISTORY, state=state)
    check_prompt(cm, HISTORY, p)
    assert quick.calls == 1 and p.stats["summary_triggered"] is False
    async_state = asyncio.run(cm.asummarize_after(HISTORY))
    assert async_state["summary"].startswith("CM-2")


def test_async_session_summary_is_a_task_saved_transactionally() -> None:
    quick = Recorder("AS")
    cm = small_manager(quick)
    session = wf.Session(wf.MemoryStore(), "as")
    session.extend(HISTORY)

    async def go() -> bool:
        task = session.asummarize_after(cm)
        return await task

    assert asyncio.run(go()) is True
    assert session.state["summary"].startswith("AS-1")


@pytest.mark.parametrize("summarize", [True, False])
def test_prepare_summarize_flag(summarize: bool) -> None:
    quick = Recorder("F")
    cm = small_manager(quick)
    p = cm.prepare(HISTORY, summarize=summarize)
    check_prompt(cm, HISTORY, p)
    assert (quick.calls == 1) is summarize
    assert p.stats["summary_deferred"] is (not summarize)
