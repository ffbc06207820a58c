"""What ``fit`` logs and reports when the round in progress is larger than the budget.

Nothing at WARNING (the window is valid and the caller chose the budget for the window, not
for the round); at INFO one line that says what was kept; ``stats`` carries the same facts,
and ``stop_reason`` names the budget whenever it cut something.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
import windowfit as wf

COUNTER = wf.Counter(encoding="o200k_base")
HEAD = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Refactor the parser."},
]


def _long_answers(n: int) -> list[dict[str, Any]]:
    """A round of ``n`` long assistant messages: nothing in it can be truncated."""
    return [{"role": "assistant", "content": f"note {k}: " + "word " * 200} for k in range(n)]


def _tool_round(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"row {k} " * 700},
        ]
    return out


def test_a_round_partly_left_out_is_info_and_says_what_was_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = HEAD + _long_answers(12)
    with caplog.at_level(logging.WARNING, logger="windowfit"):
        r = wf.fit(history, 1200, counter=COUNTER)
    assert not caplog.records  # nothing the caller must act on
    kept_of_round = [i for i in r.kept if i >= 2]
    assert kept_of_round and r.stats["round_dropped"] == 12 - len(kept_of_round)
    assert r.stats["stop_reason"] == "budget"
    with caplog.at_level(logging.INFO, logger="windowfit"):
        wf.fit(history, 1200, counter=COUNTER)
    (line,) = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.INFO]
    found = re.search(r"kept (\d+) of its messages, left out (\d+)", line)
    assert found, line
    assert int(found[1]) == len(kept_of_round) and int(found[2]) == r.stats["round_dropped"]
    assert "messages 2 to 13" in line


def test_cut_results_report_the_budget_not_all_fit(caplog: pytest.LogCaptureFixture) -> None:
    history = HEAD + _tool_round(6)
    with caplog.at_level(logging.INFO, logger="windowfit"):
        r = wf.fit(history, 3000, counter=COUNTER)
    assert r.stats["results_truncated"] > 0 and r.stats["round_dropped"] == 0
    assert r.kept == list(range(len(history)))
    assert r.stats["stop_reason"] == "budget"
    assert not [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    whole = wf.fit(history, 100_000, counter=COUNTER)
    assert whole.stats["stop_reason"] == "all_fit" and whole.stats["results_truncated"] == 0


def test_pins_over_the_budget_still_raise() -> None:
    with pytest.raises(wf.BudgetError):
        wf.fit(HEAD + _long_answers(2), 5, counter=COUNTER)
