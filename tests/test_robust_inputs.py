"""Bad values handed to the usage tracker and the context manager are clear errors naming the
field (``WindowfitError`` subclasses keeping their builtin base), never an overflow, an OS
error, a silent cut or a state that is not JSON."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import windowfit as wf
from windowfit.errors import ArgumentTypeError, BudgetError, InvalidArgumentError, WindowfitError
from windowfit.store import MemoryStore
from windowfit.usage import UsageTracker, extract_usage


@pytest.fixture
def tracker() -> UsageTracker:
    return UsageTracker(MemoryStore())


def openai_response(**usage: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "usage": {"prompt_tokens": 100, "completion_tokens": 10, **usage}}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1.9, -1, "1.5", [3]])
def test_record_response_rejects_counts_that_are_not_whole(
    tracker: UsageTracker, value: Any
) -> None:
    with pytest.raises(InvalidArgumentError, match="completion_tokens") as info:
        tracker.record_response(openai_response(completion_tokens=value))
    assert isinstance(info.value, ValueError)
    assert tracker.totals()["calls"] == 0  # nothing recorded


def test_record_response_takes_integral_floats(tracker: UsageTracker) -> None:
    rec = tracker.record_response(openai_response(completion_tokens=12.0))
    assert rec.completion_tokens == 12


def test_negative_anthropic_cache_field_is_an_error_not_prompt_tokens() -> None:
    usage = {
        "input_tokens": 50,
        "output_tokens": 5,
        "cache_read_input_tokens": -40,
        "cache_creation_input_tokens": 0,
    }
    with pytest.raises(InvalidArgumentError, match="cache_read_input_tokens"):
        extract_usage({"model": "claude-3-5-sonnet", "usage": usage})
    usage["cache_read_input_tokens"] = 40
    assert extract_usage({"usage": usage})["prompt_tokens"] == 90


@pytest.mark.parametrize("stamp", [-1e18, 1e18, math.inf, math.nan])
def test_record_timestamp_out_of_calendar_range(tracker: UsageTracker, stamp: float) -> None:
    with pytest.raises(InvalidArgumentError, match="timestamp") as info:
        tracker.record("gpt-4o", 10, 1, timestamp=stamp)
    assert isinstance(info.value, WindowfitError)


def test_record_timestamp_of_the_wrong_type(tracker: UsageTracker) -> None:
    with pytest.raises(ArgumentTypeError, match="timestamp"):
        tracker.record("gpt-4o", 10, 1, timestamp="yesterday")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["totals", "rows", "by_day"])
def test_reports_reject_a_model_that_is_not_a_name(tracker: UsageTracker, method: str) -> None:
    tracker.record("gpt-4o", 10, 1)
    with pytest.raises(ArgumentTypeError, match="model") as info:
        getattr(tracker, method)(model=5)
    assert isinstance(info.value, TypeError)
    assert tracker.totals(model="gpt-4o")["calls"] == 1


def big_tools(n: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "does a thing " * 200,
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for i in range(n)
    ]


def test_tool_schemas_filling_the_window_are_named_in_the_budget_error() -> None:
    cm = wf.ContextManager(model="gpt-4o", context_window=8000, output_reserve=1000)
    tools = big_tools(12)
    schema = cm.counter.count_tools(tools)
    assert schema > 7000  # the tools alone take the window
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    with pytest.raises(BudgetError, match="tool schemas take") as info:
        cm.prepare(messages, tools=tools)
    assert f"{schema:,}" in str(info.value)
    # without tools the same messages fit
    assert cm.prepare(messages).messages


def test_a_nan_next_anchor_resets_the_state_and_the_state_stays_json() -> None:
    cm = wf.ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 40}
        for i in range(40)
    ]
    state = cm.prepare(history).state
    assert state is not None
    broken = {**state, "next_anchor": math.nan}
    p = cm.prepare(history, state=broken)
    assert p.stats["state_reset"] and "next_anchor" in p.stats["state_reset_reason"]
    json.dumps(p.state, allow_nan=False)  # strict JSON again
