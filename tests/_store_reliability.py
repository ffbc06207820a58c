"""Reliability checks shared by the SQLite, Redis and PostgreSQL test modules (several processes, SIGKILL)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

from _store_workers import append_worker, endless_writer, open_store, spawn, state_worker
from windowfit.session import Session
from windowfit.store import BaseStore


def check_concurrent_appends(spec: dict[str, Any], writers: int = 4, count: int = 150) -> None:
    """Several processes append to one session at once: all kept, each in order, no duplicates."""
    session_id = f"concurrent-{uuid.uuid4().hex[:8]}"
    ctx = spawn()
    start = ctx.Event()
    procs = [
        ctx.Process(target=append_worker, args=(spec, session_id, w, count, start))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    store = open_store(spec)
    try:
        messages = Session(store, session_id).messages
        assert len(messages) == writers * count
        seen = [(m["w"], m["i"]) for m in messages]
        assert len(set(seen)) == len(seen), "duplicated messages"
        for w in range(writers):
            mine = [i for (ww, i) in seen if ww == w]
            assert mine == list(range(count)), f"writer {w}'s messages out of order or lost"
        # each 2-message extend is contiguous (atomic, never interleaved with another writer)
        for pos, (w, i) in enumerate(seen):
            if i % 3 == 1 and i + 1 < count:
                assert seen[pos + 1] == (w, i + 1), "an extend was interleaved"
        info = store.info(session_id)
        assert info is not None and info.length == writers * count
        # the writers really were several processes
        assert len({m["pid"] for m in messages}) == writers
    finally:
        store.close()


def check_concurrent_state(spec: dict[str, Any], writers: int = 4, rounds: int = 25) -> None:
    """Optimistic concurrency across processes: no lost update."""
    session_id = f"state-{uuid.uuid4().hex[:8]}"
    ctx = spawn()
    start, out = ctx.Event(), ctx.Queue()
    # every writer holds the same first version before any saves: the writers must compete
    barrier = ctx.Barrier(writers)
    procs = [
        ctx.Process(target=state_worker, args=(spec, session_id, rounds, start, out, barrier))
        for _ in range(writers)
    ]
    for p in procs:
        p.start()
    start.set()
    conflicts = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    store = open_store(spec)
    try:
        state, version = store.load_state(session_id)
        assert state == {"n": writers * rounds}
        assert version == writers * rounds
        # the first saves all raced on one version: all but one were refused, none was lost
        assert sum(conflicts) >= writers - 1
        assert sum(c > 0 for c in conflicts) >= writers - 1
    finally:
        store.close()


def check_sigkill_mid_appends(
    spec: dict[str, Any], batch: int = 20, size: int = 20_000
) -> BaseStore:
    """A writer SIGKILLed while appending: whole batches only, the store opens and works."""
    session_id = f"killed-{uuid.uuid4().hex[:8]}"
    ctx = spawn()
    ready = ctx.Event()
    proc = ctx.Process(target=endless_writer, args=(spec, session_id, batch, size, ready))
    proc.start()
    assert ready.wait(timeout=120), "writer did not start"
    time.sleep(0.3)  # let it get well into its stream of appends
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    store = open_store(spec)
    session = Session(store, session_id)
    messages = session.messages
    assert len(messages) >= 3 * batch
    assert len(messages) % batch == 0, "a batch was half written"
    for n in range(len(messages) // batch):
        group = messages[n * batch : (n + 1) * batch]
        assert [m["k"] for m in group] == list(range(batch))
        assert {m["tool_call_id"] for m in group} == {f"b{n}"}
        assert all(len(m["content"]) == size for m in group)
    # the store keeps working after the crash
    index = session.append({"role": "user", "content": "after the crash"})
    assert index == len(messages)
    assert session.messages[-1] == {"role": "user", "content": "after the crash"}
    return store
