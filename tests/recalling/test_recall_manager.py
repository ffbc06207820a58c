"""The manager's recall stage: evicted units the latest user message asks about come back as
one block right before it, within the budget, and the rest of the prompt is unchanged."""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recall import FACTS, _pairing_ok, chat, tool_history
from windowfit import _core
from windowfit.context.recall import (
    DEFAULT_RECALL_RATIO,
    RECAP_SEARCH_RATIO,
    RecallInput,
    asks,
    asks_recap,
    recall_settings,
    recall_stage,
)
from windowfit.recalling import recall_terms

COUNTER = wf.Counter(model="gpt-4o")
WINDOW = 2048


def manager(**kw: Any) -> wf.ContextManager:
    return wf.ContextManager(model="gpt-4o", context_window=WINDOW, counter=COUNTER, **kw)


def replayed(cm: wf.ContextManager, msgs: list[dict[str, Any]]) -> dict[str, Any] | None:
    state = None
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            state = cm.prepare(msgs[:i], state).state
    return state


def text(messages: list[Any]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


HISTORY = chat(FACTS, 120)
QUESTION = {"role": "user", "content": "What did we name our parrot?"}
# many facts, more than a summary of this window can hold: some only recall brings back
CODES = {t: f"QX-{1000 + 37 * t}" for t in range(2, 90, 3)}
MANY = chat(
    {
        t: (f"The booking code for trip number {t} is {c}.", "Noted, thanks.")
        for t, c in CODES.items()
    },
    130,
)


@pytest.fixture(scope="module")
def asked() -> tuple[Any, Any, str]:
    on, off = manager(), manager(recall=False)
    state_on, state_off = replayed(on, MANY), replayed(off, MANY)
    # a fact the plain prompt (summary + window) has lost
    for t, code in CODES.items():
        question = {"role": "user", "content": f"What is the booking code for trip number {t}?"}
        p_off = off.prepare([*MANY, question], state_off)
        if code not in text(p_off.messages):
            return on.prepare([*MANY, question], state_on), p_off, code
    raise AssertionError("every fact survived the summary: the test needs more facts")


def test_the_evicted_answer_comes_back_before_the_question(asked: tuple[Any, Any, str]) -> None:
    p, p_off, code = asked
    assert code in text(p.messages)
    recalled = p.stats["recalled"]
    assert recalled and any(
        code in str(m.get("content"))
        for m in p.messages[-1 - sum(u["end"] - u["start"] for u in recalled) : -1]
    )
    assert p.messages[-1] is p_off.messages[-1]
    n = sum(u["end"] - u["start"] for u in recalled)
    block = p.messages[-1 - n : -1]
    assert str(block[0]["content"]).startswith("[Recalled from earlier: said 2023-05-")
    # everything else is exactly the prompt without recall: the prefix is untouched
    assert [*p.messages[: -1 - n], p.messages[-1]] == p_off.messages
    budget = WINDOW - manager().output_reserve
    assert COUNTER.count_messages(p.messages) == p.stats["tokens"] <= budget
    assert p.stats["tokens_recall"] == sum(u["tokens"] for u in recalled)
    assert p.stats["tokens_recall"] <= DEFAULT_RECALL_RATIO * budget


def test_recall_off_by_argument_and_env(monkeypatch: pytest.MonkeyPatch, asked: Any) -> None:
    _, p_off, _ = asked
    assert p_off.stats["recalled"] == [] and p_off.stats["recall_reason"] == "recall is off"
    monkeypatch.setenv("WINDOWFIT_RECALL", "0")
    assert not manager().recall_settings.enabled
    monkeypatch.setenv("WINDOWFIT_RECALL_RATIO", "0.1")
    assert manager(recall=True).recall_settings.ratio == 0.1
    with pytest.raises(wf.WindowfitError):
        manager(recall_ratio=1.5)
    with pytest.raises(wf.WindowfitError):
        manager(recall="yes")


def test_a_message_the_prompt_already_covers_recalls_nothing() -> None:
    # an agent's next observation or a follow-up on the current topic: the block would only
    # move every call and break the cached prefix
    cm = manager()
    follow_up = {"role": "user", "content": MANY[-2]["content"]}
    p = cm.prepare([*MANY, follow_up], None)
    assert p.stats["recalled"] == [] and p.stats["tokens_recall"] == 0


def _held_in_passing(*latest: dict[str, Any]) -> RecallInput:
    """A fact long evicted, then a window whose remarks hold every word of "what kind of
    music do I like to listen to?", one or two each, then ``latest`` (its first message the
    latest user message)."""
    fact = chat(
        {0: ("I like to listen to jazz music of every kind, Miles Davis most of all.", "Noted!")},
        1,
    )
    remarks = [
        "The radio music was loud today.",
        "I'd like some tea now.",
        "Listen, the rain has started.",
        "That was kind of you.",
    ]
    window = [
        {"role": role, "content": text}
        for r in remarks
        for role, text in (("user", r), ("assistant", "Indeed."))
    ]
    history = [*fact, *chat({}, 40), *window, *latest]
    shown = list(range(len(history) - len(window) - len(latest), len(history)))
    prompt = [history[k] for k in shown]
    last_user = len(history) - len(latest)
    terms, held, _ = _core.RecallIndex().coverage(
        history, "What kind of music do I like to listen to?", shown[: -len(latest)], ""
    )
    assert held == terms  # the term count alone holds it covered
    return RecallInput(
        history, prompt, shown, COUNTER.count_messages(prompt), 1500, last_user, "", 0, {}
    )


def test_a_question_whose_words_the_window_holds_in_passing_still_recalls() -> None:
    # the term count calls it covered, but the evicted exchange matches it far better than
    # any message in the window
    ask = {"role": "user", "content": "What kind of music do I like to listen to?"}
    out = recall_stage(recall_settings(True, 0.3, None), COUNTER, _held_in_passing(ask))
    assert "Miles Davis" in text(out.prompt), out.stats["recall_reason"]
    assert out.prompt[-1] is ask and out.tokens <= 1500


def test_an_agents_observation_held_in_passing_recalls_nothing() -> None:
    # an agent's tool round names what it works on: the term count decides, not the scores
    # (scored, old tool output outscored it on many calls and the block moved every call)
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    round_ = (
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "kind music like listen"},
    )
    out = recall_stage(recall_settings(True, 0.3, None), COUNTER, _held_in_passing(*round_))
    assert out.stats["recall_reason"] == "the prompt already holds what the message is about"
    assert "Miles Davis" not in text(out.prompt)


def test_nothing_evicted_nothing_recalled() -> None:
    p = manager().prepare(chat(FACTS, 3), None)
    assert p.stats["recalled"] == [] and p.stats["recall_reason"] == "nothing has left the window"


@pytest.mark.parametrize(
    ("sources", "out"),
    [
        ([-1, 0, 1, 2], False),  # the summary's message beside all three
        ([0, 1], True),
        ([-1, 1, 2], True),
        ([0, 0, 2], True),  # a message twice is not the one left out
        ([2, 1, 0, 0], False),
    ],
)
def test_the_stage_tells_whether_anything_left_the_prompt(sources: list[int], out: bool) -> None:
    history = [{"role": "user", "content": f"message {k}"} for k in range(3)]
    inp = RecallInput(history, [], sources, 10, 1000, 2, "", 0, {})
    assert inp.leaves_out_any() is out
    assert out is (len({k for k in sources if k >= 0}) < len(history))  # the rule it stands for
    # the set of history positions is built only where their count, reaching the history's
    # length, cannot tell the answer (the count is what the stage asks on every turn)
    told_by_count = sum(k >= 0 for k in sources) < len(history)
    assert ("in_prompt" in vars(inp)) is not told_by_count


def test_agent_calls_of_one_turn_send_the_same_block() -> None:
    cm = manager()
    base = tool_history()[:-1]
    msgs = [*base, {"role": "user", "content": "where does load_config raise KeyError?"}]
    # a long agent turn after the question: many rounds push the early ones out
    for k in range(40):
        cid = f"z{k}"
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "ls dir{k}"}}'},
                    }
                ],
            }
        )
        msgs.append(
            {"role": "tool", "tool_call_id": cid, "content": f"listing {k} " + "entry " * 60}
        )
    state = None
    by_cut: dict[int, list[Any]] = {}
    heads: dict[int, list[Any]] = {}
    budget = WINDOW - cm.output_reserve
    for i in range(len(msgs) - 20, len(msgs) + 1, 2):
        p = cm.prepare(msgs[:i], state)
        state = p.state
        assert COUNTER.count_messages(p.messages) <= budget
        spans = [(u["start"], u["end"]) for u in p.stats["recalled"]]
        by_cut.setdefault(p.stats["cut"], []).append((spans, p.stats["recall_reason"]))
        # the prompt up to the latest user message: the block's stamps name the history
        # length it was chosen at, so a kept block is the same text on every call
        ask = next(j for j, m in enumerate(p.messages) if m is msgs[len(base)])
        heads.setdefault(p.stats["cut"], []).append(p.messages[: ask + 1])
    assert any(len(v) > 1 and v[0][0] for v in by_cut.values()), by_cut
    for cut, calls in by_cut.items():
        assert all(spans == calls[0][0] for spans, _ in calls)
        assert all(reason == "kept from the previous call" for spans, reason in calls[1:] if spans)
        assert all(head == heads[cut][0] for head in heads[cut])


def test_a_failing_embedder_never_breaks_prepare() -> None:
    def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model offline")

    cm = manager(recall_embedder=broken)
    question = {"role": "user", "content": "What is the booking code for trip number 2?"}
    p = cm.prepare([*MANY, question], None)
    assert p.messages[-1] is question
    assert p.stats["recall_reason"] == "error" and "model offline" in p.stats["recall_error"]


def test_stage_bad_input_never_raises() -> None:
    settings = recall_settings(True, 0.3, None)
    lone = [{"role": "user", "content": "only \ud800 message"}]
    out = recall_stage(settings, COUNTER, RecallInput(lone, lone, [0], 10, 1000, 0, "", 0, {}))
    assert out.prompt == lone and out.stats["recalled"] == []
    huge_q = [*HISTORY, {"role": "user", "content": "parrot " * 500_000}]
    out = recall_stage(
        settings,
        COUNTER,
        RecallInput(huge_q, [huge_q[-1]], [len(huge_q) - 1], 100, 3000, len(huge_q) - 1, "", 0, {}),
    )
    assert out.tokens <= 3000
    no_text = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "a",
            "content": [{"type": "image_url", "image_url": {"url": "data:,"}}],
        },
        {"role": "user", "content": "what did the tool show?"},
    ]
    out = recall_stage(
        settings, COUNTER, RecallInput(no_text, [no_text[2]], [2], 10, 1000, 2, "", 0, {})
    )
    assert out.tokens <= 1000


def test_session_prepare_recalls_over_the_stored_history() -> None:
    store = wf.MemoryStore()
    s = wf.Session(store, "recall")
    for m in MANY:
        s.append(m)
    t, code = next(iter(CODES.items()))
    s.append({"role": "user", "content": f"What is the booking code for trip number {t}?"})
    p = s.prepare(manager())
    assert p.stats["recalled"]
    assert code in text(p.messages)


def test_a_statement_gets_no_block_a_question_does() -> None:
    # a remark about a topic that left the window is not a question about it: a block for
    # every remark moved on most turns of a chat and broke the cached prefix
    t, code = next(iter(CODES.items()))
    said = {"role": "user", "content": f"The trip number {t} booking went well."}
    asked = {"role": "user", "content": f"What is the booking code for trip number {t}?"}
    remark = manager().prepare([*MANY, said], None)
    assert remark.stats["recalled"] == []
    assert remark.stats["recall_reason"] == "the message asks nothing"
    question = manager().prepare([*MANY, asked], None)
    assert question.stats["recalled"] and code in text(question.messages)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("who is the governor", True),
        ("Remind me of the booking code", True),
        ("List the places we planned to visit.", True),
        ("Recently I've been exploring different workout methods.", True),
        ("你还记得我养的鹦鹉叫什么", True),
        ("上次说的那家餐厅", True),
        ("We painted the living room teal.", False),
        ("Thanks, that helps a lot!", False),
        ("我今天去公园散步了。", False),
    ],
)
def test_what_counts_as_asking(message: str, expected: bool) -> None:
    assert asks(message) is expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Before we wrap up, can you recap the important things I have told you?", True),
        ("What have I told you so far?", True),
        ("Could you summarize our conversation?", True),
        ("最后，能帮我回顾一下我之前告诉过你的重要事情吗？", True),
        ("What is the booking code for trip number 5?", False),
        ("你还记得我养的鹦鹉叫什么吗？", False),
    ],
)
def test_what_counts_as_a_recap_request(message: str, expected: bool) -> None:
    assert asks_recap(message) is expected


def test_a_recaps_own_words_take_at_most_their_share_of_a_large_ratio() -> None:
    # a recap that names a topic: what its words find takes at most RECAP_SEARCH_RATIO of
    # the budget however large recall_ratio is, so its block is the one a ratio of that share
    # gives, and the rest of the room is filled with what the prompt does not say
    recap = {"role": "user", "content": "Can you recap what I told you about the booking codes?"}
    assert asks_recap(recap["content"])
    history = [*MANY, recap]
    blocks = []
    for ratio in (0.9, DEFAULT_RECALL_RATIO, RECAP_SEARCH_RATIO):
        cm = manager(recall_ratio=ratio)
        p = cm.prepare(history, replayed(cm, MANY))
        assert COUNTER.count_messages(p.messages) == p.stats["tokens"] <= WINDOW - cm.output_reserve
        blocks.append([(u["start"], u["end"]) for u in p.stats["recalled"]])
    assert blocks[0] and blocks[0] == blocks[1] == blocks[2]
    assert len(blocks[0]) > 1  # the words found some, the rest of the room holds more


def test_a_recap_request_brings_back_what_the_prompt_does_not_say() -> None:
    # no term of the request names what to look for: the room the prompt leaves is filled with
    # the evicted exchanges that add the most the prompt does not already say (the booking
    # codes, each its own), not with small talk the window repeats
    cm = manager()
    state = replayed(cm, MANY)
    recap = {"role": "user", "content": "Can you recap what I have told you so far?"}
    history = [*MANY, recap]
    p = cm.prepare(history, state)
    off = manager(recall=False).prepare(history, state)
    recalled = p.stats["recalled"]
    assert recalled, p.stats["recall_reason"]
    budget = WINDOW - cm.output_reserve
    assert COUNTER.count_messages(p.messages) == p.stats["tokens"] <= budget
    spans = [(u["start"], u["end"]) for u in recalled]
    n = sum(e - s for s, e in spans)
    block = p.messages[-1 - n : -1]
    assert [*p.messages[: -1 - n], p.messages[-1]] == off.messages  # the rest is unchanged
    # every recalled exchange says something the rest of the prompt does not
    rest = set(recall_terms(text(off.messages)))
    for s, e in spans:
        assert set(recall_terms(text(MANY[s:e]))) - rest, MANY[s:e]
    # more of the codes the plain prompt lost than the newest evicted exchanges of the same
    # size hold
    lost = [c for c in CODES.values() if c not in text(off.messages)]
    first_kept = min(k for k, m in enumerate(MANY) if any(m is x for x in off.messages))
    newest, used = [], 0
    for k in range(first_kept - 2, -1, -2):
        used += COUNTER.count_messages(MANY[k : k + 2])  # no stamp: the most that fits
        if used > p.stats["tokens_recall"]:
            break
        newest.extend(MANY[k : k + 2])
    found = sum(c in text(block) for c in lost)
    assert found > sum(c in text(newest) for c in lost)
    # stamped stretches, the history verbatim
    at = 0
    for start, end in spans:
        first = str(block[at]["content"])
        assert first.startswith(f"[Recalled from earlier: said {MANY[start]['date']}, message ")
        assert first.endswith(MANY[start]["content"])
        assert all(a is b for a, b in zip(block[at + 1 : at + end - start], MANY[start + 1 : end]))
        at += end - start
    assert at == n


def test_a_recap_about_something_named_brings_it_first() -> None:
    # "what did I tell you about trip number 5?": the exchange about it, then more
    cm = manager()
    state = replayed(cm, MANY)
    t = 5
    recap = {"role": "user", "content": f"Can you recap what I told you about trip number {t}?"}
    p = cm.prepare([*MANY, recap], state)
    off = manager(recall=False).prepare([*MANY, recap], state)
    assert CODES[t] not in text(off.messages)
    assert CODES[t] in text(p.messages)
    assert len(p.stats["recalled"]) >= 2
    budget = WINDOW - cm.output_reserve
    assert COUNTER.count_messages(p.messages) == p.stats["tokens"] <= budget
    assert p.messages[-1] is recap


RECAP_WORDS = ["parrot", "Lisbon", "ramen", "QX-1037", "gate 12", "科幻", "电影", "thanks", "ok"]


@st.composite
def long_histories(draw: Any) -> list[dict[str, Any]]:
    """Chats of user turns with their replies and tool rounds asked for by a user turn (some
    unanswered), stray results, one instruction first: what a manager sees, long enough that a
    small window evicts most of it (``test_recall.histories`` scatters instructions, which a
    manager pins, and rounds no user asked for)."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for k in range(draw(st.integers(10, 60))):
        kind = draw(st.sampled_from(["chat", "chat", "chat", "tools", "orphan"]))
        words = draw(st.lists(st.sampled_from(RECAP_WORDS), min_size=1, max_size=12))
        said = " ".join(words) + f" (turn {k})"
        if kind == "tools":
            n = draw(st.integers(1, 3))
            calls = [
                {
                    "id": f"t{k}_{j}",
                    "type": "function",
                    "function": {"name": "f", "arguments": said},
                }
                for j in range(n)
            ]
            msgs.append({"role": "user", "content": f"look up {said}"})
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            answered = draw(st.integers(0, n))
            msgs.extend(
                {"role": "tool", "tool_call_id": f"t{k}_{j}", "content": said * 3}
                for j in range(answered)
            )
        elif kind == "orphan":
            msgs.append({"role": "tool", "tool_call_id": f"x{k}", "content": said})
        else:
            msgs.append({"role": "user", "content": said})
            msgs.append({"role": "assistant", "content": f"noted: {said}"})
    return msgs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_histories(), st.sampled_from([600, 900, 1500]))
def test_a_recap_block_keeps_the_window_invariants(msgs: list[dict[str, Any]], window: int) -> None:
    """Whatever the history, a recap's block keeps the budget and every tool pair whole, the
    request stays the last message, and the prompt without the block is the one recall off
    gives."""
    recap = {"role": "user", "content": "Can you recap what I have told you so far?"}
    history = [*msgs, recap]
    on = wf.ContextManager(
        model="gpt-4o", context_window=window, counter=COUNTER, output_reserve=100
    )
    off = wf.ContextManager(
        model="gpt-4o", context_window=window, counter=COUNTER, output_reserve=100, recall=False
    )
    p, q = on.prepare(history), off.prepare(history)
    assert COUNTER.count_messages(p.messages) == p.stats["tokens"] <= window - 100
    assert p.messages[-1] is recap and _pairing_ok(p.messages)
    n = sum(u["end"] - u["start"] for u in p.stats.get("recalled") or ())
    assert [*p.messages[: len(p.messages) - 1 - n], p.messages[-1]] == q.messages
    analysis = _core.tool_units(history)
    rounds = {(a, b) for a, b, kind in analysis.units if kind == "tool_round"}
    for u in p.stats.get("recalled") or ():
        a, b = u["start"], u["end"]
        assert all(history[k].get("role") != "system" for k in range(a, b))
        if any(history[k].get("tool_calls") for k in range(a, b)):
            assert any(s <= a and b <= e or a <= s and e <= b for s, e in rounds)
            assert not any(a <= k < b for k, _, _ in analysis.problems)


def test_a_question_naming_a_day_long_evicted_recalls_that_day() -> None:
    history = chat(FACTS, 120)  # ten turns a day from 2023-05-01; the parrot on May 1st
    ask = {"role": "user", "content": "Which pet did I tell you about on May 1st?"}
    p = manager().prepare([*history, ask], replayed(manager(), history))
    assert "Biscuit" in text(p.messages), p.stats["recall_reason"]
    # its words ("pet") match nothing said about the parrot: the day it names does
    assert any(u["date"] == "2023-05-01" for u in p.stats["recalled"])
    assert p.messages[-1] is ask and p.stats["tokens"] <= p.stats["prompt_budget"]


def test_a_recap_of_one_named_day_brings_back_that_day_only() -> None:
    # "what did we talk about" alone asks for the whole conversation (its block filled with
    # whatever adds most); naming a day, for that day only
    ask = {"role": "user", "content": "What did we talk about on May 2nd?"}
    cm = manager()
    p = cm.prepare([*MANY, ask], replayed(cm, MANY))
    assert p.stats["recalled"] and all(u["date"] == "2023-05-02" for u in p.stats["recalled"])
    assert p.stats["tokens"] <= p.stats["prompt_budget"] and p.messages[-1] is ask
