"""Message and turn caps of ``wf.fit`` (``max_messages``, ``max_turns``) over generated histories.

The reference is the spec's slow fit (``_histories.expect``: pins, then units newest first
down to the latest user turn, then whole rounds, each step re-summed from scratch) with the
caps checked at every step; every window invariant of an uncapped fit is checked again.
"""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from _histories import (
    SETTINGS,
    expect,
    histories,
    is_user_turn,
    request_problems,
)
from hypothesis import given
from hypothesis import strategies as st

COUNTER = wf.Counter(encoding="o200k_base")


def expect_capped(
    msgs: list[dict[str, Any]],
    budget: int,
    max_messages: int | None,
    max_turns: int | None,
    **opts: Any,
) -> tuple[list[int], str]:
    """(kept indices, stop reason) of the spec's fit with both caps."""
    e = expect(msgs, budget, COUNTER, max_messages=max_messages, max_turns=max_turns, **opts)
    return e.kept or [], e.stop_reason or "all_fit"


@st.composite
def capped_cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int, int | None, int | None, dict]:
    msgs = draw(histories(max_events=10, huge=False))
    opts = {
        "keep_system": draw(st.booleans()),
        "keep_last_user": draw(st.sampled_from([True, True, False])),
        "start_on": draw(st.sampled_from(["user", "user", None])),
        "unanswered": draw(st.sampled_from(["drop", "strip"])),
    }
    total = COUNTER.count_messages(msgs) if msgs else 0
    budget = draw(st.one_of(st.integers(0, total + 10), st.just(10**9)))
    max_messages = draw(st.one_of(st.none(), st.integers(0, len(msgs) + 1)))
    max_turns = draw(st.one_of(st.none(), st.integers(0, 6)))
    return msgs, budget, max_messages, max_turns, opts


@SETTINGS
@given(capped_cases())
def test_caps_match_the_spec_and_keep_every_window_invariant(case: tuple) -> None:
    msgs, budget, max_messages, max_turns, opts = case
    # the reference models selection only; cutting an oversized round is tested elsewhere
    cut = {"oversize": "drop"}
    want, stop = expect_capped(msgs, budget, max_messages, max_turns, **opts)
    pins_over_budget = expect(msgs, budget, COUNTER, **opts).budget_error
    if pins_over_budget:
        with pytest.raises(wf.BudgetError):
            wf.fit(
                msgs,
                budget,
                counter=COUNTER,
                max_messages=max_messages,
                max_turns=max_turns,
                **opts,
                **cut,
            )
        return
    r = wf.fit(
        msgs, budget, counter=COUNTER, max_messages=max_messages, max_turns=max_turns, **opts, **cut
    )
    assert r.kept == want
    if msgs:
        assert r.stats["stop_reason"] == stop
    # the window invariants of an uncapped fit still hold
    assert request_problems(r.messages) == []
    assert r.tokens <= budget
    assert r.tokens == (COUNTER.count_messages(r.messages) if r.messages else 0)
    assert sorted(r.kept + r.dropped) == list(range(len(msgs)))
    # caps only take away: the capped window is inside the uncapped one
    free = wf.fit(msgs, budget, counter=COUNTER, **opts, **cut)
    assert set(r.kept) <= set(free.kept)
    # whole units: a kept call has every result the uncapped fit sends with it, and a kept
    # result its call
    e = expect(msgs, 10**12, COUNTER, **opts)
    kept = set(r.kept)
    for unit in e.analysis.units:
        assert all(i in kept for i in unit) or not any(i in kept for i in unit)


@SETTINGS
@given(capped_cases())
def test_caps_hold_beyond_the_pins(case: tuple) -> None:
    msgs, _, max_messages, max_turns, opts = case
    r = wf.fit(msgs, 10**9, counter=COUNTER, max_messages=max_messages, max_turns=max_turns, **opts)
    pinned = wf.fit(msgs, 10**9, counter=COUNTER, max_messages=0, max_turns=0, **opts)
    turns = sum(is_user_turn(m) for m in r.messages)
    pin_turns = sum(is_user_turn(m) for m in pinned.messages)
    if max_messages is not None:
        assert len(r.kept) <= max(max_messages, len(pinned.kept))
    if max_turns is not None:
        assert turns <= max(max_turns, pin_turns)


def test_a_call_is_never_kept_without_its_results() -> None:
    msgs = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for k in range(3)
            ],
        },
        *({"role": "tool", "tool_call_id": f"c{k}", "content": "result"} for k in range(3)),
        {"role": "assistant", "content": "done"},
    ]
    r = wf.fit(msgs, 10**6, counter=COUNTER, start_on=None, max_messages=5)
    # the pinned user turn and the answer: the 4-message call unit would make 6
    assert r.kept == [0, 5]
    assert r.stats["stop_reason"] == "max_messages"
    assert request_problems(r.messages) == []
    assert wf.fit(msgs, 10**6, counter=COUNTER, start_on=None, max_messages=6).kept == list(
        range(6)
    )


@pytest.mark.parametrize(
    ("kw", "exc"),
    [
        ({"max_messages": -1}, ValueError),
        ({"max_turns": -2}, ValueError),
        ({"max_messages": 1.5}, TypeError),
        ({"max_turns": True}, TypeError),
        ({"max_messages": "40"}, TypeError),
    ],
)
def test_bad_caps_are_rejected_with_their_name(kw: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc, match=next(iter(kw))) as info:
        wf.fit([{"role": "user", "content": "hi"}], 100, counter=COUNTER, **kw)
    assert isinstance(info.value, wf.WindowfitError)
