"""The manager's summary gates and window caps as settings: constructor arguments and
``WINDOWFIT_*`` variables, each observed through what the manager sends and summarizes."""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from _manager_checks import SYSTEM, check_prompt, conversation
from windowfit.context import ContextManager


class Recorder:
    """A summarizer that records every call and answers within its target."""

    inline = True

    def __init__(self) -> None:
        self.targets: list[int] = []

    def __call__(self, messages: list[Any], **kw: Any) -> str:
        self.targets.append(int(kw["target_tokens"]))
        return "summary " * max(1, min(kw["target_tokens"], 50) // 2)


def _manager(**kw: Any) -> tuple[ContextManager, Recorder]:
    rec = Recorder()
    base: dict[str, Any] = {"model": "gpt-4o", "context_window": 6000, "output_reserve": 500}
    base.update(kw)
    return ContextManager(summarizer=rec, **base), rec


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    cm, _ = _manager()
    assert (cm.summary_max_tokens, cm.min_messages_before_summary) == (1536, 10)
    assert (cm.max_summaries_per_window, cm.resummarize_ratio) == (3, 0.5)
    assert (cm.max_messages, cm.max_turns) == (None, None)
    monkeypatch.setenv("WINDOWFIT_SUMMARY_MAX_TOKENS", "300")
    monkeypatch.setenv("WINDOWFIT_MAX_MESSAGES", "40")
    monkeypatch.setenv("WINDOWFIT_MAX_TURNS", "12")
    monkeypatch.setenv("WINDOWFIT_RESUMMARIZE_RATIO", "0.25")
    cm, _ = _manager(max_turns=5)
    assert (cm.summary_max_tokens, cm.max_messages, cm.max_turns) == (300, 40, 5)
    assert cm.resummarize_ratio == 0.25


@pytest.mark.parametrize(
    ("kw", "exc"),
    [
        ({"summary_max_tokens": 0}, ValueError),
        ({"max_messages": -1}, ValueError),
        ({"max_summaries_per_window": 1.5}, TypeError),
        ({"resummarize_ratio": 0}, ValueError),
    ],
)
def test_bad_gate_values_name_the_setting(kw: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc, match=next(iter(kw))) as info:
        _manager(**kw)
    assert isinstance(info.value, wf.WindowfitError)


def test_trigger_ratio_one_turns_summarizing_off() -> None:
    history = conversation(80)
    cm, rec = _manager(trigger_ratio=1.0)
    state = None
    for end in range(20, len(history) + 1, 20):
        p = cm.prepare(history[:end], state=state)
        check_prompt(cm, history[:end], p)
        state = p.state
    assert rec.targets == []
    assert "trigger_ratio" in p.stats["strategy_reason"] or p.stats["strategy"] == "keep"
    # the same history with summarizing on does summarize
    cm_on, rec_on = _manager(preference="quality")
    cm_on.prepare(history, state=None)
    assert rec_on.targets


def test_summary_max_tokens_caps_the_summary_on_a_large_window() -> None:
    history = conversation(400, words=400)
    big, rec_big = _manager(context_window=128_000, output_reserve=4096, preference="quality")
    capped, rec = _manager(
        context_window=128_000, output_reserve=4096, preference="quality", summary_max_tokens=200
    )
    p_big = big.prepare(history)
    p = capped.prepare(history)
    assert rec_big.targets and rec.targets
    assert max(rec.targets) <= 200 < max(rec_big.targets)
    assert p.stats["summary_target_tokens"] <= 200 < p_big.stats["summary_target_tokens"]


def test_min_messages_before_summary_holds_summaries_back() -> None:
    history = conversation(80)
    cm, rec = _manager(preference="quality", min_messages_before_summary=10_000)
    p = cm.prepare(history)
    check_prompt(cm, history, p)
    assert rec.targets == []
    assert "min_messages_before_summary" in p.stats["strategy_reason"]


def assert_within_caps(sent: list[Any], max_messages: Any, max_turns: Any) -> None:
    convo = [m for m in sent if m.get("role") not in ("system", "developer")]
    if max_messages is not None:
        assert len(convo) <= max_messages
    if max_turns is not None:
        assert sum(m.get("role") == "user" for m in convo) <= max_turns


@pytest.mark.parametrize(("max_messages", "max_turns"), [(10, None), (None, 3), (7, 2)])
def test_manager_caps_bound_the_conversation_sent(max_messages: Any, max_turns: Any) -> None:
    history = conversation(30, words=5)  # small: the budget alone would keep everything
    cm = ContextManager(
        model="gpt-4o", summarizer="none", max_messages=max_messages, max_turns=max_turns
    )
    p = cm.prepare(history)
    check_prompt(cm, history, p)
    assert_within_caps(p.messages, max_messages, max_turns)
    assert p.messages[0] is history[0] and history[0] == SYSTEM
    uncapped = ContextManager(model="gpt-4o", summarizer="none").prepare(history)
    assert len(uncapped.messages) == len(history)


@pytest.mark.parametrize(("max_messages", "max_turns"), [(10, None), (None, 3), (12, 3)])
def test_recall_keeps_within_the_conversation_caps(max_messages: Any, max_turns: Any) -> None:
    history = conversation(30, words=5)
    # a question about an exchange the caps evicted: recall would bring back several units
    history.append({"role": "user", "content": "What was ticket T-1003 about, question 3?"})
    cm = ContextManager(
        model="gpt-4o", summarizer="none", max_messages=max_messages, max_turns=max_turns
    )
    p = cm.prepare(history)
    check_prompt(cm, history, p)
    assert_within_caps(p.messages, max_messages, max_turns)
    uncapped = ContextManager(model="gpt-4o", summarizer="none", max_messages=40)
    assert uncapped.prepare(history).stats["recalled"], "the question is about evicted turns"


def _users_sent(history: list[dict[str, Any]], sent: list[Any]) -> int:
    ids = {id(m) for m in sent}
    return sum(1 for m in history if m.get("role") == "user" and id(m) in ids)


def test_min_recent_rounds_keeps_the_newest_rounds_verbatim() -> None:
    history = conversation(40, words=300, tools_every=0)
    plain, _ = _manager(preference="quality")
    floored, rec = _manager(preference="quality", min_recent_rounds=5)
    p_plain = plain.prepare(history)
    p = floored.prepare(history)
    check_prompt(floored, history, p)
    assert rec.targets, "the older rounds are still summarized"
    assert _users_sent(history, p_plain.messages) < 5 <= _users_sent(history, p.messages)
    # the newest five rounds are the input objects themselves, in order
    tail = history[-10:]
    assert [id(m) for m in p.messages[-10:]] == [id(m) for m in tail]


def test_min_recent_rounds_gives_way_when_the_rounds_do_not_fit() -> None:
    history = conversation(40, words=300, tools_every=0)
    cm, _ = _manager(preference="quality", min_recent_rounds=30)
    p = cm.prepare(history)
    check_prompt(cm, history, p)  # the budget still holds
    assert _users_sent(history, p.messages) < 30


def _tool_round(k: int, content: str) -> list[dict[str, Any]]:
    cid = f"t{k}"
    return [
        {"role": "user", "content": f"step {k}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": content},
        {"role": "assistant", "content": f"done {k}"},
    ]


def test_the_newest_tool_outputs_are_never_cut() -> None:
    big = "\n".join(f"log line {i}: " + "x" * 40 for i in range(400))
    history = [dict(SYSTEM)] + [m for k in range(4) for m in _tool_round(k, big)]
    tools = [k for k, m in enumerate(history) if m.get("role") == "tool"]
    cm = ContextManager(
        model="gpt-4o",
        summarizer="none",
        tool_output_max_tokens=200,
        keep_recent_tool_outputs=2,
    )
    p = cm.prepare(history)
    check_prompt(cm, history, p)
    sent = {m.get("tool_call_id"): m for m in p.messages if m.get("role") == "tool"}
    for rank, k in enumerate(reversed(tools)):
        m = sent[history[k]["tool_call_id"]]
        if rank < 2:
            assert m is history[k]  # whole: the input object itself
        else:
            assert cm.counter.count(m["content"]) <= 200 < cm.counter.count(big)


def test_json_tool_results_are_compacted_keeping_key_fields() -> None:
    import json

    records = [
        {
            "id": f"rec-{i}",
            "title": f"Title {i}",
            "created_at": f"2024-01-{i % 28 + 1:02d}",
            "body": "lorem ipsum " * 40,
        }
        for i in range(50)
    ]
    raw = json.dumps(records)
    history = [dict(SYSTEM), *_tool_round(0, raw), *_tool_round(1, "ok")]
    cm = ContextManager(model="gpt-4o", summarizer="none", tool_output_max_tokens=900)
    p = cm.prepare(history)
    check_prompt(cm, history, p)
    cut = next(m for m in p.messages if m.get("tool_call_id") == "t0")["content"]
    assert cm.counter.count(cut) <= 900
    # a plain cut of the raw JSON keeps only the first and last records
    plain = wf.truncate(raw, 900, direction="head_tail", counter=cm.counter).text
    assert "rec-25" not in plain
    assert "rec-25" in cut and "Title 25" in cut


class ExactRecorder(Recorder):
    """A recorder that, like the offline summarizer, selects lines and keeps its target
    exactly with the manager's tokenizer."""

    keeps_target = True

    def __init__(self) -> None:
        super().__init__()
        self.counter = wf.Counter(model="gpt-4o")


def test_an_exact_extractive_summarizer_aims_at_its_whole_room() -> None:
    """A summarizer that selects lines and keeps its target (the offline one) aims at the
    whole summary room; one that writes aims at ``summary_length_ratio`` (0.15) of what it
    folds; an explicit ratio applies to both."""
    history = conversation(40)  # ~4,800 tokens: 15% of the fold is under the room

    def first_target(rec: Recorder, **kw: Any) -> tuple[int, dict[str, Any]]:
        base: dict[str, Any] = {"model": "gpt-4o", "context_window": 6000, "output_reserve": 500}
        cm = ContextManager(summarizer=rec, preference="quality", **{**base, **kw})
        p = cm.prepare(history)
        assert rec.targets, p.stats["strategy_reason"]
        return rec.targets[0], dict(p.stats)

    exact, stats = first_target(ExactRecorder())
    room = min(stats["summary_budget"], 1536)
    written, _ = first_target(Recorder())
    assert room - 64 <= exact <= room  # the room less the summary's heading
    assert written < room * 0.8 and written < exact
    told, _ = first_target(ExactRecorder(), summary_length_ratio=0.15)
    assert told < exact
    assert ContextManager(model="gpt-4o").summary_length_ratio is None
