"""Context quality of ContextManager: nothing that fits is dropped, budget use is reported,
and observation masking clears old tool output in batches without breaking pairing."""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit.context.masking import advance_mask, is_passthrough, maskable, masked, tool_name
from windowfit.testing.invariants import request_problems

COUNTER = wf.Counter(encoding="o200k_base")


def _manager(**kw: Any) -> wf.ContextManager:
    kw.setdefault("context_window", 4096)
    kw.setdefault("output_reserve", 512)
    return wf.ContextManager(counter=COUNTER, **kw)


# -- nothing that fits is dropped ------------------------------------------------------------


def test_leading_assistant_message_is_sent_when_the_history_fits() -> None:
    history = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "assistant", "content": "Hello! Your booking code is QX-5521."},
        {"role": "user", "content": "Thanks. Which hotel did I pick?"},
    ]
    # the plain window's start-on-user rule leaves the greeting out...
    assert history[1] not in wf.fit(history, 3000, counter=COUNTER).messages
    p = _manager().prepare(history)
    # ...the manager sends everything that fits
    assert p.messages == history
    assert p.stats["messages_dropped"] == 0
    assert p.stats["left_out"] == {}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant"]), st.text(min_size=1, max_size=60)),
        min_size=1,
        max_size=12,
    )
)
def test_a_history_that_fits_is_sent_whole(turns: list[tuple[str, str]]) -> None:
    history = [{"role": r, "content": t} for r, t in turns]
    m = _manager(context_window=8192)
    assert COUNTER.count_messages(history) < m.budget().prompt_budget  # it fits
    p = m.prepare(history)
    assert p.messages == history
    assert p.stats["left_out"] == {}


def test_left_out_names_why() -> None:
    big = "word " * 400
    history: list[dict[str, Any]] = []
    m = _manager(summarizer="none")
    state = None
    for i in range(30):
        history += [
            {"role": "user", "content": f"question {i}: {big}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
        p = m.prepare(history, state)
        state = p.state
    assert p.stats["messages_dropped"] > 0
    left = p.stats["left_out"]
    assert sum(v for k, v in left.items() if k != "fit_reason") == p.stats["messages_dropped"]


# -- budget use ------------------------------------------------------------------------------


def test_budget_use_is_sent_over_the_prompt_budget() -> None:
    history: list[dict[str, Any]] = []
    m = _manager()
    state = None
    for i in range(40):
        history += [
            {"role": "user", "content": f"step {i} " + "detail " * 60},
            {"role": "assistant", "content": f"done {i}"},
        ]
        p = m.prepare(history, state)
        state = p.state
        sent = COUNTER.count_messages(p.messages)
        assert p.stats["budget_use"] == pytest.approx(sent / p.stats["prompt_budget"], abs=1e-3)
        assert 0 < p.stats["budget_use"] <= 1


# -- masking: the pure functions -------------------------------------------------------------


def _round(i: int, output: str, name: str = "bash") -> list[dict[str, Any]]:
    cid = f"call_{i}"
    return [
        {
            "role": "assistant",
            "content": f"running step {i}",
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": output},
    ]


def test_placeholder_names_the_tool_and_the_saved_file() -> None:
    note = "line\n" * 5 + "[truncated 50/4,000 tokens; full output: tool-output/bash-17.txt]"
    msgs = [{"role": "user", "content": "go"}, *_round(1, note, name="bash")]
    out = masked(msgs, 2)
    assert out["tool_call_id"] == "call_1"
    assert "bash" in out["content"] and "tool-output/bash-17.txt" in out["content"]
    assert msgs[2]["content"] == note  # the input is untouched
    plain = [{"role": "user", "content": "go"}, *_round(1, "x" * 900, name="grep")]
    text = masked(plain, 2)["content"]
    assert "grep" in text and "message 2" in text
    assert tool_name(plain, 2) == "grep"


def test_thinking_is_dropped_and_provider_items_pass_through() -> None:
    thinking = {
        "role": "assistant",
        "reasoning_content": "long private reasoning " * 50,
        "content": [
            {"type": "thinking", "thinking": "more reasoning", "signature": "sig"},
            {"type": "text", "text": "the answer is 42"},
        ],
    }
    assert maskable(thinking)
    out = masked([thinking], 0)
    assert "reasoning_content" not in out
    assert out["content"] == [{"type": "text", "text": "the answer is 42"}]
    redacted = {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "ok"},
        ],
        "reasoning_content": "x",
    }
    compaction = {
        "role": "tool",
        "tool_call_id": "c",
        "content": [{"type": "compaction", "encrypted_content": "e"}],
    }
    for item in (redacted, compaction, {"type": "reasoning", "encrypted_content": "abc"}):
        assert is_passthrough(item) and not maskable(item)


def test_mask_moves_only_in_batches_of_clear_at_least() -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for i in range(6):
        msgs += _round(i, "output line\n" * 100)
    count = COUNTER.count_message
    one = count(msgs[2]) - count(masked(msgs, 2))
    # 6 results, keep 2: 4 maskable, each freeing `one` tokens
    new, freed = advance_mask(msgs, 0, keep=2, clear_at_least=one * 3, count=count)
    assert new == 9  # the assistant message of the 5th round (the oldest kept result's call)
    assert freed >= one * 3
    assert advance_mask(msgs, 0, keep=2, clear_at_least=one * 5, count=count) == (0, 0)
    assert advance_mask(msgs, 9, keep=2, clear_at_least=1, count=count) == (9, 0)


# -- masking: in the manager -----------------------------------------------------------------


def _agent_history(rounds: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the crash in src/parser/lexer.py (issue PRJ-4412)."},
    ]
    for i in range(rounds):
        msgs += _round(i, f"$ cat file_{i}.py\n" + f"def f{i}(x):\n    return x + {i}\n" * 40)
    return msgs


def test_manager_masks_old_outputs_keeping_budget_pairing_and_the_task() -> None:
    history = _agent_history(60)
    calls = [i for i, m in enumerate(history) if m["role"] == "assistant"] + [len(history)]
    results = {}
    for keep in (0, 3):
        m = _manager(
            context_window=16384, output_reserve=2048, mask_keep=keep, mask_clear_at_least=1500
        )
        state = None
        masked_turns = reused = sent = 0
        prev: list[Any] = []
        for n in calls:
            p = m.prepare(history[:n], state)
            state = p.state
            assert p.stats["tokens"] <= p.stats["prompt_budget"]
            assert request_problems(p.messages) == []
            assert "PRJ-4412" in " ".join(str(x.get("content")) for x in p.messages)
            masked_turns += p.stats["strategy"] == "mask"
            reused += bool(prev) and p.messages[: len(prev)] == prev
            sent += p.stats["messages_sent"]
            prev = p.messages
        results[keep] = (masked_turns, reused, p, sent)
    assert results[0][0] == 0
    assert results[3][0] > 0
    final = results[3][2]
    placeholders = [x for x in final.messages if "cleared to save context" in str(x.get("content"))]
    assert placeholders and all("bash" in x["content"] for x in placeholders)
    # the 3 most recent tool outputs are verbatim
    tools = [x for x in final.messages if x.get("role") == "tool"]
    assert all("cleared" not in x["content"] for x in tools[-3:])
    # over the run, masking keeps more of it in the prompt (old outputs as placeholders) than
    # cutting alone, and breaks the cached prefix no more often
    assert results[3][3] > 1.5 * results[0][3]
    assert results[3][1] >= results[0][1]


def test_one_manager_masks_two_histories_without_mixing_them() -> None:
    m = _manager(context_window=16384, output_reserve=2048, mask_keep=3, mask_clear_at_least=1500)

    a = _agent_history(60)
    b = [dict(x) for x in a]
    for k, (x, y) in enumerate(zip(a, b)):
        if x["role"] == "tool":  # each output names the file its full text was saved to
            x["content"] += f"\n[truncated; full output: out/a-{k}.txt]"
            y["content"] = (
                y["content"].replace("return x", "return y") + f"\n[full output: out/b-{k}.txt]"
            )
    # two sessions served turn by turn by the same manager (its caches see both)
    states: dict[str, Any] = {"a": None, "b": None}
    out: dict[str, Any] = {}
    for n in [i for i, x in enumerate(a) if x["role"] == "assistant"] + [len(a)]:
        for name, history in (("a", a), ("b", b)):
            out[name] = m.prepare(history[:n], states[name])
            states[name] = out[name].state
    pa, pb = out["a"], out["b"]
    assert pa.state["mask_until"] == pb.state["mask_until"] > 0  # same boundary, same key
    text_a = " ".join(str(x.get("content")) for x in pa.messages)
    text_b = " ".join(str(x.get("content")) for x in pb.messages)
    assert "cleared to save context; full output: out/a-" in text_a
    assert "cleared to save context; full output: out/b-" in text_b
    assert "out/a-" not in text_b and "return x" not in text_b and "return y" in text_b
    assert all(x in b or x.get("role") in ("tool", "system") for x in pb.messages)
