"""``Prepared.stats`` is exactly the ``PreparedStats`` TypedDict: every key documented there is
present (the optional ones only when they apply), none is undocumented, and each value has
its declared type."""

from __future__ import annotations

import types
import typing
from typing import Any

import pytest
import windowfit as wf
from windowfit.context import PreparedStats
from windowfit.context.prepared import LeftOut

COUNTER = wf.Counter(encoding="o200k_base")
OPTIONAL = {
    "masked_from",
    "masked_until",
    # only when the recall stage failed or left matching units out
    "recall_error",
    "recall_skipped",
    # added by Session.prepare
    "invalid_skipped",
    "unreadable_skipped",
    "state_saved",
    "state_save_error",
}


def _history(rounds: int, *, tools: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for k in range(rounds):
        out.append({"role": "user", "content": f"question {k} " + "word " * 40})
        if tools:
            cid = f"c{k}"
            fn = {"name": "grep", "arguments": "{}"}
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": cid, "type": "function", "function": fn}],
                }
            )
            out.append({"role": "tool", "tool_call_id": cid, "content": "hit " * 150})
        out.append({"role": "assistant", "content": f"answer {k} " + "text " * 40})
    return out


def _matches(value: Any, hint: Any) -> bool:
    if hint is LeftOut:
        return isinstance(value, dict) and set(value) <= set(LeftOut.__annotations__)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _runs() -> list[tuple[str, list[wf.Prepared]]]:
    plain = wf.ContextManager(counter=COUNTER, context_window=100_000, output_reserve=1000)
    small = dict(counter=COUNTER, context_window=3_000, output_reserve=300, tool_output_dir="off")
    summarizing = wf.ContextManager(preference="quality", **small)
    masking = wf.ContextManager(summarizer="none", mask_keep=1, mask_clear_at_least=100, **small)
    out = []
    for name, cm, history in (
        ("plain", plain, _history(5, tools=False)),
        ("summarizing", summarizing, _history(40, tools=False)),
        ("masking", masking, _history(20, tools=True)),
    ):
        state, ps = None, []
        for i in range(1, len(history) + 1):
            if history[i - 1]["role"] != "tool":
                p = cm.prepare(history[:i], state=state)
                ps.append(p)
                state = p.state
        out.append((name, ps))
    return out


@pytest.fixture(scope="module")
def runs() -> list[tuple[str, list[wf.Prepared]]]:
    return _runs()


def test_every_stats_key_is_documented_with_its_type(runs: Any) -> None:
    hints = typing.get_type_hints(PreparedStats)
    seen: set[str] = set()
    for name, ps in runs:
        for p in ps:
            keys = set(p.stats)
            assert keys <= set(hints), f"{name}: undocumented {keys - set(hints)}"
            assert set(hints) - OPTIONAL <= keys, f"{name}: missing {set(hints) - OPTIONAL - keys}"
            for k, v in p.stats.items():
                assert _matches(v, hints[k]), f"{name}: stats[{k!r}] = {v!r} is not {hints[k]}"
            seen |= keys
    # the scenarios reach the summary and the masking paths
    assert {"masked_from", "masked_until"} <= seen
    assert any(p.stats["summary_triggered"] for _, ps in runs for p in ps)
