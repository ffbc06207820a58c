"""windowfit.replay: every per-call figure re-derived independently of the replay, on the
generated sample session and on a real agent run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _agent_runs import RUN, extract
from windowfit.cli.showcase import simulate_session
from windowfit.history_io import load_history
from windowfit.replay import SERIES, call_points, replay
from windowfit.testing import FIT_PROMISES, check_window

SESSION = simulate_session(24).messages  # 88 messages, about 7k tokens: outgrows a 4k window


def test_call_points_are_where_the_model_answered() -> None:
    points = call_points(SESSION)
    assert points == sorted(set(points)) and points
    for k in points:
        assert k == len(SESSION) or SESSION[k]["role"] == "assistant"
    answers = [k for k, m in enumerate(SESSION) if k and m["role"] == "assistant"]
    assert [k for k in points if k < len(SESSION)] == answers
    assert call_points(SESSION + [{"role": "user", "content": "more?"}])[-1] == len(SESSION) + 1
    assert call_points([]) == []


def check(res: Any, msgs: list[dict[str, Any]], model: str) -> None:
    counter = wf.Counter(model=model)
    info = wf.get_model(model)
    points = call_points(msgs)
    assert [t.messages for t in res.turns] == points
    prev: list[Any] = []
    for t in res.turns:
        history = msgs[: t.messages]
        # the whole history, counted from scratch
        assert t.whole == counter.count_messages(history)
        # fit's window: within budget, every invariant; its prefix re-derived message by message
        fitted = wf.fit(history, res.budget, counter=counter)
        check_window(history, fitted, res.budget, counter, **FIT_PROMISES)
        assert t.fit_sent == fitted.tokens
        shared = 0
        for a, b in zip(prev, fitted.messages):
            if a is not b:
                break
            shared += counter.count_message(b)
        assert t.fit_prefix == shared
        prev = fitted.messages
        assert 0 <= t.prefix <= t.sent <= res.budget
        assert 0 <= t.summary <= t.sent
        assert t.fit_ms >= 0 and t.prepare_ms >= 0
    series = res.series()
    assert set(series) == set(SERIES)
    assert all(len(v) == len(points) for v in series.values())
    tot = res.totals()
    sent = sum(t.sent for t in res.turns)
    cached = sum(t.prefix for t in res.turns)
    assert tot["sent_tokens"] == sent and tot["whole_tokens"] == sum(t.whole for t in res.turns)
    assert tot["cost_uncached"] == pytest.approx(sent * info.input_price / 1e6)
    assert tot["cost_cached"] == pytest.approx(
        ((sent - cached) * info.input_price + cached * info.cached_input_price) / 1e6
    )
    assert tot["cost_cached"] <= tot["cost_uncached"]
    assert tot["fit_ms_p50"] <= tot["fit_ms_p99"]


def test_replay_sample_session() -> None:
    res = replay(SESSION, model="gpt-4o", context_window=4_000, output_reserve=500, name="s")
    assert (res.budget, res.context_window, res.name) == (3_500, 4_000, "s")
    check(res, SESSION, "gpt-4o")
    # the window is small: the history outgrows it and the manager summarizes
    assert res.totals()["overflow_calls"] > 0
    assert max(res.series()["summary"]) > 0


def test_replay_times_langchain_next_to_fit() -> None:
    pytest.importorskip("langchain_core")
    res = replay(SESSION[:40], model="gpt-4o", context_window=4_000, output_reserve=500)
    assert res.langchain_error is None
    assert all(t.langchain_ms is not None and t.langchain_ms >= 0 for t in res.turns)
    off = replay(SESSION[:40], model="gpt-4o", context_window=4_000, langchain=False)
    assert all(t.langchain_ms is None for t in off.turns)


def test_replay_reports_progress() -> None:
    seen: list[tuple[int, int]] = []
    res = replay(SESSION[:30], context_window=4_000, on_call=lambda d, n: seen.append((d, n)))
    n = len(res.turns)
    assert seen == [(k, n) for k in range(1, n + 1)]


def test_replay_real_agent_run(tmp_path: Path) -> None:
    (path,) = extract(tmp_path, RUN)
    msgs = load_history(path).messages
    res = replay(msgs, model="deepseek-chat", context_window=16_000, name=RUN, langchain=False)
    check(res, msgs, "deepseek-chat")
    assert res.totals()["saved"] > 0
