"""A thread's table of held ``str`` objects is released when the thread ends.

Counting keeps the ``str`` objects a thread counted alive (their identity names their content,
see ``cache/held.rs``), up to a byte budget per thread. A thread-per-request server ends a
thread per request: before, each finished thread's table was only queued for release by
whichever later call went through PyO3's generic path (never, for a server that only counts),
so memory grew with every finished thread.
"""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc
from collections.abc import Callable

import windowfit as wf
from windowfit import _core

COUNTER = wf.Counter(model="gpt-4o")


def run_threads(n: int, work: Callable[[], None], at_once: int = 8) -> None:
    for start in range(0, n, at_once):
        threads = [threading.Thread(target=work) for _ in range(min(at_once, n - start))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def test_finished_threads_hold_no_references_to_what_they_counted() -> None:
    texts = [f"request {i}: " + "some tool output line\n" * 20 for i in range(200)]
    for t in texts:  # first sights: noted, not held; every thread's count is a second sight
        COUNTER.count(t)
    before = [sys.getrefcount(t) for t in texts]
    held: list[int] = []

    def work() -> None:
        for t in texts:
            COUNTER.count(t)
        held.append(_core._held_cache_stats()[0])

    run_threads(200, work)
    # each thread held (nearly) all it counted: the table is set-associative by the str's
    # address, so a few texts may share a full set and evict one another
    assert len(held) == 200 and min(held) >= len(texts) * 9 // 10, "each thread held its texts"
    assert [sys.getrefcount(t) for t in texts] == before


def test_memory_of_finished_threads_returns_to_the_baseline() -> None:
    per_thread = 100 * 8_000  # bytes of text each thread makes, counts and lets go of

    def work() -> None:
        texts = [f"{threading.get_ident()} {i} " + "x" * 8_000 for i in range(100)]
        for t in texts:
            COUNTER.count(t)

    run_threads(4, work)  # warm: caches, vocabulary, thread machinery
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        run_threads(40, work)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    # before: every finished thread's texts stayed alive (40 threads, ~32 MB)
    assert grown < per_thread, f"{grown} bytes still allocated after 40 finished threads"


def test_the_calling_threads_table_keeps_working_after_others_end() -> None:
    text = "a text the main thread counts " * 10
    want = COUNTER.count(text)
    run_threads(4, lambda: [COUNTER.count(text) for _ in range(3)] and None)
    assert COUNTER.count(text) == want
    assert _core._held_cache_stats()[0] >= 1
