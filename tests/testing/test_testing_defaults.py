"""``windowfit.testing`` for a user's own simple policy, as the README shows it: the default
``check_window`` checks what every valid window must be (``fit``'s own promises are opt-in,
``FIT_PROMISES``), and the strategies generate fast enough for hypothesis's health checks
on a first run (no example database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from hypothesis import given, settings
from hypothesis import strategies as st
from windowfit.messages import tool_units
from windowfit.testing import (
    FIT_PROMISES,
    WindowInvariantError,
    budgets,
    check_window,
    valid_histories,
)

C = wf.Counter(encoding="o200k_base")


def drop_oldest(messages: list[Any], budget: int, counter: Any) -> list[Any]:
    """A simple policy: drop the oldest tool units (never the system messages or the latest
    user message) until the rest fits."""
    latest_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    units = tool_units(messages)
    pinned = [
        any(messages[i]["role"] == "system" or i == latest_user for i in range(a, b))
        for a, b, _ in units
    ]
    keep = list(range(len(units)))
    while (
        counter.count_messages([messages[i] for u in keep for i in range(*units[u][:2])]) > budget
    ):
        droppable = [u for u in keep if not pinned[u]]
        if not droppable:
            raise wf.BudgetError("the pins alone do not fit")
        keep.remove(droppable[0])
    return [messages[i] for u in keep for i in range(*units[u][:2])]


HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "check the logs " * 20},
    {"role": "assistant", "content": "first I look at the service list " * 10},
    {"role": "assistant", "content": "then at the logs " * 10},
    {"role": "user", "content": "and now?"},
]


def test_a_simple_policy_passes_the_defaults() -> None:
    budget = C.count_messages(HISTORY) - 30  # the policy drops message 1 and keeps 2 and 3
    window = drop_oldest(HISTORY, budget, C)
    assert window == [HISTORY[0], HISTORY[2], HISTORY[3], HISTORY[4]]
    check_window(HISTORY, window, budget, C)
    # fit's own promises are opt-in: this window starts mid-round
    with pytest.raises(WindowInvariantError, match="contiguity"):
        check_window(HISTORY, window, budget, C, **FIT_PROMISES)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_simple_policy_on_generated_histories(data: st.DataObject) -> None:
    msgs = data.draw(valid_histories())
    budget = data.draw(budgets(msgs, C))
    try:
        window: Any = drop_oldest(msgs, budget, C)
    except wf.BudgetError as e:
        window = e
    check_window(msgs, window, budget, C)


USERS_TEST = """
import windowfit as wf
from hypothesis import given, settings, strategies as st
from windowfit.testing import budgets, check_window, histories, valid_histories

C = wf.Counter(model="gpt-4o")

@settings(database=None)
@given(data=st.data())
def test_my_trim(data):
    msgs = data.draw(histories())
    budget = data.draw(budgets(msgs, C, feasible=True))
    check_window(msgs, wf.fit(msgs, budget, counter=C), budget, C)

@settings(database=None)
@given(msgs=valid_histories())
def test_valid(msgs):
    check_window(msgs, wf.fit(msgs, 10**6, counter=C), 10**6, C)
"""


def test_the_strategies_pass_the_health_checks_on_a_first_run(tmp_path: Path) -> None:
    """The README's test in a fresh process with an empty Hypothesis directory (nothing
    cached yet), with every health check on: drawing histories must not build Hypothesis's
    unicode tables (seconds on a first run) inside the test's input generation."""
    (tmp_path / "test_users.py").write_text(USERS_TEST, encoding="utf-8")
    env = {**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "hypothesis")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_users.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert not (tmp_path / "hypothesis" / "unicode_data").exists()
