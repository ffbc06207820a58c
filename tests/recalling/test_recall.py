"""Recall: ``wf.recall`` and the core's ``RecallIndex`` (scores, units, stamps, budget, bad
input)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit import _core, recalling
from windowfit.recalling import recall_terms

COUNTER = wf.Counter(model="gpt-4o")

FILLER = [
    ("How are you today?", "I'm doing well, thanks for asking. How can I help?"),
    ("Tell me something nice.", "Every day is a chance to learn something new."),
    ("Any plans for the weekend?", "I don't have plans, but I'd love to hear yours."),
]


def chat(facts: dict[int, tuple[str, str]], turns: int, dated: bool = True) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for t in range(turns):
        q, a = facts.get(t, FILLER[t % len(FILLER)])
        day = f"2023-05-{1 + t // 10:02d}"
        for role, text in (("user", q), ("assistant", a)):
            m: dict[str, Any] = {"role": role, "content": text}
            if dated:
                m["date"] = day
            msgs.append(m)
    return msgs


FACTS = {
    3: ("We adopted a parrot and named him Biscuit.", "Biscuit is a lovely name for a parrot!"),
    12: ("I cooked ramen on April 30 for my sister.", "Ramen for your sister sounds delicious."),
    21: ("我最喜欢的科幻电影是《星际穿越》。", "《星际穿越》确实是一部经典的科幻电影。"),
}


def bm25(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25, the textbook formula, over given term lists."""
    n = len(docs)
    avg = max(1.0, sum(len(d) for d in docs) / n)
    out = []
    for d in docs:
        s = 0.0
        for t in set(query):
            df = sum(1 for x in docs if t in x)
            tf = d.count(t)
            if df and tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def test_index_scores_are_bm25_over_the_core_terms() -> None:
    msgs = chat(FACTS, 25, dated=False)
    index = _core.RecallIndex()
    query = "What did I cook for my sister on April 30?"
    got = dict(index.search(msgs, query, limit=1000))
    # one document per distinct message: a repeated message is indexed once
    distinct = list(dict.fromkeys((m["role"], m["content"]) for m in msgs))
    scores = bm25([recall_terms(text) for _, text in distinct], recall_terms(query))
    by_content = dict(zip(distinct, scores))
    for i, m in enumerate(msgs):
        want = by_content[(m["role"], m["content"])]
        assert got.get(i, 0.0) == pytest.approx(want, rel=1e-4, abs=1e-5)
    assert max(got, key=lambda i: got[i]) == 24  # the user message stating it


def test_index_is_incremental_and_keyed_by_content() -> None:
    index = _core.RecallIndex()
    msgs = chat(FACTS, 10)
    index.search(msgs, "parrot", limit=10)
    assert len(index) == len({(m["role"], m["content"]) for m in msgs})
    more = [*msgs, {"role": "user", "content": "a brand new message about kayaks"}]
    index.search(more, "kayak", limit=10)
    assert len(index) == len({(m["role"], m["content"]) for m in more})
    # a copy of a message (a new object, same content) is the same document
    copies = [dict(m) for m in more]
    index.search(copies, "kayak", limit=10)
    assert len(index) == len({(m["role"], m["content"]) for m in more})
    small = _core.RecallIndex(max_messages=5)
    small.search(more, "kayak", limit=10)
    assert len(small) <= 5


def test_a_messages_own_date_is_read_once_and_follows_a_new_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The date a message states is read once per message object and position, from call to
    call on one index; other message objects at the same positions are read again."""
    index = _core.RecallIndex()
    msgs = chat(FACTS, 40)
    reads: list[Any] = []
    own = recalling._Dates.own
    monkeypatch.setattr(recalling._Dates, "own", staticmethod(lambda m: reads.append(m) or own(m)))
    question = "What is the name of our parrot?"
    first = wf.recall(msgs, question, 200, counter=COUNTER, index=index)
    assert first.units[0].date == "2023-05-01" and reads
    reads.clear()
    again = wf.recall(msgs, question, 200, counter=COUNTER, index=index)
    assert again.units == first.units and again.messages == first.messages
    assert not reads
    moved = [{**m, "date": m["date"].replace("2023-05", "2024-07")} for m in msgs]
    other = wf.recall(moved, question, 200, counter=COUNTER, index=index)
    assert other.units[0].date == "2024-07-01" and reads
    assert other.messages[0]["content"].startswith("[Recalled from earlier: said 2024-07-01,")


def test_message_values_that_refuse_comparison_do_not_break_the_date_memo() -> None:
    class Opaque:
        def __eq__(self, other: object) -> bool:
            raise ValueError("no truth value")

        __hash__ = object.__hash__

    index = _core.RecallIndex()
    question = "What is the name of our parrot?"
    results = []
    for _ in range(2):  # fresh copies each time: the memo compares them with the last call's
        msgs = [{**m, "meta": Opaque()} for m in chat(FACTS, 40)]
        results.append(wf.recall(msgs, question, 200, counter=COUNTER, index=index))
    assert results[0].units and results[0].units[0].date == "2023-05-01"
    assert [u.date for u in results[1].units] == [u.date for u in results[0].units]


def test_recall_brings_back_the_exchange_stamped_and_counted() -> None:
    msgs = chat(FACTS, 40)
    r = wf.recall(msgs, "What is the name of our parrot?", 200, counter=COUNTER)
    assert r.units and r.units[0].start == 6 and r.units[0].end == 8  # user turn + its reply
    assert r.units[0].date == "2023-05-01"
    first = r.messages[0]["content"]
    assert first.startswith("[Recalled from earlier: said 2023-05-01, message 7 of 80]")
    assert "Biscuit" in first and r.messages[1] is msgs[7]
    assert r.tokens == sum(COUNTER.count_message(m) for m in r.messages) <= 200
    assert msgs[6]["content"].startswith("We adopted")  # the input is not changed
    zh = wf.recall(msgs, "我最喜欢的科幻电影是哪部？", 200, counter=COUNTER)
    assert any("星际穿越" in str(m["content"]) for m in zh.messages)
    assert zh.messages[0]["content"].startswith("【回忆：2023-05-03，第 43/80 条消息】")


def test_candidates_and_summary_exclude() -> None:
    msgs = chat(FACTS, 40)
    r = wf.recall(msgs, "parrot name", 500, counter=COUNTER, candidates=range(10, 80))
    assert all(u.start >= 10 for u in r.units)
    summary = (
        "- user: We adopted a parrot and named him Biscuit. Biscuit is a lovely name for a parrot"
    )
    r2 = wf.recall(msgs, "parrot name Biscuit", 500, counter=COUNTER, exclude_text=summary)
    assert all(u.start != 6 for u in r2.units)
    assert any(s["reason"] == "already in the summary" for s in r2.skipped)


def test_budget_too_small_returns_nothing() -> None:
    msgs = chat(FACTS, 40)
    r = wf.recall(msgs, "parrot", 5, counter=COUNTER)
    assert r.messages == [] and r.tokens == 0


def tool_history() -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "Fix the failing test in src/app/config_loader.py"}
    ]
    for k in range(6):
        calls = [
            {
                "id": f"c{k}{j}",
                "type": "function",
                "function": {"name": "bash", "arguments": f'{{"cmd": "cat file{k}_{j}.txt"}}'},
            }
            for j in range(2)
        ]
        msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
        for j in range(2):
            body = (
                "def load_config(path): raise KeyError"
                if (k, j) == (1, 1)
                else f"plain output {k} {j}"
            )
            msgs.append({"role": "tool", "tool_call_id": f"c{k}{j}", "content": body})
    msgs.append({"role": "user", "content": "where does load_config raise KeyError?"})
    return msgs


def test_a_tool_call_comes_back_with_all_its_results() -> None:
    msgs = tool_history()
    r = wf.recall(
        msgs, "load_config KeyError", 500, counter=COUNTER, candidates=range(1, len(msgs) - 1)
    )
    assert r.units and (r.units[0].start, r.units[0].end) == (4, 7)
    assert r.messages[0]["tool_calls"] == msgs[4]["tool_calls"]
    assert r.messages[1:] == msgs[5:7]


def test_a_result_far_into_a_long_tool_round_brings_back_the_whole_round() -> None:
    """The round is found from its call however far back it is (the whole history's rule,
    not a stretch around the hit)."""
    calls = [
        {"id": f"c{j}", "type": "function", "function": {"name": "grep", "arguments": f'"{j}"'}}
        for j in range(40)
    ]
    body = {35: "deploy_token expires at 2024-07-01 for the staging cluster"}
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "check every service config"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": f"c{j}", "content": body.get(j, f"ok {j}")}
            for j in range(40)
        ),
        {"role": "assistant", "content": "All configs checked."},
        {"role": "user", "content": "When does the deploy_token expire?"},
    ]
    asked = {"candidates": range(len(msgs) - 1), "index": _core.RecallIndex()}
    r = wf.recall(msgs, "deploy_token expire", 2000, counter=COUNTER, **asked)
    assert [(u.start, u.end) for u in r.units] == [(1, 42)]
    assert r.messages[1:] == msgs[2:42] and _pairing_ok(r.messages)
    # with one result missing the round cannot be sent, and nothing of it comes back
    broken = msgs[:20] + msgs[21:]
    r = wf.recall(broken, "deploy_token expire", 2000, counter=COUNTER, **asked)
    assert r.units and all(u.start > 40 or u.end <= 1 for u in r.units)


def _pairing_ok(messages: list[dict[str, Any]]) -> bool:
    open_calls: set[str] = set()
    for m in messages:
        if m.get("role") == "assistant":
            if open_calls:
                return False
            open_calls = {c["id"] for c in m.get("tool_calls") or ()}
        elif m.get("role") == "tool":
            if m.get("tool_call_id") not in open_calls:
                return False
            open_calls.discard(m["tool_call_id"])
        elif open_calls:
            return False
    return not open_calls


WORDS = ["parrot", "ramen", "config", "kyoto", "error", "sister", "科幻", "电影", "42", "src/a.py"]


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    for k in range(draw(st.integers(1, 25))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "orphan", "system"]))
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=6)))
        if kind == "tools":
            n = draw(st.integers(1, 3))
            calls = [
                {
                    "id": f"t{k}_{j}",
                    "type": "function",
                    "function": {"name": "f", "arguments": text},
                }
                for j in range(n)
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            answered = draw(st.integers(0, n))  # some calls may be left unanswered
            msgs.extend(
                {"role": "tool", "tool_call_id": f"t{k}_{j}", "content": text}
                for j in range(answered)
            )
        elif kind == "orphan":
            msgs.append({"role": "tool", "tool_call_id": f"x{k}", "content": text})
        else:
            msgs.append({"role": kind, "content": text})
    return msgs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(st.sampled_from(WORDS), max_size=5), st.integers(0, 400))
def test_recall_invariants(msgs: list[dict[str, Any]], query: list[str], budget: int) -> None:
    r = wf.recall(msgs, " ".join(query), budget, counter=COUNTER, index=_core.RecallIndex())
    assert r.tokens == sum(COUNTER.count_message(m) for m in r.messages) <= budget
    assert _pairing_ok(r.messages)
    assert all(m.get("role") not in ("system", "developer") for m in r.messages)
    spans = [(u.start, u.end) for u in r.units]
    assert spans == sorted(spans) and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # a tool round comes back as the whole history's pairing rule delimits it
    analysis = _core.tool_units(msgs)
    rounds = {(a, b) for a, b, kind in analysis.units if kind == "tool_round"}
    for a, b in spans:
        if msgs[a].get("tool_calls"):
            assert (a, b) in rounds
            assert not any(a <= k < b for k, _, _ in analysis.problems)


def test_embedder_is_fused_and_optional() -> None:
    msgs = chat(FACTS, 40)
    seen: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.append(len(texts))
        # a toy embedding: "animal" questions are near the parrot text
        return [[1.0, 0.0] if ("parrot" in t or "pet" in t) else [0.0, 1.0] for t in texts]

    r = wf.recall(msgs, "tell me about my pet", 200, counter=COUNTER, embedder=embed)
    assert seen and any(u.start == 6 for u in r.units)
    assert "embedding" in r.units[0].reason
    with pytest.raises(wf.ArgumentTypeError):
        wf.recall(msgs, "x", 10, counter=COUNTER, embedder=42)  # type: ignore[arg-type]


def test_bad_input_gives_nothing_or_a_bounded_block() -> None:
    index = _core.RecallIndex()
    msgs = chat(FACTS, 30)
    assert wf.recall(msgs, "", 500, counter=COUNTER).messages == []
    assert wf.recall(msgs, "   ", 500, counter=COUNTER).messages == []
    huge = "parrot " * 300_000 + "ramen"
    r = wf.recall(msgs, huge, 500, counter=COUNTER, index=index)
    assert r.tokens <= 500
    one = [{"role": "user", "content": "just one message about a parrot"}]
    assert wf.recall(one, "parrot", 500, counter=COUNTER).tokens <= 500
    no_text = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": ""},
    ]
    r = wf.recall(no_text, "parrot", 500, counter=COUNTER)
    assert r.tokens <= 500 and _pairing_ok(r.messages)
    surrogate = [{"role": "user", "content": "parrot \ud800 named \udfff Biscuit"}, *msgs]
    r = wf.recall(surrogate, "parrot \udc00 Biscuit", 500, counter=COUNTER)
    assert r.tokens <= 500
    big = [
        {"role": "user", "content": "parrot " + "x" * 10_000_000},
        {"role": "assistant", "content": "ok"},
    ]
    r = wf.recall([*big, *msgs], "parrot", 300, counter=COUNTER)
    assert r.tokens <= 300
    with pytest.raises(wf.ArgumentTypeError):
        wf.recall(msgs, None, 10, counter=COUNTER)  # type: ignore[arg-type]
    with pytest.raises(wf.WindowfitError):
        wf.recall(msgs, "x", -1, counter=COUNTER)
    with pytest.raises(wf.MessageTypeError, match="message 1"):
        wf.recall([msgs[0], "not a dict"], "x", 10, counter=COUNTER)  # type: ignore[list-item]


def test_terms_follow_the_core_rules() -> None:
    assert recall_terms("I cooked ramen") == ["cook", "ramen"]
    assert "src/app/config_loader.py" in recall_terms("open src/app/config_loader.py")
    assert {"科幻", "电影"} <= set(recall_terms("科幻电影"))


def test_cover_checks_one_cost_and_one_join_per_span() -> None:
    msgs = chat(FACTS, 4)
    ix = _core.RecallIndex()
    with pytest.raises(wf.errors.InvalidArgumentError, match="one cost and one join") as info:
        ix.cover(msgs, [(0, 2), (2, 4)], [10], [False, True], "", 100, 5)
    assert isinstance(info.value, ValueError)
    assert ix.cover(msgs, [(0, 2), (2, 4)], [10, 10], [False, True], "", 100, 5)


def _days(stamp: Any, count: int = 30) -> list[dict[str, Any]]:
    """One exchange per day, each message carrying the day ``stamp(day)`` names."""
    msgs: list[dict[str, Any]] = []
    for d in range(1, count + 1):
        said = f"I repainted the garage door teal{d}." if d == 7 else f"Day {d} was calm{d}."
        for role, text in (("user", said), ("assistant", "Noted.")):
            msgs.append({"role": role, "content": text, "date": stamp(d)})
    return msgs


@pytest.mark.parametrize(
    ("stamp", "question"),
    [
        (lambda d: f"2023-05-{d:02d}", "What did I tell you on May 7th?"),
        (lambda d: f"2023-05-{d:02d}T09:30:00Z", "What did I tell you on the 7th of May?"),
        (lambda d: f"1:56 pm on {d} May, 2023", "What did I say on May 7, 2023?"),
        (lambda d: f"2023-05-{d:02d}", "5月7日我跟你说了什么？"),
    ],
)
def test_a_question_naming_a_day_brings_back_what_was_said_that_day(
    stamp: Any, question: str
) -> None:
    # the question's words match nothing said that day: the day it names does
    history = _days(stamp)
    out = wf.recall(history, question, 200, counter=COUNTER)
    assert max(out.units, key=lambda u: u.score).start == 12, out.units
    assert "teal7" in " ".join(str(m["content"]) for m in out.messages)
    assert out.tokens <= 200


def test_a_day_in_another_year_or_none_named_brings_nothing_back() -> None:
    history = _days(lambda d: f"2022-05-{d:02d}")
    assert not wf.recall(history, "What did I say on May 7, 2023?", 200, counter=COUNTER).units
    assert not wf.recall(history, "What did I say back then?", 200, counter=COUNTER).units


def test_the_days_words_still_rank_within_the_day() -> None:
    history = _days(lambda d: f"2023-05-{d:02d}")
    history[12:12] = [
        {"role": "user", "content": "My sister visited.", "date": "2023-05-07"},
        {"role": "assistant", "content": "Lovely.", "date": "2023-05-07"},
    ]
    out = wf.recall(history, "What colour was the garage door on May 7?", 60, counter=COUNTER)
    assert [u.start for u in out.units] == [14]  # the day's match first, in a tight budget


def test_a_day_named_as_the_day_of_an_event_still_brings_the_event_first() -> None:
    # "is my flight on May 4th confirmed?" asks about a booking made on another day: the best
    # match of its other words comes before the named day's unrelated exchanges
    history = _days(lambda d: f"2023-04-{d:02d}")
    history[40] = {
        "role": "user",
        "content": "I booked my flight to Lisbon for May 4th, confirmation AB123.",
        "date": "2023-04-21",
    }
    history += [
        {"role": role, "content": text, "date": "2023-05-04"}
        for _ in range(3)
        for role, text in (("user", "The garden is blooming."), ("assistant", "Lovely."))
    ]
    out = wf.recall(history, "Is my flight on May 4th confirmed?", 60, counter=COUNTER)
    assert [u.start for u in out.units] == [40], out.units
    wider = wf.recall(history, "Is my flight on May 4th confirmed?", 400, counter=COUNTER)
    assert {"2023-04-21", "2023-05-04"} <= {u.date for u in wider.units}


def test_each_stamps_day_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # a history states the same stamps on every call: their days are parsed the first time
    read: list[str] = []
    parse = _core.recall_stamp_days

    def counted(stamps: list[str]) -> Any:
        read.extend(stamps)
        return parse(stamps)

    monkeypatch.setattr(recalling._core, "recall_stamp_days", counted)
    history = _days(lambda d: f"2023-05-{d:02d}")
    index = _core.RecallIndex()
    for _ in range(3):
        on_day = recalling.said_on_named_days(history, "What on May 7th?", 0, 60, set(), index)
        assert on_day == [12, 13]
    assert sorted(read) == sorted({str(m["date"]) for m in history})
