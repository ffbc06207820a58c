"""ContextManager: configuration, budgets, strategy choice and single-call behaviour.

``check_prompt`` (the invariants every prepared prompt must satisfy) lives in
``tests/_manager_checks.py``, shared with the session and summary tests.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from typing import Any

import pytest
import windowfit as wf
from _manager_checks import SYSTEM, check_prompt, conversation  # noqa: F401 - shared
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from windowfit.context import (
    ENV_VARS,
    Budget,
    ContextManager,
    choose_strategy,
    compute_budget,
    summary_target_tokens,
)
from windowfit.summarize import ExtractiveSummarizer


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


# ---------------------------------------------------------------------------------------------
# budget arithmetic
# ---------------------------------------------------------------------------------------------


def test_budget_formula_matches_the_seeds() -> None:
    b = compute_budget(
        context_window=128_000,
        output_reserve=4096,
        system_tokens=2000,
        tools_tokens=0,
        history_ratio=0.6,
        summary_ratio=0.25,
        trigger_ratio=0.8,
        target_ratio=0.4,
    )
    # the budget design's worked example: (128000 - 4096 - 2000) * 0.6 = 73,142
    assert b.history_budget == 73_142
    assert b.prompt_budget == 128_000 - 4096
    assert b.summary_budget == int(73_142 * 0.25)
    assert (b.high_water, b.low_water) == (int(73_142 * 0.8), int(73_142 * 0.4))


_ratios = st.tuples(
    st.floats(0.05, 1.0), st.floats(0.0, 0.5), st.floats(0.1, 1.0), st.floats(0.01, 0.99)
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 2_000_000),
    st.integers(0, 200_000),
    st.integers(0, 200_000),
    st.integers(0, 50_000),
    st.integers(0, 10),
    _ratios,
)
def test_budget_invariants(
    window: int, reserve: int, system: int, tools: int, overhead: int, ratios: tuple
) -> None:
    history_ratio, summary_ratio, trigger, target_frac = ratios
    target = trigger * target_frac
    assume(target > 0 and summary_ratio + target <= trigger)
    b = compute_budget(
        context_window=window,
        output_reserve=reserve,
        system_tokens=system,
        tools_tokens=tools,
        history_ratio=history_ratio,
        summary_ratio=summary_ratio,
        trigger_ratio=trigger,
        target_ratio=target,
        overhead=overhead,
    )
    assert all(isinstance(v, int) and v >= 0 for v in b.as_dict().values())
    assert b.prompt_budget == max(0, window - reserve - tools)
    assert b.low_water <= b.high_water <= b.history_budget <= b.prompt_budget
    # the whole prompt (system + history + priming) always fits what the window allows
    assert b.history_budget + system + overhead <= b.prompt_budget or b.history_budget == 0
    # a fresh summary plus the recent part after a cut lands under the trigger
    assert b.summary_budget + b.low_water <= b.high_water


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10_000_000), st.integers(0, 100_000), st.floats(0.01, 1.0))
def test_summary_target_is_clamped(evicted: int, budget: int, ratio: float) -> None:
    t = summary_target_tokens(evicted, budget, ratio)
    assert 0 <= t <= budget
    if budget >= 48:
        assert t >= 48
        assert (
            t == min(budget, max(48, -(-int(evicted * ratio * 1_000_000) // 1_000_000)))
            or abs(t - min(budget, max(48, evicted * ratio))) <= 1
        )


def test_summary_target_is_about_fifteen_percent() -> None:
    assert summary_target_tokens(10_000, 5_000) == 1_500
    assert summary_target_tokens(100_000, 5_000) == 5_000  # clamped to the budget
    assert summary_target_tokens(10, 5_000) == 48  # a useful floor
    assert summary_target_tokens(10_000, 20) == 20  # never above the budget


# ---------------------------------------------------------------------------------------------
# strategy: the preference picks the summarization route
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "tokens", "preference", "expected"),
    [
        (5, 400, "fast", "truncate"),
        (5, 400, "balanced", "truncate"),
        (5, 400, "quality", "truncate"),  # short: nothing worth summarizing
        (30, 2000, "fast", "truncate"),
        (30, 2000, "balanced", "truncate"),  # a tie goes to the free option
        (30, 2000, "quality", "summarize"),
        (60, 20_000, "fast", "truncate"),
        (60, 20_000, "balanced", "summarize"),
        (60, 20_000, "quality", "summarize"),
    ],
)
def test_strategy_matrix(count: int, tokens: int, preference: str, expected: str) -> None:
    d = choose_strategy(preference=preference, message_count=count, content_tokens=tokens)
    assert d.strategy == expected
    assert d.reason


def test_strategy_frequency_limit_and_no_summarizer() -> None:
    busy = choose_strategy(
        preference="balanced", message_count=60, content_tokens=20_000, recent_summaries=3
    )
    assert busy.strategy == "truncate" and "summaries in the last" in busy.reason
    assert (
        choose_strategy(
            preference="quality", message_count=60, content_tokens=20_000, recent_summaries=5
        ).strategy
        == "summarize"
    )
    none = choose_strategy(message_count=100, content_tokens=50_000, has_summarizer=False)
    assert none.strategy == "truncate" and "no summarizer" in none.reason
    with pytest.raises(ValueError):
        choose_strategy(preference="cheap", message_count=1, content_tokens=1)


# ---------------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------------


def test_defaults_come_from_the_model_registry() -> None:
    cm = ContextManager(model="gpt-4o")
    info = wf.get_model("gpt-4o")
    assert cm.context_window == info.context_window
    assert cm.output_reserve == 4096
    assert (cm.history_ratio, cm.summary_ratio, cm.trigger_ratio, cm.target_ratio) == (
        1.0,
        0.25,
        0.85,
        0.3,
    )
    assert (cm.mask_keep, cm.mask_clear_at_least) == (3, 2048)
    assert cm.tool_output_dir is not None and cm.keep_recent_tool_outputs == 1
    assert cm.preference == "balanced" and cm.stable_prefix and cm.summary_role == "system"
    assert isinstance(cm.summarizer, ExtractiveSummarizer) and cm.summarizer.counter is cm.counter
    small = ContextManager(model="gpt-4")  # 8k window: the default reserve shrinks to a quarter
    assert small.output_reserve == 2048


def test_every_parameter_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "WINDOWFIT_MODEL": "gpt-4o-mini",
        "WINDOWFIT_CONTEXT_WINDOW": "50000",
        "WINDOWFIT_OUTPUT_RESERVE": "3000",
        "WINDOWFIT_SYSTEM_RESERVE": "1500",
        "WINDOWFIT_HISTORY_RATIO": "0.6",
        "WINDOWFIT_SUMMARY_RATIO": "0.2",
        "WINDOWFIT_TRIGGER_RATIO": "0.9",
        "WINDOWFIT_TARGET_RATIO": "0.5",
        "WINDOWFIT_SUMMARIZER": "none",
        "WINDOWFIT_TOOL_OUTPUT_MAX_TOKENS": "700",
        "WINDOWFIT_TOOL_OUTPUT_DIRECTION": "tail",
        "WINDOWFIT_TOOL_OUTPUT_DIR": "off",
        "WINDOWFIT_PREFERENCE": "quality",
        "WINDOWFIT_STABLE_PREFIX": "false",
        "WINDOWFIT_SUMMARY_ROLE": "pair",
        "WINDOWFIT_SUMMARY_TIMEOUT": "7.5",
        "WINDOWFIT_SUMMARY_LENGTH_RATIO": "0.1",
        "WINDOWFIT_LANGUAGE": "zh",
        "WINDOWFIT_ENCODING": "cl100k_base",
        "WINDOWFIT_SUMMARY_MAX_TOKENS": "512",
        "WINDOWFIT_MIN_MESSAGES_BEFORE_SUMMARY": "20",
        "WINDOWFIT_MAX_SUMMARIES_PER_WINDOW": "2",
        "WINDOWFIT_RESUMMARIZE_RATIO": "0.75",
        "WINDOWFIT_MAX_MESSAGES": "40",
        "WINDOWFIT_MAX_TURNS": "12",
        "WINDOWFIT_MIN_RECENT_ROUNDS": "4",
        "WINDOWFIT_KEEP_RECENT_TOOL_OUTPUTS": "2",
        "WINDOWFIT_MASK_KEEP": "4",
        "WINDOWFIT_MASK_CLEAR_AT_LEAST": "900",
        "WINDOWFIT_RECALL": "false",
        "WINDOWFIT_RECALL_RATIO": "0.25",
    }
    assert set(env) == set(ENV_VARS.values())
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cm = ContextManager()
    assert cm.model == "gpt-4o-mini"
    assert (cm.context_window, cm.output_reserve, cm.system_reserve) == (50_000, 3000, 1500)
    assert (cm.history_ratio, cm.summary_ratio, cm.trigger_ratio, cm.target_ratio) == (
        0.6,
        0.2,
        0.9,
        0.5,
    )
    assert cm.summarizer is None
    assert (cm.tool_output_max_tokens, cm.tool_output_direction) == (700, "tail")
    assert cm.tool_output_dir is None  # "off": nothing saved
    assert (cm.preference, cm.stable_prefix, cm.summary_role) == ("quality", False, "pair")
    assert (cm.summary_timeout, cm.summary_length_ratio, cm.language) == (7.5, 0.1, "zh")
    assert (cm.summary_max_tokens, cm.min_messages_before_summary) == (512, 20)
    assert (cm.max_summaries_per_window, cm.resummarize_ratio) == (2, 0.75)
    assert (cm.max_messages, cm.max_turns, cm.min_recent_rounds) == (40, 12, 4)
    assert cm.keep_recent_tool_outputs == 2
    assert (cm.mask_keep, cm.mask_clear_at_least) == (4, 900)
    assert (cm.recall_settings.enabled, cm.recall_settings.ratio) == (False, 0.25)
    assert cm.counter.count("hello world") == wf.get_encoding("cl100k_base").count("hello world")
    # constructor arguments win over the environment
    cm2 = ContextManager(
        "gpt-4o",
        context_window=9000,
        output_reserve=100,
        preference="fast",
        stable_prefix=True,
        summarizer="extractive",
    )
    assert (cm2.model, cm2.context_window, cm2.output_reserve, cm2.preference) == (
        "gpt-4o",
        9000,
        100,
        "fast",
    )
    assert cm2.stable_prefix is True and isinstance(cm2.summarizer, ExtractiveSummarizer)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("WINDOWFIT_CONTEXT_WINDOW", "big"),
        ("WINDOWFIT_TRIGGER_RATIO", "0.8x"),
        ("WINDOWFIT_STABLE_PREFIX", "maybe"),
    ],
)
def test_invalid_environment_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=var):
        ContextManager(model="gpt-4o")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_window": 0},
        {"output_reserve": 200_000},
        {"trigger_ratio": 1.5},
        {"target_ratio": 0.9},  # above the trigger
        {"summary_ratio": 0.6},  # summary + target above the trigger
        {"history_ratio": 0},
        {"preference": "cheap"},
        {"summary_role": "assistant"},
        {"tool_output_max_tokens": -1},
        {"tool_output_direction": "middle"},
        {"summarizer": "gpt"},
        {"summarizer": 42},
        {"language": "fr"},
        {"summary_timeout": 0},
    ],
)
def test_invalid_configuration_is_rejected(kwargs: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        ContextManager(model="gpt-4o", **kwargs)


def test_model_or_window_is_required() -> None:
    with pytest.raises(ValueError):
        ContextManager()
    with pytest.raises(KeyError):
        ContextManager(model="no-such-model-xyz")
    cm = ContextManager(model="my-private-model", context_window=10_000)
    assert cm.context_window == 10_000 and cm.counter.count("hi") > 0


# ---------------------------------------------------------------------------------------------
# prepare: single calls
# ---------------------------------------------------------------------------------------------


def test_short_history_is_sent_whole_and_never_mutated() -> None:
    cm = ContextManager(model="gpt-4o")
    history = conversation(5)
    snapshot = copy.deepcopy(history)
    p = cm.prepare(history)
    assert p.messages == history and all(a is b for a, b in zip(p.messages, history))
    assert history == snapshot
    s = p.stats
    assert s["strategy"] == "keep" and not s["summary_triggered"] and not s["compacted"]
    assert s["messages_dropped"] == 0 and s["tokens_saved"] == 0 and s["tokens_summary"] == 0
    assert s["tokens"] == cm.counter.count_messages(history) == s["tokens_full"]
    assert s["tokens_system"] + s["tokens_recent"] + cm.counter.reply_priming == s["tokens"]
    assert 0 < s["usage_ratio"] < 0.1
    check_prompt(cm, history, p)


def test_empty_history() -> None:
    p = ContextManager(model="gpt-4o").prepare([])
    assert p.messages == [] and p.stats["tokens"] == 0 and p.stats["strategy"] == "keep"


def test_bad_inputs() -> None:
    cm = ContextManager(model="gpt-4o")
    with pytest.raises(TypeError):
        cm.prepare("hello")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cm.prepare([SYSTEM, "hello"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        cm.prepare([SYSTEM], state="nope")  # type: ignore[arg-type]


def test_summarizes_when_over_the_high_water_mark() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    history = conversation(40)
    state_in = {"version": 1}
    p = cm.prepare(history, state_in)
    assert state_in == {"version": 1}  # the caller's state is not modified
    s = p.stats
    assert s["summary_triggered"] and not s["summary_failed"] and s["compacted"]
    assert s["strategy"] == "summarize" and s["strategy_reason"]
    assert s["tokens_summary"] > 0 and s["has_summary"]
    assert s["tokens_summary"] + s["tokens_recent"] <= s["high_water"]
    assert s["tokens_summary"] <= s["summary_budget"]
    # the recent part is the longest run of whole rounds under the low-water mark: what
    # follows the cut, and one round more would not have fit
    c, cut = cm.counter, p.state["cut"]
    assert s["tokens_recent"] == c.count_messages(history[cut:]) - c.reply_priming
    assert s["tokens_recent"] <= s["low_water"]
    before = max(i for i in range(1, cut) if history[i]["role"] == "user")
    assert c.count_messages(history[before:]) - c.reply_priming > s["low_water"]
    assert s["tokens_saved"] == s["tokens_full"] - s["tokens"]
    state = p.state
    assert state["summary"] and state["summary_tokens"] == cm.counter.count(state["summary"])
    assert state["summarized_until"] == state["cut"] > 1
    assert state["created_at"] and state["summaries"] == 1
    assert p.messages[0] is history[0]
    assert p.messages[1]["role"] == "system" and p.messages[1]["content"].startswith(
        "[Summary of the earlier"
    )
    # the summary carries the tickets of questions it folded (they are each said once)
    folded = {f"T-{1000 + r}" for r in range(40) if f"T-{1000 + r}" in str(history[: state["cut"]])}
    assert any(t in p.messages[1]["content"] for t in folded)
    check_prompt(cm, history, p)


def test_summary_as_a_user_assistant_pair() -> None:
    cm = ContextManager(
        model="gpt-4o", context_window=4000, output_reserve=500, summary_role="pair"
    )
    history = conversation(40)
    p = cm.prepare(history)
    roles = [m["role"] for m in p.messages[:4]]
    assert roles[:3] == ["system", "user", "assistant"]
    assert p.messages[1]["content"].startswith("[Summary")
    # the window after the pair starts on a user message, so roles alternate
    assert p.messages[3]["role"] == "user"
    check_prompt(cm, history, p)


def test_chinese_conversation_gets_a_chinese_summary_header() -> None:
    cm = ContextManager(model="gpt-4o", context_window=3000, output_reserve=500)
    history: list[dict[str, Any]] = [dict(SYSTEM)]
    for r in range(40):
        history.append(
            {
                "role": "user",
                "content": f"第{r}个问题：请帮我检查班级 C-{7000 + r} 的成绩数据。" * 3,
            }
        )
        history.append(
            {"role": "assistant", "content": f"好的，第{r}个问题已经处理完毕，结果正常。" * 3}
        )
    p = cm.prepare(history)
    assert p.stats["summary_triggered"]
    assert p.messages[1]["content"].startswith("【早期对话摘要")
    assert "## 任务目标" in p.messages[1]["content"]


def test_big_tool_outputs_are_truncated_in_the_prompt_only() -> None:
    cm = ContextManager(model="gpt-4o", tool_output_max_tokens=300)
    history = conversation(6, big=2000)
    snapshot = copy.deepcopy(history)
    p = cm.prepare(history)
    assert history == snapshot
    tools = [m for m in p.messages if m["role"] == "tool"]
    originals = {m["tool_call_id"]: m for m in history if m["role"] == "tool"}
    # the newest output is sent whole (keep_recent_tool_outputs=1), the older ones are cut
    *older, newest = tools
    assert newest is originals[newest["tool_call_id"]]
    assert older and all(cm.counter.count(m["content"]) <= 300 for m in older)
    assert p.stats["tool_outputs_truncated"] == len(older)
    assert p.stats["tool_tokens_truncated"] > 0
    for m in older:
        assert m is not originals[m["tool_call_id"]]
        assert set(m) == set(originals[m["tool_call_id"]])
    # deterministic: the same truncation next turn (so the prompt prefix stays cacheable)
    p2 = cm.prepare(history, p.state)
    assert [m["content"] for m in p2.messages] == [m["content"] for m in p.messages]
    check_prompt(cm, history, p)
    # 0 disables truncation
    assert (
        ContextManager(model="gpt-4o", tool_output_max_tokens=0)
        .prepare(history)
        .stats["tool_outputs_truncated"]
        == 0
    )


def test_auto_tool_cap_keeps_one_huge_output_from_evicting_everything() -> None:
    cm = ContextManager(model="gpt-4o", context_window=8000, output_reserve=1000)
    history = conversation(3, big=6000)
    p = cm.prepare(history)
    b = cm.budget(history)
    assert p.stats["tool_outputs_truncated"] >= 1
    *older, newest = [m for m in p.messages if m["role"] == "tool"]
    for m in older:
        assert cm.counter.count(m["content"]) <= max(64, b.low_water // 2)
    # the newest is exempt from the cap, yet no larger than the low-water mark
    assert max(64, b.low_water // 2) < cm.counter.count(newest["content"]) <= b.low_water
    check_prompt(cm, history, p)


def test_tools_schemas_are_budgeted() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "does things " * 20,
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string", "description": "query"}},
                },
            },
        }
        for i in range(8)
    ]
    cm = ContextManager(model="gpt-4o", context_window=3000, output_reserve=500)
    history = conversation(30)
    p = cm.prepare(history, tools=tools)
    assert p.stats["tokens_tools"] == cm.counter.count_tools(tools) > 0
    assert p.stats["prompt_budget"] == 3000 - 500 - p.stats["tokens_tools"]
    check_prompt(cm, history, p, tools)


def test_system_reserve_is_a_floor() -> None:
    history = conversation(5)
    a = ContextManager(model="gpt-4o").budget(history)
    b = ContextManager(model="gpt-4o", system_reserve=5000).budget(history)
    assert b.system_tokens == 5000 and b.history_budget < a.history_budget
    c = ContextManager(model="gpt-4o", system_reserve=1).budget(history)
    assert c.system_tokens == a.system_tokens  # the measured size when bigger


def test_budget_error_when_the_pins_cannot_fit() -> None:
    cm = ContextManager(model="gpt-4o", context_window=600, output_reserve=100)
    history = [dict(SYSTEM), {"role": "user", "content": "word " * 2000}]
    with pytest.raises(wf.BudgetError):
        cm.prepare(history)


def test_state_of_another_history_is_discarded() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    p = cm.prepare(conversation(40))
    other = conversation(40, words=31)
    p2 = cm.prepare(other, p.state)
    assert p2.stats["state_reset"]
    assert re.search(r"Question \d+: word word", p2.state["summary"])
    assert p2.state["summary"] != p.state["summary"] and p2.state["summaries"] == 1
    check_prompt(cm, other, p2)
    # a stale or foreign state object is ignored, not trusted
    assert cm.prepare(other, {"version": 99, "summary": "bogus"}).state["summary"] != "bogus"


def test_rolled_back_history_keeps_a_valid_summary() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    history = conversation(40)
    p = cm.prepare(history)
    longer = history + [{"role": "user", "content": "one more"}]
    p2 = cm.prepare(longer, p.state)
    p3 = cm.prepare(history, p2.state)  # the last message was rolled back
    assert not p3.stats["state_reset"]
    assert p3.state["summary"] == p.state["summary"]
    check_prompt(cm, history, p3)


def test_recommend() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    short = cm.recommend(conversation(2))
    assert short["urgency"] in ("none", "low") and not short["needs_optimization"]
    assert short["recommended_strategy"] == "truncate"
    long = cm.recommend(conversation(60))
    assert long["urgency"] == "critical" and long["needs_optimization"]
    assert long["usage_ratio"] > 1 and long["recommended_strategy"] == "summarize"
    assert long["reason"]
    fast = ContextManager(
        model="gpt-4o", context_window=4000, output_reserve=500, preference="fast"
    )
    assert fast.recommend(conversation(60))["recommended_strategy"] == "truncate"


def test_check_safety() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    ok, message = cm.check_safety(conversation(2), tools_count=1)
    assert ok and message.startswith("ok:")
    ok, message = cm.check_safety(conversation(2), tools_count=5)
    assert not ok and "over the limit" in message and "prepare()" in message
    tools = [{"type": "function", "function": {"name": "t", "parameters": {}}}]
    ok, message = cm.check_safety(conversation(60), tools=tools)
    assert not ok
    with pytest.raises(ValueError):
        cm.check_safety([], tools_count=-1)


def test_aprepare_matches_prepare() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    history = conversation(40)
    sync = cm.prepare(history)
    asyn = asyncio.run(cm.aprepare(history))
    assert [m["content"] for m in asyn.messages] == [m["content"] for m in sync.messages]
    assert asyn.state["summary"] == sync.state["summary"]


def test_prepared_is_json_friendly() -> None:
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    p = cm.prepare(conversation(40))
    json.dumps(p.stats)
    json.dumps(p.messages)
    assert p.tokens == p.stats["tokens"]
    assert isinstance(cm.budget(), Budget)
    assert "ContextManager(model='gpt-4o'" in repr(cm)
