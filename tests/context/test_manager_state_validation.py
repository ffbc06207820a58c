"""Every field of a loaded state is checked against the history it comes with.

A carried state is bookkeeping the manager trusts to skip work: which messages are system
prompts, where the latest user message is, where the window starts, how far old tool outputs
are masked. A field that was edited, corrupted or written for another history must not drop
the system prompt, the agent's task or the tool output the agent acts on, nor leave messages
neither sent nor summarized: it is reset, the reset is named in ``stats``, and what is sent
is what a sound state sends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import windowfit as wf

COUNTER = wf.Counter(encoding="o200k_base")
SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer with ticket numbers."}
TASK = {"role": "user", "content": "Find why the parser drops the last column of the CSV."}


def _manager(**kw: Any) -> wf.ContextManager:
    base: dict[str, Any] = {
        "counter": COUNTER,
        "context_window": 3_000,
        "output_reserve": 300,
        "summarizer": "none",
        "tool_output_dir": "off",
    }
    return wf.ContextManager(**{**base, **kw})


def _chat(rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [dict(SYSTEM)]
    for r in range(rounds):
        history.append({"role": "user", "content": f"Question {r}: " + "word " * 40 + f"T-{r}"})
        history.append({"role": "assistant", "content": f"Answer {r}: " + "text " * 40})
    return history


def _agent_loop(rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [dict(SYSTEM), dict(TASK)]
    for k in range(rounds):
        cid = f"call_{k}"
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "grep", "arguments": f'{{"k": {k}}}'},
                    }
                ],
            }
        )
        output = " ".join(f"line{k}-{j} column buffer offset" for j in range(60))
        history.append({"role": "tool", "tool_call_id": cid, "content": output})
        history.append({"role": "assistant", "content": f"step {k} done"})
    return history


def _turn_by_turn(
    cm: wf.ContextManager, full: list[dict[str, Any]], cuts: list[tuple[int, int]] | None = None
) -> dict[str, Any]:
    """The state after preparing ``full`` one message at a time (as a chat or an agent would);
    no turn of a sound run resets anything. ``cuts`` collects (history length, cut) at each
    move of the cut."""
    history: list[dict[str, Any]] = []
    state: dict[str, Any] | None = None
    for m in full:
        history.append(m)
        if m["role"] != "tool":
            p = cm.prepare(history, state=state)
            assert p.stats["state_reset"] is False, p.stats["state_reset_reason"]
            if cuts is not None and (state is None or p.state["cut"] != state["cut"]):
                cuts.append((len(history), p.state["cut"]))
            state = p.state
    assert state is not None
    return state


def _same_as(p: wf.Prepared, q: wf.Prepared) -> None:
    """``p`` sends what ``q`` sends."""
    assert p.messages == q.messages
    assert p.tokens == q.tokens


# -- scan -------------------------------------------------------------------------------------


def test_an_emptied_system_list_does_not_drop_the_system_prompt() -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    assert state["cut"] > 1, "the window must have moved past the system prompt"
    sound = cm.prepare(history, state=state)
    tampered = copy.deepcopy(state)
    tampered["scan"]["system"] = []
    p = cm.prepare(history, state=tampered)
    assert any(m is history[0] for m in p.messages), "the system prompt was dropped"
    assert p.stats["state_reset"] is True
    assert "'scan'" in p.stats["state_reset_reason"]
    _same_as(p, sound)
    assert p.state["scan"]["system"] == [0]


def test_a_lost_latest_user_does_not_drop_the_agents_task() -> None:
    cm = _manager()
    history = _agent_loop(40)
    state = _turn_by_turn(cm, history)
    assert state["cut"] > 1 and state["scan"]["last_user"] == 1
    sound_state = {**state, "head_user": None}
    sound = cm.prepare(history, state=sound_state)
    assert any(m is history[1] for m in sound.messages)
    tampered = copy.deepcopy(sound_state)
    tampered["scan"]["last_user"] = None
    p = cm.prepare(history, state=tampered)
    assert any(m is history[1] for m in p.messages), "the agent's task was dropped"
    assert "'scan'" in p.stats["state_reset_reason"]
    _same_as(p, sound)


def test_a_scan_naming_a_message_of_another_role_is_not_reused() -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    tampered = copy.deepcopy(state)
    tampered["scan"]["last_user"] = len(history) - 1  # an assistant message
    # a consistent check digest too: the roles themselves are checked
    scan = tampered["scan"]
    from windowfit.context.state import _scan_check

    scan["check"] = _scan_check(
        scan["n"],
        scan["counter"],
        scan["tokens"],
        scan["system"],
        scan["last_user"],
        scan["anchor"],
    )
    p = cm.prepare(history, state=tampered)
    assert "another role" in p.stats["state_reset_reason"]
    _same_as(p, cm.prepare(history, state=state))


@pytest.mark.parametrize("edit", [("tokens", 0), ("last_user", 0), ("system", [])])
def test_a_scan_without_its_check_is_scanned_again(edit: tuple[str, Any]) -> None:
    # Found by test_fuzz: with the check removed, an edited scan was carried on as it was.
    cm = _manager()
    history = _agent_loop(30)
    state = _turn_by_turn(cm, history)
    tampered = copy.deepcopy(state)
    del tampered["scan"]["check"]
    tampered["scan"][edit[0]] = edit[1]
    p = cm.prepare(history, state=tampered)
    assert "carries no check" in p.stats["state_reset_reason"]
    _same_as(p, cm.prepare(history, state=state))
    again = cm.prepare(history, state=p.state)
    assert again.stats["state_reset"] is False


# -- mask boundary ----------------------------------------------------------------------------


@pytest.mark.parametrize("past", [0, 1, 10**6])
def test_a_mask_boundary_past_the_newest_outputs_masks_none_of_them(past: int) -> None:
    cm = _manager(mask_keep=2, mask_clear_at_least=150)
    history = _agent_loop(30)
    state = _turn_by_turn(cm, history)
    assert state.get("mask_until", 0) > 0, "masking must have started"
    newest = max(i for i, m in enumerate(history) if m["role"] == "tool")
    tampered = {**state, "mask_until": newest + past}
    p = cm.prepare(history, state=tampered)
    assert any(m is history[newest] for m in p.messages), "the output acted on was masked"
    assert "'mask_until'" in p.stats["state_reset_reason"]
    assert p.state.get("mask_until", 0) <= newest - 1


# -- cut --------------------------------------------------------------------------------------


def _replanned(cm: wf.ContextManager, history: list[Any], state: dict[str, Any]) -> wf.Prepared:
    """What a sound state with no cut yet sends: the window planned from the summary's end."""
    sound = {**state, "cut": state["summarized_until"], "head_user": None, "scan": None}
    return cm.prepare(history, state=sound)


@pytest.mark.parametrize("where", ["n-2", "n-6", "huge"])
def test_a_wrong_cut_is_planned_again_and_not_saved_back(where: str) -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    n = len(history)
    cut = {"n-2": n - 2, "n-6": n - 6, "huge": 10**9}[where]
    p = cm.prepare(history, state={**state, "cut": cut})
    assert "'cut'" in p.stats["state_reset_reason"]
    assert p.state["cut"] != cut
    expected = _replanned(cm, history, state)
    _same_as(p, expected)
    # nothing is left unsent that the window had room for
    assert p.stats["messages_pending"] == expected.stats["messages_pending"]
    assert p.stats["tokens"] > cm.context_window // 4


def test_a_cut_made_by_a_plan_is_kept() -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    p = cm.prepare(history, state=state)
    assert p.stats["state_reset"] is False
    assert p.state["cut"] == state["cut"]


@pytest.mark.parametrize("where", ["n-2", "n-6"])
def test_a_wrong_cut_is_not_vouched_for_by_edited_cut_tokens(where: str) -> None:
    """A steady call checks its cut from the carried ``cut_tokens`` when ``cut_check``
    vouches for them; edited ones (here: a window that looks over the low-water mark) are
    not used, the window is counted and the wrong cut planned again."""
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    assert state["cut_check"] is not None
    n = len(history)
    cut = {"n-2": n - 2, "n-6": n - 6}[where]
    p = cm.prepare(history, state={**state, "cut": cut, "cut_tokens": 0})
    assert "'cut'" in p.stats["state_reset_reason"]
    _same_as(p, _replanned(cm, history, state))


def test_a_vouched_cut_is_checked_without_counting_its_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    counted: list[int] = []
    counter = cm.settings.counter
    count = type(counter).count_messages
    monkeypatch.setattr(
        type(counter),
        "count_messages",
        lambda self, msgs: counted.append(len(msgs)) or count(self, msgs),
    )
    window = len(history) - state["cut"]
    p = cm.prepare(history, state=state)
    assert p.stats["state_reset"] is False and p.state["cut"] == state["cut"]
    assert all(k < window for k in counted), counted
    # a state from before cut_check: the window is counted, and the cut still kept
    counted.clear()
    p = cm.prepare(history, state={k: v for k, v in state.items() if k != "cut_check"})
    assert p.stats["state_reset"] is False and p.state["cut"] == state["cut"]
    assert max(counted) > window, counted


def test_a_cut_under_a_message_cap_is_kept() -> None:
    cm = _manager(max_messages=4)
    history = _chat(40)
    cuts: list[tuple[int, int]] = []
    _turn_by_turn(cm, history, cuts)  # every turn after each cut keeps it
    low = cm.budget(history).low_water
    by_cap = [(n, cut) for n, cut in cuts if cut > 1]
    assert by_cap and any(cm.counter.count_messages(history[c - 2 : n]) < low for n, c in by_cap)


def test_a_wrong_held_user_message_is_not_pinned() -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    older = 1  # a user message, but not the one the cut was made after
    p = cm.prepare(history, state={**state, "head_user": older})
    assert not any(m is history[older] for m in p.messages)
    assert "'head_user'" in p.stats["state_reset_reason"]


def test_a_backoff_past_its_longest_pause_is_reset() -> None:
    cm = _manager()
    history = _chat(10)
    state = cm.prepare(history).state
    p = cm.prepare(history, state={**state, "failures": 3, "retry_turn": 10**9})
    assert "'retry_turn'" in p.stats["state_reset_reason"]
    assert p.state["retry_turn"] == 0


# -- prev -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prev",
    [
        {"head": [], "start": 0, "end": float("inf"), "tools": ""},  # OverflowError
        {"head": [], "start": 0, "end": "x", "tools": ""},  # ValueError
        {"head": 5, "start": 0, "end": 3, "tools": ""},  # TypeError
        {"head": [None], "start": 0, "end": 3, "tools": ""},
        {"head": [], "start": [1], "end": 3, "tools": ""},
        "not a mapping",
    ],
)
def test_a_malformed_prev_is_dropped_with_a_reason(prev: Any) -> None:
    cm = _manager()
    history = _chat(40)
    state = _turn_by_turn(cm, history)
    sound = cm.prepare(history, state={**state, "prev": None})
    p = cm.prepare(history, state={**state, "prev": prev})
    assert "'prev'" in p.stats["state_reset_reason"]
    _same_as(p, sound)
    assert p.stats["prefix_tokens_shared"] == 0


def test_a_sound_state_resets_nothing() -> None:
    for cm, history in ((_manager(), _chat(40)), (_manager(mask_keep=2), _agent_loop(30))):
        state = _turn_by_turn(cm, history)
        p = cm.prepare(history, state=state)
        assert p.stats["state_reset"] is False and p.stats["state_reset_reason"] is None


def test_a_nan_next_anchor_is_not_saved_back() -> None:
    cm = _manager()
    history = _chat(10)
    state = cm.prepare(history).state
    p = cm.prepare(history, state={**state, "next_anchor": float("nan")})
    assert "'next_anchor'" in p.stats["state_reset_reason"]
    json.dumps(p.state, allow_nan=False)  # strict JSON again
