"""One workload of ``compare_commits.py``, N times after its setup, for instruction counts.

Wall-clock on a loaded machine moves by tens of percent between runs; instruction counts do
not. Run it under callgrind with each commit's venv (built by ``compare_commits.py``), once
with N calls and once with 0: the difference divided by N is one call's instructions.

    for sha in 9faf75421b 878a625b63; do for n in 0 200; do
      valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        target/compare/$sha/venv/bin/python benches/callgrind_workload.py fit_sample $n \\
        2>&1 | grep Collected
    done; done

Workloads: ``fit_sample`` (40 messages, budget 2,000), ``fit_10k`` (10,000 messages, budget
100,000, warm), ``count_warm`` (10,000 messages,
counted warm), ``manager_warm`` (a prepare of 2,000 messages the previous prepare already
saw), ``session`` (a SQLite session of 400 messages: N turns of append + prepare; the turns
grow the history, so compare runs of the same N only).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_commits as cc  # noqa: E402 - the same histories as the wall-clock comparison
import windowfit as wf  # noqa: E402


def main() -> None:
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
        session = store.session("bench")
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
