"""Worker processes for the multi-process store tests (importable by spawned children)."""

from __future__ import annotations

import multiprocessing
import os
import time
from typing import Any

from windowfit.session import Session
from windowfit.store import BaseStore, SQLiteStore


def open_store(spec: dict[str, Any]) -> BaseStore:
    if spec["kind"] == "sqlite":
        return SQLiteStore(spec["path"], synchronous=spec.get("synchronous", "FULL"))
    if spec["kind"] == "postgres":
        from windowfit.store.postgres import PostgresStore

        return PostgresStore(spec["dsn"], schema=spec["schema"])
    from windowfit.store import RedisStore

    return RedisStore(spec["url"], prefix=spec["prefix"])


def append_worker(
    spec: dict[str, Any], session_id: str, writer: int, count: int, start: Any
) -> None:
    """Append ``count`` messages, alternating single appends and 2-message extends."""
    store = open_store(spec)
    session = Session(store, session_id)
    start.wait()
    i = 0
    while i < count:
        if i % 3 == 1 and i + 1 < count:
            session.extend([_msg(writer, i), _msg(writer, i + 1)])
            i += 2
        else:
            session.append(_msg(writer, i))
            i += 1
    store.close()


def _msg(writer: int, i: int) -> dict[str, Any]:
    return {"role": "user", "content": f"w{writer}-{i}", "w": writer, "i": i, "pid": os.getpid()}


def state_worker(
    spec: dict[str, Any],
    session_id: str,
    rounds: int,
    start: Any,
    out: Any,
    barrier: Any = None,
) -> None:
    """Increment a counter in the session state with optimistic concurrency, retrying conflicts.
    With ``barrier``, every writer loads the first state before any of them saves, so all but
    one of the first saves must conflict."""
    from windowfit.store import ConflictError

    store = open_store(spec)
    session = Session(store, session_id)
    start.wait()
    conflicts = 0
    for r in range(rounds):
        while True:
            state, version = session.load_state()
            if barrier is not None and r == 0 and conflicts == 0:
                barrier.wait(timeout=120)
            try:
                session.save_state({"n": (state or {"n": 0})["n"] + 1}, version)
                break
            except ConflictError:
                conflicts += 1
    out.put(conflicts)
    store.close()


def endless_writer(
    spec: dict[str, Any], session_id: str, batch: int, size: int, ready: Any
) -> None:
    """Append batches of ``batch`` big messages until killed; sets ``ready`` after a few."""
    store = open_store(spec)
    session = Session(store, session_id)
    payload = "x" * size
    n = 0
    while True:
        session.extend(
            [
                {"role": "tool", "tool_call_id": f"b{n}", "content": payload, "k": k}
                for k in range(batch)
            ]
        )
        n += 1
        if n == 3:
            ready.set()
        time.sleep(0)


def spawn() -> Any:
    """A multiprocessing context whose children start fresh (like real worker processes)."""
    return multiprocessing.get_context("spawn")


def open_worker(paths: list[str], barrier: Any, out: Any) -> None:
    """Open a new store at each of ``paths`` at the same moment as the other workers (the
    barrier before each); put the errors met, as text."""
    errors = []
    for path in paths:
        barrier.wait(timeout=120)
        try:
            SQLiteStore(path).close()
        except Exception as exc:  # every failure goes back to the test, which names it
            errors.append(repr(exc))
    out.put(errors)
