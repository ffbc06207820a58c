"""Print the fitting benchmark as a markdown table (benches/RESULTS.md, section "Fitting").

    .venv/bin/python benches/reports/report_fit.py            # 100 .. 100,000 messages; LangChain up to 10,000
    .venv/bin/python benches/reports/report_fit.py --full     # also time LangChain at 100,000
    .venv/bin/python benches/reports/report_fit.py --threads 1  # windowfit on one thread, like LangChain
    .venv/bin/python benches/reports/report_fit.py --sizes 100 1000

The workload, counters and the rules of the comparison are described in bench_fit.py. Every
contender gets the same number of timed runs at a size (``bench_fit.rounds``: 5 up to 1,000
messages, 3 up to 10,000, 2 above); the table gives the best and the median of those runs.
Each size also checks that windowfit and LangChain keep exactly the same messages.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites"))
from _build import require_release  # noqa: E402

if __name__ == "__main__" and "--threads" in sys.argv:
    # rayon sizes its pool once, when windowfit first counts: set it before the import
    os.environ["RAYON_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]

import bench_fit as b
import windowfit as wf


def timed(
    fn: Callable[..., Any], runs: int, setup: Callable[[], Any] | None = None
) -> tuple[float, float, Any]:
    """(best seconds, median seconds, last result) over ``runs`` calls; ``setup`` runs untimed
    before each and its result is ``fn``'s argument."""
    times, out = [], None
    for _ in range(runs):
        arg = setup() if setup else None
        s = time.perf_counter()
        out = fn() if setup is None else fn(arg)
        times.append(time.perf_counter() - s)
    return min(times), statistics.median(times), out


def ms(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.2f} s"


def ratio(a: float | None, b_: float | None) -> str:
    return "—" if a is None or b_ is None else f"{b_ / a:,.0f}x"


def measure(n: int, lc_count: Any, *, run_langchain: bool) -> tuple:
    """One row: messages, MB of text, kept, runs, then (best, median) of windowfit cold,
    LangChain, windowfit warm, LangChain warm (None where LangChain is not run)."""
    h = b.history(n)
    text_mb = sum(len(m.get("content") or "") for m in h) / 1e6
    runs = b.rounds(n)
    *cold, r = timed(
        lambda c: wf.fit(h, b.BUDGET, counter=c), runs, setup=lambda: b.cold_counter(n)
    )
    assert r.tokens <= b.BUDGET

    # the agent loop: last turn's history was fitted; one more turn, fit again
    c = b.cold_counter(n + 100)
    wf.fit(h, b.BUDGET, counter=c)
    nexts = iter([h + b.next_turn(k) for k in range(runs)])
    *warm, _ = timed(lambda: wf.fit(next(nexts), b.BUDGET, counter=c), runs)

    lc_cold = lc_warm = None
    if run_langchain:
        lc = b.to_langchain(h)
        *lc_cold, out = timed(lambda: b.langchain_trim(lc, lc_count), runs)
        b.same_selection(r, lc, out)
        h2 = h + b.next_turn(0)
        lc2 = b.to_langchain(h2)
        *lc_warm, out2 = timed(lambda: b.langchain_trim(lc2, lc_count), runs)
        b.same_selection(wf.fit(h2, b.BUDGET, counter=c), lc2, out2)
    print(
        f"  {n:>7,} messages, {runs} runs each: cold {ms(cold[0])}, warm {ms(warm[0])}, "
        f"LangChain {ms(lc_cold and lc_cold[0])} / {ms(lc_warm and lc_warm[0])}",
        file=sys.stderr,
    )
    return (n, text_mb, len(r.kept), runs, cold, lc_cold, warm, lc_warm)


def both(t: list[float] | None) -> str:
    return "—" if t is None else f"{ms(t[0])} ({ms(t[1])})"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", type=int, nargs="*", default=b.SIZES)
    ap.add_argument(
        "--full", action="store_true", help="also run LangChain above 10,000 messages (one run)"
    )
    ap.add_argument("--label", default="", help="build label for the header, e.g. 'release'")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="rayon threads for windowfit (RAYON_NUM_THREADS); LangChain always uses one",
    )
    args = ap.parse_args()
    require_release()

    enc = b.tiktoken_encoding()
    enc.encode_ordinary("warm up the regex " * 100)
    lc_count = b.langchain_counter(enc)
    lc_limit = max(args.sizes) if args.full else b.LANGCHAIN_MAX

    rows = [measure(n, lc_count, run_langchain=n <= lc_limit) for n in args.sizes]

    label = f" ({args.label} build)" if args.label else ""
    threads = os.environ.get("RAYON_NUM_THREADS") or f"{os.cpu_count()} (all cores)"
    print(f"### Fitting{label}\n")
    print(
        f'wf.fit vs LangChain `trim_messages` (strategy="last", include_system, start_on="human"), '
        f"budget {b.BUDGET:,} tokens, exact cl100k_base counts on both sides, identical selections "
        f"checked. Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs. "
        f"Threads: windowfit {threads} (a batch of new messages of 64 KB or more is counted in "
        f"parallel), LangChain 1. Each cell: best of the row's runs (median in brackets); every "
        f"contender gets the same runs.\n"
    )
    print(
        "| messages | text | kept | runs | windowfit cold | LangChain | cold speedup "
        "| windowfit warm (+1 turn) | LangChain (+1 turn) | warm speedup | cold µs/msg | warm µs/msg |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, mb, kept, runs, cold, lcc, warm, lcw in rows:
        print(
            f"| {n:,} | {mb:,.1f} MB | {kept} | {runs} | {both(cold)} | {both(lcc)} "
            f"| {ratio(cold[0], lcc and lcc[0])} | {both(warm)} | {both(lcw)} "
            f"| {ratio(warm[0], lcw and lcw[0])} | {cold[0] / n * 1e6:,.2f} "
            f"| {warm[0] / (n + 2) * 1e6:,.3f} |"
        )
    if not args.full and any(n > b.LANGCHAIN_MAX for n, *_ in rows):
        print(
            f"\nLangChain is not run above {b.LANGCHAIN_MAX:,} messages (use --full to time it once)."
        )


if __name__ == "__main__":
    main()
