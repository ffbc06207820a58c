"""Session store speed: append and load of a 10,000-message session (SQLite and Redis).

    PYTHONPATH=python pytest benches/suites/bench_store.py --benchmark-columns=min,mean,max,rounds

Each append is its own transaction (one message per call, as an agent loop writes them).
``extra_info`` of each result holds the time per append / per message loaded. SQLite runs on a
file in a temporary directory (the disk's fsync speed matters for synchronous=FULL); Redis on a
redis-server started on loopback (tests/_redis.py).
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from _redis import redis_prefix, redis_server, redis_url
from windowfit.session import Session
from windowfit.store import BaseStore, SQLiteStore

# imported so that pytest finds these fixtures in this module
REDIS_FIXTURES = (redis_prefix, redis_server, redis_url)

N = 10_000
# synchronous=FULL waits for the disk on each commit: time its last 1,000 appends only
FULL_APPENDS = 1_000


def message(i: int) -> dict[str, Any]:
    if i % 5 == 3:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": "search",
                        "arguments": f'{{"query": "item {i}", "limit": 10}}',
                    },
                }
            ],
        }
    if i % 5 == 4:
        return {
            "role": "tool",
            "tool_call_id": f"call_{i - 1}",
            "content": f"result {i}: " + "data " * 60,
        }
    role = "user" if i % 5 in (0, 2) else "assistant"
    return {"role": role, "content": f"message {i}: " + "lorem ipsum dolor sit amet " * 10}


MESSAGES = [message(i) for i in range(N)]


@pytest.fixture(params=["sqlite-NORMAL", "sqlite-FULL", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, BaseStore]]:
    kind = request.param
    if kind.startswith("sqlite"):
        s: BaseStore = SQLiteStore(tmp_path / "bench.db", synchronous=kind.split("-")[1])
    else:
        from windowfit.store import RedisStore

        server = request.getfixturevalue("redis_server")
        s = RedisStore(server.url, prefix=request.getfixturevalue("redis_prefix"))
    yield kind, s
    s.close()


def test_append_10k(benchmark: Any, store: tuple[str, BaseStore]) -> None:
    kind, s = store
    timed = FULL_APPENDS if kind == "sqlite-FULL" else N

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        session = Session(s, f"bench-{uuid.uuid4().hex}")
        if timed < N:
            session.extend(MESSAGES[: N - timed])
        return (session,), {}

    def run(session: Any) -> None:
        for msg in MESSAGES[N - timed :]:
            session.append(msg)

    benchmark.pedantic(run, setup=setup, rounds=3, iterations=1)
    per = benchmark.stats.stats.mean / timed
    benchmark.extra_info.update({"appends": timed, "us_per_append": round(per * 1e6, 1)})


def test_load_10k(benchmark: Any, store: tuple[str, BaseStore]) -> None:
    _, s = store
    session_id = f"bench-load-{uuid.uuid4().hex}"
    Session(s, session_id).extend(MESSAGES)

    def run() -> list[dict[str, Any]]:
        return Session(s, session_id).messages  # a fresh handle: reads and decodes all 10,000

    got = benchmark.pedantic(run, rounds=10, iterations=1, warmup_rounds=1)
    assert got == MESSAGES
    benchmark.extra_info.update(
        {
            "messages": N,
            "ms_per_load": round(benchmark.stats.stats.mean * 1e3, 2),
            "us_per_message": round(benchmark.stats.stats.mean / N * 1e6, 2),
        }
    )


def test_incremental_load(benchmark: Any, store: tuple[str, BaseStore]) -> None:
    """A worker's handle that has read the 10,000 already, reading after one more append."""
    kind, s = store
    session = Session(s, f"bench-incr-{uuid.uuid4().hex}")
    session.extend(MESSAGES)
    session.load()
    counter = iter(range(10**9))

    def run() -> int:
        session.append({"role": "user", "content": f"turn {next(counter)}"})
        return len(session.messages)

    benchmark.pedantic(run, rounds=50 if kind == "sqlite-FULL" else 200, iterations=1)
    benchmark.extra_info["ms_per_append_and_load"] = round(benchmark.stats.stats.mean * 1e3, 3)


if __name__ == "__main__":  # quick numbers without pytest-benchmark
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        st = SQLiteStore(Path(d) / "q.db", synchronous="NORMAL")
        sess = Session(st, "q")
        t0 = time.perf_counter()
        for m in MESSAGES:
            sess.append(m)
        t1 = time.perf_counter()
        _ = Session(st, "q").messages
        t2 = time.perf_counter()
        print(f"sqlite NORMAL: {(t1 - t0) / N * 1e6:.0f} us/append, load {(t2 - t1) * 1e3:.0f} ms")
