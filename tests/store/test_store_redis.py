"""RedisStore on a real redis-server: several processes, crashes, foreign data, retries, TTL."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from _redis import RedisCluster as RedisClusterServers
from _redis import redis_cluster, redis_prefix, redis_server, redis_url, start_redis_server
from _store_reliability import (
    check_concurrent_appends,
    check_concurrent_state,
    check_sigkill_mid_appends,
)
from redis.crc import key_slot
from windowfit.errors import InvalidArgumentError
from windowfit.session import Session
from windowfit.store import ConflictError, RedisStore, StoreCorruptError, StoreError
from windowfit.store.base import encode_message
from windowfit.store.redis import eviction_risk

# imported so that pytest finds these fixtures in this module
REDIS_FIXTURES = (redis_cluster, redis_prefix, redis_server, redis_url)


@pytest.fixture
def store(redis_url: str, redis_prefix: str) -> Iterator[RedisStore]:
    s = RedisStore(redis_url, prefix=redis_prefix)
    yield s
    s.close()


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def spec(url: str, prefix: str) -> dict[str, str]:
    return {"kind": "redis", "url": url, "prefix": prefix}


@pytest.mark.slow
def test_processes_append_concurrently(redis_url: str, redis_prefix: str) -> None:
    check_concurrent_appends(spec(redis_url, redis_prefix), writers=4, count=150)


@pytest.mark.slow
def test_processes_save_state_concurrently(redis_url: str, redis_prefix: str) -> None:
    check_concurrent_state(spec(redis_url, redis_prefix), writers=4, rounds=25)


@pytest.mark.slow
def test_sigkill_mid_appends(redis_url: str, redis_prefix: str, r: redis.Redis) -> None:
    store = check_sigkill_mid_appends(spec(redis_url, redis_prefix))
    for info in store.list_sessions():
        assert info.length == r.llen(store._k("m", info.id))
    store.close()


def test_key_layout(store: RedisStore, r: redis.Redis, redis_prefix: str) -> None:
    s = Session(store, "layout")
    s.append({"role": "user", "content": "x"})
    c = s.child("t")
    assert r.type(store._k("m", "layout")) == b"list"
    assert r.type(store._k("h", "layout")) == b"hash"
    assert r.type(store._k("c", "layout")) == b"zset"
    assert r.zscore(store._index("layout"), "layout") is not None
    assert r.zscore(store._index(c.id), c.id) is not None
    # one hash slot per session (Redis Cluster): its keys, its bucket's index, its op keys
    slots = {key_slot(k.encode()) for k in (store._k(x, "layout") for x in "mhc")}
    assert slots == {key_slot(store._index("layout").encode())}
    assert key_slot(store._opkey("layout").encode()) in slots
    assert r.hget(store._k("h", c.id), "parent_id") == b"layout"
    assert r.hget(store._k("h", "layout"), "schema") == b"1"


def test_prefixes_isolate_stores(redis_url: str) -> None:
    a = RedisStore(redis_url, prefix=f"a-{uuid.uuid4().hex[:6]}")
    b = RedisStore(redis_url, prefix=f"b-{uuid.uuid4().hex[:6]}")
    Session(a, "same").append({"role": "user", "content": "a"})
    assert Session(b, "same").messages == []
    a.close()
    b.close()


def test_prefix_and_id_never_share_keys(redis_url: str, redis_prefix: str) -> None:
    """Regression: prefix "P" + session "m:x" and prefix "P:m" + session "x" wrote the same
    keys ("P:m:m:x"...), so one store read and overwrote the other's history."""
    a = RedisStore(redis_url, prefix=redis_prefix)
    b = RedisStore(redis_url, prefix=f"{redis_prefix}:m")
    Session(a, "m:x").append({"role": "user", "content": "from a"})
    Session(b, "x").append({"role": "user", "content": "from b"})
    assert [m["content"] for m in Session(a, "m:x").messages] == ["from a"]
    assert [m["content"] for m in Session(b, "x").messages] == ["from b"]
    assert {k for kind in "mhc" for k in (a._k(kind, "m:x"),)}.isdisjoint(
        {b._k(kind, "x") for kind in "mhc"}
    )
    with pytest.raises(ValueError, match="braces"):
        RedisStore(redis_url, prefix="app{x}")
    a.close()
    b.close()


def test_sessions_of_the_previous_key_layout_are_moved(
    redis_url: str, redis_prefix: str, r: redis.Redis
) -> None:
    """Keys written by the previous layout (P:m:<id>, P:h:<id>, P:c:<id>, P:sessions, P:u:...)
    are moved on a store's first call: nothing stored is lost."""
    p = redis_prefix
    old = [
        encode_message({"role": "user", "content": "old 1"}),
        encode_message({"role": "assistant", "content": "old 2"}),
    ]
    r.rpush(f"{p}:m:legacy", *old)
    r.hset(f"{p}:h:legacy", mapping={"epoch": "e1", "created_at": 1.0, "updated_at": 2.0,
                                      "state_version": 3, "status": "open", "schema": 1,
                                      "state": '{"_wf": 1, "s": {"summary": "kept"}}'})  # fmt: skip
    r.zadd(f"{p}:c:legacy", {"subagent-1": 1.5})
    r.hset(f"{p}:h:subagent-1", mapping={"epoch": "e2", "created_at": 1.5, "updated_at": 1.5,
                                          "parent_id": "legacy", "status": "open"})  # fmt: skip
    r.zadd(f"{p}:sessions", {"legacy": 2.0, "subagent-1": 1.5})
    r.sadd(f"{p}:u:days", "2026-01-01")
    r.hset(f"{p}:u:d:2026-01-01", mapping={"prompt_tokens:m1": 10, "calls:m1": 1, "cost:m1": 0.5})
    r.hset(f"{p}:u:s:legacy", mapping={"prompt_tokens:2026-01-01:m1": 10, "calls:2026-01-01:m1": 1})
    store = RedisStore(redis_url, prefix=p)
    s = Session(store, "legacy")
    assert [m["content"] for m in s.messages] == ["old 1", "old 2"]
    assert s.load_state() == ({"summary": "kept"}, 3)
    assert [c.id for c in s.children()] == ["subagent-1"]
    assert {i.id for i in store.list_sessions()} == {"legacy", "subagent-1"}
    (row,) = store.usage_rows()
    assert (row.day, row.model, row.prompt_tokens, row.calls, row.cost) == (
        "2026-01-01", "m1", 10, 1, 0.5
    )  # fmt: skip
    assert store.usage_rows(session_id="legacy")[0].prompt_tokens == 10
    assert not r.exists(f"{p}:m:legacy", f"{p}:h:legacy", f"{p}:sessions", f"{p}:u:days")
    # a second store (another worker) finds nothing left to move, and nothing is doubled
    assert RedisStore(redis_url, prefix=p).migrate_legacy() == 0
    assert store.usage_rows()[0].prompt_tokens == 10
    store.close()


def test_retried_commands_are_not_applied_twice(store: RedisStore, r: redis.Redis) -> None:
    # what redis-py does after a lost reply: the same script call again, same operation id
    s = Session(store, "retry")
    s.append({"role": "user", "content": "first"})
    op = store._op_append("retry", [{"role": "user", "content": "once"}])
    request = next(op)
    first = store._execute(store._client, store._scripts, request)
    second = store._execute(store._client, store._scripts, request)
    assert first == second == 1
    assert [m["content"] for m in s.messages] == ["first", "once"]
    # state saves too: a replayed save is not reported as a conflict nor applied twice
    op = store._op_save_state("retry", {"v": 1}, 0)
    request = next(op)
    assert list(store._execute(store._client, store._scripts, request)) == [0, 1]
    assert list(store._execute(store._client, store._scripts, request)) == [0, 1]
    assert s.load_state() == ({"v": 1}, 1)


def test_ttl_expires_sessions(redis_url: str, redis_prefix: str, r: redis.Redis) -> None:
    # the TTL is set on every key a session writes (an hour: no test is that slow) ...
    hour = RedisStore(redis_url, prefix=f"{redis_prefix}-hour", ttl=3600)
    s = Session(hour, "kept")
    s.append({"role": "user", "content": "x"})
    c = s.child("t")
    assert 3000 < r.ttl(hour._k("m", "kept")) <= 3600
    assert 3000 < r.ttl(hour._k("h", c.id)) <= 3600
    hour.close()
    # ... and the server really drops a session when it runs out
    store = RedisStore(redis_url, prefix=redis_prefix, ttl=1)
    s = Session(store, "brief")
    s.append({"role": "user", "content": "x"})
    c = s.child("t")
    # a guard against a hang only: the server expires the keys after 1 s
    deadline = time.time() + 60
    while time.time() < deadline and r.exists(store._k("m", "brief")):
        time.sleep(0.1)
    assert s.messages == [] and store.info("brief") is None
    assert store.list_sessions() == []  # index entries of expired sessions are skipped
    store.cleanup(older_than=0.001)  # ...and removed from the index by cleanup
    assert sum(r.zcard(k) for k in store._indexes()) == 0
    store.close()


def test_async_across_event_loops(store: RedisStore) -> None:
    async def write(tag: str) -> None:
        s = Session(store, "loops")
        await asyncio.gather(
            *(s.aappend({"role": "user", "content": f"{tag}{i}"}) for i in range(20))
        )

    asyncio.run(write("a"))
    asyncio.run(write("b"))
    got = [m["content"] for m in Session(store, "loops").messages]
    assert sorted(got) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])


def test_async_state_conflict(store: RedisStore) -> None:
    async def main() -> None:
        s = Session(store, "astate")
        await s.asave_state({"v": 1})
        other = Session(store, "astate")
        with pytest.raises(ConflictError):
            await other.asave_state({"v": 2})
        await store.aclose()

    asyncio.run(main())


def test_given_clients(redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = RedisStore(client=client, prefix=redis_prefix)
    Session(store, "given").append({"role": "user", "content": "ü"})
    assert Session(store, "given").messages == [{"role": "user", "content": "ü"}]
    assert store.info("given").length == 1  # type: ignore[union-attr]
    store.close()
    assert client.ping()  # a client we were given is not closed by us

    async def main() -> None:
        aclient = redis.asyncio.Redis.from_url(redis_url)
        astore = RedisStore(client=client, async_client=aclient, prefix=redis_prefix)
        assert len(await Session(astore, "given").aload()) == 1
        await aclient.aclose()

    asyncio.run(main())
    client.close()


def test_bad_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="invalid Redis URL 'http://x'"):
        RedisStore("http://x")


def test_unreachable_server_is_a_store_error() -> None:
    store = RedisStore("redis://127.0.0.1:1/0", socket_connect_timeout=0.5)
    with pytest.raises(StoreError, match="Redis error"):
        Session(store, "x").append({"role": "user", "content": "x"})
    with pytest.raises(StoreError):
        store.ping()


# --------------------------------------------------------------------------- foreign / corrupt data


@pytest.mark.parametrize("kind", ["string", "hash", "set"])
def test_wrong_type_message_key(
    store: RedisStore, r: redis.Redis, redis_prefix: str, kind: str
) -> None:
    key = store._k("m", "odd")
    if kind == "string":
        r.set(key, "hello")
    elif kind == "hash":
        r.hset(key, "a", "b")
    else:
        r.sadd(key, "x")
    with pytest.raises(StoreCorruptError) as err:
        _ = Session(store, "odd").messages
    assert err.value.session_id == "odd" and "'odd'" in str(err.value)
    with pytest.raises(StoreCorruptError, match="'odd'"):
        Session(store, "odd").append({"role": "user", "content": "x"})
    # the failed append wrote nothing (checks run before any write)
    assert not r.exists(store._k("h", "odd"))
    assert Session(store, "fine").append({"role": "user", "content": "ok"}) == 0


def test_wrong_type_meta_key(store: RedisStore, r: redis.Redis, redis_prefix: str) -> None:
    r.rpush(store._k("h", "meta-odd"), "x")
    for action in (
        lambda s: s.info(),
        lambda s: s.state,
        lambda s: s.save_state({"a": 1}),
        lambda s: s.append({"role": "user", "content": "x"}),
        lambda s: s.child("t"),
    ):
        with pytest.raises(StoreCorruptError, match="'meta-odd'"):
            action(Session(store, "meta-odd"))


@pytest.mark.parametrize("junk", [b"\xff\xfe\xfd", b"{not json", b"[1]"])
def test_garbage_list_elements_are_skipped_and_reported(
    store: RedisStore, r: redis.Redis, redis_prefix: str, junk: bytes
) -> None:
    s = Session(store, "junk")
    s.append({"role": "user", "content": "good"})
    r.rpush(store._k("m", "junk"), junk)
    r.rpush(store._k("m", "junk"), b'{"role": "assistant", "content": "after"}')
    handle = Session(store, "junk")
    assert [m.get("content") for m in handle.messages] == ["good", None, "after"]
    [(index, why)] = handle.unreadable
    assert index == 1 and "'junk'" in why and "message 1" in why


def test_a_record_of_a_newer_format_is_an_error(store: RedisStore, r: redis.Redis) -> None:
    """Not damage: this windowfit cannot read the session's newer records, so it says so."""
    Session(store, "newer").append({"role": "user", "content": "good"})
    r.rpush(store._k("m", "newer"), b'{"_wf": 3, "m": {}}')
    with pytest.raises(StoreCorruptError, match="newer windowfit") as err:
        _ = Session(store, "newer").messages
    assert err.value.session_id == "newer" and "message 1" in str(err.value)


def test_corrupt_meta_fields(store: RedisStore, r: redis.Redis, redis_prefix: str) -> None:
    s = Session(store, "fields")
    s.save_state({"ok": True})
    r.hset(store._k("h", "fields"), "state_version", "many")
    with pytest.raises(StoreCorruptError, match="state_version"):
        s.load_state()
    with pytest.raises(StoreCorruptError, match="state_version"):
        s.save_state({"x": 1}, expected_version=1)
    r.hset(store._k("h", "fields"), mapping={"state_version": 1, "state": "{broken"})
    with pytest.raises(StoreCorruptError, match=r"'fields'.*state"):
        _ = s.state
    r.hset(store._k("h", "fields"), mapping={"state": encode_message({}), "meta": "[]"})
    with pytest.raises(StoreCorruptError, match="meta"):
        s.info()


def test_bare_messages_written_by_other_tools_load(
    store: RedisStore, r: redis.Redis, redis_prefix: str
) -> None:
    r.rpush(store._k("m", "bare"), b'{"role": "user", "content": "pushed by hand"}')
    assert Session(store, "bare").messages == [{"role": "user", "content": "pushed by hand"}]
    assert Session(store, "bare").append({"role": "assistant", "content": "ok"}) == 1


def test_finish_races_only_one_wins(store: RedisStore) -> None:
    parent = Session(store, "race")
    child = parent.child("t")
    results: list[Any] = []

    async def main() -> None:
        async def attempt(k: int) -> None:
            try:
                results.append(await Session(store, child.id).afinish(f"r{k}"))
            except ConflictError as exc:
                results.append(exc)

        await asyncio.gather(*(attempt(k) for k in range(5)))

    asyncio.run(main())
    assert sum(isinstance(x, dict) for x in results) == 1
    assert len(parent.messages) == 1


# ---------------------------------------------------------------------- Redis Cluster


def test_cluster_url_and_cluster_client(redis_cluster: RedisClusterServers) -> None:
    """The same class on a 3-master cluster, from its URL or from a RedisCluster client; a
    parent and its sub-agent in different slots (different masters) still work together."""
    from redis.cluster import RedisCluster

    prefix = f"wftest-{uuid.uuid4().hex[:8]}"
    by_url = RedisStore(redis_cluster.url, prefix=prefix)
    assert by_url.cluster
    client = RedisCluster.from_url(redis_cluster.url)
    by_client = RedisStore(client=client, prefix=prefix)
    assert by_client.cluster
    ids = [f"s{i}" for i in range(12)]
    # the sessions spread over the cluster's masters
    nodes = {client.get_node_from_key(by_url._k("m", sid)).name for sid in ids}
    assert len(nodes) == 3
    for sid in ids:
        Session(by_url, sid).append({"role": "user", "content": sid})
    parent = Session(by_client, "s0")
    child = parent.child("look it up", child_id="far-away")
    assert by_url._tag("s0") != by_url._tag("far-away")
    child.append({"role": "assistant", "content": "found it"})
    child.finish()
    assert parent.messages[-1]["content"] == "found it"
    assert by_url.info("far-away").status == "finished"  # type: ignore[union-attr]
    assert {i.id for i in by_client.list_sessions(limit=None)} == {*ids, "far-away"}
    assert by_client.cleanup(older_than=3600) == 0
    assert by_client.cleanup(older_than=1e-6) == 13
    by_url.close()
    client.close()


def test_cluster_processes_append_concurrently(redis_cluster: RedisClusterServers) -> None:
    check_concurrent_appends(
        {"kind": "redis", "url": redis_cluster.url, "prefix": f"wft-{uuid.uuid4().hex[:8]}"}
    )


def test_half_finished_sub_agent_is_completed_not_duplicated(store: RedisStore) -> None:
    """A finish cut short between its two steps (the parent got the answer, the child was not
    marked): the next finish completes the mark and raises ConflictError; the parent keeps
    exactly one answer."""
    parent = Session(store, "half")
    child = parent.child("t", child_id="half-child")
    op = store._op_finish_child("half-child", "first", {"role": "assistant", "content": "first"})
    request = next(op)  # read the child
    request = op.send(store._execute(store._client, store._scripts, request))
    assert request[1] == "hand_back"
    store._execute(store._client, store._scripts, request)  # then the client "dies"
    assert store.info("half-child").status == "open"  # type: ignore[union-attr]
    with pytest.raises(ConflictError):
        child.finish("second")
    info = store.info("half-child")
    assert info is not None and (info.status, info.result) == ("finished", "first")
    assert [m["content"] for m in parent.messages].count("first") == 1
    assert "second" not in [m["content"] for m in parent.messages]


# ---------------------------------------------------------------------- a server restart


def test_server_restart_mid_run_loses_and_duplicates_nothing() -> None:
    """Writers append while redis-server restarts (append-only file, fsync always): every
    append is kept exactly once, in each writer's order: the store resends a request whose
    connection died, and the operation id stops a resent write from applying twice."""
    import threading

    server = start_redis_server("--appendonly", "yes", "--appendfsync", "always")
    try:
        store = RedisStore(server.url, prefix="restart", socket_timeout=5)
        session = Session(store, "busy")
        done: dict[int, list[int]] = {0: [], 1: [], 2: []}
        failed: list[StoreError] = []
        halfway = threading.Event()

        def writer(w: int) -> None:
            for i in range(150):
                try:
                    session.append({"role": "user", "content": f"{w}-{i}", "w": w, "i": i})
                    done[w].append(i)
                except StoreError as exc:
                    failed.append(exc)
                    time.sleep(0.05)
                if i == 50:
                    halfway.set()

        threads = [threading.Thread(target=writer, args=(w,)) for w in done]
        for t in threads:
            t.start()
        assert halfway.wait(60)
        server.restart()
        for t in threads:
            t.join(timeout=120)
        seen = [(m["w"], m["i"]) for m in session.messages]
        assert len(seen) == len(set(seen)), "an append was applied twice"
        for w, ok in done.items():
            mine = [i for ww, i in seen if ww == w]
            assert set(ok) <= set(mine), f"writer {w} lost acknowledged messages"
            assert mine == sorted(mine)
            assert ok[-1] == 149, "the writer did not recover after the restart"
        # the store retries a lost request itself (the operation id makes that safe): the
        # restart costs no write
        assert failed == []
        assert len(seen) == 3 * 150
        store.close()
    finally:
        server.stop()


# ---------------------------------------------------------------------- unknown outcomes


def test_a_write_lost_after_it_ran_is_an_unknown_outcome_retried_once(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server applies the append, then every connection dies (a restart right after the
    script ran): the caller gets StoreOutcomeUnknownError with the op id, and retrying with
    it stores nothing twice."""
    from windowfit.store import StoreOutcomeUnknownError
    from windowfit.store import redis as redis_module

    monkeypatch.setattr(redis_module, "_BACKOFF", 0.0)
    s = Session(store, "lost-reply")
    s.append({"role": "user", "content": "first"})
    real = store._execute
    ran: list[Any] = []

    def applied_then_lost(client: Any, scripts: Any, request: Any) -> Any:
        if not ran:
            ran.append(real(client, scripts, request))  # applied on the server
        raise redis.exceptions.ConnectionError("Connection closed by server.")

    monkeypatch.setattr(store, "_execute", applied_then_lost)
    with pytest.raises(StoreOutcomeUnknownError) as info:
        s.append({"role": "assistant", "content": "maybe"})
    err = info.value
    assert isinstance(err, StoreError) and err.op_id and err.session_id == "lost-reply"
    assert err.op_id in str(err)
    monkeypatch.setattr(store, "_execute", real)
    assert s.append({"role": "assistant", "content": "maybe"}, op_id=err.op_id) == ran[0] == 1
    assert [m["content"] for m in Session(store, "lost-reply").messages] == ["first", "maybe"]
    # a read that loses its connection is not an unknown outcome: a plain StoreError
    monkeypatch.setattr(store, "_execute", applied_then_lost)
    with pytest.raises(StoreError) as read_error:
        store.read("lost-reply")
    assert not isinstance(read_error.value, StoreOutcomeUnknownError)


# ---------------------------------------------------------------------- memory limits


def fill_until_full(store: RedisStore, prefix: str) -> list[str]:
    """Sessions appended until the server refuses writes; the ids written."""
    written = []
    blob = "x" * 20_000
    for i in range(10_000):
        sid = f"{prefix}-{i}"
        try:
            store.append(sid, [{"role": "user", "content": f"{i} {blob}"}])
        except StoreError as exc:
            assert "OOM" in str(exc) or "maxmemory" in str(exc)
            return written
        written.append(sid)
    raise AssertionError("the server never reached its memory limit")


def test_reads_work_at_maxmemory_with_noeviction() -> None:
    """Writes are refused at the limit; reads are not (they never run as MULTI/EXEC, whose
    queued commands the server refuses at maxmemory)."""
    server = start_redis_server("--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
    try:
        store = RedisStore(server.url, prefix="full")
        Session(store, "kept").extend([{"role": "user", "content": "hello"}])
        Session(store, "kept").save_state({"summary": "s"})
        written = fill_until_full(store, "bulk")
        assert len(written) > 10
        s = Session(store, "kept")
        assert s.messages == [{"role": "user", "content": "hello"}]
        assert s.state == {"summary": "s"} and s.info() is not None
        assert store.read(written[-1])[1][0]["content"].startswith(written[-1].split("-")[1])
        assert len(store.list_sessions(limit=5)) == 5
        assert store.children("kept") == []
        store.close()
    finally:
        server.stop()


def test_evicted_keys_are_reported_never_an_empty_history(
    store: RedisStore, r: redis.Redis
) -> None:
    """What an evicting policy does to a session, key by key: a shortened or vanished history
    is a StoreCorruptError naming it, never a silently empty one."""
    s = Session(store, "evicted")
    s.extend([{"role": "user", "content": f"m{i}"} for i in range(3)])
    r.rpop(store._k("m", "evicted"))  # the list lost its tail
    with pytest.raises(StoreCorruptError, match="1 of 3 messages are missing") as info:
        store.read("evicted")
    assert info.value.session_id == "evicted" and "noeviction" in str(info.value)
    r.delete(store._k("m", "evicted"))  # the whole list
    with pytest.raises(StoreCorruptError, match="3 of 3 messages are missing"):
        store.read("evicted")
    r.delete(store._k("h", "evicted"))  # and its record: still listed in the index
    with pytest.raises(StoreCorruptError, match="record is gone"):
        store.read("evicted")
    # a deleted session, and one never written, read as absent
    Session(store, "gone").append({"role": "user", "content": "x"})
    assert store.delete("gone") and store.read("gone") == (None, [])
    assert store.read("never-written") == (None, [])


def test_an_expired_session_reads_empty(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(redis_url, prefix=redis_prefix, ttl=1)
    Session(store, "short").append({"role": "user", "content": "x"})
    deadline = time.monotonic() + 10
    while store.info("short") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert store.read("short") == (None, [])  # expired as asked: no error
    store.close()


def test_messages_evicted_between_two_writes_are_reported(
    store: RedisStore, r: redis.Redis
) -> None:
    """The server drops the message list (an evicting server does) and the session is written
    again: the list is re-created with the new message alone, and a read must say what is
    missing rather than return it as the whole history."""
    store.append("evicted", [{"role": "user", "content": "my passport number is X123"}])
    r.delete(store._k("m", "evicted"))
    store.append("evicted", [{"role": "assistant", "content": "noted"}])
    with pytest.raises(StoreCorruptError, match="1 of 2 messages are missing") as info:
        store.read("evicted")
    assert info.value.session_id == "evicted"


def test_a_session_whose_record_was_evicted_is_not_written_afresh(
    store: RedisStore, r: redis.Redis
) -> None:
    """Its record and messages gone while its bucket's index still lists it: a write would
    start a new, shorter history under the same id, so it is refused with the reason, and the
    read says the record is gone."""
    store.append("gone", [{"role": "user", "content": "my passport number is X123"}])
    r.delete(store._k("m", "gone"), store._k("h", "gone"))
    with pytest.raises(StoreCorruptError, match="evicted") as info:
        store.append("gone", [{"role": "assistant", "content": "noted"}])
    assert info.value.session_id == "gone"
    with pytest.raises(StoreCorruptError, match="record is gone"):
        store.read("gone")
    # deleted by its owner, it is a new session again
    store.delete("gone")
    store.append("gone", [{"role": "user", "content": "hello again"}])
    assert [m["content"] for m in store.read("gone")[1]] == ["hello again"]


def test_an_evicting_server_never_returns_a_silently_empty_session() -> None:
    server = start_redis_server("--maxmemory", "4mb", "--maxmemory-policy", "allkeys-random")
    try:
        store = RedisStore(server.url, prefix="evict", on_evicting_server="warn")
        blob = "y" * 20_000
        ids = [f"s{i}" for i in range(400)]
        outcomes = {"whole": 0, "reported": 0, "absent": 0}
        refused = set()
        for sid in ids:
            store.append(sid, [{"role": "user", "content": f"{sid} {blob}"}])
            try:
                store.append(sid, [{"role": "assistant", "content": "ok"}])
            except StoreCorruptError as exc:  # its record went between the two writes
                assert exc.session_id == sid
                refused.add(sid)
                outcomes["reported"] += 1
        for sid in ids:
            if sid in refused:
                continue
            try:
                epoch, messages = store.read(sid)
            except StoreCorruptError as exc:
                assert exc.session_id == sid
                outcomes["reported"] += 1
                continue
            if epoch is None and not messages:
                outcomes["absent"] += 1  # every key of it gone, index entry too
                continue
            assert [m["content"] for m in messages][1:] == ["ok"], messages
            outcomes["whole"] += 1
        assert outcomes["reported"] > 0 and outcomes["whole"] > 0
        store.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("policy", "limit", "expiring", "risky"),
    [
        ("allkeys-lru", 4 << 20, False, True),
        ("allkeys-random", 1, True, True),
        ("volatile-lru", 4 << 20, False, False),  # only keys with a TTL, and ours have none
        ("volatile-ttl", 4 << 20, True, True),
        ("noeviction", 4 << 20, True, False),
        ("allkeys-lru", 0, True, False),  # no memory limit: nothing is evicted
    ],
)
def test_eviction_risk_by_policy_limit_and_ttl(
    policy: str, limit: int, expiring: bool, risky: bool
) -> None:
    why = eviction_risk({"maxmemory_policy": policy, "maxmemory": limit}, expiring)
    assert (why is not None) == risky
    if risky:
        assert policy in why and str(limit) in why  # type: ignore[operator]


def test_a_server_that_may_evict_a_whole_session_is_refused_or_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session evicted whole leaves nothing to report, so a server whose memory limit and
    policy can evict the store's keys is refused on every call, before anything is written;
    ``on_evicting_server="warn"`` runs with one warning. ``volatile-*`` evicts only keys with
    a TTL: a store without ``ttl`` runs there."""
    server = start_redis_server("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
    try:
        r = redis.Redis.from_url(server.url)
        store = RedisStore(server.url, prefix="risky")
        for _ in range(2):
            with pytest.raises(StoreError, match="maxmemory-policy allkeys-lru") as info:
                store.append("s", [{"role": "user", "content": "my passport number is X123"}])
            assert not isinstance(info.value, StoreCorruptError)
            assert "on_evicting_server='warn'" in str(info.value)
        with pytest.raises(StoreError, match="allkeys-lru"):
            store.read("s")
        with pytest.raises(StoreError, match="allkeys-lru"):
            asyncio.run(store.aappend("s", [{"role": "user", "content": "x"}]))

        async def first_calls_at_once() -> list[Any]:
            fresh = RedisStore(server.url, prefix="risky")
            calls = [fresh.aappend(f"c{i}", [{"role": "user", "content": "x"}]) for i in range(8)]
            return await asyncio.gather(*calls, return_exceptions=True)

        outcomes = asyncio.run(first_calls_at_once())
        assert all(isinstance(o, StoreError) and "allkeys-lru" in str(o) for o in outcomes)
        assert r.keys("risky:*") == []
        store.close()
        with caplog.at_level(logging.WARNING, logger="windowfit.store.redis"):
            warned = RedisStore(server.url, prefix="risky", on_evicting_server="warn")
            for i in range(3):
                warned.append("s", [{"role": "user", "content": f"m{i}"}])
        assert [m["content"] for m in warned.read("s")[1]] == ["m0", "m1", "m2"]
        warnings = [rec for rec in caplog.records if "allkeys-lru" in rec.getMessage()]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
        warned.close()
        r.config_set("maxmemory-policy", "volatile-lru")
        without_ttl = RedisStore(server.url, prefix="risky")
        without_ttl.append("t", [{"role": "user", "content": "kept"}])
        assert without_ttl.read("t")[1][0]["content"] == "kept"
        with pytest.raises(StoreError, match="volatile-lru"):
            RedisStore(server.url, prefix="risky", ttl=3600).read("t")
        without_ttl.close()
        r.close()
    finally:
        server.stop()


def test_a_server_that_refuses_info_is_not_checked() -> None:
    """A managed server may rename ``INFO``: the store cannot learn the policy, and runs."""
    server = start_redis_server("--rename-command", "INFO", "")
    try:
        store = RedisStore(server.url, prefix="noinfo")
        store.append("s", [{"role": "user", "content": "hello"}])
        assert store.read("s")[1][0]["content"] == "hello"
        store.close()
    finally:
        server.stop()


def test_on_evicting_server_is_validated(redis_url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="on_evicting_server"):
        RedisStore(redis_url, on_evicting_server="ignore")  # type: ignore[arg-type]
