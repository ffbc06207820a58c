"""A cold fit counts only what its window can reach; it must choose exactly what a fit over a
fully counted history chooses, and report the same statistics (``tokens_dropped`` on access)."""

from __future__ import annotations

import random
from typing import Any

import pytest
import windowfit as wf


def long_history(seed: int, n: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "数据",
        "gamma",
        "delta",
        "上下文",
        "epsilon",
        "error=E42",
        "path/to/file.py",
    ]

    def text(lo: int, hi: int) -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi))) + f" #{rng.random()}"

    msgs: list[dict[str, Any]] = [{"role": "system", "content": text(5, 30)}]
    call = 0
    while len(msgs) < n:
        r = rng.random()
        if r < 0.03:
            msgs.append({"role": "system", "content": text(3, 10)})
        elif r < 0.35:
            msgs.append({"role": "user", "content": text(2, 60)})
        elif r < 0.55:
            msgs.append({"role": "assistant", "content": text(2, 80)})
        elif r < 0.9:
            ids = [f"c{call + k}" for k in range(rng.choice([1, 1, 2, 3]))]
            call += len(ids)
            calls = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in ids
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            answered = ids if rng.random() > 0.1 else ids[:-1]  # some calls go unanswered
            for i in answered:
                msgs.append({"role": "tool", "tool_call_id": i, "content": text(10, 400)})
        else:
            msgs.append({"role": "tool", "tool_call_id": f"orphan{call}", "content": text(5, 50)})
            call += 1
    return msgs


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("start_on", ["user", None])
def test_cold_lazy_fit_equals_fully_counted_fit(seed: int, start_on: str | None) -> None:
    msgs = long_history(seed, 3000)
    warm = wf.Counter(encoding="cl100k_base", cache_entries=100_000)
    total = warm.count_messages(msgs)  # every message counted: the fit below needs no laziness
    rng = random.Random(seed)
    for budget in [rng.randint(2_000, 20_000), rng.randint(20_000, total // 2), total + 10]:
        cold = wf.Counter(encoding="cl100k_base", cache_entries=100_000)
        try:
            expected = wf.fit(msgs, budget, counter=warm, start_on=start_on)
        except wf.BudgetError:
            with pytest.raises(wf.BudgetError):
                wf.fit(msgs, budget, counter=cold, start_on=start_on)
            continue
        got = wf.fit(msgs, budget, counter=cold, start_on=start_on)
        assert got.kept == expected.kept and got.dropped == expected.dropped
        assert got.tokens == expected.tokens <= budget
        if budget <= 20_000:
            # the window is far shorter than the history: most dropped messages were never
            # counted (a counted message leaves two cache entries: the message and its text)
            assert cold.cache_info()["size"] < len(msgs)
        assert dict(got.stats) == dict(expected.stats)  # counts tokens_dropped on access
