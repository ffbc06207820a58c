"""Print the truncation benchmark as a markdown table (benches/RESULTS.md, section "Truncation").

    .venv/bin/python benches/report_truncate.py                  # 100 KB .. 100 MB
    .venv/bin/python benches/report_truncate.py --sizes 100KB 10MB --label release

The workload and the two sides are described in bench_truncate.py. Times are the best of
several runs (5 up to 10 MB; at 100 MB windowfit 2 and tiktoken 1). Each size also checks that
windowfit and tiktoken keep the same head. Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_truncate as b
from windowfit.observation import ObservationTruncator


def best(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """(best seconds, last result) over ``runs`` calls."""
    t, out = float("inf"), None
    for _ in range(runs):
        s = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - s)
    return t, out


def fmt(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s * 1e3:,.1f} ms" if s < 1 else f"{s:,.2f} s"


def measure(label: str, size: int, enc: Any) -> tuple:
    """One row: (size label, MB, tokens, windowfit, tiktoken, count pass, observation)."""
    text = b.log_text(size)
    mb = len(text.encode()) / 1e6
    big = size >= 50_000_000
    c = b.counter()
    wf_t, t = best(lambda: b.windowfit_cut(text, c), 2 if big else 5)
    tk_t, tk = best(lambda: b.tiktoken_cut(text, enc), 1 if big else 5)
    b.same_cut(t, tk, text)
    count_t, n = best(lambda: c.count(text), 2 if big else 5)
    assert n == t.original_tokens
    with tempfile.TemporaryDirectory() as d:
        ot = ObservationTruncator(
            max_lines=None,
            max_bytes=None,
            max_tokens=b.MAX_TOKENS,
            direction="head_tail",
            output_dir=d,
            counter=c,
        )
        ot_t, r = best(lambda: ot.truncate("read_log", text), 2 if big else 5)
        assert r["stats"]["kept_tokens"] <= b.MAX_TOKENS
    print(
        f"  {label}: windowfit {fmt(wf_t)}, tiktoken {fmt(tk_t)}, {tk_t / wf_t:.1f}x",
        file=sys.stderr,
    )
    return label, mb, t.original_tokens, wf_t, tk_t, count_t, ot_t


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", nargs="*", default=list(b.SIZES), choices=list(b.SIZES))
    ap.add_argument("--label", default="", help="build label for the header, e.g. 'release'")
    args = ap.parse_args()

    enc = b.tiktoken_encoding()
    enc.encode_ordinary("warm up the regex " * 100)
    rows = [measure(s, b.SIZES[s], enc) for s in args.sizes]

    label = f" ({args.label} build)" if args.label else ""
    print(f"### Truncation{label}\n")
    print(
        f"A service log (deterministic, bench_truncate.py) cut to {b.MAX_TOKENS:,} tokens head + tail "
        f'with cl100k_base: `wf.truncate(text, {b.MAX_TOKENS}, direction="head_tail")` (counter cache '
        "off) vs tiktoken `encode_ordinary` + slice the first and last 1,000 ids + `decode`. "
        "Both keep the same head (checked). *count pass*: `Counter.count(text)` alone, the floor of "
        "a cut that reports the exact original count. *ObservationTruncator*: the same cut plus "
        "the note and the full output written (fsynced) to a file. Best of 5 runs (100 MB: 2, "
        f"tiktoken 1). Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs.\n"
    )
    print(
        "| output | tokens | windowfit | tiktoken | speedup | windowfit MB/s | count pass | ObservationTruncator |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for lab, mb, tokens, wf_t, tk_t, count_t, ot_t in rows:
        print(
            f"| {lab} ({mb:,.1f} MB) | {tokens:,} | {fmt(wf_t)} | {fmt(tk_t)} | {tk_t / wf_t:,.1f}x "
            f"| {mb / wf_t:,.0f} | {fmt(count_t)} | {fmt(ot_t)} |"
        )


if __name__ == "__main__":
    main()
