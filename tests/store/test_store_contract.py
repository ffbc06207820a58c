"""The store protocol, run identically against MemoryStore, SQLiteStore, a real Redis and a real
PostgreSQL (both started on loopback by the fixtures)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _redis import redis_cluster, redis_prefix, redis_server, redis_url
from _store_postgres import pg_schema, postgres_server
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit.errors import MessageTypeError
from windowfit.session import Session
from windowfit.store import (
    BaseStore,
    ConflictError,
    MemoryStore,
    SQLiteStore,
    StoreCorruptError,
    StoreError,
    open_store,
)
from windowfit.store.base import decode_message, encode_message

# imported so that pytest finds these fixtures in this module
REDIS_FIXTURES = (redis_cluster, redis_prefix, redis_server, redis_url, pg_schema, postgres_server)

KINDS = ["memory", "sqlite", "redis", "redis-cluster", "postgres"]


def make_store(kind: str, request: pytest.FixtureRequest, tmp_path: Any, **kw: Any) -> BaseStore:
    if kind == "memory":
        return MemoryStore(**kw)
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "sessions.db", **kw)
    if kind == "postgres":
        from windowfit.store.postgres import PostgresStore

        pg = request.getfixturevalue("postgres_server")
        return PostgresStore(pg.dsn, schema=request.getfixturevalue("pg_schema"), **kw)
    from windowfit.store import RedisStore

    if kind == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        return RedisStore(cluster.url, prefix=request.getfixturevalue("redis_prefix"), **kw)
    server = request.getfixturevalue("redis_server")
    return RedisStore(server.url, prefix=request.getfixturevalue("redis_prefix"), **kw)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[BaseStore]:
    s = make_store(request.param, request, tmp_path)
    yield s
    s.close()


def sid() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


# Every message shape windowfit supports (OpenAI chat, Responses items, Anthropic blocks).
SHAPES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": "Prefer tools."},
    {"role": "user", "content": "hi"},
    {"role": "user", "content": ""},
    {"role": "user", "name": "alice", "content": "named"},
    {"role": "assistant", "content": None},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this image?"},
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
            },
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": '{"q": "x"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "open", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "result 1"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "part"}]},
    {"role": "assistant", "content": "", "refusal": "no", "audio": None},
    {"role": "function", "name": "legacy", "content": "old style"},
    # Anthropic-style content blocks
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
            {"type": "text", "text": "Let me look."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris", "days": 3},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "sunny"}],
                "is_error": False,
            },
            {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}},
        ],
    },
    # OpenAI Responses API items (no role)
    {"type": "function_call", "call_id": "fc_1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "fc_1", "output": "ok"},
    # numbers, nesting, key order, unicode
    {
        "role": "user",
        "content": "x",
        "n": [0, -1, 1.5, 1e300, 2**62, True, None],
        "z": {"b": 1, "a": 2},
    },
    {"role": "user", "content": "héllo 世界 🚀 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u0000 \t\n\r \u2028 \ufeff 😀"},
]


# --------------------------------------------------------------------------- basics


def test_append_and_read_every_shape(store: BaseStore) -> None:
    s = Session(store, sid())
    for i, msg in enumerate(SHAPES):
        assert s.append(msg) == i
    assert s.messages == SHAPES
    # byte-identical: the JSON of what comes back equals the JSON of what went in
    again = Session(store, s.id).messages
    assert [json.dumps(m, ensure_ascii=False) for m in again] == [
        json.dumps(m, ensure_ascii=False) for m in SHAPES
    ]


def test_missing_session_reads_empty(store: BaseStore) -> None:
    s = Session(store, sid())
    assert s.messages == []
    assert s.state is None and s.state_version == 0
    assert s.info() is None and not s.exists()
    assert store.read(s.id) == (None, [])
    assert s.extend([]) == 0
    assert not s.exists()  # an empty extend creates nothing


def test_extend_is_contiguous_and_returns_first_index(store: BaseStore) -> None:
    s = Session(store, sid())
    assert s.extend([{"role": "user", "content": str(i)} for i in range(3)]) == 0
    assert s.append({"role": "assistant", "content": "3"}) == 3
    assert s.extend(iter([{"role": "user", "content": "4"}, {"role": "user", "content": "5"}])) == 4
    assert [m["content"] for m in s.messages] == [str(i) for i in range(6)]
    info = s.info()
    assert info is not None and info.length == 6 and info.parent_id is None
    assert info.created_at <= info.updated_at


def test_an_append_retried_with_its_op_id_is_applied_once(store: BaseStore) -> None:
    """What a caller does after StoreOutcomeUnknownError: the same append, the same op id."""
    s = Session(store, sid())
    s.append({"role": "user", "content": "first"})
    once = [{"role": "assistant", "content": "once"}, {"role": "user", "content": "twice?"}]
    assert store.append(s.id, once, op_id="op-retry-1") == 1
    assert store.append(s.id, once, op_id="op-retry-1") == 1  # the retry: nothing new
    assert s.extend([{"role": "assistant", "content": "next"}], op_id="op-retry-2") == 3
    assert s.extend([{"role": "assistant", "content": "next"}], op_id="op-retry-2") == 3
    assert [m["content"] for m in s.messages] == ["first", "once", "twice?", "next"]

    async def retried() -> int:
        return await store.aappend(s.id, once, op_id="op-retry-1")

    assert asyncio.run(retried()) == 1 and len(s.messages) == 4
    for bad in ("", "has space", "x" * 65, "brace{"):
        with pytest.raises(ValueError, match="op_id"):
            store.append(s.id, once, op_id=bad)
    with pytest.raises(TypeError, match="op_id"):
        store.append(s.id, once, op_id=5)  # type: ignore[arg-type]
    assert len(s.messages) == 4


def test_extend_of_more_than_lua_unpack_limit(store: BaseStore) -> None:
    s = Session(store, sid())
    msgs = [{"role": "user", "content": f"m{i}"} for i in range(2500)]
    assert s.extend(msgs) == 0
    assert s.messages == msgs


def test_incremental_load_sees_other_handles_writes(store: BaseStore) -> None:
    a = Session(store, "shared-" + sid())
    b = Session(store, a.id)
    a.append({"role": "user", "content": "1"})
    assert len(b.messages) == 1
    a.append({"role": "assistant", "content": "2"})
    b.append({"role": "user", "content": "3"})
    assert [m["content"] for m in a.messages] == ["1", "2", "3"]
    assert [m["content"] for m in b.messages] == ["1", "2", "3"]


def test_messages_returns_a_new_list(store: BaseStore) -> None:
    s = Session(store, sid())
    s.append({"role": "user", "content": "x"})
    got = s.messages
    got.append({"role": "user", "content": "not stored"})
    assert len(s.messages) == 1
    mine = s.load(copy=True)
    mine[0]["content"] = "changed"
    assert s.messages[0]["content"] == "x"


def test_reused_id_after_delete_is_reloaded(store: BaseStore) -> None:
    s = Session(store, sid())
    s.extend([{"role": "user", "content": "old"}] * 3)
    assert len(s.messages) == 3
    other = Session(store, s.id)
    assert other.delete()
    assert not other.delete()
    assert s.messages == []
    other.extend([{"role": "user", "content": "new"}] * 4)
    # the handle still caches 3 old messages: the epoch change makes it reread everything
    assert [m["content"] for m in s.messages] == ["new"] * 4


def test_rejects_non_json_messages(store: BaseStore) -> None:
    s = Session(store, sid())
    with pytest.raises(TypeError, match="JSON"):
        s.append({"role": "user", "content": object()})
    with pytest.raises(TypeError, match="mapping"):
        s.append("just a string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="keys"):
        s.append({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        s.append({"role": "user", "content": float("nan")})
    # a failed batch writes nothing
    with pytest.raises(TypeError):
        s.extend([{"role": "user", "content": "ok"}, {"role": "user", "content": {1, 2}}])
    assert s.messages == []


def test_sdk_message_objects_are_stored_as_plain_dicts(store: BaseStore) -> None:
    from openai.types.chat import ChatCompletionMessage

    msg = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    s = Session(store, sid())
    s.append(msg)
    assert s.messages == [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    ]


def test_invalid_session_ids(store: BaseStore) -> None:
    for bad, exc in [
        ("", ValueError),
        (None, TypeError),
        ("x" * 2000, ValueError),
        ("a\udc80", ValueError),
    ]:
        with pytest.raises(exc):
            Session(store, bad)  # type: ignore[arg-type]


def test_huge_message_round_trip(store: BaseStore) -> None:
    big = "".join(chr(0x20 + (i * 7919) % 0x5F) for i in range(3_000_000)) + "🚀" * 100_000
    s = Session(store, sid())
    s.append({"role": "tool", "tool_call_id": "c", "content": big})
    s.append({"role": "user", "content": "after"})
    got = Session(store, s.id).messages
    assert got[0]["content"] == big and got[1]["content"] == "after"


def test_lone_surrogates_round_trip(store: BaseStore) -> None:
    # not valid UTF-8: stored with JSON escapes, read back exactly
    msg = {"role": "user", "content": "broken \ud800 pair \udfff end"}
    s = Session(store, sid())
    s.append(msg)
    assert Session(store, s.id).messages == [msg]


# --------------------------------------------------------------------------- state


def test_state_versions_and_conflicts(store: BaseStore) -> None:
    a = Session(store, sid())
    b = Session(store, a.id)
    assert a.state is None
    assert a.save_state({"summary": "one", "upto": 3}) == 1
    assert b.state == {"summary": "one", "upto": 3}
    assert b.save_state({"summary": "two"}) == 2
    with pytest.raises(ConflictError) as err:
        a.save_state({"summary": "stale"})  # a last saw version 1
    assert err.value.current_version == 2 and err.value.session_id == a.id
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, StoreError)
    assert a.state == {"summary": "two"}
    assert a.save_state({"summary": "three"}) == 3
    assert a.save_state(None) == 4
    assert a.state is None and a.state_version == 4
    with pytest.raises(ConflictError):
        store.save_state(a.id, {"x": 1}, expected_version=99)


def test_blind_state_write_over_existing_state_conflicts(store: BaseStore) -> None:
    a = Session(store, sid())
    a.save_state({"v": 1})
    fresh = Session(store, a.id)
    with pytest.raises(ConflictError):
        fresh.save_state({"v": "blind"})
    assert fresh.state == {"v": 1}


def test_state_must_be_json_object(store: BaseStore) -> None:
    s = Session(store, sid())
    with pytest.raises(TypeError):
        s.save_state(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        s.save_state({"x": object()})
    assert s.state_version == 0


def test_concurrent_state_saves_one_winner_per_version(store: BaseStore) -> None:
    s0 = Session(store, sid())
    s0.save_state({"n": 0})
    wins: list[int] = []
    conflicts: list[int] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for _ in range(20):
            h = Session(store, s0.id)
            state, version = h.load_state()
            try:
                h.save_state({"n": state["n"] + 1, "by": k}, version)
                with lock:
                    wins.append(version)
            except ConflictError:
                with lock:
                    conflicts.append(version)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state, version = s0.load_state()
    # every successful save incremented exactly once: no lost update, no double write
    assert state["n"] == len(wins) == version - 1
    assert sorted(wins) == list(range(1, version))


# --------------------------------------------------------------------------- sub-agents


def test_child_sessions_are_isolated_and_listed(store: BaseStore) -> None:
    parent = Session(store, sid())
    parent.append({"role": "user", "content": "convert the pdf"})
    a = parent.child("read the pdf skill and convert", system="You are a sub-agent.")
    b = parent.child("second task", meta={"budget": 2000})
    assert a.id.startswith("subagent-") and len(a.id) == len("subagent-") + 8
    assert a.id != b.id
    assert a.parent_id == parent.id and Session(store, a.id).parent_id == parent.id
    assert parent.parent_id is None
    assert a.messages == [
        {"role": "system", "content": "You are a sub-agent."},
        {"role": "user", "content": "read the pdf skill and convert"},
    ]
    for i in range(17):  # the sub-agent's work stays in the sub-agent
        a.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 100})
    assert len(parent.messages) == 1
    assert [c.id for c in parent.children()] == [a.id, b.id]
    info = b.info()
    assert info is not None and info.task == "second task" and info.meta == {"budget": 2000}
    assert info.status == "open" and info.parent_id == parent.id
    assert a.children() == [] and parent.parent() is None and a.parent() == parent
    # the child has its own state
    a.save_state({"summary": "child"})
    assert parent.state is None


def test_finish_hands_one_message_to_the_parent(store: BaseStore) -> None:
    parent = Session(store, sid())
    parent.append({"role": "user", "content": "do it"})
    call = {
        "id": "call_sub",
        "type": "function",
        "function": {"name": "call_subagent", "arguments": "{}"},
    }
    parent.append({"role": "assistant", "content": None, "tool_calls": [call]})
    child = parent.child("the task", tool_call_id="call_sub")
    child.extend([{"role": "assistant", "content": f"step {i}"} for i in range(5)])
    child.append({"role": "assistant", "content": "converted, output in outputs/"})
    msg = child.finish()
    assert msg == {
        "role": "tool",
        "tool_call_id": "call_sub",
        "content": "converted, output in outputs/",
    }
    assert parent.messages[-1] == msg and len(parent.messages) == 3
    info = child.info()
    assert info is not None and info.status == "finished"
    assert info.result == "converted, output in outputs/"
    with pytest.raises(ConflictError):
        child.finish("again")
    assert len(parent.messages) == 3


def test_finish_without_tool_call_and_with_values(store: BaseStore) -> None:
    parent = Session(store, sid())
    c1 = parent.child("t1")
    assert c1.finish({"ok": True, "files": ["a.png"]}) == {
        "role": "assistant",
        "name": c1.id,
        "content": '{"ok": true, "files": ["a.png"]}',
    }
    c2 = parent.child("t2")
    assert c2.finish("plain", role="user") == {"role": "user", "content": "plain"}
    c3 = parent.child("t3")
    with pytest.raises(ValueError, match="final assistant"):
        c3.finish()
    c3.append(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        }
    )
    assert c3.finish()["content"] == "a\nb"  # text parts join with newlines (messages.content_text)
    with pytest.raises(ValueError, match="tool call"):
        parent.child("t4").finish("x", role="tool")
    with pytest.raises(ValueError, match="not a sub-agent"):
        parent.finish("x")
    assert [m["content"] for m in parent.messages] == [
        '{"ok": true, "files": ["a.png"]}',
        "plain",
        "a\nb",
    ]


def test_protocol_errors_read_alike_in_every_store(store: BaseStore) -> None:
    """The stores raise the protocol's errors from one place (store/_common.py): called on the
    store itself, not through a Session (which checks some first), each store gives the same
    class, message and fields, sync and async."""
    s = sid()
    assert store.save_state(s, {"v": 1}, 0) == 1
    stale = (
        f"session {s!r}: state version is 1, not 0: another writer saved first; reload and retry"
    )
    with pytest.raises(ConflictError) as err:
        store.save_state(s, {"v": 2}, 0)
    assert str(err.value) == stale
    assert err.value.session_id == s and err.value.current_version == 1
    with pytest.raises(ConflictError) as aerr:
        asyncio.run(store.asave_state(s, {"v": 2}, 0))
    assert str(aerr.value) == stale and aerr.value.current_version == 1
    reply = {"role": "tool", "tool_call_id": "c", "content": "done"}
    with pytest.raises(ValueError) as orphan:
        store.finish_child(s, "done", reply)
    assert str(orphan.value) == f"session {s!r} is not a sub-agent session"
    child = sid()
    assert store.create_child(s, child, task="t", messages=[{"role": "user", "content": "go"}])
    assert store.finish_child(child, "done", reply) == 0
    with pytest.raises(ConflictError) as again:
        store.finish_child(child, "again", reply)
    assert str(again.value) == f"sub-agent {child!r} is already finished"
    assert again.value.session_id == child
    # create_child checks both ids before it encodes a message, and writes nothing on error
    fresh = sid()
    with pytest.raises(TypeError, match="session id must be str"):
        store.create_child(1, fresh, task=None, messages=[object()])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        store.create_child(s, "", task=None, messages=[object()])
    with pytest.raises(MessageTypeError):
        store.create_child(s, fresh, task=None, messages=[object()])
    with pytest.raises(MessageTypeError):
        store.create_child(s, fresh, task=None, messages=[], meta={"x": object()})
    assert store.info(fresh) is None
    assert [c.id for c in store.children(s)] == [child]


def test_child_with_explicit_id(store: BaseStore) -> None:
    parent = Session(store, sid())
    c = parent.child("task", child_id="custom-child")
    assert c.id == "custom-child"
    with pytest.raises(ValueError, match="exists"):
        parent.child("task", child_id="custom-child")
    with pytest.raises(ValueError):
        parent.child("")


def test_nested_children(store: BaseStore) -> None:
    root = Session(store, sid())
    c = root.child("level 1")
    g = c.child("level 2")
    g.finish("deep result")
    assert c.messages[-1]["content"] == "deep result"
    assert root.messages == []
    assert [x.id for x in c.children()] == [g.id]
    c.finish("level 1 result")
    assert root.messages == [{"role": "assistant", "name": c.id, "content": "level 1 result"}]


# --------------------------------------------------------------------------- listing, cleanup


def test_list_sessions_most_recent_first(store: BaseStore) -> None:
    ids = [sid() for _ in range(3)]
    for i in ids:
        Session(store, i).append({"role": "user", "content": i})
        time.sleep(0.01)
    listed = [i.id for i in store.list_sessions(limit=None)]
    assert listed[:3] == ids[::-1]
    assert len(store.list_sessions(limit=2)) == 2
    assert store.list_sessions(limit=0) == []


def test_cleanup_removes_idle_sessions(store: BaseStore) -> None:
    old, new = Session(store, sid()), Session(store, sid())
    old.append({"role": "user", "content": "old"})
    time.sleep(1.1)
    new.append({"role": "user", "content": "new"})
    assert store.cleanup(older_than=1.0) == 1
    assert old.messages == [] and not old.exists()
    assert new.messages == [{"role": "user", "content": "new"}]
    with pytest.raises(ValueError, match="older_than"):
        store.cleanup()


def test_delete_child_unlists_it(store: BaseStore) -> None:
    parent = Session(store, sid())
    a, b = parent.child("a"), parent.child("b")
    assert a.delete()
    assert [c.id for c in parent.children()] == [b.id]


# --------------------------------------------------------------------------- async twins


def test_async_twins(store: BaseStore) -> None:
    async def main() -> None:
        s = Session(store, sid())
        assert await s.aappend({"role": "user", "content": "a"}) == 0
        assert (
            await s.aextend(
                [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
            )
            == 1
        )
        assert [m["content"] for m in await s.aload()] == ["a", "b", "c"]
        assert await s.aload_state() == (None, 0)
        assert await s.asave_state({"k": 1}) == 1
        with pytest.raises(ConflictError):
            await s.asave_state({"k": 2}, expected_version=0)
        child = await s.achild("sub", tool_call_id="t1")
        await child.aappend({"role": "assistant", "content": "done"})
        assert await child.afinish() == {"role": "tool", "tool_call_id": "t1", "content": "done"}
        assert [c.id for c in await s.achildren()] == [child.id]
        info = await s.ainfo()
        assert info is not None and info.length == 4
        assert [i.id for i in await store.alist_sessions(limit=None)]
        assert await store.adelete(child.id)
        # concurrent appends from many tasks are all kept
        await asyncio.gather(*(s.aappend({"role": "user", "content": f"t{i}"}) for i in range(50)))
        assert len(await s.aload()) == 54
        assert await store.acleanup(older_than=3600) == 0

    asyncio.run(main())
    asyncio.run(main())  # a second event loop works too (Redis async clients are per loop)


# --------------------------------------------------------------------------- property tests


json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": json_values},
    optional={"name": st.text(min_size=1, max_size=10), "extra": json_values},
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(messages, min_size=1, max_size=5))
def test_property_round_trip(store: BaseStore, batch: list[dict[str, Any]]) -> None:
    # any JSON at all: through the store itself (Session.extend applies the message rules)
    s = Session(store, sid())
    store.append(s.id, batch)
    got = Session(store, s.id).messages
    assert got == batch
    assert json.dumps(got, ensure_ascii=False) == json.dumps(batch, ensure_ascii=False)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ident=st.text(min_size=1, max_size=120))
def test_property_odd_session_ids(store: BaseStore, ident: str) -> None:
    ident = ident + "-" + uuid.uuid4().hex[:6]  # unique per example, odd characters kept
    s = Session(store, ident)
    s.append({"role": "user", "content": ident})
    s.save_state({"id": ident})
    twin = Session(store, ident)
    assert twin.messages == [{"role": "user", "content": ident}]
    assert twin.state == {"id": ident}
    info = store.info(ident)
    assert info is not None and info.id == ident and info.length == 1
    c = twin.child("t")
    assert [x.id for x in twin.children()] == [c.id] and c.parent_id == ident


# --------------------------------------------------------------------------- codec


def test_codec_versions_and_legacy_records() -> None:
    raw = encode_message({"role": "user", "content": "x"}, now=1.5)
    assert json.loads(raw) == {"_wf": 1, "t": 1.5, "m": {"role": "user", "content": "x"}}
    assert decode_message(raw, "s") == {"role": "user", "content": "x"}
    # a bare message (no envelope), as bytes: read as-is
    assert decode_message(b'{"role": "user", "content": "bare"}', "s") == {
        "role": "user",
        "content": "bare",
    }
    with pytest.raises(StoreCorruptError, match="newer windowfit") as err:
        decode_message('{"_wf": 99, "m": {}}', "sess-1", "message 3")
    assert err.value.session_id == "sess-1" and "sess-1" in str(err.value)
    for bad in [
        "{not json",
        "[1, 2]",
        '"str"',
        b"\xff\xfe",
        '{"_wf": 1, "m": 5}',
        '{"_wf": "x"}',
        42,
    ]:
        with pytest.raises(StoreCorruptError) as err:
            decode_message(bad, "sess-2", "message 0")
        assert "sess-2" in str(err.value)


def test_open_store(tmp_path: Any) -> None:
    assert isinstance(open_store("memory:"), MemoryStore)
    s = open_store(str(tmp_path / "x.db"))
    assert isinstance(s, SQLiteStore)
    s.close()
    with pytest.raises(StoreError, match="closed") as err:
        Session(s, "a").append({"role": "user", "content": "x"})
    assert not isinstance(err.value, StoreCorruptError)


def test_session_handles_compare_by_store_and_id() -> None:
    m = MemoryStore()
    assert Session(m, "a") == Session(m, "a") and Session(m, "a") != Session(m, "b")
    assert Session(m, "a") != Session(MemoryStore(), "a")
    assert len({Session(m, "a"), Session(m, "a")}) == 1
    assert isinstance(Session(m, "a"), Session) and "a" in repr(Session(m, "a"))


def test_deeply_nested_payload_is_a_clear_type_error(store: BaseStore) -> None:
    """Regression: a message nested 50,000 levels deep raised RecursionError out of the JSON
    encoder; it is a MessageTypeError (a WindowfitError and a TypeError) like any other payload
    the store cannot keep, on every backend, and nothing is written."""
    from windowfit.errors import MessageTypeError, WindowfitError

    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50_000):
        node["x"] = {}
        node = node["x"]
    s = Session(store, sid())
    for write in (
        lambda: s.append({"role": "user", "content": "x", "extra": deep}),
        lambda: s.save_state({"summary": deep}),
        lambda: s.child("t", meta={"deep": deep}),
    ):
        with pytest.raises(MessageTypeError, match="nested too deeply") as info:
            write()
        assert isinstance(info.value, WindowfitError) and isinstance(info.value, TypeError)
    assert s.messages == [] and s.state is None


def test_store_errors_are_windowfit_errors() -> None:
    from windowfit.errors import WindowfitError

    for cls in (StoreError, ConflictError, StoreCorruptError):
        assert issubclass(cls, WindowfitError) and issubclass(cls, RuntimeError)


def test_the_store_package_never_imports_the_session_module() -> None:
    """Regression: store/base.py imported windowfit.session, which imports store/base.py (an
    import cycle). Sessions are made from a store (``Session(store, id)``); the store does not
    know them, not even for type checkers."""
    import ast
    from pathlib import Path

    import windowfit.store

    package = Path(windowfit.store.__file__).parent
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [
            n.module or "" if isinstance(n, ast.ImportFrom) else a.name
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        ]
        assert not any(n.startswith("windowfit.session") for n in names), (
            f"{path.name} imports a session module"
        )
    assert type(Session(MemoryStore(), "x")) is Session


@pytest.mark.parametrize(
    "first",
    [
        "windowfit.session",
        "windowfit.session.state",
        "windowfit.session.summaries",
        "windowfit.session.children",
        "windowfit.store.base",
        "windowfit.store.sqlite",
        "windowfit.usage",
    ],
)
def test_any_import_order_gives_typed_working_session_handles(first: str) -> None:
    """Each of these modules imported first, in a fresh interpreter: no import cycle, and
    ``Session(store, id)`` returns a working ``windowfit.Session``."""
    import subprocess
    import sys

    code = (
        f"import importlib; importlib.import_module({first!r}); "
        "from windowfit.store.memory import MemoryStore; from windowfit.session import Session; "
        "s = Session(MemoryStore(), 'x'); assert type(s) is Session, type(s); "
        "s.append({'role': 'user', 'content': 'hi'}); assert s.messages[0]['content'] == 'hi'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_store_session_is_typed_for_type_checkers(tmp_path: Any) -> None:
    """mypy sees ``wf.Session(store, ...)`` as a ``Session`` (not ``Any``), so a
    misspelt method is an error users get before running."""
    api = pytest.importorskip("mypy.api")
    user = tmp_path / "user.py"
    user.write_text(
        "import windowfit as wf\n"
        "s = wf.Session(wf.SQLiteStore(':memory:'), 'x')\n"
        "reveal_type(s)\n"
        "s.apend({'role': 'user', 'content': 'hi'})\n",
        encoding="utf-8",
    )
    out, err, _ = api.run([str(user)])
    assert 'Revealed type is "windowfit.session.session.Session"' in out, out + err
    assert '"Session" has no attribute "apend"' in out, out + err
