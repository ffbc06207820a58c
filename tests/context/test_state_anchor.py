"""The manager's state is anchored on content, and every field of a loaded state is checked.

A caller that drops messages the summary already holds keeps the summary; a history that
really changed, or a state with a broken field, resets with a reason — never a crash.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from _manager_checks import check_prompt, conversation
from _summarizers import Recorder, small_manager
from windowfit.context import ContextManager


def _summarized() -> tuple[ContextManager, Recorder, list[dict[str, Any]], dict[str, Any]]:
    rec = Recorder()
    cm = small_manager(rec)
    history = conversation(40, words=200, tools_every=0)
    p = cm.prepare(history)
    assert rec.calls == 1 and p.state["summarized_until"] > 1
    return cm, rec, history, p.state


@pytest.mark.parametrize("keep_from", ["anchor", "after"])
def test_dropping_summarized_messages_keeps_the_summary(keep_from: str) -> None:
    cm, rec, history, state = _summarized()
    s = state["summarized_until"]
    # keep the system prompt and the last summarized message, or only what follows it
    start = s - 1 if keep_from == "anchor" else s
    shorter = [history[0], *history[start:]]
    p = cm.prepare(shorter, state=state)
    check_prompt(cm, shorter, p)
    assert p.stats["state_reset"] is False
    assert any("SUMMARY-1" in str(m.get("content")) for m in p.messages)
    assert p.state["summary"] == state["summary"]
    # positions follow the content: the first unsummarized message is where it now is
    assert shorter[p.state["summarized_until"]] is history[s]
    assert rec.calls == 1 or p.stats["summary_triggered"]


def test_a_rewritten_history_still_resets_with_a_reason() -> None:
    cm, _, history, state = _summarized()
    rewritten = copy.deepcopy(history)
    for m in rewritten[1:]:
        m["content"] = "something else " + str(m["content"])
    p = cm.prepare(rewritten, state=state)
    check_prompt(cm, rewritten, p)
    assert p.stats["state_reset"] is True
    assert "has changed" in p.stats["state_reset_reason"]
    assert not any("SUMMARY-1" in str(m.get("content")) for m in p.messages)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("cut", -3, "cut"),
        ("summarized_until", "7", "summarized_until"),
        ("summary_tokens", None, "summary_tokens"),
        ("turn", True, "turn"),
        ("summary", 42, "summary"),
        ("summary_turns", "1,2", "summary_turns"),
        ("summary_turns", [-1], "summary_turns"),
        ("anchor", None, "anchor"),
        ("language", {"x": 1}, "language"),
        ("version", 99, "version"),
    ],
)
def test_every_broken_field_resets_with_its_name(field: str, value: Any, named: str) -> None:
    cm, _, history, state = _summarized()
    broken = copy.deepcopy(state)
    broken[field] = value
    p = cm.prepare(history, state=broken)
    check_prompt(cm, history, p)
    assert p.stats["state_reset"] is True
    assert named in p.stats["state_reset_reason"]


def test_a_position_past_the_end_is_found_again_by_content() -> None:
    cm, _, history, state = _summarized()
    broken = {**copy.deepcopy(state), "summarized_until": 10**6}
    p = cm.prepare(history, state=broken)
    assert p.stats["state_reset"] is False
    assert p.state["summarized_until"] == state["summarized_until"]


@pytest.mark.parametrize(
    "scan",
    [
        {"system": ["x"]},
        {"system": [10**6]},
        {"last_user": -1},
        {"tokens": "many"},
    ],
)
def test_a_broken_carried_scan_is_recounted(scan: dict[str, Any]) -> None:
    cm, _, history, state = _summarized()
    broken = copy.deepcopy(state)
    broken["scan"] = {**broken["scan"], **scan}
    p = cm.prepare(history, state=broken)
    fresh = cm.prepare(history, state=state)
    check_prompt(cm, history, p)
    assert p.stats["tokens"] == fresh.stats["tokens"]
    assert [id(m) for m in p.messages if "SUMMARY" not in str(m.get("content"))] == [
        id(m) for m in fresh.messages if "SUMMARY" not in str(m.get("content"))
    ]
