"""Failure injection: a summarizer that raises, hangs, answers "" or 10x too long never loses a
message, never lands in the summary, keeps the budget, is reported, and is retried with backoff."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time

import pytest
from _manager_checks import check_prompt
from windowfit.cli.showcase import simulate_session
from windowfit.context import ENV_VARS, ContextManager
from windowfit.summarize import ExtractiveSummarizer

WINDOW = {"model": "gpt-4o", "context_window": 6000, "output_reserve": 800, "preference": "quality"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def session():
    return simulate_session(120, seed=5)


class Flaky:
    """A summarizer that misbehaves in a chosen way for its first ``fail`` calls."""

    inline = True

    def __init__(self, mode: str, fail: int = 10**9, sleep: float = 1.0) -> None:
        self.mode = mode
        self.fail = fail
        self.sleep = sleep
        self.calls: list[int] = []  # the target of each call
        self.good = ExtractiveSummarizer()

    def __call__(self, messages, *, previous_summary, target_tokens, language):
        self.calls.append(target_tokens)
        if len(self.calls) <= self.fail:
            if self.mode == "raise":
                raise RuntimeError("HTTP 500 from the summarizer: SECRET-ERROR-TEXT")
            if self.mode == "empty":
                return ""
            if self.mode == "blank":
                return "  \n "
            if self.mode == "none":
                return None
            if self.mode == "number":
                return 42
            if self.mode == "oversize":
                return "SECRET-ERROR-TEXT lorem ipsum " * (target_tokens * 10)
            if self.mode == "timeout":
                time.sleep(self.sleep)
                return "too late SECRET-ERROR-TEXT"
        return self.good(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
        )


class SlowThreaded(Flaky):
    """Like Flaky but run in a worker thread by the manager (not inline), so it can time out."""

    inline = False


def drive(cm: ContextManager, session, limit: int | None = None) -> list:
    state = None
    out = []
    for n, (_, history) in enumerate(session.prefixes()):
        if limit is not None and n >= limit:
            break
        p = cm.prepare(history, state)
        check_prompt(cm, history, p)  # budget kept, system + latest user present, no orphans
        out.append((history, p))
        state = p.state
    return out


@pytest.mark.parametrize("mode", ["raise", "empty", "blank", "none", "number", "oversize"])
def test_failures_never_lose_messages_or_store_errors(session, mode: str) -> None:
    flaky = Flaky(mode)
    cm = ContextManager(summarizer=flaky, **WINDOW)
    results = drive(cm, session)
    failed = [p for _, p in results if p.stats["summary_failed"]]
    assert flaky.calls, "the summarizer was never asked"
    assert len(failed) == len(flaky.calls)  # every failure is reported
    prev_cut = None
    for _history, p in results:
        s = p.stats
        assert p.state["summary"] == ""  # nothing was ever accepted ...
        assert "SECRET-ERROR-TEXT" not in json.dumps(p.messages)  # ... so no error text is sent
        assert p.state["summarized_until"] == 0  # no message was marked as summarized
        if s["summary_failed"]:
            assert s["strategy"] == "fallback" and s["summary_error"]
            assert "fitting plainly" in s["strategy_reason"]
            assert p.state["failures"] >= 1 and p.state["last_error"]
            # nothing was folded, and the cut stays where the previous turn left it
            assert not s["compacted"]
            assert prev_cut is not None and p.state["cut"] == prev_cut
        prev_cut = p.state["cut"]
    errors = {p.stats["summary_error"] for _, p in results if p.stats["summary_failed"]}
    expected = {
        "raise": "RuntimeError",
        "empty": "empty",
        "blank": "empty",
        "none": "NoneType",
        "number": "int",
        "oversize": "oversize",
    }[mode]
    assert all(expected in e for e in errors), errors


def test_retry_next_turn_then_backoff(session) -> None:
    flaky = Flaky("raise")
    cm = ContextManager(summarizer=flaky, **WINDOW)
    results = drive(cm, session)
    failed = [p for _, p in results if p.stats["summary_failed"]]
    assert len(failed) >= 4
    # consecutive failures count up; each schedules the next attempt 1, 2, 4, 8... turns later
    assert [p.state["failures"] for p in failed] == list(range(1, len(failed) + 1))
    for p in failed:
        assert p.state["retry_turn"] - p.stats["turn"] == min(2 ** (p.state["failures"] - 1), 32)
    turns = [p.stats["turn"] for p in failed]
    gaps = [b - a for a, b in itertools.pairwise(turns)]
    assert gaps[0] == 1  # the first failure is retried on the very next turn
    assert all(gap >= min(2**k, 32) for k, gap in enumerate(gaps))
    backing_off = [p for _, p in results if "backing off" in p.stats["strategy_reason"]]
    assert backing_off and all(p.stats["strategy"] == "truncate" for p in backing_off)
    # while backing off the cut still moves (plain truncation), so prompts stay in budget
    assert all(p.stats["tokens"] <= cm.context_window - cm.output_reserve for _, p in results)


def test_recovery_folds_everything_pending(session) -> None:
    flaky = Flaky("raise", fail=3)
    cm = ContextManager(summarizer=flaky, **WINDOW)
    results = drive(cm, session)
    final = results[-1][1]
    assert final.state["failures"] == 0 and final.state["last_error"] is None
    assert final.state["summary"] and final.state["summaries"] >= 2
    # the messages evicted while the summarizer was down were folded in after it recovered
    assert final.stats["messages_pending"] <= results[-1][1].stats["messages_total"] // 4
    first_good = next(
        p for _, p in results if p.stats["summary_triggered"] and not p.stats["summary_failed"]
    )
    assert "We are preparing the grades service" in first_good.state["summary"]


class Gated(SlowThreaded):
    """Its first ``fail`` calls block until the test opens the gate (or 120 s pass), so a turn
    that comes back while one is still blocked proves the timeout path ran, with no clock."""

    def __init__(self, fail: int) -> None:
        super().__init__("timeout", fail=fail)
        self.gate = threading.Event()
        self.blocked = 0
        self.lock = threading.Lock()

    def __call__(self, messages, *, previous_summary, target_tokens, language):
        if len(self.calls) >= self.fail:
            return super().__call__(
                messages,
                previous_summary=previous_summary,
                target_tokens=target_tokens,
                language=language,
            )
        self.calls.append(target_tokens)
        with self.lock:
            self.blocked += 1
        try:
            self.gate.wait(120)
            return "too late SECRET-ERROR-TEXT"
        finally:
            with self.lock:
                self.blocked -= 1


def test_timeouts_do_not_block_the_turn(session) -> None:
    slow = Gated(fail=2)
    cm = ContextManager(summarizer=slow, summary_timeout=0.2, **WINDOW)
    try:
        state, timed_out, last = None, 0, None
        for n, (_, history) in enumerate(session.prefixes()):
            if n >= 200:
                break
            p = cm.prepare(history, state)
            check_prompt(cm, history, p)
            if p.stats["summary_failed"]:
                timed_out += 1
                assert p.stats["summary_error"] == "timed out after 0.2s"
                # the turn came back while the summarizer was still blocked on the gate
                assert slow.blocked >= 1
                assert "too late" not in json.dumps(p.messages)
            state, last = p.state, p
        # The two gated calls time out; a later, quick call can too on a loaded machine (its
        # worker thread not run within 0.2 s: one `make test` run saw three), so at least two.
        assert timed_out >= 2 and len(slow.calls) > 2
        assert last is not None and last.state["summary"]
        assert "too late" not in last.state["summary"]
    finally:
        slow.gate.set()


def test_async_failures_and_timeouts(session) -> None:
    class AsyncFlaky:
        def __init__(self) -> None:
            self.calls = 0
            self.cancelled = 0
            self.good = ExtractiveSummarizer()

        async def __call__(self, messages, *, previous_summary, target_tokens, language):
            self.calls += 1
            if self.calls == 1:
                raise ConnectionError("endpoint down")
            if self.calls == 2:
                try:
                    await asyncio.sleep(120)
                except asyncio.CancelledError:
                    self.cancelled += 1  # the timeout cancelled it: no clock needed
                    raise
            return self.good(
                messages,
                previous_summary=previous_summary,
                target_tokens=target_tokens,
                language=language,
            )

    s = AsyncFlaky()
    cm = ContextManager(summarizer=s, summary_timeout=0.2, **WINDOW)

    async def main() -> list:
        state = None
        out = []
        for n, (_, history) in enumerate(session.prefixes()):
            if n >= 200:
                break
            p = await cm.aprepare(history, state)
            check_prompt(cm, history, p)
            out.append(p)
            state = p.state
        return out

    prepared = asyncio.run(main())
    errors = [p.stats["summary_error"] for p in prepared if p.stats["summary_failed"]]
    assert errors[0].startswith("ConnectionError: endpoint down")
    assert errors[1] == "timed out after 0.2s"
    assert s.cancelled == 1 and s.calls > 2
    assert prepared[-1].state["summary"] and prepared[-1].state["failures"] == 0


def test_sync_summarizer_in_aprepare_and_async_in_prepare(session) -> None:
    calls: list[str] = []
    main_thread = threading.get_ident()

    def sync_summarizer(messages, *, previous_summary, target_tokens, language):
        calls.append("thread" if threading.get_ident() != main_thread else "main")
        return ExtractiveSummarizer()(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
        )

    async def async_summarizer(messages, *, previous_summary, target_tokens, language):
        calls.append("async")
        return ExtractiveSummarizer()(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
        )

    history = session.messages[: session.calls[150]]
    cm = ContextManager(summarizer=sync_summarizer, **WINDOW)
    p = asyncio.run(cm.aprepare(history))
    assert p.stats["summary_triggered"] and not p.stats["summary_failed"]
    assert calls == ["thread"]  # a sync summarizer does not block the event loop
    cm2 = ContextManager(summarizer=async_summarizer, **WINDOW)
    p2 = cm2.prepare(history)
    assert p2.stats["summary_triggered"] and not p2.stats["summary_failed"]
    assert calls[-1] == "async"


def test_a_mutating_summarizer_cannot_touch_the_history(session) -> None:
    def vandal(messages, *, previous_summary, target_tokens, language):
        for m in messages:
            m["content"] = "VANDALIZED"
            m.pop("tool_calls", None)
        messages.clear()
        return "## Goal\n- something"

    history = session.messages[: session.calls[150]]
    snapshot = json.dumps(history)
    p = ContextManager(summarizer=vandal, **WINDOW).prepare(history)
    assert json.dumps(history) == snapshot
    assert "VANDALIZED" not in json.dumps(p.messages)


def test_a_summary_that_no_longer_fits_is_dropped_not_fatal(session) -> None:
    cm = ContextManager(**WINDOW)
    history = session.messages[: session.calls[150]]
    p = cm.prepare(history)
    assert p.state["summary"]
    # a huge system message arrives: summary + system + latest user no longer fit together
    grown = history + [{"role": "system", "content": "late rule " * 2300}]
    frozen = ContextManager(summarizer="none", **WINDOW)  # cannot re-summarize smaller
    p2 = frozen.prepare(grown, p.state)
    check_prompt(frozen, grown, p2)
    assert p2.stats["summary_dropped"] and not p2.stats["has_summary"]
    assert p2.state["summary"] == p.state["summary"]  # kept for when it fits again
    # with a summarizer, the manager re-summarizes into the smaller budget instead
    p3 = cm.prepare(grown, p.state)
    check_prompt(cm, grown, p3)
    s3 = p3.stats
    assert not s3["summary_dropped"] and s3["has_summary"]
    assert s3["summary_triggered"] and not s3["summary_failed"]
    assert p3.state["summaries"] == p.state["summaries"] + 1  # a new, smaller summary
    assert 0 < s3["tokens_summary"] <= s3["summary_budget"] < p.stats["tokens_summary"]
