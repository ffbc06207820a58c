"""Single-text counting on text the process has never seen (markdown out).

    .venv/bin/python benches/reports/report_first_pass.py --runs 3

``report_engine.py`` times its single rows after the exactness pass, so the per-thread piece
caches of windowfit and of the peers that keep one (toktok-rs, gigatoken) hold the corpus's
pieces already: the count of a text an agent has counted before. This script times what a
never-seen text costs instead: each contender in a fresh process per run, made ready on a
one-word text (vocabulary loaded), then one pass over the corpus, one text per call on one
thread. Best of ``--runs`` processes per contender. The contenders, corpora and exactness
rule are those of ``report_engine.py`` (a contender whose counts differ from tiktoken's is
not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _build import require_release  # noqa: E402
from report_engine import CORPORA, ENCODINGS, contenders, exact  # noqa: E402


def worker(name: str, corpus: str, who: str, folder: str) -> None:
    """One fresh process: ready the contender on a one-word text, then one timed pass."""
    from _corpus import tiktoken_cl100k, tiktoken_o200k

    ref = tiktoken_cl100k() if name == "cl100k_base" else tiktoken_o200k()
    texts = CORPORA[corpus]()
    single = contenders(name, ref, Path(folder))[who]["single"]
    single("a")  # loads the vocabulary; no piece of the corpus is seen
    start = time.perf_counter()
    got = [single(t) for t in texts]
    seconds = time.perf_counter() - start
    expected = [len(x) for x in ref.encode_ordinary_batch(texts)]
    print(json.dumps({"seconds": seconds, "exact": got == expected}))


def first_pass(name: str, corpus: str, who: str, folder: str, runs: int) -> float | None:
    best = None
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", name, corpus, who, folder],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        if not row["exact"]:
            return None
        best = row["seconds"] if best is None else min(best, row["seconds"])
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    # checked here, not in the workers: importing windowfit there would take its import out
    # of the load they time
    require_release()
    from _corpus import tiktoken_cl100k, tiktoken_o200k

    print(
        f"Single text per call on text never seen by the process, best of {args.runs} fresh "
        f"processes per contender; load average {os.getloadavg()[0]:.2f} at the start.\n"
    )
    print("| encoding | corpus | contender | first pass | MB/s | its time / windowfit's |")
    print("|---|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ENCODINGS:
            ref = tiktoken_cl100k() if name == "cl100k_base" else tiktoken_o200k()
            who_all = list(contenders(name, ref, Path(tmp)))
            for corpus, build in CORPORA.items():
                texts = build()
                mb = sum(len(t.encode()) for t in texts) / 1e6
                expected = [len(x) for x in ref.encode_ordinary_batch(texts)]
                peers = contenders(name, ref, Path(tmp))
                times: dict[str, float | None] = {}
                for who in who_all:
                    single = peers[who]["single"]
                    if exact(lambda ts, f=single: [f(t) for t in ts], texts, expected):
                        times[who] = None  # inexact: reported, not timed
                        continue
                    times[who] = first_pass(name, corpus, who, tmp, args.runs)
                mine = times.get("windowfit")
                for who, t in times.items():
                    if t is None:
                        print(f"| {name} | {corpus} | {who} | not exact | | |")
                        continue
                    ratio = f"{t / mine:.2f}x" if mine and who != "windowfit" else ""
                    print(
                        f"| {name} | {corpus} | {who} | {t * 1e3:,.1f} ms | {mb / t:,.0f} "
                        f"| {ratio} |"
                    )
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end.")


if __name__ == "__main__":
    main()
