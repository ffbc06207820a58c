"""One workload of ``compare_commits.py``, N times after its setup, for instruction counts.

Wall-clock on a loaded machine moves by tens of percent between runs; instruction counts do
not. The calls run between two markers, ``os.getppid()`` before them and ``os.getpgrp()``
after: callgrind zeroes its counters entering the first and dumps them entering the second,
so the dump holds the N calls alone (the setup, interpreter start and exit are left out):

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.%p \
      --zero-before=getppid --dump-before=getpgrp \
      .venv/bin/python benches/profile/callgrind_workload.py fit_sample 200
    grep summary cg.*.1     # the N calls; callgrind_annotate cg.*.1 says where they went

Every workload makes two untimed calls after its setup (lazy imports, the recall index, the
first counts; a short text enters the count cache on its second sight), so N calls are the
steady state of that call. Workloads:

* ``fit_sample`` (40 messages, budget 2,000), ``fit_10k`` (10,000 messages, budget 100,000,
  warm), ``count_warm`` (10,000 messages counted warm), ``manager_warm`` (a prepare of 2,000
  messages the previous prepare already saw), ``session`` (a SQLite session of 400 messages:
  N turns of append + prepare; the turns grow the history, so compare runs of the same N only);
* ``fit_{cold,turn,warm}_{100,1k,10k}``: ``wf.fit`` on ``bench_fit.history(n)``, budget
  100,000: *cold* with a new empty counter each call, *turn* one new turn (a new list: the
  history plus two new messages) with the counter of the previous fits (``report_fit.py``'s
  warm column), *warm* the same list again;
* ``manager_{steady,new}_{100,1k,10k}`` and ``..._norecall``: ``ContextManager(model="gpt-4o",
  summarizer="none").prepare`` on ``bench_manager.history(n)`` (``report_manager.py``):
  *steady* the state of the previous prepare of the same list, *new* one new user message
  each call from the state before it; ``_norecall`` with ``recall=False`` (a commit without
  the recall stage runs the same call);
* ``session_norecall``: ``session`` with ``recall=False``;
* ``recall_question_10k``: ``eval_recall.py --timing 10000``'s question: a prepare of 10,000
  messages of generated dialogs (8k window) that recalls a block;
* ``dialog_count_{warm,cold}``, ``dialog_messages_{warm,cold}``: one call is a pass of
  ``Counter.count`` per text / ``Counter.count_messages`` per text (as one user message) over
  the dialog corpus of ``report_engine.py``, through a counter that saw it all / one with
  ``cache_entries=0``.

``--table`` does all of it for two sides and prints the Markdown table of instructions per
call. A side is a commit (its release wheel built by ``compare_commits.build``) or the path of a
source tree whose ``python/windowfit`` holds a built ``_core`` (run with this interpreter and
``PYTHONPATH=<tree>/python``):

    nice -n 5 .venv/bin/python benches/profile/callgrind_workload.py --table --before 9faf754 --after HEAD
    .venv/bin/python benches/profile/callgrind_workload.py --table --before ../base --after . fit_warm_100
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "reports"))
sys.path.insert(0, str(HERE.parents[1] / "suites"))

import compare_commits as cc  # noqa: E402 - the same histories as the wall-clock comparison
from corpora import cached_conversations  # noqa: E402

#: Calls per workload in ``--table`` (the figure is their mean; a call's own variation, e.g. a
#: cache's table growing, is averaged over them).
CALLS = {
    "fit_sample": 2_000,
    "fit_10k": 10,
    "count_warm": 10,
    "manager_warm": 400,
    "session": 20,
    "fit_cold_100": 20,
    "fit_cold_1k": 10,
    "fit_cold_10k": 3,
    "fit_turn_100": 200,
    "fit_turn_1k": 100,
    "fit_turn_10k": 10,
    "fit_warm_100": 1_000,
    "fit_warm_1k": 200,
    "fit_warm_10k": 20,
    "manager_steady_100": 400,
    "manager_steady_100_norecall": 400,
    "manager_new_100": 400,
    "manager_new_100_norecall": 400,
    "manager_steady_1k": 100,
    "manager_steady_1k_norecall": 100,
    "manager_steady_10k": 20,
    "manager_steady_10k_norecall": 20,
    "manager_new_1k": 20,
    "manager_new_1k_norecall": 20,
    "manager_new_10k": 10,
    "manager_new_10k_norecall": 10,
    "session_norecall": 20,
    "recall_question_10k": 20,
    "dialog_count_warm": 3,
    "dialog_count_cold": 1,
    "dialog_messages_warm": 3,
    "dialog_messages_cold": 1,
}

SIZES = {"100": 100, "1k": 1_000, "10k": 10_000}


def _manager(recall: bool, build: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """A manager from ``build`` (``ContextManager`` by default); ``recall=False`` only where
    the stage exists (older commits lack it)."""
    if build is None:
        from windowfit.context import ContextManager as build
    if not recall:
        try:
            return build(recall=False, **kwargs)
        except TypeError:
            pass
    return build(**kwargs)


def setup(what: str) -> Callable[[int], Any]:
    """``what``'s inputs, two untimed calls made; returns the call (its argument: the call's
    number, for inputs that must be new each call)."""
    import windowfit as wf

    text = cc._sample_text()
    warm = wf.Counter(encoding="cl100k_base")
    parts = what.split("_")
    if what == "fit_sample":
        sample = cc._history(40, text)
        call: Callable[[int], Any] = lambda i: wf.fit(sample, 2_000, counter=warm)  # noqa: E731
    elif what == "fit_10k":
        big = cc._history(10_000, text)
        warm.count_messages(big)
        call = lambda i: wf.fit(big, 100_000, counter=warm)  # noqa: E731
    elif what == "count_warm":
        big = cc._history(10_000, text)
        call = lambda i: warm.count_messages(big)  # noqa: E731
    elif what == "manager_warm":
        big = cc._history(2_000, text)
        cm = cc._manager()
        state = cm.prepare(big).state
        call = lambda i: cm.prepare(big, state=state)  # noqa: E731
    elif what in ("session", "session_norecall"):
        big = cc._history(400 + 2 + CALLS[what], text)
        store = wf.SQLiteStore(os.path.join(tempfile.mkdtemp(prefix="wf-cg-"), "s.db"))
        cm = _manager(what == "session", build=cc._manager)
        session = wf.Session(store, "bench")
        for m in big[:400]:
            session.append(m)
        session.prepare(cm)
        feed = iter(big[400:])

        def call(i: int) -> Any:
            session.append(next(feed))
            return session.prepare(cm)

    elif parts[0] == "fit":
        import bench_fit as bf

        mode, n = parts[1], SIZES[parts[2]]
        h = bf.history(n)
        if mode == "cold":
            call = lambda i: wf.fit(h, bf.BUDGET, counter=bf.cold_counter(n))  # noqa: E731
        elif mode == "turn":
            c = bf.cold_counter(n + 100)
            wf.fit(h, bf.BUDGET, counter=c)
            call = lambda i: wf.fit(h + bf.next_turn(i + 1), bf.BUDGET, counter=c)  # noqa: E731
        else:
            c = bf.cold_counter(n + 100)
            wf.fit(h, bf.BUDGET, counter=c)
            call = lambda i: wf.fit(h, bf.BUDGET, counter=c)  # noqa: E731
    elif parts[0] == "manager":
        import bench_manager as bm

        mode, n = parts[1], SIZES[parts[2]]
        cm = _manager(parts[-1] != "norecall", model="gpt-4o", summarizer="none")
        msgs = bm.history(n) + [{"role": "user", "content": "and now?"}]
        if mode == "steady":
            state = cm.prepare(msgs[:-1]).state
            state = cm.prepare(msgs, state).state
            call = lambda i: cm.prepare(msgs, state)  # noqa: E731
        else:
            base = msgs[:-1]
            before = cm.prepare(base).state
            call = lambda i: cm.prepare(  # noqa: E731
                base + [{"role": "user", "content": f"new question {i + 1}"}], before
            )
    elif what == "recall_question_10k":
        sys.path.insert(0, str(HERE.parents[1] / "eval"))
        import eval_recall

        cm, history, state, asked = eval_recall.timed_question(
            10_000, wf.Counter(model="gpt-4o"), 8_192
        )
        call = lambda i: cm.prepare([*history, asked], state)  # noqa: E731
    elif parts[0] == "dialog":
        texts = cached_conversations()
        counter = wf.Counter(
            encoding="cl100k_base", cache_entries=0 if parts[2] == "cold" else 2_000_000
        )
        if parts[1] == "count":
            call = lambda i: [counter.count(t) for t in texts]  # noqa: E731
        else:
            msgs = [[{"role": "user", "content": t}] for t in texts]
            call = lambda i: [counter.count_messages(m) for m in msgs]  # noqa: E731
    else:
        raise SystemExit(f"unknown workload {what!r}: {', '.join(CALLS)}")
    call(-1)
    call(0)
    return call


def _git(tree: Path, *args: str) -> str:
    """The output of ``git args`` run in ``tree``."""
    out = subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _side(spec: str) -> tuple[str, list[str], dict[str, str]]:
    """(label, python command, extra environment) of a side: a commit or a source tree."""
    tree = Path(spec)
    if (tree / "python" / "windowfit").is_dir():
        sha = _git(tree, "rev-parse", "--short=10", "HEAD")
        dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
        label = f"{sha}{'+changes' if dirty else ''} ({tree.resolve().name} tree)"
        return label, [sys.executable], {"PYTHONPATH": str(tree.resolve() / "python")}
    sha, python = cc.build(spec)
    return sha, [str(python)], {}


def instructions(python: list[str], env: dict[str, str], what: str, n: int) -> int:
    """Instructions callgrind counts in ``n`` calls of ``what`` with ``python`` (between the
    markers: the setup left out)."""
    with tempfile.TemporaryDirectory(prefix="wf-cg-") as tmp:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/cg.out",
                "--zero-before=getppid",
                "--dump-before=getpgrp",
                *python,
                str(HERE),
                what,
                str(n),
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp,  # the side's windowfit, not the source tree's
            env={**os.environ, "PYTHONHASHSEED": "0", **env},
        )
        dump = Path(tmp) / "cg.out.1"
        found = re.search(r"^summary: (\d+)", dump.read_text(), re.M) if dump.exists() else None
    if found is None:
        raise RuntimeError(f"no dump of the calls from callgrind for {what}")
    return int(found.group(1))


def table(before: str, after: str, workloads: list[str]) -> None:
    """Per-call instructions of each workload on both sides."""
    sides = [_side(before), _side(after)]
    print(f"before `{sides[0][0]}`, after `{sides[1][0]}`\n")
    print("| workload (calls) | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for what in workloads:
        n = CALLS[what]
        per_call = [instructions(python, env, what, n) / n for _, python, env in sides]
        print(
            f"| {what} ({n:,}) | {per_call[0]:,.0f} | {per_call[1]:,.0f} "
            f"| {per_call[1] / per_call[0]:.3f} |",
            flush=True,
        )


def main() -> None:
    if "--table" in sys.argv:
        ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        ap.add_argument("--table", action="store_true")
        ap.add_argument("--before", default="9faf754", help="a commit or a built source tree")
        ap.add_argument("--after", default="HEAD", help="a commit or a built source tree")
        ap.add_argument("workloads", nargs="*", default=list(CALLS))
        args = ap.parse_args()
        table(args.before, args.after, args.workloads)
        return
    what, n = sys.argv[1], int(sys.argv[2])
    call = setup(what)
    os.getppid()  # callgrind zeroes its counters here (--zero-before=getppid)
    for i in range(n):
        call(i + 1)
    os.getpgrp()  # and dumps the calls' instructions here (--dump-before=getpgrp)


if __name__ == "__main__":
    main()
