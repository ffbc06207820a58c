"""The manager's tool outputs: the newest ``keep_recent_tool_outputs`` are sent whole, older
ones are cut by ``ObservationTruncator`` (JSON records compacted to their key fields, the full
output saved to a file the preview names) and later masked to a placeholder naming that file."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit.testing.invariants import request_problems

COUNTER = wf.Counter(encoding="o200k_base")
SYSTEM = {"role": "system", "content": "You are a coding agent."}
TASK = {"role": "user", "content": "Triage the open issues of the parser (ticket PRJ-4412)."}


def _round(k: int, output: str, name: str = "bash") -> list[dict[str, Any]]:
    cid = f"call_{k}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": output},
        {"role": "assistant", "content": f"step {k} done"},
    ]


def _issues(n: int, seed: int = 7) -> str:
    """A list-issues API response: records with an id, a title, times and long bodies."""
    rng = random.Random(seed)
    words = "parser lexer token crash regression unicode offset buffer column stream".split()
    return json.dumps(
        [
            {
                "id": 90000 + i,
                "number": 1200 + i,
                "title": f"Lexer {rng.choice(words)} {rng.choice(words)} in case {i}",
                "state": "open",
                "user": {"login": f"dev{i % 7}", "id": 500 + i % 7},
                "labels": [{"name": rng.choice(words)} for _ in range(2)],
                "created_at": f"2024-03-{i % 28 + 1:02d}T10:{i % 60:02d}:00Z",
                "updated_at": f"2024-04-{i % 28 + 1:02d}T09:00:00Z",
                "body": " ".join(rng.choice(words) for _ in range(120)),
            }
            for i in range(n)
        ],
        indent=2,
    )


def test_a_json_output_is_compacted_saved_and_named_then_masked_to_the_same_file(
    tmp_path: Path,
) -> None:
    raw = _issues(30)
    history: list[dict[str, Any]] = [SYSTEM, TASK, *_round(0, raw, "list_issues")]
    cm = wf.ContextManager(
        counter=COUNTER,
        context_window=32768,  # the low-water mark holds the whole JSON while it is newest
        output_reserve=2048,
        summarizer="none",
        tool_output_max_tokens=1200,
        tool_output_dir=tmp_path,
        keep_recent_tool_outputs=1,
        mask_keep=1,
        mask_clear_at_least=500,
    )
    # the newest output is sent whole, however large
    p = cm.prepare(history)
    assert next(m for m in p.messages if m.get("role") == "tool") is history[3]
    assert not list(tmp_path.iterdir())

    history += _round(1, "ok")
    p = cm.prepare(history)
    cut = next(m for m in p.messages if m.get("tool_call_id") == "call_0")["content"]
    assert COUNTER.count(cut) <= 1200 < COUNTER.count(raw)
    # compacted: one line per record with its key fields, far more records than a raw cut
    plain = wf.truncate(raw, 1200, direction="head_tail", counter=COUNTER).text
    assert "Lexer" in cut and "90015" in cut and "90015" not in plain
    assert "2024-03-" in cut  # a time field kept
    # the full output is in the file the preview names
    saved = [f for f in tmp_path.iterdir() if not f.name.startswith(".")]
    assert len(saved) == 1 and saved[0].read_text(encoding="utf-8") == raw
    assert str(saved[0]) in cut and saved[0].name.startswith("list_issues-")
    assert p.stats["tool_outputs_truncated"] == 1

    # later, old outputs are masked: the placeholder names the same file
    state = p.state
    found = None
    for k in range(2, 60):
        history += _round(k, f"$ cat src/mod_{k}.py\n" + f"def f{k}(x):\n    return x\n" * 100)
        p = cm.prepare(history, state)
        state = p.state
        assert p.stats["tokens"] <= p.stats["prompt_budget"]
        assert request_problems(p.messages) == []
        first = next((m for m in p.messages if m.get("tool_call_id") == "call_0"), None)
        if first is not None and "cleared to save context" in first["content"]:
            found = first["content"]
            break
    assert found is not None, "the JSON output was never masked"
    assert "list_issues" in found and str(saved[0]) in found
    assert len([f for f in tmp_path.iterdir() if f.name.startswith("list_issues-")]) == 1


def test_tool_output_dir_off_saves_nothing_and_points_into_the_history(tmp_path: Path) -> None:
    raw = _issues(30)
    history = [SYSTEM, TASK, *_round(0, raw, "list_issues"), *_round(1, "ok")]
    cm = wf.ContextManager(
        counter=COUNTER,
        context_window=16384,
        output_reserve=2048,
        summarizer="none",
        tool_output_max_tokens=1200,
        tool_output_dir="off",
    )
    assert cm.tool_output_dir is None
    cut = next(m for m in cm.prepare(history).messages if m.get("tool_call_id") == "call_0")
    assert "90015" in cut["content"] and "is in the stored history]" in cut["content"]
    assert "saved" not in cut["content"]
    assert COUNTER.count(cut["content"]) <= 1200


def test_the_default_folder_is_the_users_own_under_the_temporary_directory() -> None:
    import tempfile

    cm = wf.ContextManager(counter=COUNTER, context_window=16384)
    assert cm.tool_output_dir is not None
    assert cm.tool_output_dir.is_relative_to(Path(tempfile.gettempdir()))


# -- keep_recent_tool_outputs under arbitrary agent histories ---------------------------------


@st.composite
def _agent_histories(draw: Any) -> tuple[list[dict[str, Any]], int, int]:
    rounds = draw(st.integers(min_value=1, max_value=24))
    sizes = draw(st.lists(st.integers(0, 900), min_size=rounds, max_size=rounds))
    history: list[dict[str, Any]] = [SYSTEM, TASK]
    for k, size in enumerate(sizes):
        if draw(st.booleans()):
            history.append({"role": "user", "content": f"now look at file {k}"})
        history += _round(k, " ".join(f"w{k}x{j}" for j in range(size)), f"tool{k % 3}")
    keep = draw(st.integers(0, 3))
    cap = draw(st.integers(80, 600))
    return history, keep, cap


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_agent_histories(), st.integers(0, 3))
def test_the_newest_outputs_are_never_cut_and_older_ones_only_within_the_cap(
    drawn: tuple[list[dict[str, Any]], int, int], mask_keep: int
) -> None:
    history, keep, cap = drawn
    cm = wf.ContextManager(
        counter=COUNTER,
        context_window=8192,
        output_reserve=1024,
        summarizer="none",
        tool_output_max_tokens=cap,
        tool_output_dir="off",
        keep_recent_tool_outputs=keep,
        mask_keep=mask_keep,
        mask_clear_at_least=200,
    )
    state = None
    calls = [i for i, m in enumerate(history) if m["role"] == "assistant"] + [len(history)]
    for n in calls:
        prefix = history[:n]
        p = cm.prepare(prefix, state)
        state = p.state
        assert p.stats["tokens"] <= p.stats["prompt_budget"]
        assert request_problems(p.messages) == []
        tools = [i for i, m in enumerate(prefix) if m["role"] == "tool"]
        newest = (
            {prefix[i]["tool_call_id"] for i in tools[max(0, len(tools) - keep) :]}
            if keep
            else set()
        )
        original = {prefix[i]["tool_call_id"]: prefix[i] for i in tools}
        low = cm.budget(prefix).low_water
        for m in p.messages:
            if m.get("role") != "tool":
                continue
            if m["tool_call_id"] in newest:
                if COUNTER.count(original[m["tool_call_id"]]["content"]) <= low:
                    assert m is original[m["tool_call_id"]]  # sent whole: the input itself
                else:  # alone over the low-water mark: cut to it, never to the smaller cap
                    assert cap < COUNTER.count(m["content"]) <= low or cap >= low
            elif m is not original[m["tool_call_id"]]:
                assert COUNTER.count(m["content"]) <= cap  # cut or masked, within the cap
