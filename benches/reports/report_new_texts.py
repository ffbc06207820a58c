"""The default ``Counter`` against one without a cache, on texts it has never seen.

    .venv/bin/python benches/reports/report_new_texts.py                    # multilingual, o200k
    .venv/bin/python benches/reports/report_new_texts.py --corpus english --encoding cl100k_base
    .venv/bin/python benches/reports/report_new_texts.py --pairs 150 --json new_texts.json

Each process counts ``--passes`` passes of the corpus, every pass's texts made new (a number
at their start), so that from the third pass on the words are known and no text is: what a
process that counts new messages all day meets. The speed is the median pass of passes 3 on
(MB/s). The default counter and ``cache_entries=0`` take turns in fresh processes, and the
ratio is the median of the pairs' ratios: on a noisy host a single pair ranges 0.6x-1.7x,
so only medians over many pairs say anything. ``--build DIR`` adds another build (a copy of
``python/windowfit`` under ``DIR``), default counter, to each pair.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpora  # noqa: E402
from _build import ANY_BUILD, require_release  # noqa: E402

ONE_PROCESS = """
import json, os, statistics, sys, time
import windowfit as wf
if wf._core.DEBUG_ASSERTIONS and not os.environ.get("ANY_BUILD"):
    sys.exit(f"{wf.__file__}: a build with debug assertions; make release, or set ANY_BUILD=1")
passes = json.load(open(sys.argv[1]))
counter = wf.Counter(encoding=sys.argv[2], **json.loads(sys.argv[3]))
megabytes = sum(len(t.encode()) for t in passes[0]) / 1e6
times = []
for texts in passes:
    start = time.perf_counter()
    for t in texts:
        counter.count(t)
    times.append(time.perf_counter() - start)
print(megabytes / statistics.median(times[2:]))
""".replace("ANY_BUILD", ANY_BUILD)


def texts_of(corpus: str) -> list[str]:
    return corpora.conversations(english=corpus == "english")


def one_process(
    passes_file: str, encoding: str, options: dict[str, int], path: str | None
) -> float:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path
    out = subprocess.run(
        [sys.executable, "-c", ONE_PROCESS, passes_file, encoding, json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=["multilingual", "english"], default="multilingual")
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--passes", type=int, default=12)
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--build", action="append", default=[], help="another build's directory")
    parser.add_argument("--json", type=Path, help="write the runs here")
    args = parser.parse_args()
    require_release()

    base = texts_of(args.corpus)
    sides: dict[str, tuple[dict[str, int], str | None]] = {
        "default": ({}, None),
        "cache_entries=0": ({"cache_entries": 0}, None),
    }
    for path in args.build:
        sides[f"default ({path})"] = ({}, path)
    runs: dict[str, list[float]] = {name: [] for name in sides}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump([[f"{k} {t}" for t in base] for k in range(args.passes)], f)
    try:
        for i in range(args.pairs):
            for name, (options, path) in sides.items():
                runs[name].append(one_process(f.name, args.encoding, options, path))
            print(f"pair {i + 1}/{args.pairs}", file=sys.stderr, end="\r")
    finally:
        os.unlink(f.name)

    print(f"\n{args.corpus} dialog, {args.encoding}, {len(base)} texts a pass, {args.pairs} pairs")
    print("| counter | median MB/s | against the default (paired median) |")
    print("|---|---:|---:|")
    for name, mbs in runs.items():
        ratio = statistics.median(a / b for a, b in zip(mbs, runs["default"], strict=True))
        print(f"| {name} | {statistics.median(mbs):.1f} | {ratio:.3f}x |")
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs})
        )


if __name__ == "__main__":
    main()
