"""Print the README's "Managing" and "Sessions" figures (benches/RESULTS.md, same sections).

    make release
    .venv/bin/python benches/reports/report_manager.py --label release

Managing: ``ContextManager(model="gpt-4o", summarizer="none").prepare`` on the 10,000-message
history of bench_manager.py — *steady* (the previous turn's state passed back, the newest
message just appended, caches warm), *one new message* (a different new user message each
run, so it really is counted and scanned), *no state* (a first call for a long stored
session: every message scanned, cut computed from scratch). Sessions: the 10,000 messages of
bench_store.py (~300 bytes of JSON each), appended one call each (one transaction each), then
loaded with a fresh handle; SQLite on a file in a temporary directory (``synchronous="FULL"``
waits for the disk on each commit, so only its last 1,000 appends are timed), Redis on a
redis-server started on loopback (tests/_redis.py). Every figure: median and best of the
stated runs, one thread (nothing here runs in parallel). pytest-benchmark runs the same
workloads: ``pytest benches/suites/bench_manager.py benches/suites/bench_store.py --benchmark-only``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import bench_manager as bm
import bench_store as bs
from _build import require_release  # noqa: E402
from windowfit.context import ContextManager
from windowfit.session import Session
from windowfit.store import BaseStore, SQLiteStore


def runs_of(
    fn: Callable[[], Any], runs: int, setup: Callable[[], Any] | None = None
) -> list[float]:
    """Seconds of each of ``runs`` calls; ``setup`` runs untimed before each, its result is
    ``fn``'s argument."""
    out = []
    for _ in range(runs):
        arg = setup() if setup else None
        t = time.perf_counter()
        fn() if setup is None else fn(arg)  # type: ignore[call-arg]
        out.append(time.perf_counter() - t)
    return out


def fmt(times: list[float], per: int = 1) -> str:
    med, best = statistics.median(times) / per, min(times) / per
    unit, scale = ("µs", 1e6) if med < 1e-3 else ("ms", 1e3)
    return f"{med * scale:,.2f} {unit} (best {best * scale:,.2f})"


def manager_figures(runs: int) -> dict[str, str]:
    msgs = bm.history() + [{"role": "user", "content": "and now?"}]
    cm = ContextManager(model="gpt-4o", summarizer="none")
    state = cm.prepare(msgs[:-1]).state
    state = cm.prepare(msgs, state).state  # warm every cache once
    steady = runs_of(lambda: cm.prepare(msgs, state), runs)
    base, before = msgs[:-1], cm.prepare(msgs[:-1]).state
    fresh = iter(range(10**9))
    one_new = runs_of(
        lambda h: cm.prepare(h, before),
        runs,
        setup=lambda: base + [{"role": "user", "content": f"new question {next(fresh)}"}],
    )
    stateless = runs_of(lambda: cm.prepare(msgs), max(3, runs // 5))
    return {
        "messages": f"{len(msgs):,}",
        "steady": fmt(steady),
        "one new message": fmt(one_new),
        "no state": fmt(stateless),
        "runs": f"{runs} / {runs} / {max(3, runs // 5)}",
    }


def store_figures(store: BaseStore, timed: int, load_runs: int) -> tuple[str, str]:
    n = len(bs.MESSAGES)
    session = Session(store, f"report-{uuid.uuid4().hex}")
    if timed < n:
        session.extend(bs.MESSAGES[: n - timed])
    per_append = runs_of(
        lambda m: session.append(m), timed, setup=iter(bs.MESSAGES[n - timed :]).__next__
    )
    sid = session.id
    load = runs_of(lambda: Session(store, sid).messages, load_runs)
    assert Session(store, sid).messages == bs.MESSAGES
    return fmt(per_append), fmt(load)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=50, help="timed runs per manager figure")
    ap.add_argument("--label", default="", help="build label for the header, e.g. 'release'")
    ap.add_argument("--no-redis", action="store_true", help="leave Redis out")
    args = ap.parse_args()
    require_release()

    m = manager_figures(args.runs)
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as d:
        for sync, timed in (("NORMAL", len(bs.MESSAGES)), ("FULL", bs.FULL_APPENDS)):
            s = SQLiteStore(Path(d) / f"{sync}.db", synchronous=sync)
            try:
                rows.append((f'SQLite `synchronous="{sync}"`', *store_figures(s, timed, 10)))
            finally:
                s.close()
    if not args.no_redis:
        from _redis import start_redis_server
        from windowfit.store import RedisStore

        server = start_redis_server()
        r = RedisStore(server.url, prefix=f"report-{uuid.uuid4().hex[:8]}")
        try:
            rows.append(("Redis on loopback", *store_figures(r, len(bs.MESSAGES), 10)))
        finally:
            r.close()
            server.stop()

    label = f" ({args.label} build)" if args.label else ""
    print(f"### Managing and sessions{label}\n")
    print(
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        "median (best) of the stated runs, one thread.\n"
    )
    print(
        f"`ContextManager.prepare`, {m['messages']} messages, no summarizer call, runs {m['runs']}:\n"
    )
    print("| case | time |\n|---|---:|")
    for case in ("steady", "one new message", "no state"):
        print(f"| {case} | {m[case]} |")
    print(f"\nSessions, {len(bs.MESSAGES):,} messages of ~300 bytes of JSON:\n")
    print("| store | one append | load all with a fresh handle (10 runs) |\n|---|---:|---:|")
    for name, append, load in rows:
        print(f"| {name} | {append} | {load} |")


if __name__ == "__main__":
    main()
