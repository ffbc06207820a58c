"""Parity with LangChain: ``wf.fit`` keeps exactly the messages of
``trim_messages(strategy="last", include_system=True, start_on="human", allow_partial=False)``
given the same counter, whenever the latest round fits (ARCHITECTURE.md invariant 7) — at
the same budget when the counter's reply priming is 0 or the history does not start with a
system message, and at LangChain's budget + ``reply_priming`` when it does.

LangChain counts through ``token_counter(list_of_messages)``; here that function converts the
LangChain messages back to OpenAI dicts and counts them with the windowfit counter, so both
sides see identical numbers (checked per message; ``text_format="block"`` keeps content parts
apart, the default joins them with newlines and changes their count).

Reply priming P (3 for OpenAI chat models, the default counter's): ``_last_max_tokens``
charges ``token_counter([system])`` (which includes P) against the budget, then checks
``token_counter(window) <= budget - that`` (P again), so with a system message first
LangChain charges P twice and a request it keeps at budget B + P costs B. windowfit charges
P once, the request's real cost. Measured on the README's LangChain example with the default
``gpt-4o`` counter: at every budget from 3,000 to 8,999 ``trim(h, B)`` equals
``trim_messages(h, B + 3)``, while at the same B they differ on 28 budgets (the 3 below each
round boundary). The tests below check both counters at every budget where the kept set
changes, and every budget of a hand-written history.
"""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from _histories import (
    SETTINGS,
    expect,
    is_user_turn,
    pins_cost,
    request_problems,
    valid_histories,
)
from hypothesis import assume, event, given
from hypothesis import strategies as st
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
DEFAULT = wf.Counter(model="gpt-4o")  # what wf.fit(..., model="gpt-4o") counts with
COUNTERS = {"priming-0": PARITY, "gpt-4o": DEFAULT}


def lc_budget(msgs: list[Any], budget: int, counter: wf.Counter) -> int:
    """The budget at which LangChain keeps what ``wf.fit`` keeps at ``budget``: P more when the
    history starts with a system message (LangChain charges the priming twice then)."""
    first = msgs[0] if msgs else None
    role = first.get("role") if isinstance(first, dict) else getattr(first, "type", None)
    return budget + (counter.reply_priming if role == "system" else 0)


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
    theirs = lc_kept(msgs, lc_budget(msgs, budget, counter), counter)
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


@pytest.mark.parametrize("name", list(COUNTERS))
def test_parity_generated(name: str) -> None:
    counter = COUNTERS[name]

    @SETTINGS
    @given(msgs=valid_histories(), data=st.data())
    def check(msgs: list[dict[str, Any]], data: st.DataObject) -> None:
        assert request_problems(msgs) == []
        back = convert_to_openai_messages(convert_to_messages(msgs), text_format="block")
        assert [counter.count_message(m) for m in back] == [counter.count_message(m) for m in msgs]
        need = latest_round_cost(msgs, counter)
        assume(need is not None)
        total = counter.count_messages(msgs)
        budget = data.draw(
            st.one_of(
                st.integers(need, total + 5),
                st.sampled_from([need, total, max(total - 1, need)]),
            )
        )
        kept = check_parity(msgs, budget, counter)
        event("all kept" if len(kept) == len(msgs) else "trimmed")

    check()


@SETTINGS
@given(msgs=valid_histories(), data=st.data())
def test_below_the_latest_round_windowfit_still_sends_a_valid_request(
    msgs: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Outside the parity promise (the latest round does not fit), LangChain may send nothing
    or a window cut inside a tool round; windowfit keeps its pins and whole tool units."""
    need = latest_round_cost(msgs, PARITY)
    assume(need is not None and need > 0)
    pins = pins_cost(msgs, PARITY)
    budget = data.draw(
        st.one_of(st.integers(0, need - 1), st.integers(min(pins, need - 1), need - 1))
    )
    too_small = expect(msgs, budget, PARITY).budget_error
    try:
        r = wf.fit(msgs, budget, counter=PARITY)
    except wf.BudgetError:
        # exactly when the pins plus priming exceed the budget, by the reference
        assert too_small, f"BudgetError at {budget}, the pins cost {pins}"
        event("BudgetError")
        return
    assert not too_small, f"no BudgetError at {budget}, the pins cost {pins}"
    event("fitted")
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


@pytest.mark.parametrize("name", list(COUNTERS))
def test_parity_at_every_budget(name: str) -> None:
    """Tool calls in the latest round, trailing assistant messages after the latest user,
    rounds that fit to the token and one token short: every budget from the least that keeps
    the latest round to the whole history and beyond, with and without reply priming."""
    counter = COUNTERS[name]
    need = latest_round_cost(HISTORY, counter)
    total = counter.count_messages(HISTORY)
    assert need is not None and need < total
    kept_sets = {tuple(check_parity(HISTORY, b, counter)) for b in range(need, total + 6)}
    assert len(kept_sets) == 3  # one, two and all three rounds: every boundary was crossed


@pytest.mark.parametrize("name", list(COUNTERS))
def test_same_budget_differs_only_by_the_double_charged_priming(name: str) -> None:
    """At LangChain's own budget the two differ exactly on the P budgets below each round
    boundary (none when P is 0): what the README says, measured."""
    counter = COUNTERS[name]
    P = counter.reply_priming
    need = latest_round_cost(HISTORY, counter)
    total = counter.count_messages(HISTORY)
    assert need is not None
    differ = [
        b
        for b in range(need, total + 6)
        if wf.fit(HISTORY, b, counter=counter).kept != lc_kept(HISTORY, b, counter)
    ]
    boundaries = sorted(b for b in round_budgets(HISTORY, counter)[1::3] if b >= need)
    assert differ == [b + d for b in boundaries for d in range(P)]


def test_parity_budget_equal_to_total() -> None:
    total = PARITY.count_messages(HISTORY)
    assert check_parity(HISTORY, total) == list(range(len(HISTORY)))
    assert check_parity(HISTORY, total - 1) == [0, *range(5, len(HISTORY))]


def test_parity_exact_round_boundaries() -> None:
    # the two latest rounds fit exactly: both keep them, not a token of the third
    b = PARITY.count_messages([HISTORY[0], *HISTORY[5:]])
    assert check_parity(HISTORY, b) == [0, *range(5, 15)]
    assert check_parity(HISTORY, b - 1) == [0, *range(10, 15)]


@pytest.mark.parametrize("name", list(COUNTERS))
def test_parity_without_system_and_leading_assistant(name: str) -> None:
    counter = COUNTERS[name]
    msgs = [{"role": "assistant", "content": "Hello! How can I help?"}, *HISTORY[1:]]
    total = counter.count_messages(msgs)
    # everything fits, but the window must start on a user turn: both drop the greeting
    assert check_parity(msgs, total, counter) == list(range(1, len(msgs)))
    for b in round_budgets(msgs, counter):
        if b >= latest_round_cost(msgs, counter):
            check_parity(msgs, b, counter)


@pytest.mark.parametrize("name", list(COUNTERS))
def test_parity_latest_user_is_last(name: str) -> None:
    counter = COUNTERS[name]
    msgs = [*HISTORY[:10], {"role": "user", "content": "Thanks!"}]
    for b in round_budgets(msgs, counter):
        if b >= latest_round_cost(msgs, counter):
            check_parity(msgs, b, counter)


def readme_history() -> list[Any]:
    """The README's LangChain example: a system prompt and 50 rounds of a file read."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    history: list[Any] = [SystemMessage("You are terse.")]
    for i in range(50):
        history += [
            HumanMessage(f"read file {i}"),
            AIMessage(
                "",
                tool_calls=[{"name": "read", "args": {"path": f"{i}.txt"}, "id": f"call_{i}"}],
            ),
            ToolMessage("lorem ipsum " * 300, tool_call_id=f"call_{i}"),
            AIMessage(f"file {i} is lorem ipsum"),
        ]
    return history


def test_readme_example_with_the_default_counter_at_every_round_boundary() -> None:
    """The README's claim, on its own example: ``trim(h, B, model="gpt-4o")`` keeps exactly
    what ``trim_messages(h, B + 3, token_counter=token_counter("gpt-4o"), ...)`` keeps, at every
    budget where the kept set changes (each round boundary, one token either side), from the
    least budget that keeps the latest round to the whole history; and at LangChain's own
    budget B they differ exactly on the 3 budgets from each boundary up."""
    from windowfit.integrations.langchain import token_counter, trim

    h = readme_history()
    tc = token_counter("gpt-4o")
    P = DEFAULT.reply_priming
    assert P == 3

    def theirs(b: int) -> list[int]:
        out = trim_messages(
            h, max_tokens=b, token_counter=tc, strategy="last", include_system=True,
            start_on="human",
        )  # fmt: skip
        return [next(i for i, m in enumerate(h) if m is x) for x in out]

    def ours(b: int) -> list[int]:
        return [next(i for i, m in enumerate(h) if m is x) for x in trim(h, b, model="gpt-4o")]

    # the cost of the system prompt + the newest k rounds, priming included: where k rounds fit
    rounds = [tc([h[0], *h[1 + 4 * (50 - k) :]]) for k in range(1, 51)]
    assert rounds == sorted(rounds) and rounds[-1] == tc(h)
    for k, b in enumerate(rounds, start=1):
        assert len(ours(b)) == 1 + 4 * k  # k rounds fit to the token ...
        if k > 1:
            assert len(ours(b - 1)) == 1 + 4 * (k - 1)  # ... and one token less drops a round
        for budget in (b - 1, b, b + 1) if k > 1 else (b, b + 1):
            assert ours(budget) == theirs(budget + P), budget
        for budget in range(b, b + P):
            assert ours(budget) != theirs(budget), budget  # LangChain needs P more
        assert ours(b + P) == theirs(b + P)


def test_parity_only_system_and_one_user() -> None:
    msgs = [HISTORY[0], {"role": "user", "content": "hi"}]
    check_parity(msgs, PARITY.count_messages(msgs))


def test_langchain_charges_priming_twice_with_a_system_message() -> None:
    """Why LangChain's budget is P more: with a system message and priming P, LangChain needs
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
