"""Parity with LangChain: ``wf.fit`` keeps exactly the messages of
``trim_messages(strategy="last", include_system=True, start_on="human", allow_partial=False)``
given the same counter, whenever the latest round fits (ARCHITECTURE.md invariant 7).

LangChain counts through ``token_counter(list_of_messages)``; here that function converts the
LangChain messages back to OpenAI dicts and counts them with the windowfit counter, so both
sides see identical numbers (checked per message; ``text_format="block"`` keeps content parts
apart, the default joins them with newlines and changes their count).

Reply priming: ``_last_max_tokens`` charges ``token_counter([system])`` (which includes the
priming) against the budget, then checks ``token_counter(window) <= budget - that`` (priming
again), so with a system message LangChain charges the priming twice. Parity therefore uses a
counter with ``reply_priming=0``; ``test_langchain_charges_priming_twice_with_a_system_message``
pins the difference down.
"""

from __future__ import annotations

from typing import Any

import pytest
from _histories import SETTINGS, is_user_turn, request_problems, valid_histories
from hypothesis import assume, event, given
from hypothesis import strategies as st

pytest.importorskip("langchain_core")

import windowfit as wf
from langchain_core.messages import (
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
    trim_messages,
)

wf.register_model(
    wf.ModelInfo(
        name="parity-model",
        provider="test",
        tokenizer="cl100k_base",
        context_window=100_000,
        max_output_tokens=0,
        reply_priming=0,
    )
)
PARITY = wf.Counter(model="parity-model")
PRIMED = wf.Counter(encoding="cl100k_base")  # reply_priming 3


def lc_counter(counter: wf.Counter) -> Any:
    def count(messages: list[BaseMessage]) -> int:
        # text_format="block" keeps content parts apart; the default "string" joins them with
        # newlines, which changes the count of multi-part messages.
        return counter.count_messages(convert_to_openai_messages(messages, text_format="block"))

    return count


def lc_kept(msgs: list[dict[str, Any]], budget: int, counter: wf.Counter) -> list[int]:
    """Positions of the messages LangChain keeps."""
    lc = convert_to_messages(msgs)
    out = trim_messages(
        lc,
        max_tokens=budget,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
        token_counter=lc_counter(counter),
    )
    where = {id(m): i for i, m in enumerate(lc)}
    return [where[id(m)] for m in out]


def latest_round_cost(msgs: list[dict[str, Any]], counter: wf.Counter) -> int | None:
    """Tokens of the system message (index 0) + the latest round + priming: the least budget
    at which parity is promised. None without a user turn."""
    users = [i for i, m in enumerate(msgs) if is_user_turn(m)]
    if not users:
        return None
    head = msgs[:1] if msgs and msgs[0]["role"] == "system" else []
    return counter.count_messages(head + msgs[users[-1] :])


def check_parity(
    msgs: list[dict[str, Any]], budget: int, counter: wf.Counter = PARITY
) -> list[int]:
    ours = wf.fit(msgs, budget, counter=counter).kept
    theirs = lc_kept(msgs, budget, counter)
    assert ours == theirs, f"windowfit {ours} != LangChain {theirs} at budget {budget}"
    return ours


@pytest.fixture(scope="module", autouse=True)
def _round_trip_is_count_preserving() -> None:
    """The histories used here survive LangChain's conversion with identical counts."""
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "bob"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"q": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    back = convert_to_openai_messages(convert_to_messages(msgs), text_format="block")
    assert [PARITY.count_message(m) for m in back] == [PARITY.count_message(m) for m in msgs]


# ---------------------------------------------------------------- generated


@SETTINGS
@given(msgs=valid_histories(), data=st.data())
def test_parity_generated(msgs: list[dict[str, Any]], data: st.DataObject) -> None:
    assert request_problems(msgs) == []
    back = convert_to_openai_messages(convert_to_messages(msgs), text_format="block")
    assert [PARITY.count_message(m) for m in back] == [PARITY.count_message(m) for m in msgs]
    need = latest_round_cost(msgs, PARITY)
    assume(need is not None)
    total = PARITY.count_messages(msgs)
    budget = data.draw(
        st.one_of(
            st.integers(need, total + 5),
            st.sampled_from([need, total, max(total - 1, need)]),
        )
    )
    kept = check_parity(msgs, budget)
    event("all kept" if len(kept) == len(msgs) else "trimmed")


@SETTINGS
@given(msgs=valid_histories(), data=st.data())
def test_below_the_latest_round_windowfit_still_sends_a_valid_request(
    msgs: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Outside the parity promise (the latest round does not fit), LangChain may send nothing
    or a window cut inside a tool round; windowfit keeps its pins and whole tool units."""
    need = latest_round_cost(msgs, PARITY)
    assume(need is not None and need > 0)
    budget = data.draw(st.integers(0, need - 1))
    try:
        r = wf.fit(msgs, budget, counter=PARITY)
    except wf.BudgetError:
        return
    assert request_problems(r.messages) == []
    assert r.tokens <= budget


# ---------------------------------------------------------------- hand-written


def call(ids: list[str], text: str = "") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": "search", "arguments": f'{{"query": "{i}"}}'},
            }
            for i in ids
        ],
    }


def tool(i: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": text}


HISTORY = [
    {"role": "system", "content": "You are a careful research assistant."},
    {"role": "user", "content": "Find the population of Lyon."},
    call(["a1"]),
    tool("a1", "Lyon has about 520,000 inhabitants (2021 census). " * 3),
    {"role": "assistant", "content": "Lyon has about 520,000 inhabitants."},
    {"role": "user", "content": "And of Marseille and Nice?"},
    call(["b1", "b2"], "Looking both up."),
    tool("b1", "Marseille: 873,000 inhabitants. " * 4),
    tool("b2", "Nice: 342,000 inhabitants. " * 4),
    {"role": "assistant", "content": "Marseille about 873,000; Nice about 342,000."},
    {"role": "user", "content": "Which is the largest of the three?"},
    call(["c1"]),
    tool("c1", "Marseille > Lyon > Nice"),
    {"role": "assistant", "content": "Marseille."},
    {"role": "assistant", "content": "Anything else?"},
]


def round_budgets(msgs: list[dict[str, Any]], counter: wf.Counter) -> list[int]:
    """Budgets at which exactly k latest rounds fit, and one token less."""
    users = [i for i, m in enumerate(msgs) if is_user_turn(m)]
    head = msgs[:1] if msgs[0]["role"] == "system" else []
    out = []
    for u in users:
        b = counter.count_messages(head + msgs[u:])
        out += [b - 1, b, b + 1]
    return out


@pytest.mark.parametrize(
    "budget", [b for b in round_budgets(HISTORY, PARITY) if b >= latest_round_cost(HISTORY, PARITY)]
)
def test_parity_rounds_that_exactly_fit(budget: int) -> None:
    """Tool calls in the latest round, trailing assistant messages after the latest user,
    rounds that fit to the token and one token short."""
    check_parity(HISTORY, budget)


def test_parity_budget_equal_to_total() -> None:
    total = PARITY.count_messages(HISTORY)
    assert check_parity(HISTORY, total) == list(range(len(HISTORY)))
    assert check_parity(HISTORY, total - 1) == [0, *range(5, len(HISTORY))]


def test_parity_exact_round_boundaries() -> None:
    # the two latest rounds fit exactly: both keep them, not a token of the third
    b = PARITY.count_messages([HISTORY[0], *HISTORY[5:]])
    assert check_parity(HISTORY, b) == [0, *range(5, 15)]
    assert check_parity(HISTORY, b - 1) == [0, *range(10, 15)]


def test_parity_without_system_and_leading_assistant() -> None:
    msgs = [{"role": "assistant", "content": "Hello! How can I help?"}, *HISTORY[1:]]
    total = PARITY.count_messages(msgs)
    # everything fits, but the window must start on a user turn: both drop the greeting
    assert check_parity(msgs, total) == list(range(1, len(msgs)))
    for b in round_budgets(msgs, PARITY):
        if b >= latest_round_cost(msgs, PARITY):
            check_parity(msgs, b)


def test_parity_latest_user_is_last() -> None:
    msgs = [*HISTORY[:10], {"role": "user", "content": "Thanks!"}]
    for b in round_budgets(msgs, PARITY):
        if b >= latest_round_cost(msgs, PARITY):
            check_parity(msgs, b)


def test_parity_only_system_and_one_user() -> None:
    msgs = [HISTORY[0], {"role": "user", "content": "hi"}]
    check_parity(msgs, PARITY.count_messages(msgs))


def test_langchain_charges_priming_twice_with_a_system_message() -> None:
    """Why parity uses reply_priming=0: with a system message and priming P, LangChain needs
    P more tokens than the request costs; windowfit charges it once (the request's real cost)."""
    P = PRIMED.count_messages([HISTORY[0]]) - PRIMED.count_message(HISTORY[0])
    assert P == 3
    total = PRIMED.count_messages(HISTORY)
    ours = wf.fit(HISTORY, total, counter=PRIMED)
    assert ours.kept == list(range(len(HISTORY))) and ours.tokens == total
    theirs = lc_kept(HISTORY, total, PRIMED)
    assert theirs != ours.kept  # LangChain drops the oldest round
    assert lc_kept(HISTORY, total + P, PRIMED) == ours.kept  # ... unless given P more
    # without a system message LangChain charges it once, like windowfit
    no_sys = HISTORY[1:]
    t = PRIMED.count_messages(no_sys)
    assert (
        wf.fit(no_sys, t, counter=PRIMED).kept
        == lc_kept(no_sys, t, PRIMED)
        == list(range(len(no_sys)))
    )
