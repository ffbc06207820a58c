"""SQLiteStore: several processes, crashes, corrupt and foreign data, TTL, locking."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from _store_reliability import (
    check_concurrent_appends,
    check_concurrent_state,
    check_sigkill_mid_appends,
)
from _store_workers import open_worker, spawn
from windowfit.session import Session
from windowfit.store import SQLiteStore, StoreCorruptError, StoreError


def spec(path: Path, **kw: str) -> dict[str, str]:
    return {"kind": "sqlite", "path": str(path), **kw}


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_wal_mode_and_tables(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    SQLiteStore(db).close()
    with raw(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "windowfit_sessions",
        "windowfit_messages",
        "windowfit_usage",
        "windowfit_meta",
    } <= tables


def test_shares_a_file_with_other_tables(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with raw(db) as c:
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users (name) VALUES ('ann')")
    store = SQLiteStore(db)
    Session(store, "a").append({"role": "user", "content": "x"})
    store.close()
    with raw(db) as c:
        assert c.execute("SELECT name FROM users").fetchall() == [("ann",)]


@pytest.mark.slow
def test_processes_append_concurrently(tmp_path: Path) -> None:
    check_concurrent_appends(spec(tmp_path / "c.db"), writers=4, count=150)


@pytest.mark.slow
def test_processes_save_state_concurrently(tmp_path: Path) -> None:
    check_concurrent_state(spec(tmp_path / "st.db"), writers=4, rounds=25)


def test_processes_open_one_new_store_together(tmp_path: Path) -> None:
    # The first opens switch the new file to WAL; two that each hold a read lock while asking
    # deadlock, and SQLite refuses one at once ("database is locked", its busy timeout never
    # waited). Eight processes, twenty new files: before the switch was retried, 4 of 20
    # rounds failed an open.
    ctx = spawn()
    processes = 8
    paths = [str(tmp_path / f"new-{k}.db") for k in range(20)]
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=open_worker, args=(paths, barrier, out)) for _ in range(processes)]
    for p in procs:
        p.start()
    errors = [e for _ in procs for e in out.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert errors == []
    for path in paths:
        with raw(Path(path)) as c:
            assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_sigkill_mid_appends(tmp_path: Path, synchronous: str) -> None:
    db = tmp_path / "k.db"
    store = check_sigkill_mid_appends(spec(db, synchronous=synchronous))
    store.close()
    with raw(db) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_threads_share_one_store(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    s = Session(store, "threads")

    def work(k: int) -> None:
        for i in range(50):
            s.append({"role": "user", "content": f"{k}-{i}"})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [m["content"] for m in Session(store, "threads").messages]
    assert len(got) == 200 and len(set(got)) == 200
    for k in range(4):
        assert [c for c in got if c.startswith(f"{k}-")] == [f"{k}-{i}" for i in range(50)]
    store.close()


def test_short_lived_threads_do_not_leak_connections(tmp_path: Path) -> None:
    import gc

    store = SQLiteStore(tmp_path / "leak.db")
    for i in range(40):
        t = threading.Thread(
            target=Session(store, "x").append, args=({"role": "user", "content": str(i)},)
        )
        t.start()
        t.join()
    gc.collect()
    assert len(store._conns) <= 2  # the main thread's, maybe one not yet collected
    assert len(Session(store, "x").messages) == 40
    store.close()


def test_memory_database_is_shared_by_threads() -> None:
    store = SQLiteStore(":memory:")
    s = Session(store, "m")
    t = threading.Thread(target=lambda: s.append({"role": "user", "content": "from a thread"}))
    t.start()
    t.join()
    s.append({"role": "user", "content": "main"})
    assert [m["content"] for m in s.messages] == ["from a thread", "main"]


def _forked_append(store: SQLiteStore) -> None:
    Session(store, "forked").append({"role": "user", "content": "child"})


def test_store_used_after_fork(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "f.db")
    Session(store, "forked").append({"role": "user", "content": "parent"})
    proc = multiprocessing.get_context("fork").Process(target=_forked_append, args=(store,))
    proc.start()
    proc.join(timeout=60)
    assert proc.exitcode == 0
    Session(store, "forked").append({"role": "user", "content": "parent again"})
    assert [m["content"] for m in Session(store, "forked").messages] == [
        "parent",
        "child",
        "parent again",
    ]


def test_waits_for_a_lock_then_errors_clearly(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    store = SQLiteStore(db, timeout=0.2)
    blocker = raw(db)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreError, match="locked"):
            Session(store, "x").append({"role": "user", "content": "x"})
        assert time.monotonic() - t0 >= 0.15
        # readers are not blocked by a writer in WAL mode
        assert Session(store, "x").messages == []
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    Session(store, "x").append({"role": "user", "content": "now"})
    assert Session(store, "x").messages == [{"role": "user", "content": "now"}]


def test_ttl_cleanup_runs_on_open(tmp_path: Path) -> None:
    db = tmp_path / "ttl.db"
    store = SQLiteStore(db)
    Session(store, "old").append({"role": "user", "content": "x"})
    Session(store, "new").append({"role": "user", "content": "y"})
    store.close()
    with raw(db) as c:
        c.execute("UPDATE windowfit_sessions SET updated_at = updated_at - 7200 WHERE id = 'old'")
    store = SQLiteStore(db, ttl=3600)
    assert store.info("old") is None and Session(store, "old").messages == []
    assert Session(store, "new").messages == [{"role": "user", "content": "y"}]
    with raw(db) as c:
        assert c.execute(
            "SELECT COUNT(*) FROM windowfit_messages WHERE session_id='old'"
        ).fetchone() == (0,)
    store.close()
    with pytest.raises(ValueError):
        SQLiteStore(db, ttl=0)


# --------------------------------------------------------------------------- corrupt / foreign data


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "garbage.db"
    db.write_bytes(os.urandom(8192))
    with pytest.raises(StoreCorruptError, match=r"garbage\.db"):
        SQLiteStore(db)


def test_foreign_table_with_our_name(tmp_path: Path) -> None:
    db = tmp_path / "foreign.db"
    with raw(db) as c:
        c.execute("CREATE TABLE windowfit_messages (a, b)")
    with pytest.raises(StoreCorruptError, match="windowfit_messages"):
        SQLiteStore(db)


def test_database_from_a_newer_version(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    SQLiteStore(db).close()
    with raw(db) as c:
        c.execute("UPDATE windowfit_meta SET value = '7' WHERE key = 'schema'")
    with pytest.raises(StoreCorruptError, match="newer windowfit"):
        SQLiteStore(db)


def test_unreachable_path_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"cannot open|unable"):
        SQLiteStore(tmp_path / "no" / "such" / "dir" / "x.db")


@pytest.mark.parametrize(
    "data",
    [
        "{not json",
        "[1,2,3]",
        b"\xff\xfe\x00garbage",
        '{"_wf": 1, "m": "str"}',
    ],
)
def test_corrupt_message_is_skipped_and_reported(
    tmp_path: Path, data: object, caplog: pytest.LogCaptureFixture
) -> None:
    """One undecodable record never makes the session unreadable: it keeps its place as a
    stand-in, is logged, listed in ``Session.unreadable`` and never sent."""
    db = tmp_path / "c.db"
    store = SQLiteStore(db)
    Session(store, "victim").extend(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"ok {i}"} for i in range(3)]
    )
    Session(store, "healthy").append({"role": "user", "content": "fine"})
    with raw(db) as c:
        c.execute(
            "UPDATE windowfit_messages SET data = ? WHERE session_id = 'victim' AND seq = 1",
            (data,),
        )
    victim = Session(store, "victim")
    with caplog.at_level(logging.WARNING, logger="windowfit.store.base"):
        messages = victim.messages
    assert [m.get("content") for m in messages] == ["ok 0", None, "ok 2"]
    assert any(
        "'victim'" in r.getMessage() and "message 1" in r.getMessage() for r in caplog.records
    )
    [(index, why)] = victim.unreadable
    assert index == 1 and "'victim'" in why and "message 1" in why
    p = victim.prepare(KeepAll())
    assert [m["content"] for m in p.messages] == ["ok 0", "ok 2"]
    assert p.stats["invalid_skipped"] == [1] and p.stats["unreadable_skipped"] == [1]
    # other sessions, and appends to the damaged one, still work
    assert Session(store, "healthy").messages == [{"role": "user", "content": "fine"}]
    assert Session(store, "victim").append({"role": "user", "content": "more"}) == 3


class KeepAll:
    """A context manager stand-in that sends every message it is given."""

    def prepare(
        self, messages: list[dict[str, object]], state: object = None, **kw: object
    ) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(messages=list(messages), stats={}, state=None)


def test_a_record_of_a_newer_format_is_an_error(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    store = SQLiteStore(db)
    Session(store, "newer").extend([{"role": "user", "content": "ok"}] * 2)
    with raw(db) as c:
        c.execute(
            "UPDATE windowfit_messages SET data = ? WHERE session_id = 'newer' AND seq = 1",
            ('{"_wf": 42, "m": {}}',),
        )
    with pytest.raises(StoreCorruptError, match="newer windowfit") as err:
        _ = Session(store, "newer").messages
    assert err.value.session_id == "newer" and "message 1" in str(err.value)


def test_missing_message_row_is_detected(tmp_path: Path) -> None:
    db = tmp_path / "gap.db"
    store = SQLiteStore(db)
    Session(store, "gap").extend([{"role": "user", "content": str(i)} for i in range(4)])
    with raw(db) as c:
        c.execute("DELETE FROM windowfit_messages WHERE session_id = 'gap' AND seq = 2")
    with pytest.raises(StoreCorruptError, match="message 2 is missing"):
        _ = Session(store, "gap").messages


def test_corrupt_state_and_metadata(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteStore(db)
    Session(store, "st").save_state({"ok": 1})
    Session(store, "meta").child("t", child_id="kid", meta={"a": 1})
    with raw(db) as c:
        c.execute("UPDATE windowfit_sessions SET state = '{oops' WHERE id = 'st'")
        c.execute("UPDATE windowfit_sessions SET meta = '[1]' WHERE id = 'kid'")
    with pytest.raises(StoreCorruptError, match=r"'st'.*state"):
        _ = Session(store, "st").state
    with pytest.raises(StoreCorruptError, match="'kid'"):
        store.info("kid")
    with raw(db) as c:
        c.execute(
            "UPDATE windowfit_sessions SET state = NULL, state_version = 'abc' WHERE id = 'st'"
        )
    with pytest.raises(StoreCorruptError, match="state_version"):
        Session(store, "st").load_state()


def test_messages_without_session_row_still_load(tmp_path: Path) -> None:
    db = tmp_path / "orphan.db"
    store = SQLiteStore(db)
    s = Session(store, "orphan")
    s.extend([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    with raw(db) as c:
        c.execute("DELETE FROM windowfit_sessions WHERE id = 'orphan'")
    assert [m["content"] for m in Session(store, "orphan").messages] == ["a", "b"]
    assert s.append({"role": "user", "content": "c"}) == 2


def test_durable_across_reopen(tmp_path: Path) -> None:
    db = tmp_path / "reopen.db"
    store = SQLiteStore(db, synchronous="NORMAL")
    Session(store, "a").extend([{"role": "user", "content": str(i)} for i in range(10)])
    Session(store, "a").save_state({"x": 1})
    store.close()
    again = SQLiteStore(db)
    assert len(Session(again, "a").messages) == 10
    assert Session(again, "a").load_state() == ({"x": 1}, 1)
    with pytest.raises(ValueError):
        SQLiteStore(db, synchronous="sometimes")
