"""A cold fit of an agent history holding one huge tool output, against counting that output.

    .venv/bin/python benches/reports/report_fit_huge.py --mb 10 --runs 5

The window search counts a message it may reach only up to the budget, so an output larger
than the whole budget costs what the budget does, not its size (plus hashing it, at memory
speed, for the count cache's key, after Python converts a non-ASCII string to UTF-8 once). Each run uses a new counter and a new output string, so
nothing is cached or memoized. The source-code corpus of ``report_engine.py`` fills the output.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import windowfit as wf
from _build import require_release  # noqa: E402
from report_engine import code


def history(output: str, rounds: int = 20, huge_at: int = 15) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Run the tests and fix what fails."},
    ]
    for i in range(rounds):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "sh", "arguments": '{"cmd": "pytest"}'},
        }
        msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": output if i == huge_at else f"ok {i}",
            }
        )
    return msgs


def best_cold_fit(output: str, budget: int, runs: int) -> float:
    """Best of ``runs`` fits, each of a history holding a new copy of ``output``."""
    times = []
    for run in range(runs):
        msgs = history(f"{run}{output}")  # a new string: its hash is not memoized
        counter = wf.Counter(encoding="cl100k_base", cache_entries=10_000)
        t = time.perf_counter()
        wf.fit(msgs, budget, counter=counter, oversize="drop")
        times.append(time.perf_counter() - t)
    return min(times)


def best_count(output: str, runs: int) -> float:
    times = []
    for run in range(runs):
        text = f"{run}{output}"  # a new string, as the fit gets
        counter = wf.Counter(encoding="cl100k_base", cache_entries=0)
        t = time.perf_counter()
        counter.count(text)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=int, nargs="*", default=[10])
    ap.add_argument("--budget", type=int, default=8_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    require_release()
    source = "".join(code())
    print(f"| output | cold `fit` (budget {args.budget:,}) | `count` of the output alone |")
    print("|---|---:|---:|")
    for mb in args.mb:
        output = (source * (mb * 1_000_000 // len(source) + 1))[: mb * 1_000_000]
        t_fit = best_cold_fit(output, args.budget, args.runs)
        t_count = best_count(output, args.runs)
        print(f"| {mb} MB | {t_fit * 1e3:,.2f} ms | {t_count * 1e3:,.1f} ms |")


if __name__ == "__main__":
    main()
