"""PostgresStore against a real PostgreSQL on loopback: processes, killed connections, schema
versions, foreign tables, unreachable servers (the protocol itself is in test_store_contract)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _store_postgres import PostgresServer, pg_schema, postgres_server
from _store_reliability import (
    check_concurrent_appends,
    check_concurrent_state,
    check_sigkill_mid_appends,
)

psycopg = pytest.importorskip("psycopg")

from windowfit.errors import WindowfitError  # noqa: E402
from windowfit.session import Session
from windowfit.store import StoreCorruptError, StoreError  # noqa: E402
from windowfit.store.base import UNREADABLE, is_unreadable  # noqa: E402
from windowfit.store.postgres import PostgresStore  # noqa: E402

# imported so that pytest finds these fixtures in this module
FIXTURES = (pg_schema, postgres_server)


@pytest.fixture
def spec(postgres_server: PostgresServer, pg_schema: str) -> dict[str, Any]:
    return {"kind": "postgres", "dsn": postgres_server.dsn, "schema": pg_schema}


@pytest.fixture
def store(postgres_server: PostgresServer, pg_schema: str) -> Iterator[PostgresStore]:
    s = PostgresStore(postgres_server.dsn, schema=pg_schema)
    yield s
    s.close()


def _sql(server: PostgresServer, schema: str, *statements: str) -> list[Any]:
    out: list[Any] = []
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        for sql in statements:
            cur = conn.execute(sql)
            out.append(cur.fetchall() if cur.description else None)
    return out


def test_processes_append_concurrently(spec: dict[str, Any]) -> None:
    check_concurrent_appends(spec)


def test_processes_save_state_concurrently(spec: dict[str, Any]) -> None:
    check_concurrent_state(spec)


def test_sigkill_mid_appends(spec: dict[str, Any]) -> None:
    check_sigkill_mid_appends(spec).close()


def _kill_backends(server: PostgresServer) -> int:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database() "
            "AND backend_type = 'client backend'"
        ).fetchall()
    return len(rows)


def test_killed_connections_mid_run_lose_and_duplicate_nothing(
    store: PostgresStore, postgres_server: PostgresServer
) -> None:
    """Writers keep appending while every backend is terminated again and again: each append
    either lands exactly once (a retry after a lost commit finds its operation id) or raises a
    StoreError; the history holds each writer's successful appends once, in order."""
    session = Session(store, f"kill-{uuid.uuid4().hex[:8]}")
    done: dict[int, list[int]] = {0: [], 1: [], 2: []}
    errors: list[BaseException] = []
    stop = threading.Event()
    kills: list[int] = []

    def writer(w: int) -> None:
        for i in range(120):
            try:
                session.append({"role": "user", "content": f"{w}-{i}", "w": w, "i": i})
                done[w].append(i)
            except StoreError as exc:  # allowed: a clear error, never a silent loss
                errors.append(exc)

    def killer() -> None:
        # kill at once and then often, so the writers' connections die while they are busy
        # (a slow first tick once let fast writers finish before any kill)
        while True:
            kills.append(_kill_backends(postgres_server))
            if stop.wait(0.1):
                return

    k = threading.Thread(target=killer)
    threads = [threading.Thread(target=writer, args=(w,)) for w in done]
    k.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    stop.set()
    k.join(timeout=30)
    messages = session.messages
    seen = [(m["w"], m["i"]) for m in messages]
    assert len(seen) == len(set(seen)), "a retried append was applied twice"
    for w, ok in done.items():
        mine = [i for ww, i in seen if ww == w]
        # every acknowledged append is there; an append that raised may or may not have landed
        assert set(ok) <= set(mine), f"writer {w} lost acknowledged messages"
        assert mine == sorted(mine), f"writer {w}'s order was not kept"
    assert len(errors) <= 3 * 120 - sum(len(v) for v in done.values())
    assert sum(len(v) for v in done.values()) > 0
    assert sum(kills) > 0, "no connection was killed: the test proved nothing"


def test_a_retry_after_a_lost_commit_is_not_applied_twice(store: PostgresStore) -> None:
    """The operation-id check, driven directly: the same op run twice appends once."""
    sid = f"op-{uuid.uuid4().hex[:8]}"
    make = store._operation("append", sid, [{"role": "user", "content": "once"}])
    first = store._drive(make, sid)
    again = store._drive(make, sid)  # as after a reply lost with the connection
    assert first == again == 0
    assert store.read(sid)[1] == [{"role": "user", "content": "once"}]


def test_async_twins_on_two_loops(store: PostgresStore) -> None:
    sid = f"a-{uuid.uuid4().hex[:8]}"

    async def go(n: int) -> int:
        # each asyncio.run is a new event loop: the store gives each loop its own pool
        return await store.aappend(sid, [{"role": "user", "content": str(n)}])

    assert asyncio.run(go(0)) == 0
    assert asyncio.run(go(1)) == 1
    assert [m["content"] for m in store.read(sid)[1]] == ["0", "1"]


def test_newer_schema_is_refused(postgres_server: PostgresServer, pg_schema: str) -> None:
    with PostgresStore(postgres_server.dsn, schema=pg_schema) as s:
        s.append("x", [{"role": "user", "content": "hi"}])
    _sql(postgres_server, pg_schema, "UPDATE windowfit_meta SET value = '99' WHERE key = 'schema'")
    with PostgresStore(postgres_server.dsn, schema=pg_schema) as s:
        with pytest.raises(StoreCorruptError, match="newer windowfit") as info:
            s.read("x")
        assert "127.0.0.1" in str(info.value)


def test_foreign_table_is_refused(postgres_server: PostgresServer, pg_schema: str) -> None:
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{pg_schema}"')
        conn.execute(f'CREATE TABLE "{pg_schema}".windowfit_sessions (id TEXT, name TEXT)')
    with PostgresStore(postgres_server.dsn, schema=pg_schema) as s:
        with pytest.raises(StoreCorruptError, match="not created by windowfit"):
            s.append("x", [{"role": "user", "content": "hi"}])


def test_bare_rows_load_and_corrupt_or_missing_rows_name_the_message(
    store: PostgresStore, postgres_server: PostgresServer, pg_schema: str
) -> None:
    store.append("old", [{"role": "user", "content": "a"}])
    # a message written by another tool, without windowfit's envelope, loads as-is
    _sql(
        postgres_server,
        pg_schema,
        "UPDATE windowfit_sessions SET length = 3 WHERE id = 'old'",
        'INSERT INTO windowfit_messages VALUES (\'old\', 1, \'{"role": "assistant", "content": "b"}\')',
        "INSERT INTO windowfit_messages VALUES ('old', 2, 'not json')",
    )
    # an undecodable row keeps its place as a stand-in naming it; the rest still loads
    epoch, messages = store.read("old")
    assert [m.get("content") for m in messages[:2]] == ["a", "b"]
    assert is_unreadable(messages[2]) and "message 2" in messages[2][UNREADABLE]
    assert "'old'" in messages[2][UNREADABLE]
    _sql(postgres_server, pg_schema, "DELETE FROM windowfit_messages WHERE seq = 2")
    assert [m["content"] for m in store.read("old")[1]] == ["a", "b"]
    _sql(postgres_server, pg_schema, "DELETE FROM windowfit_messages WHERE seq = 0")
    with pytest.raises(StoreCorruptError, match="message 0 is missing"):
        store.read("old")


def test_unreachable_server_and_bad_dsn_are_store_errors() -> None:
    s = PostgresStore("postgresql://nobody@127.0.0.1:9/none", timeout=1)
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:9") as info:
        s.append("sid-1", [{"role": "user", "content": "hi"}])
    assert "sid-1" in str(info.value)
    assert isinstance(info.value, WindowfitError)
    s.close()
    with pytest.raises(StoreError, match="invalid PostgreSQL DSN"):
        PostgresStore("host=localhost port=5432 nonsense")


def test_nul_in_ids_and_texts_round_trip(store: PostgresStore) -> None:
    parent, child = "p\x00\\0", "c\\\x00"
    store.append(parent, [{"role": "user", "content": "go"}])
    assert store.create_child(parent, child, task="t\x00\\", messages=[], tool_call_id="x\x00")
    store.finish_child(child, "r\x00\\0", {"role": "tool", "tool_call_id": "x\x00", "content": ""})
    (info,) = store.children(parent)
    assert (info.id, info.parent_id, info.task, info.tool_call_id, info.result) == (
        child, parent, "t\x00\\", "x\x00", "r\x00\\0"
    )  # fmt: skip
    assert store.info("p\x00\\0") is not None and store.info("p\\0\\0") is None


def test_schema_names_postgres_would_cut_are_refused(postgres_server: PostgresServer) -> None:
    """PostgreSQL keeps 63 bytes of an identifier: two longer names sharing them would share
    tables, so such a name is an error; 63 characters still work."""
    from windowfit.errors import ArgumentTypeError, InvalidArgumentError

    stem = "t" + uuid.uuid4().hex  # 33 characters
    longest = (stem * 2)[:63]
    for too_long in (longest + "a", longest + "b"):
        with pytest.raises(InvalidArgumentError, match="schema must be at most 63") as info:
            PostgresStore(postgres_server.dsn, schema=too_long)
        assert isinstance(info.value, ValueError)
    with pytest.raises(ArgumentTypeError, match="schema must be a str"):
        PostgresStore(postgres_server.dsn, schema=5)  # type: ignore[arg-type]
    s = PostgresStore(postgres_server.dsn, schema=longest)
    try:
        s.append("a", [{"role": "user", "content": "kept whole"}])
        assert s.read("a")[1][0]["content"] == "kept whole"
        (rows,) = _sql(
            postgres_server,
            longest,
            f"SELECT schema_name FROM information_schema.schemata WHERE schema_name = '{longest}'",
        )
        assert rows == [(longest,)]
    finally:
        s.close()


def test_a_write_lost_after_its_commit_is_an_unknown_outcome_retried_once(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append commits, then every connection dies before the reply: the caller gets
    StoreOutcomeUnknownError with the op id, and retrying with it appends nothing twice."""
    from windowfit.store import StoreOutcomeUnknownError
    from windowfit.store import postgres as pg_module

    sid = f"lost-{uuid.uuid4().hex[:8]}"
    store.append(sid, [{"role": "user", "content": "first"}])
    real_run, real_execute = pg_module.run_steps, pg_module._execute
    conns: list[Any] = []
    committed: list[Any] = []

    def seeing_execute(conn: Any, step: Any) -> Any:
        conns.append(conn)
        return real_execute(conn, step)

    def committed_then_lost(op: Any, execute: Any) -> Any:
        if not committed:
            committed.append(real_run(op, execute))
            conns[-1].commit()  # applied on the server
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(pg_module, "_execute", seeing_execute)
    monkeypatch.setattr(pg_module, "run_steps", committed_then_lost)
    monkeypatch.setattr(pg_module.time, "sleep", lambda s: None)
    with pytest.raises(StoreOutcomeUnknownError) as info:
        store.append(sid, [{"role": "assistant", "content": "maybe"}])
    err = info.value
    assert isinstance(err, StoreError) and err.op_id and err.session_id == sid
    monkeypatch.setattr(pg_module, "run_steps", real_run)
    assert store.append(sid, [{"role": "assistant", "content": "maybe"}], op_id=err.op_id) == 1
    assert committed == [1]
    assert [m["content"] for m in store.read(sid)[1]] == ["first", "maybe"]
