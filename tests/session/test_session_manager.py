"""Session.prepare with the real ContextManager: the summary state survives the stores exactly.

Driving the manager through a stored session (history appended turn by turn, state saved in the
store) must give the same prompts as driving it with the state kept in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _redis import redis_prefix, redis_server, redis_url
from windowfit.session import Session
from windowfit.store import BaseStore, MemoryStore, SQLiteStore

# imported so that pytest finds these fixtures in this module
REDIS_FIXTURES = (redis_prefix, redis_server, redis_url)

TURNS = 120


@pytest.fixture(scope="module")
def simulated() -> Any:
    from windowfit.cli.showcase import simulate_session

    return simulate_session(TURNS, seed=11)


def manager() -> Any:
    from windowfit.context import ContextManager
    from windowfit.summarize import ExtractiveSummarizer

    cm = ContextManager(
        model="gpt-4o",
        context_window=8000,
        output_reserve=1000,
        preference="quality",
        # tool outputs are not what this test is about: never cut them
        tool_output_max_tokens=10**9,
    )
    cm.summarizer = ExtractiveSummarizer(counter=cm.counter)
    return cm


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    if request.param == "memory":
        s: BaseStore = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "cm.db", synchronous="NORMAL")
    else:
        from windowfit.store import RedisStore

        server = request.getfixturevalue("redis_server")
        s = RedisStore(server.url, prefix=request.getfixturevalue("redis_prefix"))
    yield s
    s.close()


def timeless(state: Any) -> Any:
    """The state without its wall-clock timestamps (they differ between two runs)."""
    return {k: v for k, v in state.items() if not k.endswith("_at")}


def reference(simulated: Any) -> list[Any]:
    cm, state, out = manager(), None, []
    for _, history in simulated.prefixes():
        p = cm.prepare(history, state)
        out.append(p)
        state = p.state
    return out


def test_stored_session_matches_in_memory_state(store: BaseStore, simulated: Any) -> None:
    expected = reference(simulated)
    assert any(p.state.get("summary") for p in expected), "the window never summarized"
    cm = manager()
    session = Session(store, "agent-run")
    written = 0
    versions = []
    for i, (_, history) in enumerate(simulated.prefixes()):
        session.extend(history[written:])
        written = len(history)
        p = session.prepare(cm)
        assert p.messages == expected[i].messages
        assert timeless(p.state) == timeless(expected[i].state)
        versions.append(session.state_version)
    assert session.messages == simulated.messages[:written]  # the history is never rewritten
    assert session.state == p.state  # stored exactly as returned
    assert versions == sorted(versions) and versions[-1] >= 1


def test_async_stored_session(store: BaseStore, simulated: Any) -> None:
    expected = reference(simulated)[:40]

    async def drive() -> list[Any]:
        cm = manager()
        session = Session(store, "async-run")
        written, out = 0, []
        for i, (_, history) in enumerate(simulated.prefixes()):
            if i >= len(expected):
                break
            await session.aextend(history[written:])
            written = len(history)
            out.append(await session.aprepare(cm))
        return out

    got = asyncio.run(drive())
    assert [p.messages for p in got] == [p.messages for p in expected]
    assert [timeless(p.state) for p in got] == [timeless(p.state) for p in expected]
