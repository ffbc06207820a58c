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


@pytest.mark.parametrize("start_on", ["user", None])
def test_a_tool_output_past_the_budget_is_not_read_to_the_end(start_on: str | None) -> None:
    """The window search counts a message it may reach only up to the budget: one larger than
    the whole budget can never be kept, so a 1.5 MB tool output is not read to its end, and the
    fit (and its statistics, counted on access) is the fully counted one."""
    msgs = long_history(7, 400)
    rng = random.Random(7)
    lines = [
        f"{rng.random():.12f} step={i} status=ok path=/srv/app/{i % 97}.py\n" for i in range(40)
    ]
    huge = "".join(rng.choice(lines) for _ in range(1_500_000 // 45))
    spots = [i for i, m in enumerate(msgs) if m["role"] == "tool"][-6:-3]
    for i in spots:
        msgs[i] = dict(msgs[i], content=huge + str(i))
    warm = wf.Counter(encoding="cl100k_base", cache_entries=100_000)
    warm.count_messages(msgs)
    for budget in [3_000, 12_000]:
        cold = wf.Counter(encoding="cl100k_base", cache_entries=100_000)
        expected = wf.fit(msgs, budget, counter=warm, start_on=start_on, oversize="drop")
        got = wf.fit(msgs, budget, counter=cold, start_on=start_on, oversize="drop")
        assert (got.kept, got.dropped, got.tokens) == (
            expected.kept,
            expected.dropped,
            expected.tokens,
        )
        reached = [i for i in spots if i in got.dropped]
        assert reached, "the window reaches at least one huge output"
        # None was counted in full (so none cached) by the fit: counting one now misses.
        misses = cold.cache_info()["misses"]
        cold.count_message(msgs[reached[-1]])
        assert cold.cache_info()["misses"] > misses
        assert dict(got.stats) == dict(expected.stats)  # tokens_dropped counts them in full
