"""UsageTracker: provider usage parsing, cost, totals shared through the store, quotas,
counter calibration, and the `windowfit usage` / `windowfit session show` commands."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
from _redis import redis_prefix, redis_server, redis_url
from windowfit.session import Session
from windowfit.store import BaseStore, MemoryStore, SQLiteStore
from windowfit.usage import Quota, QuotaExceededError, UsageTracker, extract_usage

# imported so that pytest finds these fixtures in this module
REDIS_FIXTURES = (redis_prefix, redis_server, redis_url)

GPT4O = (2.50, 10.0, 1.25)  # registry prices per 1M tokens: input, output, cached input


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        s: BaseStore = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "usage.db")
    else:
        from windowfit.store import RedisStore

        server = request.getfixturevalue("redis_server")
        s = RedisStore(server.url, prefix=request.getfixturevalue("redis_prefix"))
    yield s
    s.close()


# --------------------------------------------------------------------------- parsing


def test_openai_chat_completion_object() -> None:
    from openai.types.chat import ChatCompletion

    resp = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-2024-08-06",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "hi"},
                }
            ],
            "usage": {
                "prompt_tokens": 1200,
                "completion_tokens": 80,
                "total_tokens": 1280,
                "prompt_tokens_details": {"cached_tokens": 1024},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )
    assert extract_usage(resp) == {
        "model": "gpt-4o-2024-08-06",
        "prompt_tokens": 1200,
        "completion_tokens": 80,
        "cached_tokens": 1024,
        "cache_write_tokens": 0,
    }
    assert extract_usage(resp.usage)["model"] is None  # the usage object alone works too


def test_openai_responses_api() -> None:
    from openai.types.responses import Response, ResponseUsage

    usage = ResponseUsage.model_validate(
        {
            "input_tokens": 900,
            "output_tokens": 50,
            "total_tokens": 950,
            "input_tokens_details": {"cached_tokens": 300, "cache_write_tokens": 100},
            "output_tokens_details": {"reasoning_tokens": 10},
        }
    )
    resp = Response.model_construct(model="gpt-4.1", usage=usage)
    got = extract_usage(resp)
    assert got == {
        "model": "gpt-4.1",
        "prompt_tokens": 900,
        "completion_tokens": 50,
        "cached_tokens": 300,
        "cache_write_tokens": 100,
    }
    assert extract_usage({"model": "gpt-4.1", "usage": usage.model_dump()}) == got


def test_anthropic_message() -> None:
    from anthropic.types import Message, Usage

    usage = Usage(
        input_tokens=1000,
        output_tokens=100,
        cache_read_input_tokens=2000,
        cache_creation_input_tokens=500,
    )
    msg = Message.model_construct(
        id="m",
        type="message",
        role="assistant",
        content=[],
        model="claude-sonnet-4-20250514",
        usage=usage,
    )
    want = {
        "model": "claude-sonnet-4-20250514",
        "prompt_tokens": 3500,  # input_tokens excludes the cache parts: added back
        "completion_tokens": 100,
        "cached_tokens": 2000,
        "cache_write_tokens": 500,
    }
    assert extract_usage(msg) == want
    assert extract_usage({"model": msg.model, "usage": usage.model_dump()}) == want
    # an SDK usage whose cache fields are None
    plain = Usage(input_tokens=10, output_tokens=2)
    assert extract_usage(plain)["prompt_tokens"] == 10


def test_other_shapes() -> None:
    deepseek = {
        "model": "deepseek-chat",
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "prompt_cache_hit_tokens": 64,
            "prompt_cache_miss_tokens": 36,
        },
    }
    assert extract_usage(deepseek)["cached_tokens"] == 64
    from langchain_core.messages import AIMessage

    lc = AIMessage(
        content="x",
        usage_metadata={
            "input_tokens": 300,
            "output_tokens": 20,
            "total_tokens": 320,
            "input_token_details": {"cache_read": 100, "cache_creation": 50},
        },
        response_metadata={"model_name": "claude-sonnet-4"},
    )
    assert extract_usage(lc) == {
        "model": "claude-sonnet-4",
        "prompt_tokens": 300,
        "completion_tokens": 20,
        "cached_tokens": 100,
        "cache_write_tokens": 50,
    }
    obj = SimpleNamespace(model="m", usage=SimpleNamespace(prompt_tokens=3, completion_tokens=4))
    assert extract_usage(obj)["prompt_tokens"] == 3
    with pytest.raises(ValueError, match="no token usage"):
        extract_usage({"model": "gpt-4o", "choices": []})
    with pytest.raises(ValueError, match="not an integer"):
        extract_usage({"prompt_tokens": "many", "completion_tokens": 1})
    # cache parts reported "unadjusted" never exceed the prompt
    odd = extract_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 8, "cache_write_tokens": 5},
        }
    )
    assert (odd["cached_tokens"], odd["cache_write_tokens"]) == (8, 2)


# --------------------------------------------------------------------------- cost


def test_costs_from_registry_prices() -> None:
    t = UsageTracker()
    inp, out, cached = GPT4O
    assert t.cost("gpt-4o", 1000, 200, 500) == pytest.approx(
        (500 * inp + 500 * cached + 200 * out) / 1e6
    )
    # Anthropic cache writes at 1.25x input; reads at the cached price
    assert t.cost("claude-sonnet-4", 3500, 100, 2000, 500) == pytest.approx(
        (1000 * 3.0 + 2000 * 0.30 + 500 * 3.0 * 1.25 + 100 * 15.0) / 1e6
    )
    assert UsageTracker(cache_write_multiplier=2.0).cost(
        "claude-sonnet-4", 500, 0, 0, 500
    ) == pytest.approx(500 * 3.0 * 2.0 / 1e6)
    # other providers bill cache writes as ordinary input
    assert t.cost("gpt-4o", 1000, 0, 0, 400) == pytest.approx(1000 * inp / 1e6)
    # no cached price in the registry: cached tokens at the input price
    assert t.cost("qwen-max", 1000, 100, 400) == pytest.approx((1000 * 1.6 + 100 * 6.4) / 1e6)
    # dated names resolve through the registry's families
    assert t.cost("gpt-4o-2024-08-06", 1000, 0) == pytest.approx(1000 * inp / 1e6)
    assert t.cost("qwen3.5-27b", 10, 10) is None  # no published prices
    assert t.cost("my-local-model", 10, 10) is None  # unknown model


def test_record_validates() -> None:
    t = UsageTracker()
    with pytest.raises(ValueError, match="exceed prompt_tokens"):
        t.record("gpt-4o", 100, 10, cached_tokens=200)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError):
            t.record("gpt-4o", bad, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        t.record("  ", 1, 1)
    with pytest.raises(ValueError, match="model="):
        t.record_response({"usage": {"prompt_tokens": 1, "completion_tokens": 1}})


# --------------------------------------------------------------------------- totals in the store


def test_totals_by_model_day_and_session(store: BaseStore) -> None:
    t = UsageTracker(store)
    jan31 = datetime(2025, 1, 31, 23, 30, tzinfo=timezone.utc)
    feb1 = datetime(2025, 2, 1, 0, 30, tzinfo=timezone.utc)
    r1 = t.record("gpt-4o", 1000, 200, 500, "s1", timestamp=jan31)
    t.record("gpt-4o", 2000, 100, 0, "s2", timestamp=feb1)
    t.record("claude-sonnet-4", 3500, 100, 2000, "s1", cache_write_tokens=500, timestamp=feb1)
    t.record("local-llm", 50, 5, timestamp=feb1)
    assert r1.day == "2025-01-31" and r1.cost == pytest.approx(0.003875)

    total = t.totals()
    assert total["calls"] == 4 and total["unpriced_calls"] == 1
    assert total["prompt_tokens"] == 6550 and total["completion_tokens"] == 405
    assert total["cached_tokens"] == 2500 and total["cache_write_tokens"] == 500
    assert total["total_tokens"] == 6955
    gpt = 0.003875 + 2000 * 2.5 / 1e6 + 100 * 10 / 1e6
    claude = (1000 * 3.0 + 2000 * 0.30 + 500 * 3.75 + 100 * 15.0) / 1e6
    assert total["cost"] == pytest.approx(gpt + claude)

    assert t.totals(model="gpt-4o")["cost"] == pytest.approx(gpt)
    assert t.totals(day="2025-01-31")["calls"] == 1
    assert t.totals(day=date(2025, 2, 1))["calls"] == 3
    assert t.totals(session_id="s1")["prompt_tokens"] == 4500
    assert t.totals(session_id="s1", day="2025-02-01", model="claude-sonnet-4")["calls"] == 1
    assert t.totals(session_id="nobody") == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 0,
        "cost": 0.0,
        "calls": 0,
        "unpriced_calls": 0,
    }
    assert list(t.by_model()) == ["claude-sonnet-4", "gpt-4o", "local-llm"]
    assert t.by_model()["local-llm"]["unpriced_calls"] == 1
    assert t.by_model(day="2025-02-01")["gpt-4o"]["calls"] == 1
    assert t.by_day() == {
        "2025-01-31": t.totals(day="2025-01-31"),
        "2025-02-01": t.totals(day="2025-02-01"),
    }
    assert t.by_day(model="gpt-4o")["2025-02-01"]["prompt_tokens"] == 2000
    assert [(r["day"], r["model"]) for r in t.rows()] == [
        ("2025-01-31", "gpt-4o"),
        ("2025-02-01", "claude-sonnet-4"),
        ("2025-02-01", "gpt-4o"),
        ("2025-02-01", "local-llm"),
    ]
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        t.totals(day="yesterday")


def test_workers_share_totals(
    store: BaseStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # several trackers (threads here; processes in production) on one store
    trackers = [UsageTracker(store) for _ in range(4)]

    def work(t: UsageTracker) -> None:
        for _ in range(25):
            t.record("gpt-4o-mini", 100, 10, 20, "shared")

    threads = [threading.Thread(target=work, args=(t,)) for t in trackers]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in trackers:
        got = t.totals()
        assert got["calls"] == 100 and got["prompt_tokens"] == 10_000
        assert got["cost"] == pytest.approx(100 * (80 * 0.15 + 20 * 0.075 + 10 * 0.6) / 1e6)


def test_sqlite_usage_survives_reopen(tmp_path: Path) -> None:
    db = tmp_path / "u.db"
    with SQLiteStore(db) as s:
        UsageTracker(s).record("gpt-4o", 10, 1)
    with SQLiteStore(db) as s:
        assert UsageTracker(s).totals()["calls"] == 1


def test_async_recording(store: BaseStore) -> None:
    async def main() -> None:
        t = UsageTracker(store)
        await asyncio.gather(*(t.arecord("gpt-4o", 100, 10, session_id="a") for _ in range(10)))
        await t.arecord_response(
            {"model": "gpt-4o", "usage": {"prompt_tokens": 5, "completion_tokens": 5}}
        )
        assert (await t.atotals())["calls"] == 11
        assert (await t.atotals(session_id="a"))["prompt_tokens"] == 1000
        assert list(await t.aby_model()) == ["gpt-4o"]
        assert len(await t.aby_day()) == 1 and len(await t.arows()) == 1
        await t.acheck_quota()

    asyncio.run(main())


# --------------------------------------------------------------------------- quotas


def test_token_quota_raises_after_recording(store: BaseStore) -> None:
    t = UsageTracker(store, quota=Quota(tokens_per_day=1000))
    t.record("gpt-4o", 500, 100)
    t.check_quota()
    with pytest.raises(QuotaExceededError) as err:
        t.record("gpt-4o", 400, 100)
    assert err.value.kind == "tokens" and err.value.used == 1100 and err.value.limit == 1000
    assert "1,100 of 1,000 tokens" in str(err.value)
    assert t.totals()["calls"] == 2  # the usage was stored before the error
    with pytest.raises(QuotaExceededError):
        t.check_quota()  # before the next call


def test_quota_at_the_limit_blocks_the_next_call() -> None:
    t = UsageTracker(quota=Quota(tokens_per_day=100))
    t.record("gpt-4o", 90, 10)  # exactly the limit: this call is fine
    with pytest.raises(QuotaExceededError):
        t.check_quota()


def test_cost_quota_scoped_to_a_model_and_warn_mode(caplog: pytest.LogCaptureFixture) -> None:
    t = UsageTracker(quota=Quota(cost_per_day=0.01, model="gpt-4o"), on_quota="warn")
    with caplog.at_level(logging.WARNING, logger="windowfit.usage"):
        t.record("gpt-4o-mini", 1_000_000, 0)  # another model: not counted
        assert not [r for r in caplog.records if "quota" in r.message]
        t.record("gpt-4o", 5000, 0)  # $0.0125
    assert any("daily quota for model 'gpt-4o' exceeded" in r.message for r in caplog.records)
    t.check_quota(model="gpt-4o-mini")  # a quota of another model is not checked


def test_quota_callback_and_session_scope() -> None:
    seen: list[QuotaExceededError] = []
    t = UsageTracker(quota=[Quota(tokens_per_day=10, session_id="s1")], on_quota=seen.append)
    t.record("gpt-4o", 100, 0, session_id="s2")
    assert seen == []
    t.record("gpt-4o", 100, 0, session_id="s1")
    assert len(seen) == 1 and seen[0].quota.session_id == "s1"
    with pytest.raises(ValueError):
        Quota()
    with pytest.raises(ValueError):
        UsageTracker(on_quota="explode")


# --------------------------------------------------------------------------- calibration


class FakeCounter:
    def __init__(self, is_exact: bool = False, fail: bool = False) -> None:
        self.is_exact = is_exact
        self.fail = fail
        self.calls: list[tuple[int, int]] = []

    def calibrate(self, estimated: int, actual: int) -> None:
        self.calls.append((estimated, actual))
        if self.fail:
            raise RuntimeError("boom")


def test_recorded_usage_calibrates_estimating_counters() -> None:
    from anthropic.types import Message, Usage

    claude = FakeCounter()
    exact = FakeCounter(is_exact=True)
    t = UsageTracker(counters={"claude-sonnet-4": claude})
    t.attach("gpt-4o", exact)
    usage = Usage(
        input_tokens=1000,
        output_tokens=10,
        cache_read_input_tokens=2500,
        cache_creation_input_tokens=0,
    )
    msg = Message.model_construct(model="claude-sonnet-4-20250514", usage=usage)
    t.record_response(msg, estimated_prompt_tokens=3200)
    assert claude.calls == [(3200, 3500)]  # dated model name -> the family's counter
    t.record("gpt-4o", 100, 1, estimated_prompt_tokens=90)
    assert exact.calls == []  # exact counters need no calibration
    t.record("claude-sonnet-4", 100, 1)
    assert claude.calls == [(3200, 3500)]  # no estimate: nothing to learn
    assert t.counter_for("claude-sonnet-4") is claude and t.counter_for("gpt-5") is None


def test_calibration_failure_does_not_lose_the_record(caplog: pytest.LogCaptureFixture) -> None:
    t = UsageTracker(counters={"claude-haiku-4-5": FakeCounter(fail=True)})
    with caplog.at_level(logging.WARNING, logger="windowfit.usage"):
        t.record("claude-haiku-4-5", 100, 1, estimated_prompt_tokens=80)
    assert t.totals()["calls"] == 1
    assert any("calibrating" in r.message for r in caplog.records)


# --------------------------------------------------------------------------- CLI


def _populate(store: BaseStore) -> None:
    t = UsageTracker(store)
    t.record(
        "gpt-4o", 1000, 200, 500, "user-42", timestamp=datetime(2025, 3, 1, tzinfo=timezone.utc)
    )
    t.record(
        "claude-sonnet-4", 3000, 100, 1000, timestamp=datetime(2025, 3, 2, tzinfo=timezone.utc)
    )
    t.record("mystery-model", 10, 10, timestamp=datetime(2025, 3, 2, tzinfo=timezone.utc))
    s = Session(store, "user-42")
    s.extend(
        [
            {"role": "system", "content": "be [bold]brief[/bold]"},
            {"role": "user", "content": "hello"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "search", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ]
    )
    s.save_state({"summary": "s"})
    s.child("sub task").finish("sub result")


def test_cli_usage_and_session_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from windowfit.cli import main

    db = tmp_path / "cli.db"
    with SQLiteStore(db) as s:
        _populate(s)
    assert main(["usage", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    for text in ("2025-03-01", "2025-03-02", "gpt-4o", "mystery-model", "4,010", "total", "?"):
        assert text in out
    assert main(["usage", "--db", str(db), "--json", "--day", "2025-03-01"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["calls"] == 1 and doc["rows"][0]["model"] == "gpt-4o"
    assert main(["session", "show", "user-42", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    for text in (
        "user-42",
        "[bold]brief[/bold]",
        "[tool calls: search]",
        "[c1] found",
        "sub result",
        "subagent-",
    ):
        assert text in out
    assert main(["session", "show", "user-42", "--db", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["length"] == 5 and doc["state"] == {"summary": "s"} and len(doc["messages"]) == 5
    assert main(["session", "show", "nobody", "--db", str(db)]) == 1
    assert "no session 'nobody'" in capsys.readouterr().err
    assert main(["usage", "--db", str(tmp_path / "missing.db")]) == 1
    assert "no SQLite store" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()


def test_cli_on_redis(
    redis_url: str, redis_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from windowfit.cli import main
    from windowfit.store import RedisStore

    with RedisStore(redis_url, prefix=redis_prefix) as s:
        _populate(s)
    args = ["--redis", redis_url, "--prefix", redis_prefix]
    assert main(["usage", *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["calls"] == 3
    assert main(["session", "show", "user-42", *args, "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "[c1] found" in out and "hello" not in out
