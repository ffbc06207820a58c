"""Property tests of every window invariant (ARCHITECTURE.md "Window invariants") of wf.fit,
plus unanswered="strip" and wf.repair, over generated histories and budgets.

Each invariant is checked from the outside: the validator and the reference in
``_histories`` are written from the spec, not from the implementation, and token figures come
from the public counter API. Run longer with FIT_EXAMPLES=2000.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
import windowfit as wf
from _histories import (
    SETTINGS,
    Expected,
    PinError,
    analyze,
    call_ids,
    expect,
    histories,
    is_system,
    is_user_turn,
    priming,
    request_problems,
    sent_message,
)
from hypothesis import event, given
from hypothesis import strategies as st
from windowfit.testing import FIT_PROMISES, budgets, check_window

COUNTERS = {
    "cl100k": wf.Counter(encoding="cl100k_base"),
    "o200k": wf.Counter(encoding="o200k_base"),
}
ENCODINGS = pytest.mark.parametrize("enc", sorted(COUNTERS))


@dataclass
class Case:
    messages: list[dict[str, Any]]
    budget: int
    options: dict[str, Any]
    counter: Any


@st.composite
def cases(
    draw: st.DrawFn,
    counter: Any,
    *,
    default_options: bool = False,
    unanswered: str | None = None,
    **history_kw: Any,
) -> Case:
    msgs = draw(histories(**history_kw))
    n = len(msgs)
    if default_options:
        opts: dict[str, Any] = {}
    else:
        opts = {
            "keep_system": draw(st.booleans()),
            "keep_last_user": draw(st.sampled_from([True, True, False])),
            "start_on": draw(st.sampled_from(["user", "user", None])),
            "unanswered": unanswered or draw(st.sampled_from(["drop", "strip"])),
            "pinned": draw(st.lists(st.integers(-n, n - 1), max_size=2))
            if n and draw(st.integers(0, 3)) == 0
            else [],
        }
    budget = draw(budgets(msgs, counter, **opts))
    return Case(msgs, budget, opts, counter)


def run(case: Case) -> tuple[Expected | None, Any]:
    """(the spec's expectation or None for a bad pin, the fit result or the exception)."""
    try:
        e: Expected | None = expect(case.messages, case.budget, case.counter, **case.options)
    except PinError:
        e = None
    try:
        # the selection itself: an oversized round is left out, as the reference does
        r = wf.fit(
            case.messages, case.budget, counter=case.counter, oversize="drop", **case.options
        )
    except (ValueError, TypeError) as exc:
        r = exc
    return e, r


def successful(case: Case) -> tuple[Expected, wf.FitResult]:
    e, r = run(case)
    if e is None:
        assert isinstance(r, ValueError) and not isinstance(r, wf.BudgetError), r
        assert "pinned" in str(r)
        event("bad pin")
        return None, None  # type: ignore[return-value]
    if e.budget_error:
        assert isinstance(r, wf.BudgetError), (
            f"pins {e.pins_tokens}+{e.priming} > {case.budget}: {r!r}"
        )
        event("budget error")
        return None, None  # type: ignore[return-value]
    assert isinstance(r, wf.FitResult), f"pins {e.pins_tokens}+{e.priming} <= {case.budget}: {r!r}"
    event(f"stop: {r.stats['stop_reason']}")
    return e, r


# ---------------------------------------------------------------- (1) within budget / BudgetError


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_1_tokens_exact_within_budget_or_budget_error(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = run(case)
    c = case.counter
    if e is None:
        assert isinstance(r, ValueError) and not isinstance(r, wf.BudgetError), r
        return
    if e.budget_error:
        # exactly when the pins alone (+ reply priming) exceed the budget
        assert isinstance(r, wf.BudgetError), r
        assert isinstance(r, ValueError)
        msg = str(r)
        assert str(case.budget) in msg and str(e.pins_tokens) in msg, msg
        return
    assert isinstance(r, wf.FitResult), r
    assert r.tokens == c.count_messages(r.messages) <= case.budget
    assert r.budget == case.budget
    assert r.stats["tokens"] == r.tokens
    assert r.stats["pins_tokens"] == e.pins_tokens
    if r.messages:
        assert r.stats["tokens_kept"] + priming(c) == r.tokens
    assert r.stats["tokens_dropped"] == sum(c.count_message(case.messages[i]) for i in r.dropped)
    assert (r.stats["messages_kept"], r.stats["messages_dropped"]) == (len(r.kept), len(r.dropped))


# ---------------------------------------------------------------- (2) subsequence, partition, identity


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_2_ordered_subsequence_partition_identity(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    n = len(case.messages)
    assert r.kept == sorted(r.kept) and r.dropped == sorted(r.dropped)
    assert sorted(r.kept + r.dropped) == list(range(n))
    assert len(r.messages) == len(r.kept)
    for k, i in zip(r.messages, r.kept):
        # a stripped call, a message kept without its orphan results, an empty call list
        # left out: a new dict equal to the reference's; anything else the input itself
        sent = sent_message(case.messages, e.analysis, i)
        if sent is case.messages[i]:
            assert k is case.messages[i]
        else:
            assert k is not case.messages[i] and k == sent


# ---------------------------------------------------------------- (3) pins


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_3_pins_kept(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    msgs, o = case.messages, case.options
    kept = set(r.kept)
    a = e.analysis
    if o.get("keep_system", True):
        # every system/developer message that can be sent at all (one between a call and its
        # results is sent; it is the call that goes)
        for i, m in enumerate(msgs):
            if is_system(m):
                assert i in kept, f"system message {i} dropped"
    if o.get("keep_last_user", True):
        users = [i for i, m in enumerate(a.paired) if is_user_turn(m)]
        if users:
            assert users[-1] in kept
    n = len(msgs)
    for p in o.get("pinned", []):
        q = p + n if p < 0 else p
        assert q in kept
        # pinning a message pins its whole unit
        assert set(a.units[a.unit_of[q]]) <= kept


# ---------------------------------------------------------------- (4) no orphans


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_4_no_orphans_valid_request(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    assert request_problems(r.messages) == []
    # unanswered calls and results without their call are dropped, whatever the budget
    a = e.analysis
    for i in r.kept:
        assert a.valid(i), f"kept message {i} is {a.verdict[i]}"
    assert r.stats["orphans_removed"] == a.verdict.count("orphan")
    assert r.stats["unanswered_removed"] == a.verdict.count("unanswered")


# ---------------------------------------------------------------- (5) contiguous recent window


def window_start(e: Expected, r: wf.FitResult, n: int) -> int:
    return next((i for i in r.kept if not e.pinned_msg(i)), n)


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_5_contiguous_window_starting_on_user(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    msgs, a = case.messages, e.analysis
    n = len(msgs)
    kept = set(r.kept)
    w = window_start(e, r, n)
    # every sendable message from the window's start on is kept (only orphans and dropped
    # unanswered calls may be skipped inside it)
    for i in range(w, n):
        assert not a.valid(i) or i in kept, f"hole at {i} in a window starting at {w}"
    if (
        case.options.get("start_on", "user") is not None
        and e.latest_user is not None
        and w < e.latest_user
    ):
        u = max((i for i in range(w + 1) if is_user_turn(a.paired[i]) and a.valid(i)), default=None)
        assert u is not None, f"window reaches {w}, before any user turn"
        assert all(not a.valid(i) or e.pinned_msg(i) for i in range(u, w)), (
            f"window starts mid-round at {w}"
        )
        event("window reaches before the latest user turn")


# ---------------------------------------------------------------- (6) maximal


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_6_maximal(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    msgs, a = case.messages, e.analysis
    n = len(msgs)
    room = case.budget - (r.tokens if r.messages else e.priming)
    w = window_start(e, r, n)
    nxt = max((i for i in range(w) if a.valid(i) and not e.pinned_msg(i)), default=None)
    if nxt is None:
        assert r.stats["stop_reason"] == "all_fit"
        return
    by_rounds = (
        case.options.get("start_on", "user") is not None
        and e.latest_user is not None
        and nxt < e.latest_user
    )
    if by_rounds:
        u = max(
            (i for i in range(nxt + 1) if is_user_turn(a.paired[i]) and a.valid(i)), default=None
        )
        if u is None:
            # only messages before the first user turn are left out: start_on="user"
            assert r.stats["stop_reason"] == "start_on_user"
            return
        step = [i for i in range(u, w) if a.valid(i) and not e.pinned_msg(i)]
        what = f"round {u}..{w}"
    else:
        step = a.units[a.unit_of[nxt]]  # type: ignore[index]
        what = f"unit {step}"
    cost = sum(e.cost[i] for i in step)
    assert cost > room, f"the next older {what} ({cost} tokens) fits in the {room} left"
    assert r.stats["stop_reason"] == "budget"


# ---------------------------------------------------------------- (7) deterministic, no mutation


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_7_deterministic_and_input_untouched(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc]))
    before = copy.deepcopy(case.messages)
    ids = [id(m) for m in case.messages]
    _, r1 = run(case)
    _, r2 = run(case)
    assert case.messages == before and [id(m) for m in case.messages] == ids
    clone = Case(copy.deepcopy(case.messages), case.budget, case.options, case.counter)
    _, r3 = run(clone)
    # a fresh counter with its own empty cache gives the same answer as the warm shared one
    fresh = Case(
        case.messages,
        case.budget,
        case.options,
        wf.Counter(encoding=case.counter.encoding_name, cache_entries=10_000),
    )
    _, r4 = run(fresh)
    for other in (r2, r3, r4):
        if isinstance(r1, Exception):
            assert type(other) is type(r1) and str(other) == str(r1)
        else:
            assert (other.kept, other.dropped, other.tokens, other.stats, other.messages) == (
                r1.kept,
                r1.dropped,
                r1.tokens,
                r1.stats,
                r1.messages,
            )
    assert case.messages == before


# ---------------------------------------------------------------- the whole selection


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_matches_reference_selection(enc: str, data: st.DataObject) -> None:
    """The kept indices and stop reason equal the slow reference's (all invariants at once)."""
    case = data.draw(cases(COUNTERS[enc]))
    e, r = successful(case)
    if r is None:
        return
    assert (r.kept, r.stats["stop_reason"]) == (e.kept, e.stop_reason)


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_check_window_accepts_every_fit(enc: str, data: st.DataObject) -> None:
    """The public checker users run on their own windows passes every window fit returns
    (BudgetError included): it and fit agree on every invariant."""
    case = data.draw(cases(COUNTERS[enc]))
    e, r = run(case)
    if e is None:  # a pin naming a message that cannot be sent
        return
    check_window(case.messages, r, case.budget, case.counter, **{**FIT_PROMISES, **case.options})


@SETTINGS
@given(data=st.data())
def test_default_options_large_histories(data: st.DataObject) -> None:
    """Longer histories with the default options (the common call)."""
    case = data.draw(cases(COUNTERS["o200k"], default_options=True, max_events=40))
    e, r = successful(case)
    if r is None:
        return
    assert (r.kept, r.stats["stop_reason"]) == (e.kept, e.stop_reason)
    check_window(case.messages, r, case.budget, case.counter, **FIT_PROMISES)


# ---------------------------------------------------------------- unanswered="strip"


@ENCODINGS
@SETTINGS
@given(data=st.data())
def test_strip_keeps_text_removes_only_unanswered_calls(enc: str, data: st.DataObject) -> None:
    case = data.draw(cases(COUNTERS[enc], unanswered="strip"))
    c, msgs, budget = case.counter, case.messages, case.budget
    before = copy.deepcopy(msgs)
    _, r = successful(case)
    if r is None:
        return
    assert msgs == before, "input mutated"
    assert request_problems(r.messages) == []
    assert r.tokens == c.count_messages(r.messages) <= budget
    a = analyze(msgs, "strip")
    stripped = 0
    for k, i in zip(r.messages, r.kept):
        orig = msgs[i]
        if i in a.strips:
            stripped += len(a.strips[i])
            event("stripped a message")
            assert k is not orig, "a stripped message must be a new dict"
            assert call_ids(k) == [x for x in call_ids(orig) if x not in a.strips[i]]
            assert call_ids(k) or k.get("content"), "stripped down to an empty message"
            # everything else is untouched
            assert {key: v for key, v in k.items() if key not in ("tool_calls", "content")} == {
                key: v for key, v in orig.items() if key not in ("tool_calls", "content")
            }
            if isinstance(orig.get("content"), list):
                assert k["content"] == [
                    p
                    for p in orig["content"]
                    if not (p.get("type") == "tool_use" and p["id"] in a.strips[i])
                ]
            else:
                assert k.get("content") == orig.get("content")
        elif k is not orig and orig.get("tool_calls") == []:
            event("an empty tool_calls list left out")
            assert k == {key: v for key, v in orig.items() if key != "tool_calls"}
        elif k is not orig:
            # a message kept for its own text loses only its orphan tool_result blocks
            event("orphan results stripped from a message kept for its text")
            assert isinstance(orig.get("content"), list)
            gone = [p for p in orig["content"] if p not in k["content"]]
            assert gone and all(p.get("type") == "tool_result" for p in gone)
            assert r.stats["results_stripped"] > 0
        else:
            assert k is orig
    assert r.stats["calls_stripped"] == stripped


# ---------------------------------------------------------------- repair


@ENCODINGS
@SETTINGS
@given(msgs=histories(max_events=20), mode=st.sampled_from(["drop", "strip"]))
def test_repair_valid_idempotent_untouched(enc: str, msgs: list[dict[str, Any]], mode: str) -> None:
    c = COUNTERS[enc]
    before = copy.deepcopy(msgs)
    r = wf.repair(msgs, unanswered=mode, counter=c)
    assert msgs == before
    assert request_problems(r.messages) == []
    a = analyze(msgs, mode)
    assert r.kept == [i for i in range(len(msgs)) if a.valid(i)]
    assert sorted(r.kept + r.dropped) == list(range(len(msgs)))
    assert r.tokens == c.count_messages(r.messages)
    again = wf.repair(r.messages, unanswered=mode, counter=c)
    assert again.messages == r.messages and again.dropped == []
    assert all(x is y for x, y in zip(again.messages, r.messages))
    # fitting a repaired history with room for everything keeps everything
    if r.messages:
        f = wf.fit(r.messages, r.tokens, counter=c, unanswered=mode, start_on=None)
        assert f.kept == list(range(len(r.messages)))
