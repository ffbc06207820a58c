"""Regression tests for the bad inputs and surprises a robustness review found (issue 11).

Each test names the behaviour before the fix it guards against; all of them failed then.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from windowfit.cli.showcase import simulate_session
from windowfit.context import ENV_VARS, ContextManager
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.models import model_family
from windowfit.store import MemoryStore, SQLiteStore
from windowfit.summarize import ExtractiveSummarizer
from windowfit.truncation import ObservationTruncator
from windowfit.usage import UsageTracker

GPT4O = wf.Counter(model="gpt-4o")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


def _call(i: int, name: str = "read") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        ],
    }


def _result(i: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


# ----------------------------------------------------------------------- 1. summary_timeout


class Threaded:
    """A summarizer the manager runs in a worker thread (so its timeout machinery is used)."""

    inline = False

    def __init__(self) -> None:
        self.calls = 0
        self.good = ExtractiveSummarizer()

    def __call__(self, messages: Any, **kwargs: Any) -> str:
        self.calls += 1
        time.sleep(0.01)
        return str(self.good(messages, **kwargs))


WINDOW = {"model": "gpt-4o", "context_window": 6000, "output_reserve": 800, "preference": "quality"}


def _summarizes(cm: ContextManager, summarizer: Threaded) -> None:
    state = None
    for n, (_, history) in enumerate(simulate_session(60, seed=5).prefixes()):
        p = cm.prepare(history, state)
        state = p.state
        if summarizer.calls and n > 5:
            break
    assert summarizer.calls, "the session never summarized: the test would prove nothing"


@pytest.mark.parametrize("value", [math.inf, 1e300, 10**12])
def test_an_endless_summary_timeout_means_no_timeout(value: float) -> None:
    """Before: accepted, then every sync prepare that summarized raised OverflowError."""
    s = Threaded()
    cm = ContextManager(summarizer=s, summary_timeout=value, **WINDOW)
    assert cm.summary_timeout is None
    _summarizes(cm, s)


def test_an_endless_summary_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINDOWFIT_SUMMARY_TIMEOUT", "inf")
    s = Threaded()
    cm = ContextManager(summarizer=s, **WINDOW)
    assert cm.summary_timeout is None
    _summarizes(cm, s)


@pytest.mark.parametrize(
    ("value", "error"),
    [(math.nan, ValueError), (-1.0, ValueError), (0, ValueError), (-math.inf, ValueError)]
    + [(True, TypeError), ("10", TypeError)],
)
def test_a_bad_summary_timeout_is_rejected_at_construction(value: Any, error: type) -> None:
    """Before: nan was accepted and failed later, inside prepare."""
    with pytest.raises(error, match="summary_timeout") as info:
        ContextManager(summary_timeout=value, **WINDOW)
    assert isinstance(info.value, wf.WindowfitError)


def test_nan_summary_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINDOWFIT_SUMMARY_TIMEOUT", "nan")
    with pytest.raises(ValueError, match="summary_timeout"):
        ContextManager(**WINDOW)


# ----------------------------------------------------------------------- 2. session messages


BAD_MESSAGES = [
    ({"role": "tool", "content": "x"}, "tool_call_id"),
    ({"role": "wizard", "content": "x"}, "role"),
    ({"role": "user", "content": 5}, "content"),
]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    s = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


@pytest.mark.parametrize(("bad", "field"), BAD_MESSAGES)
def test_append_rejects_what_counting_rejects(store: Any, bad: dict[str, Any], field: str) -> None:
    """Before: stored, after which every prepare raised: the session was dead."""
    s = wf.Session(store, "s1")
    s.append({"role": "user", "content": "hi"})
    with pytest.raises(wf.WindowfitError, match=field) as info:
        s.append(bad)
    # the same rule and message as counting
    with pytest.raises(type(info.value)) as counted:
        GPT4O.count_message(bad)
    assert str(info.value) == str(counted.value)
    with pytest.raises(type(info.value)):
        s.extend([{"role": "user", "content": "ok"}, bad])  # all or nothing
    assert s.messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("bad", "field"), BAD_MESSAGES)
def test_prepare_skips_an_invalid_stored_message_and_reports_it(
    store: Any, bad: dict[str, Any], field: str
) -> None:
    """A bad message already stored (old data, a direct store write) no longer kills the
    session: prepare leaves it out, says so in stats, and later turns keep working."""
    s = wf.Session(store, "s1")
    s.extend([{"role": "system", "content": "be brief"}, {"role": "user", "content": "one"}])
    store.append("s1", [bad])  # the store itself does not check message rules
    s.append({"role": "assistant", "content": "two"})
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    p = s.prepare(cm)
    assert p.stats["invalid_skipped"] == [2]
    assert bad not in p.messages
    assert [m["content"] for m in p.messages] == ["be brief", "one", "two"]
    s.append({"role": "user", "content": "three"})
    again = wf.Session(store, "s1").prepare(cm)  # another handle skips the same message
    assert again.stats["invalid_skipped"] == [2]
    assert again.messages[-1]["content"] == "three"


def test_aprepare_skips_an_invalid_stored_message(store: Any) -> None:
    s = wf.Session(store, "s1")
    s.append({"role": "user", "content": "one"})
    store.append("s1", [{"role": "tool", "content": "x"}])
    cm = ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    p = asyncio.run(s.aprepare(cm))
    assert p.stats["invalid_skipped"] == [1]
    assert [m["content"] for m in p.messages] == ["one"]


def test_a_valid_history_reports_nothing_skipped(store: Any) -> None:
    s = wf.Session(store, "s1")
    s.append({"role": "user", "content": "one"})
    p = s.prepare(ContextManager(model="gpt-4o", context_window=4000, output_reserve=500))
    assert "invalid_skipped" not in p.stats


# ----------------------------------------------------------------------- 3. oversized round


def _round_history(big: str, small: str = "ok") -> list[dict[str, Any]]:
    old = []
    for i in range(20):
        old += [
            {"role": "user", "content": f"old question {i}"},
            {"role": "assistant", "content": "a"},
        ]
    return [
        {"role": "system", "content": "You are an agent."},
        *old,
        {"role": "user", "content": "read both files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": big},
        {"role": "tool", "tool_call_id": "b", "content": small},
    ]


BIG = "\n".join(f"line {i}: " + "lorem ipsum dolor " * 8 for i in range(400))


def test_an_oversized_round_is_truncated_by_default() -> None:
    """Before: the round (call + results) was dropped silently; an agent re-calls its tool."""
    ms = _round_history(BIG)
    r = wf.fit(ms, 1500, counter=GPT4O)
    n = len(ms)
    assert {n - 3, n - 2, n - 1} <= set(r.kept)
    assert r.stats["results_truncated"] == 1 and r.stats["round_dropped"] == 0
    assert r.tokens == GPT4O.count_messages(r.messages) <= 1500
    cut = r.messages[-2]["content"]
    assert cut != BIG and cut.startswith(BIG[:40]) and cut.endswith(BIG[-40:])
    assert r.messages[-1] is ms[-1]  # the small result is untouched
    assert ms[-2]["content"] == BIG  # the caller's message is not modified
    # what is left of the budget still goes to the history, whole rounds only
    assert r.messages[0] is ms[0] and r.messages[1]["role"] == "user"


def test_an_oversized_round_with_drop_is_reported() -> None:
    ms = _round_history(BIG)
    r = wf.fit(ms, 1500, counter=GPT4O, oversize="drop")
    n = len(ms)
    assert not {n - 3, n - 2, n - 1} & set(r.kept)
    assert r.stats["round_dropped"] == 3 and r.stats["results_truncated"] == 0


def test_an_oversized_round_with_raise() -> None:
    with pytest.raises(wf.BudgetError, match="round in progress"):
        wf.fit(_round_history(BIG), 1500, counter=GPT4O, oversize="raise")


def test_a_round_that_fits_is_left_alone() -> None:
    ms = _round_history("short output")
    r = wf.fit(ms, 1500, counter=GPT4O, oversize="raise")
    assert r.stats["round_dropped"] == 0 and r.stats["results_truncated"] == 0
    assert r.messages[-2] is ms[-2]


def test_an_orphan_in_the_round_is_not_an_oversize() -> None:
    ms = [{"role": "user", "content": "go"}, _result(9, "an orphan result")]
    r = wf.fit(ms, 1000, counter=GPT4O, oversize="raise")
    assert r.dropped == [1] and r.stats["round_dropped"] == 0


def test_oversize_is_checked() -> None:
    with pytest.raises(ValueError, match="oversize"):
        wf.fit([], 10, oversize="shrink")  # type: ignore[arg-type]


# ----------------------------------------------------------------------- 6, 7. observation


def test_an_unusable_output_dir_still_returns_the_preview(tmp_path: Path) -> None:
    """Before: ``output_dir="a\\x00b"`` raised ValueError instead of reporting save_error."""
    t = ObservationTruncator(max_lines=5, output_dir=str(tmp_path / "a\x00b"))
    r = t.truncate("ls", "\n".join(str(i) for i in range(100)))
    assert r["truncated"] and r["full_output_path"] is None
    assert "null" in r["stats"]["save_error"]
    assert r["preview"].startswith("0\n1\n")


def test_lone_surrogates_are_saved_as_valid_utf8(tmp_path: Path) -> None:
    """Before: written with surrogatepass, so the file was not valid UTF-8."""
    output = "\n".join(f"row {i} \ud800 \udfff end" for i in range(200))
    t = ObservationTruncator(max_lines=10, output_dir=tmp_path)
    r = t.truncate("dump", output)
    data = Path(r["full_output_path"]).read_bytes()
    text = data.decode("utf-8")  # strict: raises on a surrogate
    assert text == output.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
    assert r["stats"]["replaced_surrogates"] == 400
    assert len(data) == r["stats"]["original_bytes"]  # byte offsets are unchanged


def test_clean_output_reports_no_replacement(tmp_path: Path) -> None:
    r = ObservationTruncator(max_lines=2, output_dir=tmp_path).truncate("x", "a\nb\nc\nd")
    assert r["stats"]["replaced_surrogates"] == 0


# ----------------------------------------------------------------------- 9. counts


def _image(**size: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", **size}}],
    }


COUNT_ENTRY_POINTS = {
    "context_window": lambda v: ContextManager(context_window=v),
    "output_reserve": lambda v: ContextManager(context_window=8000, output_reserve=v),
    "system_reserve": lambda v: ContextManager(context_window=8000, system_reserve=v),
    "tool_output_max_tokens": lambda v: ContextManager(
        context_window=8000, tool_output_max_tokens=v
    ),
    "budget": lambda v: wf.fit([{"role": "user", "content": "hi"}], v, counter=GPT4O),
    "pinned index": lambda v: wf.fit(
        [{"role": "user", "content": "hi"}], 100, counter=GPT4O, pinned=[v]
    ),
    "max_tokens": lambda v: wf.truncate("some text", v, counter=GPT4O),
    "max_lines": lambda v: ObservationTruncator(max_lines=v, output_dir=None),
    "cache_size": lambda v: ObservationTruncator(cache_size=v, output_dir=None),
    "cache_entries": lambda v: wf.Counter(model="gpt-4o", cache_entries=v),
}


@pytest.mark.parametrize("name", sorted(COUNT_ENTRY_POINTS))
@pytest.mark.parametrize("value", [True, False, 2.5, 0.5, "3", b"3", [3]])
def test_a_count_is_an_int(name: str, value: Any) -> None:
    """Before: ``context_window=True`` became 1, ``2.5`` became 2, ``budget=0.5`` became 0."""
    with pytest.raises(TypeError, match=name) as info:
        COUNT_ENTRY_POINTS[name](value)
    assert isinstance(info.value, wf.WindowfitError)


@pytest.mark.parametrize("name", sorted(COUNT_ENTRY_POINTS))
def test_a_count_out_of_range_names_the_field(name: str) -> None:
    low = -(10**6)
    with pytest.raises(ValueError, match=name) as info:
        COUNT_ENTRY_POINTS[name](low)
    assert isinstance(info.value, wf.WindowfitError)
    with pytest.raises(ValueError, match=f"{name} is NaN"):
        COUNT_ENTRY_POINTS[name](math.nan)


def test_an_integral_float_is_a_count() -> None:
    assert ContextManager(context_window=8000.0).context_window == 8000
    assert wf.fit([{"role": "user", "content": "hi"}], 100.0, counter=GPT4O).budget == 100


@pytest.mark.parametrize("bad", [True, 2.5, "640"])
def test_an_image_size_is_an_int(bad: Any) -> None:
    """Before: ``width=True`` was accepted as 1 pixel."""
    with pytest.raises(wf.MessageTypeError, match=r"message 0: .*width: expected an int"):
        GPT4O.count_message(_image(width=bad, height=100))


def test_an_image_size_out_of_range_says_the_range() -> None:
    """Before: ``width=2**32`` said "must be a non-negative int" of a non-negative int."""
    with pytest.raises(wf.InvalidMessageError, match=r"width: must be between 0 and 4294967295"):
        GPT4O.count_message(_image(width=2**32, height=100))
    with pytest.raises(wf.InvalidMessageError, match=r"height: must be between 0 and"):
        GPT4O.count_message(_image(width=10, height=-1))
    # a valid size still goes through OpenAI's tile formula: 512x512 at high detail is one
    # tile (85 + 170), an unknown size is charged 765
    unknown = GPT4O.count_message(_image(detail="high"))
    one_tile = GPT4O.count_message(_image(width=512, height=512, detail="high"))
    assert unknown - one_tile == 765 - (85 + 170)


# ----------------------------------------------------------------------- 10. empty window


def test_nothing_pinned_and_a_zero_budget_is_an_empty_window() -> None:
    """Before: BudgetError "0 tokens + 3 reply priming = 3 > budget 0"."""
    ms = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"},
    ]
    for budget in (0, 2):
        r = wf.fit(ms, budget, counter=GPT4O, keep_system=False, keep_last_user=False)
        assert r.messages == [] and r.kept == [] and r.dropped == [0, 1, 2]
        assert r.tokens == 0 == GPT4O.count_messages(r.messages)
    with pytest.raises(wf.BudgetError):  # a pin that cannot be sent is still an error
        wf.fit(ms, 2, counter=GPT4O)
    assert wf.fit([], 0, counter=GPT4O).tokens == 0


# ----------------------------------------------------------------------- 11. usage by family


def _usage(store: Any) -> UsageTracker:
    t = UsageTracker(store)
    day = datetime(2025, 3, 1, tzinfo=timezone.utc)
    t.record("gpt-4o-2024-08-06", 1000, 100, timestamp=day)
    t.record("gpt-4o", 10, 1, timestamp=day)
    t.record("gpt-4o-mini", 500, 50, timestamp=day)
    return t


def test_usage_totals_aggregate_the_family(store: Any) -> None:
    """Before: ``totals(model="gpt-4o")`` missed usage recorded as gpt-4o-2024-08-06."""
    t = _usage(store)
    total = t.totals(model="gpt-4o")
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (2, 1010, 101)
    assert {r["model"] for r in t.rows(model="gpt-4o")} == {"gpt-4o", "gpt-4o-2024-08-06"}
    assert t.totals(model="gpt-4o-2024-08-06")["calls"] == 2  # a dated name means its family
    assert t.totals(model="gpt-4o-mini")["calls"] == 1  # a sibling family stays apart
    assert t.totals()["calls"] == 3


def test_usage_cli_shows_dated_names_and_says_when_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from windowfit.cli import main

    db = tmp_path / "u.db"
    with SQLiteStore(db) as s:
        _usage(s)
    assert main(["usage", "--db", str(db), "--model", "gpt-4o", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["calls"] == 2
    assert {r["model"] for r in doc["rows"]} == {"gpt-4o", "gpt-4o-2024-08-06"}
    assert main(["usage", "--db", str(db), "--model", "o3"]) == 0
    err = capsys.readouterr().err
    assert "no usage recorded" in err and "'o3'" in err


# ----------------------------------------------------------------------- 12. model names


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai/GPT-4o-2024-08-06", "gpt-4o"),
        ("gpt-4-0613", "gpt-4"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("qwen3-8b", "qwen3-32b"),
        ("qwen3-235b-a22b-instruct-2507", "qwen3-32b"),
        ("llama-3.1-8b", "llama-3.1-8b-instruct"),
        ("gpt-4o-mini", "gpt-4o-mini"),
    ],
)
def test_one_resolution_rule(name: str, family: str) -> None:
    info = wf.get_model(name)
    assert model_family(name) == family
    assert info.context_window == wf.get_model(family).context_window
    assert info.tokenizer == wf.get_model(family).tokenizer


@pytest.mark.parametrize("name", ["gpt-5.5-turbo", "gpt-4o-ultra", "gpt-5x", "llama-3"])
def test_a_made_up_suffix_is_no_family(name: str) -> None:
    """Before: ``gpt-5.5-turbo`` silently resolved to gpt-5."""
    with pytest.raises(wf.UnknownModelError, match="Did you mean"):
        wf.get_model(name)


def test_counter_takes_the_base_name_of_a_registered_variant() -> None:
    """Before: ``Counter(model="llama-3.1-8b")`` failed though llama-3.1-8b-instruct exists."""
    c = wf.Counter(model="llama-3.1-8b")
    assert c.count("hello world") == wf.Counter(model="llama-3.1-8b-instruct").count("hello world")


def test_a_model_name_is_a_str() -> None:
    with pytest.raises(TypeError) as info:
        wf.get_model(4)  # type: ignore[arg-type]
    assert isinstance(info.value, InvalidArgumentError | ArgumentTypeError)
