"""``Session.after_reply(cm)``: a hook registered once that makes the next summary after each
reply, off the request path (a thread after ``append``, a task after ``aappend``).

As in test_summarize_after, "prepare never waits" is shown by prepare returning while the
summarizer is still blocked; no wall-clock assertion.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import windowfit as wf
from _manager_checks import check_prompt
from _summarizers import Recorder, small_manager
from test_summarize_after import HISTORY, SAFETY, Held

# HISTORY ends on the assistant's reply: everything before it, then the reply, is one turn.
BEFORE, REPLY = HISTORY[:-1], HISTORY[-1]
CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    ],
}


def _has(prepared: Any, tag: str) -> bool:
    return any(tag in str(m.get("content")) for m in prepared.messages)


def _hooked(name: str, tag: str) -> tuple[Held, Any, wf.Session]:
    """A session holding the turn up to its reply, with a held summarizer's manager hooked."""
    held = Held(tag)
    cm = small_manager(held)
    session = wf.Session(wf.MemoryStore(), name)
    session.extend(BEFORE)
    session.after_reply(cm)
    return held, cm, session


def test_the_hook_summarizes_after_the_reply_and_the_next_prepare_uses_it() -> None:
    held, cm, session = _hooked("hook", "HK")
    assert held.calls == 0
    session.append(REPLY)  # the reply ends the turn: the hook starts the summary
    assert held.entered.wait(SAFETY)
    job = session._jobs.get("default")
    p = session.prepare(cm)  # the summarizer is blocked: this must not wait for it
    assert not held.release.is_set(), "prepare waited for the background summary"
    check_prompt(cm, session.messages, p)
    assert p.stats["summary_deferred"] is True and not _has(p, "HK-1")
    held.release.set()
    assert job.result(SAFETY) is True
    p2 = session.prepare(cm)  # ready now: used without calling the summarizer again
    check_prompt(cm, session.messages, p2)
    assert held.calls == 1 and _has(p2, "HK-1")
    assert p2.stats["summary_triggered"] is False


def test_the_hook_waits_for_the_end_of_the_turn_unless_asked_for_every_append() -> None:
    quick = Recorder("RP")
    session = wf.Session(wf.MemoryStore(), "turns")
    session.after_reply(small_manager(quick))
    session.extend([*BEFORE[:-1], CALL])  # a tool call pending: the turn goes on
    session.append({"role": "tool", "tool_call_id": "c9", "content": "found"})
    assert session._jobs.get("default") is None and quick.calls == 0
    assert session.state is None

    every = Recorder("EV")
    other = wf.Session(wf.MemoryStore(), "every")
    other.after_reply(small_manager(every), when="append")
    other.extend([*BEFORE[:-1], CALL])
    job = other._jobs.get("default")
    assert job is None or job.result(SAFETY) is True  # it may be done already
    assert other.state is not None and other.state["summary"].startswith("EV-1")


def test_a_reply_ends_the_turn_in_either_message_shape() -> None:
    from windowfit.session.summaries import ends_turn

    tool_use = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}
    assert ends_turn([{"role": "assistant", "content": "done"}])
    assert not ends_turn([CALL])
    assert not ends_turn([{"role": "assistant", "content": [tool_use]}])
    assert not ends_turn([{"role": "tool", "tool_call_id": "c9", "content": "x"}])
    assert not ends_turn([])


def test_removing_the_hook_stops_it_and_registering_again_replaces_it() -> None:
    first, second = Recorder("A"), Recorder("B")
    session = wf.Session(wf.MemoryStore(), "replace")
    session.extend(BEFORE)
    session.after_reply(small_manager(first))
    remove = session.after_reply(small_manager(second))  # same consumer: replaces the first
    session.append(REPLY)
    job = session._jobs.get("default")
    assert job is None or job.result(SAFETY) is True
    assert first.calls == 0 and session.state["summary"].startswith("B-1")
    remove()
    session.append({"role": "user", "content": "and then?"})
    session.append({"role": "assistant", "content": "nothing more"})
    assert session._jobs.get("default") is None and second.calls == 1


def test_async_hook_makes_a_task_and_aprepare_never_waits() -> None:
    held, cm, session = _hooked("ahook", "AH")

    async def go() -> tuple[Any, Any]:
        await session.aappend(REPLY)
        task = session._jobs.get("default")
        assert isinstance(task, asyncio.Task)
        p = await session.aprepare(cm)  # the task is pending: this must not wait for it
        assert not held.release.is_set(), "aprepare waited for the background summary"
        assert p.stats["summary_deferred"] is True
        held.release.set()
        assert await asyncio.wait_for(task, SAFETY) is True
        return p, await session.aprepare(cm)

    first, second = asyncio.run(go())
    check_prompt(cm, session.messages, first)
    check_prompt(cm, session.messages, second)
    assert not _has(first, "AH-1") and _has(second, "AH-1") and held.calls == 1


def test_the_hook_checks_its_arguments() -> None:
    session = wf.Session(wf.MemoryStore(), "args")
    with pytest.raises(wf.WindowfitError) as err:
        session.after_reply(object())
    assert isinstance(err.value, TypeError)
    with pytest.raises(wf.WindowfitError) as err:
        session.after_reply(small_manager(Recorder("X")), when="sometimes")  # type: ignore[arg-type]
    assert isinstance(err.value, ValueError)
