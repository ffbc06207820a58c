"""The masked window prefix a ContextManager keeps from one call to the next is never stale.

Below the mask boundary the masked copies of old tool outputs are reused turn after turn. The
reference here is a fresh manager with the same configuration, given the same history and
state: it has nothing to reuse, so any difference in what is sent (or in the stats) is a
stale reuse. Histories are edited in place under the same boundary, replaced by new lists of
the same length, and given states whose boundary or cut moved.
"""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

COUNTER = wf.Counter(encoding="o200k_base")
SYSTEM = {"role": "system", "content": "You are a coding agent."}
TASK = {"role": "user", "content": "Find why the parser drops the last column."}
WORDS = "parser lexer token column buffer stream offset unicode header footer".split()


def _manager() -> wf.ContextManager:
    return wf.ContextManager(
        counter=COUNTER,
        context_window=6_000,
        output_reserve=500,
        summarizer="none",
        tool_output_dir="off",
        mask_keep=2,
        mask_clear_at_least=150,
    )


def _round(k: int, words: int, *, reasoning: bool = False) -> list[dict[str, Any]]:
    cid = f"call_{k}"
    call: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": f"tool{k % 3}", "arguments": f'{{"k": {k}}}'},
            }
        ],
    }
    if reasoning:
        call["reasoning_content"] = f"thinking about step {k}: " + " ".join(WORDS) * 3
    output = " ".join(f"{WORDS[(k + j) % len(WORDS)]}{j}" for j in range(words))
    return [
        call,
        {"role": "tool", "tool_call_id": cid, "content": output},
        {"role": "assistant", "content": f"step {k} done"},
    ]


def _history(rounds: int, words: int = 120) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [SYSTEM, TASK]
    for k in range(rounds):
        if k % 4 == 3:
            history.append({"role": "user", "content": f"now check file {k}"})
        history += _round(k, words, reasoning=k % 2 == 0)
    return history


def _sent(p: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    stats = {k: v for k, v in p.stats.items() if k != "elapsed_ms"}
    return p.messages, stats


def _same_as_fresh(cm: wf.ContextManager, history: list[Any], state: Any) -> Any:
    """``cm.prepare`` after asserting it sends what a manager with no kept copies sends."""
    expected = _sent(_manager().prepare(history, state=state))
    p = cm.prepare(history, state=state)
    assert _sent(p) == expected
    return p


def _masked_agent_loop(rounds: int = 40) -> tuple[wf.ContextManager, list[Any], dict[str, Any]]:
    """A manager that prepared an agent loop turn by turn, its history and its last state, with
    masked messages inside the window (the boundary past the cut)."""
    full = _history(rounds)
    cm = _manager()
    history: list[Any] = []
    state: dict[str, Any] | None = None
    for m in full:
        history.append(m)
        if m["role"] != "tool":
            state = cm.prepare(history, state=state).state
    assert state is not None
    assert state["cut"] < state.get("mask_until", 0), "no masked message in the window"
    return cm, history, state


def _masked_in_window(history: list[Any], state: dict[str, Any]) -> list[int]:
    return [i for i in range(state["cut"], state["mask_until"]) if history[i]["role"] == "tool"]


def test_the_kept_copies_are_reused_and_the_window_is_the_fresh_one() -> None:
    cm, history, state = _masked_agent_loop()
    first = _same_as_fresh(cm, history, state)
    again = _same_as_fresh(cm, history, state)
    masked = [
        i for i, m in enumerate(first.messages) if m["role"] == "tool" and "cleared" in m["content"]
    ]
    assert masked, "nothing masked in the prompt"
    # the same copies, not new ones: the prompt prefix is the same objects turn after turn
    assert all(first.messages[i] is again.messages[i] for i in masked)


@pytest.mark.parametrize("role", ["tool", "user", "assistant"])
def test_a_history_edited_in_place_under_the_same_boundary(role: str) -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    i = next(
        i
        for i in range(state["cut"], state["mask_until"])
        if history[i]["role"] == role and history[i].get("content")
    )
    edited = dict(history[i])
    if role == "tool":
        edited["name"] = "renamed_tool"  # the placeholder names the tool
    else:
        edited["content"] = "an edited message " + edited["content"]
    history[i] = edited
    p = _same_as_fresh(cm, history, state)
    assert any(m is edited for m in p.messages) or role == "tool"
    if role == "tool":
        assert any("renamed_tool" in str(m.get("content")) for m in p.messages)


def test_a_tool_output_edited_in_place_to_a_short_one_is_sent_verbatim() -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    i = _masked_in_window(history, state)[0]
    history[i] = {**history[i], "content": "ok"}  # its placeholder would be longer: kept
    p = _same_as_fresh(cm, history, state)
    assert any(m is history[i] for m in p.messages)


def test_a_new_history_of_the_same_length() -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    # the same first message (the conversation's slot), everything else new and different
    other = [history[0]] + [dict(m) for m in history[1:]]
    for i in range(state["cut"], state["mask_until"]):
        if other[i]["role"] == "assistant" and isinstance(other[i].get("content"), str):
            other[i]["content"] += " (in the other conversation)"
    assert len(other) == len(history)
    p = _same_as_fresh(cm, other, state)
    assert not any(m is h for m in p.messages for h in history[1:])
    _same_as_fresh(cm, history, state)  # and back


@pytest.mark.parametrize("shift", [-4, -1, 3])
def test_a_changed_mask_boundary(shift: int) -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    moved = {**state, "mask_until": max(state["cut"] + 1, state["mask_until"] + shift)}
    _same_as_fresh(cm, history, moved)
    _same_as_fresh(cm, history, state)


def test_a_window_reaching_further_back_than_the_kept_copies() -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    back = {**state, "cut": max(2, state["cut"] - 12), "cut_tokens": 0, "scan": None}
    _same_as_fresh(cm, history, back)
    _same_as_fresh(cm, history, state)


def test_masking_language_and_tool_cap_are_part_of_what_is_kept() -> None:
    cm, history, state = _masked_agent_loop()
    cm.prepare(history, state=state)
    _same_as_fresh(cm, history, {**state, "mask_language": "zh"})
    capped = _manager()
    capped.tool_output_max_tokens = 40
    p = capped.prepare(history, state=state)
    fresh = _manager()
    fresh.tool_output_max_tokens = 40
    assert _sent(p) == _sent(fresh.prepare(history, state=state))


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("edit"), st.floats(0, 1)),
        st.tuples(st.just("copy"), st.floats(0, 1)),
        st.tuples(st.just("boundary"), st.integers(-6, 6)),
        st.tuples(st.just("cut"), st.integers(-10, 0)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_STEPS)
def test_any_sequence_of_edits_sends_what_a_fresh_manager_sends(
    steps: list[tuple[str, Any]],
) -> None:
    cm, history, state = _masked_agent_loop(30)
    k = 1000
    for op, arg in steps:
        given_state = state
        if op == "append":
            for _ in range(arg):
                history += _round(k, 120)
                k += 1
        elif op == "edit":  # in place, anywhere in the history after the system message
            i = 1 + int(arg * (len(history) - 2))
            history[i] = {**history[i], "name": f"edited{k}"}
            k += 1
        elif op == "copy":  # a new list; the messages from some point on new objects too
            j = int(arg * len(history))
            history = history[:j] + [dict(m) for m in history[j:]]
        elif op == "boundary" and "mask_until" in state:
            given_state = {**state, "mask_until": max(0, state["mask_until"] + arg)}
        elif op == "cut":
            given_state = {**state, "cut": max(0, state["cut"] + arg), "scan": None}
        state = _same_as_fresh(cm, history, given_state).state
