"""Session stores under load: N worker processes x M shared sessions x K turns, on SQLite, Redis,
Redis Cluster and PostgreSQL, measured in the same run.

    make bench-store                       # or:
    PYTHONPATH=python python benches/suites/bench_store_load.py --workers 4 --sessions 8 --turns 25

A turn, as an agent worker runs it: append one message to a session, load the session's full
history (a fresh read, as a worker that did not write it would), and ``ContextManager().prepare``
it. Every worker writes to every session, so appends contend. Reported per backend: turns per
second over all workers, p50/p99 latency of the append and of the load. Afterwards the run is
checked: every message present exactly once, each writer's messages in its own order; a lost or
duplicated message fails the benchmark.

The servers are started on loopback in temporary directories (as the tests do), SQLite is a file
in a temporary directory with ``synchronous=NORMAL`` (FULL measures the disk's fsync). Figures
depend on the machine and its load: compare the backends of one run with each other.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import queue
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

logger = logging.getLogger("bench_store_load")

BACKENDS = ("sqlite", "redis", "redis-cluster", "postgres")


def open_spec(spec: dict[str, Any]) -> Any:
    import windowfit as wf

    if spec["kind"] == "sqlite":
        return wf.SQLiteStore(spec["path"], synchronous="NORMAL")
    if spec["kind"] == "postgres":
        return wf.PostgresStore(spec["dsn"], schema=spec["schema"])
    return wf.RedisStore(spec["url"], prefix=spec["prefix"])


def message(writer: int, i: int, session: int) -> dict[str, Any]:
    """An agent-loop message of a few hundred bytes, tagged with its writer and turn."""
    tag = {"w": writer, "i": i}
    if i % 3 == 0:
        return {"role": "user", "content": f"step {i}: check the build log " * 8, **tag}
    if i % 3 == 1:
        call = {"name": "run", "arguments": f'{{"cmd": "make test -k s{session}"}}'}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": f"c{writer}-{i}", "type": "function", "function": call}],
            **tag,
        }
    return {"role": "tool", "tool_call_id": f"c{writer}-{i - 1}", "content": "ok\n" * 60, **tag}


def worker(
    spec: dict[str, Any], writer: int, sessions: int, turns: int, start: Any, out: Any
) -> None:
    import windowfit as wf

    store = open_spec(spec)
    # a small window, so longer histories are fitted (and summarized), as in a long agent run
    cm = wf.ContextManager(context_window=8192)
    appends: list[float] = []
    loads: list[float] = []
    start.wait()
    began = time.perf_counter()
    for i in range(turns):
        for s in range(sessions):
            sid = f"load-{s}"
            t0 = time.perf_counter()
            store.append(sid, [message(writer, i, s)])
            t1 = time.perf_counter()
            _, history = store.read(sid)
            t2 = time.perf_counter()
            cm.prepare([{k: v for k, v in m.items() if k not in ("w", "i")} for m in history])
            appends.append(t1 - t0)
            loads.append(t2 - t1)
    out.put((writer, time.perf_counter() - began, appends, loads))
    store.close()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def verify(spec: dict[str, Any], workers: int, sessions: int, turns: int) -> None:
    """Every message once, each writer's turns in order, in every session."""
    store = open_spec(spec)
    try:
        for s in range(sessions):
            _, history = store.read(f"load-{s}")
            seen = [(m["w"], m["i"]) for m in history]
            if len(seen) != workers * turns or len(set(seen)) != len(seen):
                raise SystemExit(f"{spec['kind']}: session {s} has {len(seen)} messages "
                                 f"({len(set(seen))} distinct), expected {workers * turns}")  # fmt: skip
            for w in range(workers):
                if [i for ww, i in seen if ww == w] != list(range(turns)):
                    raise SystemExit(f"{spec['kind']}: writer {w}'s order broken in session {s}")
    finally:
        store.close()


def run(spec: dict[str, Any], workers: int, sessions: int, turns: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(spec, w, sessions, turns, start, out))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    time.sleep(0.5)  # let the workers import and connect before the clock starts
    start.set()
    results: list[Any] = []
    deadline = time.monotonic() + 900
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            # a worker that died never reports: stop instead of waiting for it
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                raise SystemExit(f"{spec['kind']}: workers failed (exit codes {dead})") from None
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise SystemExit(f"{spec['kind']}: a worker exited with {p.exitcode}")
    verify(spec, workers, sessions, turns)
    wall = max(r[1] for r in results)
    appends = [x for r in results for x in r[2]]
    loads = [x for r in results for x in r[3]]
    return {
        "backend": spec["kind"],
        "turns_per_s": len(appends) / wall,
        "append_p50": pct(appends, 0.5) * 1e3,
        "append_p99": pct(appends, 0.99) * 1e3,
        "load_p50": pct(loads, 0.5) * 1e3,
        "load_p99": pct(loads, 0.99) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from _redis import start_redis_cluster, start_redis_server
    from _store_postgres import start_postgres_server

    rows = []
    with tempfile.TemporaryDirectory(prefix="windowfit-bench-") as tmp:
        for kind in args.backends.split(","):
            stop: Any = None
            spec: dict[str, Any] = {"kind": kind, "prefix": f"bench-{uuid.uuid4().hex[:8]}"}
            if kind == "sqlite":
                spec["path"] = os.path.join(tmp, "sessions.db")
            elif kind == "redis":
                server = start_redis_server()
                spec["url"], stop = server.url, server.stop
            elif kind == "redis-cluster":
                cluster = start_redis_cluster()
                spec["url"], stop = cluster.url, cluster.stop
            elif kind == "postgres":
                pg = start_postgres_server()
                spec["dsn"], spec["schema"], stop = pg.dsn, "bench", pg.stop
            else:
                raise SystemExit(f"unknown backend {kind!r}; choose from {BACKENDS}")
            try:
                logger.info("%s: %d workers x %d sessions x %d turns", kind, args.workers,
                            args.sessions, args.turns)  # fmt: skip
                rows.append(run(spec, args.workers, args.sessions, args.turns))
            finally:
                if stop is not None:
                    stop()
    total = args.workers * args.sessions * args.turns
    print(f"\n{args.workers} workers x {args.sessions} sessions x {args.turns} turns "
          f"({total} appends, loads and prepares per backend); nothing lost or duplicated\n")  # fmt: skip
    print("| backend | turns/s | append p50 | append p99 | load p50 | load p99 |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['backend']} | {r['turns_per_s']:.0f} | {r['append_p50']:.1f} ms | "
              f"{r['append_p99']:.1f} ms | {r['load_p50']:.1f} ms | {r['load_p99']:.1f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
