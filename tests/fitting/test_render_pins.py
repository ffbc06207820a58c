"""``render_history`` keeps the pins ``fit`` keeps: an agent's task (the latest user message)
stays in a router's view however many tool rounds follow it. Checked on a synthetic agent
run and on the real agent runs (``shared/data/agent-sessions``, skipped when absent), the
budget by tiktoken's own count of the returned text."""

from __future__ import annotations

import json
import tarfile
from typing import Any

import pytest
import windowfit as wf
from _agent_runs import ABSENT, find_agent_data
from _corpus import tiktoken_o200k

ENC = tiktoken_o200k()
COUNTER = wf.Counter(encoding="o200k_base")
TASK = "Fix the failing date parser in utils/dates.py so that ISO weeks round-trip."


def _agent_run(rounds: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": TASK},
    ]
    for k in range(rounds):
        msgs += [
            {
                "role": "assistant",
                "content": f"step {k}",
                "tool_calls": [
                    {
                        "id": f"c{k}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": f'{{"cmd": "cat f{k}"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"line {k}\n" * 80},
        ]
    return msgs


@pytest.mark.parametrize("budget", [300, 1000, 4000])
def test_the_task_stays_in_the_view(budget: int) -> None:
    run = _agent_run(40)
    assert 1 in wf.fit(run, budget, counter=COUNTER).kept  # fit pins the task
    text = wf.render_history(run, budget, counter=COUNTER)
    assert len(ENC.encode_ordinary(text)) <= budget
    assert f"USER: {TASK}" in text
    assert "TOOL: line 39" in text  # and the newest round is still there


def test_a_task_larger_than_the_budget_is_cut_to_it() -> None:
    run = _agent_run(3)
    run[1] = {"role": "user", "content": TASK + " More detail." * 400}
    text = wf.render_history(run, 120, counter=COUNTER, summary="Earlier: nothing.")
    assert len(ENC.encode_ordinary(text)) <= 120
    assert text.startswith("[Earlier conversation summary]") and f"USER: {TASK}" in text


def test_the_pin_can_be_released() -> None:
    text = wf.render_history(_agent_run(40), 1000, counter=COUNTER, keep_last_user=False)
    assert "USER:" not in text


def _real_runs(limit: int) -> list[list[dict[str, Any]]]:
    tb = find_agent_data()
    if tb is None:
        pytest.skip(ABSENT)
    runs = []
    with tarfile.open(tb) as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".traj.json") or len(runs) >= limit:
                continue
            f = tar.extractfile(member)
            data = json.load(f) if f else {}
            msgs = [m for m in data.get("messages", []) if m.get("role") != "exit"]
            if len(msgs) > 4:
                runs.append(wf.repair(msgs, counter=COUNTER).messages)
    return runs


def test_real_runs_keep_their_task_at_router_budgets() -> None:
    runs = _real_runs(20)
    assert runs
    for run in runs:
        task = next(m for m in reversed(run) if m["role"] == "user")
        first_line = str(task["content"]).strip().splitlines()[0][:60]
        for budget in (4000, 8000, 16000):
            text = wf.render_history(run, budget, counter=COUNTER)
            assert len(ENC.encode_ordinary(text)) <= budget
            assert "USER: " in text and first_line in text, (budget, first_line)
