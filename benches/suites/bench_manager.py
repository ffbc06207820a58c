"""ContextManager.prepare speed on a 10,000-message history (no summarizer call in the timed path).

    PYTHONPATH=python pytest benches/suites/bench_manager.py --benchmark-only --benchmark-columns=min,median,mean,rounds

- ``steady``: the agent-loop case — the state from the previous call is passed back and the
  newest message was just appended; counting caches are warm. Target: under 5 ms.
- ``one_new_message``: like steady, but each round appends a different new message, so the new
  message really is counted and scanned (the state is the one from before it).
- ``stateless``: no state at all (first call for a long stored session): every message is
  scanned and counted (cache-warm) and the cut is computed from scratch.
- ``extractive_fold``: one extractive summary of 200 evicted messages (for scale).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import windowfit as wf
from windowfit.context import ContextManager
from windowfit.summarize import ExtractiveSummarizer

N = 10_000


def history(n: int = N) -> list[dict[str, Any]]:
    """A chat-agent history: short turns, a tool call every 5th message, some long outputs."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent. " * 20}]
    i = 0
    while len(msgs) < n:
        msgs.append(
            {"role": "user", "content": f"Request {i}: please check item {i} and report. " * 3}
        )
        if i % 2 == 0:
            cid = f"call_{i}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {
                                "name": "search",
                                "arguments": json.dumps({"q": f"item {i}"}),
                            },
                        }
                    ],
                }
            )
            body = "result row\n" * (400 if i % 25 == 0 else 12)
            msgs.append({"role": "tool", "tool_call_id": cid, "content": f"{i}: " + body})
        msgs.append({"role": "assistant", "content": f"Item {i} is fine; nothing to do. " * 4})
        i += 1
    return msgs  # whole turns: n to n + 3 messages


@pytest.fixture(scope="module")
def msgs() -> list[dict[str, Any]]:
    return history() + [{"role": "user", "content": "and now?"}]


@pytest.fixture(scope="module")
def manager() -> ContextManager:
    return ContextManager(model="gpt-4o", summarizer="none")


def test_steady(benchmark, manager: ContextManager, msgs: list) -> None:
    state = manager.prepare(msgs[:-1]).state  # the previous turn
    state = manager.prepare(msgs, state).state  # warm every cache once
    result = benchmark(manager.prepare, msgs, state)
    assert result.stats["tokens"] <= manager.context_window - manager.output_reserve
    assert not result.stats["summary_triggered"]
    benchmark.extra_info.update(
        messages=len(msgs),
        sent=result.stats["messages_sent"],
        tokens=result.stats["tokens"],
        strategy=result.stats["strategy"],
    )


def test_one_new_message(benchmark, manager: ContextManager, msgs: list) -> None:
    base = msgs[:-1]
    state = manager.prepare(base).state
    counter = itertools.count()

    def setup():
        k = next(counter)
        return (base + [{"role": "user", "content": f"new question {k}"}], state), {}

    result = benchmark.pedantic(manager.prepare, setup=setup, rounds=200, warmup_rounds=5)
    assert not result.stats["summary_triggered"]
    benchmark.extra_info.update(messages=len(base) + 1, sent=result.stats["messages_sent"])


def test_stateless(benchmark, manager: ContextManager, msgs: list) -> None:
    manager.prepare(msgs)  # warm the counting cache
    result = benchmark(manager.prepare, msgs)
    assert not result.stats["summary_triggered"]
    benchmark.extra_info.update(messages=len(msgs), sent=result.stats["messages_sent"])


def test_extractive_fold(benchmark, msgs: list) -> None:
    s = ExtractiveSummarizer(counter=wf.Counter(model="gpt-4o"))
    batch = msgs[1:201]
    out = benchmark(s, batch, previous_summary="", target_tokens=600, language="en")
    assert out
