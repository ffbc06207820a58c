"""Print the truncation benchmark as markdown tables (benches/RESULTS.md, section "Truncation").

    make release
    .venv/bin/python benches/reports/report_truncate.py                      # 1 MB, 10 MB, 100 MB
    .venv/bin/python benches/reports/report_truncate.py --sizes 1MB 10MB --runs 3 --label release

Instruction counts, repeatable under load (each contender once, minus the same script with
nothing cut: ``--one none``):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python benches/reports/report_truncate.py --one "windowfit head" --size 10MB

Input: the deterministic service log of bench_truncate.py (request lines, JSON, SQL,
tracebacks, some CJK / accented names / emoji), cut to 2,000 tokens with cl100k_base.
Contenders, each run the same number of times in one process, taking turns (best kept):

* windowfit ``wf.truncate`` (counter cache off) in every direction, with a marker that does not
  show the omitted count (``"\\n…\\n"``; ``""`` for the head rows compared with toktok, which
  has no marker) so the whole input is never counted, then the same with ``count_total=True``
  (the exact count of the whole input, as toktok returns it), with ``lines=True``, and with the
  default marker (``"\\n…[truncated]…\\n"``: it shows no count, so the whole input is not counted);
* toktok-rs ``toktok.truncate(text, 2000, "cl100k_base")``: head only, returns the kept text and
  the whole input's count (one pass, no ids);
* tiktoken ``encode_ordinary`` + slice + ``decode`` (head).

Before timing, toktok's kept text is checked against windowfit's bare head and tiktoken's
count of it, and its total against windowfit's exact count (itself checked against tiktoken
in the test suite). Threads: windowfit's whole-input count runs on every core (rayon, all
CPUs); the cut itself, toktok and tiktoken use one thread. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites"))
import bench_truncate as b
from _build import require_release  # noqa: E402
from windowfit.truncation import DEFAULT_MARKER, truncate

LIMIT = b.MAX_TOKENS
BARE = "\n…\n"
SIZES = {"1MB": 1_000_000, "10MB": 10_000_000, "100MB": 100_000_000}


def best_in_turns(timed: list[tuple[str, Callable[[], Any]]], runs: int) -> dict[str, float]:
    """Each contender's best seconds over ``runs`` calls, the contenders taking turns (call k
    of each before call k + 1 of any): the machine's speed drifts by tens of percent within
    minutes, and back-to-back calls would let a slow phase fall on one contender."""
    out = {name: float("inf") for name, _ in timed}
    for _ in range(runs):
        for name, fn in timed:
            s = time.perf_counter()
            fn()
            out[name] = min(out[name], time.perf_counter() - s)
    return out


def fmt(s: float) -> str:
    return f"{s * 1e3:,.2f} ms" if s < 1 else f"{s:,.2f} s"


def contenders(text: str, c: Any, enc: Any) -> list[tuple[str, Callable[[], Any]]]:
    def wf(direction: str, marker: str = BARE, **kw: Any) -> Callable[[], Any]:
        return lambda: truncate(text, LIMIT, direction=direction, counter=c, marker=marker, **kw)

    rows: list[tuple[str, Callable[[], Any]]] = [
        ("windowfit head", wf("head", "")),
        ("windowfit tail", wf("tail")),
        ("windowfit head_tail", wf("head_tail")),
        ("windowfit head, lines=True", wf("head", "", lines=True)),
        ("windowfit tail, lines=True", wf("tail", lines=True)),
        ("windowfit head, count_total=True", wf("head", "", count_total=True)),
        ("windowfit head_tail, count_total=True", wf("head_tail", count_total=True)),
        ("windowfit head_tail, default marker (no count shown)", wf("head_tail", DEFAULT_MARKER)),
    ]
    try:
        import toktok

        rows.append(
            (
                "toktok-rs `truncate` (head + total)",
                lambda: toktok.truncate(text, LIMIT, "cl100k_base"),
            )
        )
    except ImportError:
        print("  toktok-rs not installed: its rows are left out", file=sys.stderr)
    rows.append(
        (
            "tiktoken encode + slice + decode (head)",
            lambda: enc.decode(enc.encode_ordinary(text)[:LIMIT]),
        )
    )
    return rows


def check_peers(text: str, c: Any, enc: Any) -> None:
    """toktok keeps the same head as windowfit, within the limit by tiktoken, and reports the
    exact total; windowfit's head is within the limit by tiktoken and maximal to a cluster."""
    head = truncate(text, LIMIT, direction="head", counter=c, marker="", count_total=True)
    assert len(enc.encode_ordinary(head.text)) == head.tokens <= LIMIT
    try:
        import toktok
    except ImportError:
        return
    kept, total = toktok.truncate(text, LIMIT, "cl100k_base")
    assert total == head.original_tokens, ("toktok total", total, head.original_tokens)
    assert len(enc.encode_ordinary(kept)) <= LIMIT
    short, long_ = sorted((kept, head.text), key=len)
    assert text.startswith(long_) and long_.startswith(short) and len(long_) - len(short) <= 16, (
        "toktok and windowfit keep different heads"
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--runs", type=int, default=3, help="runs per contender (best kept)")
    ap.add_argument("--label", default="", help="build label for the header, e.g. 'release'")
    ap.add_argument("--one", help="run only this contender once ('none': nothing), for callgrind")
    ap.add_argument("--size", default="10MB", choices=list(SIZES), help="with --one")
    args = ap.parse_args()
    require_release()
    if args.one:
        text = b.log_text(1_000_000) * (SIZES[args.size] // 1_000_000)
        warm = text[:10_000]  # every contender's vocabulary loaded in the baseline too
        rows = dict(contenders(text, b.counter(), b.tiktoken_encoding()))
        for fn in dict(contenders(warm, b.counter(), b.tiktoken_encoding())).values():
            fn()
        if args.one != "none":
            rows[args.one]()
        return

    enc = b.tiktoken_encoding()
    c = b.counter()
    results: dict[str, dict[str, float]] = {}
    for size in args.sizes:
        text = b.log_text(SIZES[size])
        check_peers(text, c, enc)
        results[size] = best_in_turns(contenders(text, c, enc), args.runs)
        for name, t in results[size].items():
            print(f"  {size} {name}: {fmt(t)}", file=sys.stderr)

    label = f" ({args.label} build)" if args.label else ""
    load = os.getloadavg()[0]
    print(f"### Truncation{label}\n")
    print(
        f"A service log cut to {LIMIT:,} tokens (cl100k_base), best of {args.runs} runs per "
        f"contender (taking turns), Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the end. *vs toktok*: toktok's time / "
        "this row's (above 1: faster than toktok).\n"
    )
    names = list(next(iter(results.values())))
    sizes = list(results)
    tok = "toktok-rs `truncate` (head + total)"
    heads = " | ".join(sizes) + " | " + " | ".join(f"vs toktok, {s}" for s in sizes)
    print(f"| contender | {heads} |")
    print("|---|" + "---:|" * (2 * len(sizes)))
    for name in names:
        cells = " | ".join(fmt(results[s][name]) for s in sizes)
        ratios = " | ".join(
            f"{results[s][tok] / results[s][name]:,.1f}x" if tok in results[s] else "—"
            for s in sizes
        )
        print(f"| {name} | {cells} | {ratios} |")
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        grow = SIZES[last] / SIZES[first]
        print(
            f"\nFlat in the input's size: from {first} to {last} ({grow:,.0f}x the input), "
            + ", ".join(
                f"{n.removeprefix('windowfit ')} {results[last][n] / results[first][n]:,.1f}x"
                for n in names
                if n.startswith("windowfit") and "count" not in n
            )
            + "."
        )


if __name__ == "__main__":
    main()
