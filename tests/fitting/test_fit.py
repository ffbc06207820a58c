"""wf.fit / wf.repair on hand-written histories: the API, the pairing rules in both formats,
pins, options, the BudgetError breakdown and bad input (errors naming index and field)."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import windowfit as wf
from _histories import request_problems

C = wf.Counter(encoding="cl100k_base")
P = 3  # cl100k_base's reply priming


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": t}


def asst(t: str | None) -> dict[str, Any]:
    return {"role": "assistant", "content": t}


def call(*ids: str, text: Any = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": "lookup", "arguments": f'{{"id": "{i}"}}'},
            }
            for i in ids
        ],
    }


def tool(i: str, t: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": t}


def a_call(*ids: str, text: str = "") -> dict[str, Any]:
    blocks: list[Any] = [{"type": "text", "text": text}] if text else []
    return {
        "role": "assistant",
        "content": blocks
        + [{"type": "tool_use", "id": i, "name": "lookup", "input": {"id": i}} for i in ids],
    }


def a_result(*ids: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": i, "content": f"result {i}"} for i in ids
        ],
    }


def tokens(msgs: list[dict[str, Any]]) -> int:
    return C.count_messages(msgs)


STATS = {
    "pins_tokens",
    "tokens_kept",
    "tokens_dropped",
    "messages_kept",
    "messages_dropped",
    "orphans_removed",
    "unanswered_removed",
    "calls_stripped",
    "results_stripped",
    "stop_reason",
    "results_truncated",
    "round_dropped",
    "budget",
    "tokens",
}

LONG = [
    {"role": "system", "content": "You are terse."},
    user("first question " * 20),
    asst("first answer " * 20),
    user("second question " * 20),
    call("c1", "c2"),
    tool("c1", "one " * 50),
    tool("c2", "two " * 50),
    asst("second answer " * 20),
    user("third question"),
    asst("third answer"),
]


# ---------------------------------------------------------------- the result


def test_result_shape_and_identity() -> None:
    total = tokens(LONG)
    r = wf.fit(LONG, total, counter=C)
    assert isinstance(r, wf.FitResult)
    assert r.kept == list(range(len(LONG))) and r.dropped == []
    assert all(a is b for a, b in zip(r.messages, LONG))
    assert r.tokens == total and r.budget == total
    assert set(r.stats) == STATS
    assert r.stats["stop_reason"] == "all_fit"
    assert r.stats["tokens_kept"] + P == r.tokens


def test_trims_oldest_rounds_first_and_reports_why() -> None:
    budget = tokens([LONG[0], *LONG[3:]])
    r = wf.fit(LONG, budget, counter=C)
    assert r.kept == [0, *range(3, 10)]
    assert r.dropped == [1, 2]
    assert r.stats["stop_reason"] == "budget"
    assert r.stats["tokens_dropped"] == C.count_message(LONG[1]) + C.count_message(LONG[2])
    # one token less: the tool round goes whole, never its call without its results
    r = wf.fit(LONG, budget - 1, counter=C)
    assert r.kept == [0, 8, 9]
    assert request_problems(r.messages) == []


def test_sequences_and_iterables_accepted() -> None:
    budget = tokens(LONG)
    assert wf.fit(tuple(LONG), budget, counter=C).kept == list(range(10))
    r = wf.fit(iter(LONG), budget, counter=C)
    assert r.kept == list(range(10)) and r.messages[0] is LONG[0]


def test_model_argument_and_default_counter() -> None:
    r = wf.fit(LONG, 10_000, model="gpt-4")
    assert r.tokens == wf.Counter(model="gpt-4").count_messages(r.messages)
    assert wf.fit(LONG, 10_000).tokens == wf.Counter(model="gpt-4o").count_messages(LONG)
    with pytest.raises(KeyError):
        wf.fit(LONG, 10_000, model="no-such-model-xyz")


def test_empty_history() -> None:
    for budget in (0, 10):
        r = wf.fit([], budget, counter=C)
        assert (r.messages, r.kept, r.dropped, r.tokens) == ([], [], [], 0)
        assert set(r.stats) == STATS and r.stats["stop_reason"] == "all_fit"
    r = wf.repair([], counter=C)
    assert (r.messages, r.kept, r.dropped, r.tokens) == ([], [], [], 0)
    assert set(r.stats) == STATS


def test_floats_and_huge_budgets() -> None:
    t = tokens(LONG)
    with pytest.raises(TypeError, match="whole number"):  # not floored silently
        wf.fit(LONG, t + 0.99, counter=C)
    assert wf.fit(LONG, float(t), counter=C).kept == list(range(10))
    assert wf.fit(LONG, math.inf, counter=C).kept == list(range(10))
    assert wf.fit(LONG, 10**40, counter=C).kept == list(range(10))
    assert wf.fit(LONG, float(t - 1), counter=C).tokens < t


# ---------------------------------------------------------------- pins


def test_system_and_developer_pinned_anywhere() -> None:
    msgs = [
        user("old " * 100),
        {"role": "developer", "content": "dev rules"},
        asst("old answer " * 100),
        {"role": "system", "content": "mid-conversation instruction"},
        user("latest"),
    ]
    need = tokens([msgs[1], msgs[3], msgs[4]])
    r = wf.fit(msgs, need, counter=C)
    assert r.kept == [1, 3, 4]
    assert r.stats["pins_tokens"] == need - P
    # unpinned, they are ordinary messages of the round they sit in, which does not fit
    assert wf.fit(msgs, need, counter=C, keep_system=False).kept == [4]
    assert wf.fit(msgs, need, counter=C, keep_system=False, start_on=None).kept == [3, 4]


def test_latest_user_pinned_even_when_older_than_the_tail() -> None:
    msgs = [user("q"), asst("a " * 200), asst("b " * 200)]
    r = wf.fit(msgs, tokens([msgs[0], msgs[2]]), counter=C)
    # the window grows from the newest unit; the user turn is pinned
    assert r.kept == [0, 2]
    r = wf.fit(msgs, tokens([msgs[2]]), counter=C, keep_last_user=False)
    assert r.kept == [2]


def test_budget_error_breakdown() -> None:
    msgs = [{"role": "system", "content": "rules " * 30}, asst("x"), user("question " * 40)]
    pins = tokens([msgs[0], msgs[2]])
    assert wf.fit(msgs, pins, counter=C).kept == [0, 2]
    with pytest.raises(wf.BudgetError) as err:
        wf.fit(msgs, pins - 1, counter=C)
    assert isinstance(err.value, ValueError)
    text = str(err.value)
    s, u = C.count_message(msgs[0]), C.count_message(msgs[2])
    assert f"system/developer {s}" in text and f"latest user message {u}" in text
    assert f"budget {pins - 1}" in text and str(pins) in text


def test_explicit_pins_pin_whole_units() -> None:
    budget = tokens([LONG[0], LONG[4], LONG[5], LONG[6], LONG[8], LONG[9]])
    r = wf.fit(LONG, budget, counter=C, pinned=[5])
    assert r.kept == [0, 4, 5, 6, 8, 9]
    assert request_problems(r.messages) == []
    assert wf.fit(LONG, budget, counter=C, pinned=[-5]).kept == r.kept  # -5 is index 5
    pins = tokens([LONG[0], LONG[4], LONG[5], LONG[6], LONG[8]])
    unit = C.count_message(LONG[4]) + C.count_message(LONG[5]) + C.count_message(LONG[6])
    with pytest.raises(wf.BudgetError, match=f"pinned indices {unit}"):
        wf.fit(LONG, pins - 1, counter=C, pinned=[5])


def test_pinning_an_unsendable_message_is_a_value_error() -> None:
    msgs = [user("q"), tool("ghost"), call("c1"), asst("done")]
    with pytest.raises(ValueError, match=r"pinned: message 1 is an orphan") as e:
        wf.fit(msgs, 1000, counter=C, pinned=[1])
    assert not isinstance(e.value, wf.BudgetError)
    with pytest.raises(ValueError, match=r"pinned: message 2"):
        wf.fit(msgs, 1000, counter=C, pinned=[2])


# ---------------------------------------------------------------- pairing


def test_parallel_calls_are_one_unit() -> None:
    msgs = [user("q"), call("a", "b", "c"), tool("a"), tool("b"), tool("c"), asst("done")]
    unit = tokens(msgs[1:5]) - P
    need = tokens([msgs[0], msgs[5]])
    assert wf.fit(msgs, need + unit, counter=C).kept == list(range(6))
    assert wf.fit(msgs, need + unit - 1, counter=C).kept == [0, 5]


def test_results_may_come_in_any_order() -> None:
    msgs = [user("q"), call("a", "b"), tool("b"), tool("a")]
    assert wf.fit(msgs, 1000, counter=C).kept == [0, 1, 2, 3]


def test_orphans_and_unanswered_dropped() -> None:
    msgs = [
        user("q"),
        tool("ghost"),  # no call at all
        call("a", "b"),  # b never answered
        tool("a"),
        call("c"),
        user("interruption"),
        tool("c"),  # separated from its call
        call("d"),
        tool("d"),
        tool("d"),  # answered twice
        asst("end"),
    ]
    r = wf.fit(msgs, 10_000, counter=C, start_on=None)
    assert r.kept == [0, 5, 7, 8, 10]
    assert r.stats["orphans_removed"] == 3  # 1, 6, 9
    assert r.stats["unanswered_removed"] == 3  # 2, 3, 4
    assert request_problems(r.messages) == []
    rep = wf.repair(msgs, counter=C)
    assert rep.kept == r.kept and rep.messages == r.messages


def test_duplicate_call_ids_cannot_be_answered() -> None:
    msgs = [user("q"), call("x", "x"), tool("x"), tool("x")]
    r = wf.repair(msgs, counter=C)
    assert r.kept == [0]
    assert request_problems(r.messages) == []


def test_anthropic_blocks_pair_like_tool_calls() -> None:
    msgs = [
        user("weather in Paris and Rome?"),
        a_call("t1", "t2", text="Checking both."),
        a_result("t1", "t2"),
        a_call("t3"),
        a_result("t3"),
        a_result("t9"),  # orphan
        asst("Paris sunny, Rome rainy."),
        user("thanks"),
    ]
    r = wf.fit(msgs, 10_000, counter=C)
    assert r.kept == [0, 1, 2, 3, 4, 6, 7]
    assert r.stats["orphans_removed"] == 1
    assert request_problems(r.messages) == []
    # the tool_result-carrying user messages are not user turns: the latest user turn is 7
    unit = tokens(msgs[3:5]) - P
    after = tokens([msgs[6], msgs[7]])
    assert wf.fit(msgs, after + unit - 1, counter=C, start_on=None).kept == [6, 7]
    assert wf.fit(msgs, after + unit, counter=C, start_on=None).kept == [3, 4, 6, 7]
    # by rounds, 6 belongs to the round of user turn 0, which does not fit whole
    assert wf.fit(msgs, after + unit, counter=C).kept == [7]


def test_anthropic_results_in_separate_messages() -> None:
    msgs = [user("q"), a_call("t1", "t2"), a_result("t2"), a_result("t1"), asst("done")]
    assert wf.fit(msgs, 10_000, counter=C).kept == [0, 1, 2, 3, 4]


def test_anthropic_unanswered_dropped_or_stripped() -> None:
    msgs = [user("q"), a_call("t1", "t2", text="Let me look."), a_result("t1"), asst("done")]
    assert wf.fit(msgs, 10_000, counter=C).kept == [0, 3]
    before = copy.deepcopy(msgs)
    r = wf.fit(msgs, 10_000, counter=C, unanswered="strip")
    assert r.kept == [0, 1, 2, 3]
    assert msgs == before
    s = r.messages[1]
    assert s is not msgs[1]
    assert s["content"] == [msgs[1]["content"][0], msgs[1]["content"][1]]  # text + t1 kept, t2 gone
    assert r.tokens == C.count_messages(r.messages)
    assert r.stats["calls_stripped"] == 1
    assert request_problems(r.messages) == []


# ---------------------------------------------------------------- unanswered="strip"


def test_strip_openai() -> None:
    msgs = [user("q"), call("a", "b", text="Trying two tools."), tool("a"), asst("done")]
    before = copy.deepcopy(msgs)
    r = wf.fit(msgs, 10_000, counter=C, unanswered="strip")
    assert r.kept == [0, 1, 2, 3]
    stripped = r.messages[1]
    assert stripped is not msgs[1] and msgs == before
    assert [c["id"] for c in stripped["tool_calls"]] == ["a"]
    assert stripped["content"] == "Trying two tools."
    assert r.tokens == C.count_messages(r.messages)
    assert r.messages[0] is msgs[0] and r.messages[2] is msgs[2]
    assert request_problems(r.messages) == []


def test_strip_with_text_and_no_answers_keeps_only_the_text() -> None:
    msgs = [user("q"), call("a", text="I'll check."), user("never mind")]
    r = wf.fit(msgs, 10_000, counter=C, unanswered="strip")
    assert r.kept == [0, 1, 2]
    assert "tool_calls" not in r.messages[1] and r.messages[1]["content"] == "I'll check."
    assert r.tokens == C.count_messages(r.messages)


def test_strip_never_leaves_an_empty_message() -> None:
    for text in (None, "", []):
        msgs = [user("q"), call("a", text=text), asst("done")]
        r = wf.fit(msgs, 10_000, counter=C, unanswered="strip")
        assert r.kept == [0, 2]
        assert r.stats["unanswered_removed"] == 1


def test_stripped_cost_counts_in_the_budget() -> None:
    msgs = [user("q"), call("a", "b", text="x " * 50), tool("a", "r " * 50), user("last")]
    r = wf.fit(msgs, 10_000, counter=C, unanswered="strip")
    exact = r.tokens
    assert exact < tokens(msgs)  # the stripped call is cheaper than the original
    assert wf.fit(msgs, exact, counter=C, unanswered="strip").kept == [0, 1, 2, 3]
    assert wf.fit(msgs, exact - 1, counter=C, unanswered="strip").kept == [3]


# ---------------------------------------------------------------- start_on


def test_start_on_user_vs_units() -> None:
    msgs = [user("q1"), asst("a1 " * 30), asst("a1b"), user("q2"), asst("a2")]
    budget = tokens([msgs[2], msgs[3], msgs[4]])
    r = wf.fit(msgs, budget, counter=C)
    assert r.kept == [3, 4]  # the older round does not fit whole
    r = wf.fit(msgs, budget, counter=C, start_on=None)
    assert r.kept == [2, 3, 4]  # unit by unit
    assert r.stats["stop_reason"] == "budget"


def test_leading_messages_before_first_user_left_out() -> None:
    msgs = [{"role": "system", "content": "s"}, asst("Hi! How can I help?"), user("q"), asst("a")]
    r = wf.fit(msgs, 10_000, counter=C)
    assert r.kept == [0, 2, 3]
    assert r.stats["stop_reason"] == "start_on_user"
    assert wf.fit(msgs, 10_000, counter=C, start_on=None).kept == [0, 1, 2, 3]
    # "human" is accepted as LangChain spells it
    assert wf.fit(msgs, 10_000, counter=C, start_on="human").kept == [0, 2, 3]


def test_no_user_turn_grows_by_units() -> None:
    msgs = [asst("a " * 50), asst("b"), asst("c")]
    r = wf.fit(msgs, tokens(msgs[1:]), counter=C)
    assert r.kept == [1, 2] and r.stats["stop_reason"] == "budget"


def test_huge_single_message() -> None:
    huge = "lorem ipsum dolor sit amet " * 20_000
    msgs = [user("q"), tool_output := asst(huge), user("next")]
    r = wf.fit(msgs, 1000, counter=C)
    assert r.kept == [2]
    assert r.stats["tokens_dropped"] == C.count_message(msgs[0]) + C.count_message(tool_output)
    with pytest.raises(wf.BudgetError):
        wf.fit([user(huge)], 1000, counter=C)


def test_no_pins_budget_below_priming() -> None:
    """With nothing pinned, a budget below the reply priming gives the empty window: an empty
    prompt is never sent, so it primes nothing (a BudgetError is for pins that cannot fit)."""
    msgs = [asst("a " * 50)]
    for budget in (0, P - 1, P):
        r = wf.fit(msgs, budget, counter=C)
        assert r.kept == [] and r.tokens == 0 == C.count_messages([])


# ---------------------------------------------------------------- repair


def test_repair_is_idempotent_and_keeps_everything_valid() -> None:
    msgs = [user("q"), call("a", "b"), tool("a"), tool("zzz"), call("c"), tool("c"), asst("done")]
    r = wf.repair(msgs, counter=C)
    assert r.kept == [0, 4, 5, 6]
    assert request_problems(r.messages) == []
    assert wf.repair(r.messages, counter=C).messages == r.messages
    s = wf.repair(msgs, counter=C, unanswered="strip")
    assert s.kept == [0, 1, 2, 4, 5, 6]
    assert [c["id"] for c in s.messages[1]["tool_calls"]] == ["a"]
    assert wf.repair(s.messages, counter=C, unanswered="strip").dropped == []
    assert s.tokens == C.count_messages(s.messages)


# ---------------------------------------------------------------- bad input

BAD_MESSAGES = [
    # (message at index 1, exception, words the error must contain)
    (42, TypeError, ["message 1", "dict"]),
    ("hello", TypeError, ["message 1", "dict"]),
    ({"content": "x"}, ValueError, ["message 1", "role"]),
    ({"role": "robot", "content": "x"}, ValueError, ["message 1", "role", "robot"]),
    ({"role": 3, "content": "x"}, TypeError, ["message 1", "role"]),
    ({"role": "user", "content": 5}, TypeError, ["message 1", "content"]),
    ({"role": "user", "content": {"text": "x"}}, TypeError, ["message 1", "content"]),
    ({"role": "user", "content": [5]}, TypeError, ["message 1", "content[0]"]),
    ({"role": "user", "content": [{"text": "x"}]}, ValueError, ["message 1", "content[0].type"]),
    ({"role": "user", "content": [{"type": "text"}]}, ValueError, ["message 1", "content[0].text"]),
    (
        {"role": "user", "content": [{"type": "text", "text": 1}]},
        TypeError,
        ["message 1", "content[0].text"],
    ),
    ({"role": "user", "content": "x", "name": 7}, TypeError, ["message 1", "name"]),
    (
        {"role": "assistant", "content": None, "tool_calls": {"id": "a"}},
        TypeError,
        ["message 1", "tool_calls"],
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": ["a"]},
        TypeError,
        ["message 1", "tool_calls[0]"],
    ),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        ValueError,
        ["message 1", "tool_calls[0].id"],
    ),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": 1, "type": "function", "function": {"name": "f"}}],
        },
        TypeError,
        ["message 1", "tool_calls[0].id"],
    ),
    (
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function"}]},
        ValueError,
        ["message 1", "tool_calls[0].function"],
    ),
    (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}],
        },
        TypeError,
        ["message 1", "tool_calls[0].function.arguments"],
    ),
    ({"role": "tool", "content": "x"}, ValueError, ["message 1", "tool_call_id"]),
    ({"role": "tool", "tool_call_id": 9, "content": "x"}, TypeError, ["message 1", "tool_call_id"]),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
        ValueError,
        ["message 1", "content[0].id"],
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
        ValueError,
        ["message 1", "content[0].tool_use_id"],
    ),
    (
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "ultra"}}],
        },
        ValueError,
        ["message 1", "detail"],
    ),
]


@pytest.mark.parametrize(
    ("bad", "exc", "words"), BAD_MESSAGES, ids=[str(i) for i in range(len(BAD_MESSAGES))]
)
@pytest.mark.parametrize("fn", ["fit", "repair"])
def test_bad_messages_name_index_and_field(bad: Any, exc: type, words: list[str], fn: str) -> None:
    msgs = [user("fine"), bad, user("also fine")]
    with pytest.raises(exc) as e:
        if fn == "fit":
            wf.fit(msgs, 1000, counter=C)
        else:
            wf.repair(msgs, counter=C)
    assert not isinstance(e.value, wf.BudgetError)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize("messages", [{"role": "user", "content": "x"}, "hello", b"bytes", 5, None])
def test_messages_must_be_a_list(messages: Any) -> None:
    with pytest.raises(TypeError, match="messages"):
        wf.fit(messages, 100, counter=C)
    with pytest.raises(TypeError, match="messages"):
        wf.repair(messages, counter=C)


@pytest.mark.parametrize(
    ("budget", "exc", "word"),
    [
        (-1, ValueError, "-1"),
        (-0.5, TypeError, "-0.5"),
        (0.5, TypeError, "whole number"),
        (-math.inf, ValueError, "inf"),
        (math.nan, ValueError, "NaN"),
        ("100", TypeError, "str"),
        (None, TypeError, "NoneType"),
        (True, TypeError, "bool"),
        (False, TypeError, "bool"),
        ([100], TypeError, "list"),
    ],
)
def test_bad_budgets(budget: Any, exc: type, word: str) -> None:
    with pytest.raises(exc) as e:
        wf.fit(LONG, budget, counter=C)
    assert "budget" in str(e.value) and word in str(e.value)
    assert not isinstance(e.value, wf.BudgetError)


@pytest.mark.parametrize(
    ("pinned", "exc", "word"),
    [
        ([10], ValueError, "10"),
        ([-11], ValueError, "-11"),
        (["1"], TypeError, "str"),
        ([True], TypeError, "bool"),
        ([1.5], TypeError, "1.5"),
    ],
)
def test_bad_pins(pinned: Any, exc: type, word: str) -> None:
    with pytest.raises(exc) as e:
        wf.fit(LONG, 10_000, counter=C, pinned=pinned)
    assert "pinned" in str(e.value) and word in str(e.value)


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="start_on"):
        wf.fit(LONG, 100, counter=C, start_on="assistant")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unanswered"):
        wf.fit(LONG, 100, counter=C, unanswered="keep")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unanswered"):
        wf.repair(LONG, counter=C, unanswered="keep")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="counter"):
        wf.fit(LONG, 100, counter="cl100k_base")  # type: ignore[arg-type]


def test_bad_input_leaves_no_trace() -> None:
    """An error on the last message: nothing mutated, and the next call works."""
    msgs = [*copy.deepcopy(LONG), {"role": "tool", "content": "no id"}]
    before = copy.deepcopy(msgs)
    with pytest.raises(ValueError, match="message 10: tool_call_id"):
        wf.fit(msgs, 1000, counter=C)
    assert msgs == before
    assert wf.fit(LONG, 10_000, counter=C).kept == list(range(10))


def test_large_history_is_exact() -> None:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "be helpful"}]
    for i in range(2000):
        msgs += [
            user(f"question {i}"),
            call(f"c{i}"),
            tool(f"c{i}", f"output {i} " * (i % 7)),
            asst(f"answer {i}"),
        ]
    r = wf.fit(msgs, 20_000, counter=C)
    assert r.tokens == C.count_messages(r.messages) <= 20_000
    assert r.tokens > 20_000 - 100  # a round is < 100 tokens
    assert request_problems(r.messages) == []
    first = r.kept[1]
    assert msgs[first]["role"] == "user" and r.kept == [0, *range(first, len(msgs))]


def test_ids_differing_only_in_lone_surrogates_do_not_pair() -> None:
    msgs = [
        user("q"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a\ud800", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a\udc00", "content": "r"},
    ]
    assert request_problems(msgs) != []  # the ids differ
    assert wf.fit(msgs, 1000, counter=C).kept == [0]
