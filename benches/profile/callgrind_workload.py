"""One workload of ``compare_commits.py``, N times after its setup, for instruction counts.

Wall-clock on a loaded machine moves by tens of percent between runs; instruction counts do
not. Run it under callgrind with each commit's venv (built by ``compare_commits.py``), once
with N calls and once with 0: the difference divided by N is one call's instructions.

    for sha in 9faf75421b 878a625b63; do for n in 0 200; do
      valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        target/compare/$sha/venv/bin/python benches/profile/callgrind_workload.py fit_sample $n \\
        2>&1 | grep Collected
    done; done

Workloads: ``fit_sample`` (40 messages, budget 2,000), ``fit_10k`` (10,000 messages, budget
100,000, warm), ``count_warm`` (10,000 messages,
counted warm), ``manager_warm`` (a prepare of 2,000 messages the previous prepare already
saw), ``session`` (a SQLite session of 400 messages: N turns of append + prepare; the turns
grow the history, so compare runs of the same N only).

``--table`` does all of it for two commits (their release wheels built by
``compare_commits.build``) and prints the Markdown table of instructions per call:

    nice -n 5 .venv/bin/python benches/profile/callgrind_workload.py --table --before 9faf754 --after HEAD
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))

import compare_commits as cc  # noqa: E402 - the same histories as the wall-clock comparison
import windowfit as wf  # noqa: E402

#: Calls per workload in ``--table``: enough that the setup's own variation (a few thousand
#: instructions between runs) does not show in the per-call figure.
CALLS = {"fit_sample": 2_000, "fit_10k": 10, "count_warm": 10, "manager_warm": 400, "session": 20}


def instructions(python: Path, what: str, n: int) -> int:
    """Instructions callgrind counts for ``what`` with ``n`` calls in ``python``'s venv."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            str(python),
            str(Path(__file__).resolve()),
            what,
            str(n),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),  # the venv's windowfit, not the source tree's
    )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def table(before: str, after: str, workloads: list[str]) -> None:
    """Per-call instructions of each workload on both commits' release wheels."""
    sides = [cc.build(before), cc.build(after)]
    print(f"before `{sides[0][0]}`, after `{sides[1][0]}`\n")
    print("| workload (calls) | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for what in workloads:
        n = CALLS[what]
        per_call = [
            (instructions(python, what, n) - instructions(python, what, 0)) / n
            for _, python in sides
        ]
        print(
            f"| {what} ({n:,}) | {per_call[0]:,.0f} | {per_call[1]:,.0f} "
            f"| {per_call[1] / per_call[0]:.2f} |",
            flush=True,
        )


def main() -> None:
    if "--table" in sys.argv:
        ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        ap.add_argument("--table", action="store_true")
        ap.add_argument("--before", default="9faf754")
        ap.add_argument("--after", default="HEAD")
        ap.add_argument("workloads", nargs="*", default=list(CALLS))
        args = ap.parse_args()
        table(args.before, args.after, args.workloads)
        return
    what, n = sys.argv[1], int(sys.argv[2])
    text = cc._sample_text()
    warm = wf.Counter(encoding="cl100k_base")
    if what == "fit_sample":
        sample = cc._history(40, text)
        wf.fit(sample, 2_000, counter=warm)  # warm, as in the comparison
        for _ in range(n):
            wf.fit(sample, 2_000, counter=warm)
    elif what == "fit_10k":
        big = cc._history(10_000, text)
        warm.count_messages(big)
        wf.fit(big, 100_000, counter=warm)
        for _ in range(n):
            wf.fit(big, 100_000, counter=warm)
    elif what == "count_warm":
        big = cc._history(10_000, text)
        warm.count_messages(big)
        for _ in range(n):
            warm.count_messages(big)
    elif what == "manager_warm":
        big = cc._history(2_000, text)
        cm = cc._manager()
        state = cm.prepare(big).state
        cm.prepare(big, state=state)
        for _ in range(n):
            cm.prepare(big, state=state)
    elif what == "session":
        big = cc._history(400 + n, text)
        store = wf.SQLiteStore(os.path.join(tempfile.mkdtemp(prefix="wf-cg-"), "s.db"))
        cm = cc._manager()
        session = wf.Session(store, "bench")
        for m in big[:400]:
            session.append(m)
        session.prepare(cm)
        for m in big[400:]:
            session.append(m)
            session.prepare(cm)
    else:
        raise SystemExit(
            f"unknown workload {what!r}: fit_sample, fit_10k, count_warm, manager_warm or session"
        )


if __name__ == "__main__":
    main()
