"""windowfit.testing: check_window catches each kind of broken window, the strategies honour
their knobs, the pytest fixtures are registered, and the README's example runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from windowfit.errors import WindowfitError
from windowfit.testing import (
    FIT_PROMISES,
    INVARIANTS,
    WindowInvariantError,
    budgets,
    call_ids,
    check_window,
    histories,
    request_problems,
)

C = wf.Counter(encoding="o200k_base")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for i in ids
        ],
    }


def result(i: str, text: str = "contents " * 20) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": i, "content": text}


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},  # 0
    {"role": "user", "content": "read a and b " * 10},  # 1
    call("a", "b"),  # 2
    result("a"),  # 3
    result("b"),  # 4
    {"role": "assistant", "content": "a and b read " * 10},  # 5
    {"role": "user", "content": "and c?"},  # 6
    call("c"),  # 7
    result("c"),  # 8
    {"role": "assistant", "content": "c read"},  # 9
    {"role": "user", "content": "thanks"},  # 10
]


def tokens(idx: list[int]) -> int:
    return C.count_messages([HISTORY[i] for i in idx])


def broken(idx: list[int], budget: int, **options: Any) -> str:
    """The invariant check_window names for the window made of HISTORY[idx]."""
    with pytest.raises(WindowInvariantError) as info:
        check_window(HISTORY, [HISTORY[i] for i in idx], budget, C, **{**FIT_PROMISES, **options})
    assert isinstance(info.value, AssertionError) and isinstance(info.value, WindowfitError)
    assert info.value.invariant in str(info.value)
    return info.value.invariant


def test_a_real_fit_passes_at_every_budget() -> None:
    total = C.count_messages(HISTORY)
    for budget in range(0, total + 5):
        try:
            r: Any = wf.fit(HISTORY, budget, counter=C)
        except wf.BudgetError as e:
            r = e
        check_window(HISTORY, r, budget, C, **FIT_PROMISES)


def test_each_broken_invariant_is_named() -> None:
    everything = list(range(len(HISTORY)))
    total = tokens(everything)
    # budget: more tokens than allowed
    assert broken(everything, total - 1) == "budget"
    # order: two messages swapped, or one that is not in the input
    assert broken([0, 1, 2, 3, 4, 6, 5, 7, 8, 9, 10], total) == "order"
    with pytest.raises(WindowInvariantError, match="order"):
        check_window(HISTORY, [{"role": "user", "content": "made up"}], total, C)
    # pins: the system message, the latest user message, an explicit pin
    assert broken(everything[1:], total) == "pins"
    assert broken(everything[:-1], total) == "pins"
    assert broken([0, 6, 7, 8, 9, 10], total, pinned=[1]) == "pins"
    # pairing: a call without one of its results, a result without its call
    assert broken([0, 1, 2, 3, 5, 6, 7, 8, 9, 10], total) == "pairing"
    assert broken([0, 8, 9, 10], total, maximal=False) == "pairing"
    # contiguity: a hole in the recent window, a window starting mid-round
    assert broken([0, 1, 2, 3, 4, 5, 6, 7, 8, 10], total) == "contiguity"
    assert broken([0, 5, 6, 7, 8, 9, 10], total) == "contiguity"
    # maximality: room was left for the next older round
    assert broken([0, 6, 7, 8, 9, 10], total) == "maximality"
    assert broken([0, 10], tokens([0, 10]) + tokens([6, 7, 8, 9]) - 3) == "maximality"
    # ... but a window that leaves room is fine when the policy does not promise maximality
    check_window(HISTORY, [HISTORY[i] for i in (0, 10)], total, C, maximal=False)


def test_budget_error_only_when_the_pins_do_not_fit() -> None:
    pins = tokens([0, 10])
    check_window(HISTORY, wf.BudgetError("too small"), pins - 1, C)
    with pytest.raises(WindowInvariantError, match="budget"):
        check_window(HISTORY, wf.BudgetError("too small"), pins, C)
    with pytest.raises(WindowInvariantError, match="budget"):
        check_window(HISTORY, ValueError("something else"), pins - 1, C)


def test_a_fit_result_must_report_its_tokens_and_indices_honestly() -> None:
    r = wf.fit(HISTORY, 10_000, counter=C)
    liar = wf.FitResult(r.messages, r.kept, r.dropped, r.tokens + 1, r.budget, r.stats)
    with pytest.raises(WindowInvariantError, match="budget"):
        check_window(HISTORY, liar, 10_000, C)
    shifted = wf.FitResult(r.messages, [*r.kept[:-1], 99], r.dropped, r.tokens, r.budget, r.stats)
    with pytest.raises(WindowInvariantError, match="order"):
        check_window(HISTORY, shifted, 10_000, C)


def test_a_fit_result_is_checked_by_its_own_indices_when_two_inputs_send_alike() -> None:
    # An empty assistant turn, and one whose empty tool_calls list is left out when sent: the
    # window's one message is either, and the result's own index says which was kept.
    msgs = [
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "", "tool_calls": []},
    ]
    r = wf.fit(msgs, 7, counter=C)
    assert list(r.kept) == [1]
    check_window(msgs, r, 7, C, **FIT_PROMISES)
    wrong = wf.FitResult(
        [{"role": "user", "content": ""}], r.kept, r.dropped, r.tokens, r.budget, r.stats
    )
    with pytest.raises(WindowInvariantError, match="order"):
        check_window(msgs, wrong, 7, C, **FIT_PROMISES)


@FAST
@given(data=st.data())
def test_removing_any_kept_message_is_caught(data: st.DataObject) -> None:
    """A fit with one kept message taken out always breaks some invariant: a pin, a pair, a
    hole in the window, or room the message's unit would have fit in."""
    msgs = data.draw(histories(max_events=10))
    budget = data.draw(budgets(msgs, C))
    try:
        r = wf.fit(msgs, budget, counter=C)
    except wf.BudgetError:
        return
    check_window(msgs, r, budget, C, **FIT_PROMISES)
    if not r.messages:
        return
    k = data.draw(st.integers(0, len(r.messages) - 1))
    window = r.messages[:k] + r.messages[k + 1 :]
    with pytest.raises(WindowInvariantError) as info:
        check_window(msgs, window, budget, C, **FIT_PROMISES)
    assert info.value.invariant in INVARIANTS


# ---------------------------------------------------------------- the strategies' knobs


@FAST
@given(h=histories(unanswered=False, orphans=False))
def test_undamaged_histories_are_valid_requests(h: list[dict[str, Any]]) -> None:
    assert request_problems(h) == []


@FAST
@given(h=histories(tools=False))
def test_no_tools_means_no_calls(h: list[dict[str, Any]]) -> None:
    assert not any(call_ids(m) for m in h)


@FAST
@given(h=histories(anthropic=False, system_mid=False))
def test_openai_only_and_system_first(h: list[dict[str, Any]]) -> None:
    for k, m in enumerate(h):
        assert not isinstance(m.get("content"), list) or all(
            p.get("type") in ("text", "image_url") for p in m["content"]
        )
        if m["role"] in ("system", "developer"):
            assert k == 0


def test_knobs_reach_what_they_promise() -> None:
    # each knob can produce its case (hypothesis searches until it does)
    def contents(h: list[dict[str, Any]]) -> str:
        return " ".join(str(m.get("content")) for m in h)

    zh = find(histories(languages=("zh",)), lambda h: "上下文" in contents(h))
    assert "上下文" in contents(zh)
    assert find(histories(), lambda h: any(len(call_ids(m)) >= 3 for m in h))
    assert find(histories(), lambda h: any(len(str(m.get("content"))) > 10_000 for m in h))
    assert find(histories(), lambda h: any(m["role"] == "system" for m in h[1:]))
    assert find(
        histories(),
        lambda h: any(
            isinstance(m.get("content"), list)
            and any(p.get("type") == "tool_use" for p in m["content"])
            for m in h
        ),
    )
    assert find(histories(orphans=False), lambda h: request_problems(h) != [])  # unanswered
    with pytest.raises(ValueError, match="languages"):
        find(histories(languages=("klingon",)), lambda h: True)


@FAST
@given(data=st.data())
def test_budgets_cover_the_edges(data: st.DataObject) -> None:
    msgs = data.draw(histories(max_events=6))
    b = data.draw(budgets(msgs, C))
    total = C.count_messages(msgs) if msgs else 0
    assert 0 <= b <= total + 50


# ---------------------------------------------------------------- fixtures and README


def test_plugin_fixtures(wf_counter: Any, check_window: Any) -> None:
    """Registered through the pytest11 entry point: no conftest needed."""
    assert wf_counter.count("hello world") == wf.Counter(model="gpt-4o").count("hello world")
    r = wf.fit(HISTORY, 10_000, counter=wf_counter)
    check_window(HISTORY, r, 10_000, wf_counter, **FIT_PROMISES)


README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's ten-line property test of a user's own trim policy, run as written: it must
    pass for the correct policy and fail on a policy that forgets the tool results."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- testing-example -->\s*```python\n(.*?)```", text, re.S)
    assert m, "README lost its windowfit.testing example"
    example = m.group(1)
    assert len(example.strip().splitlines()) <= 14
    (tmp_path / "test_readme_example.py").write_text(example, encoding="utf-8")
    naive = example.replace(
        "return wf.fit(messages, budget, counter=counter).messages",
        "return [m for m in messages if m.get('role') != 'tool'][-3:]",
    )
    assert naive != example
    (tmp_path / "test_readme_naive.py").write_text(naive, encoding="utf-8")
    # fewer examples than hypothesis' default: this checks the example, not fit
    (tmp_path / "conftest.py").write_text(
        "from hypothesis import HealthCheck, settings\n"
        "settings.register_profile('readme', max_examples=25, deadline=None,"
        " suppress_health_check=list(HealthCheck))\n"
        "settings.load_profile('readme')\n",
        encoding="utf-8",
    )
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert pytest.main(["-q", "-p", "no:cacheprovider", "test_readme_example.py"]) == 0
    assert pytest.main(["-q", "-p", "no:cacheprovider", "test_readme_naive.py"]) == 1
