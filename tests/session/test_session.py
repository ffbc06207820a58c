"""Session.prepare / aprepare against a ContextManager stand-in, and handle-level behaviour."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from windowfit.session import Session
from windowfit.store import BaseStore, MemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> BaseStore:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")


class FakeCM:
    """Keeps the last ``keep`` messages and records how far it "summarized" in the state."""

    def __init__(self, keep: int = 2, before: Callable[[int], None] | None = None) -> None:
        self.keep = keep
        self.calls: list[dict[str, Any]] = []
        self.before = before  # runs inside prepare: lets a test race another writer

    def _prepare(self, messages: list[dict[str, Any]], state: Any, tools: Any, **kw: Any) -> Any:
        self.calls.append({"n": len(messages), "state": state, "tools": tools, **kw})
        if self.before is not None:
            self.before(len(self.calls))
        upto = max(0, len(messages) - self.keep)
        new_state = None if upto == 0 else {"summarized_until": upto, "summary": f"{upto} folded"}
        if state is not None and new_state is None:
            new_state = state
        return SimpleNamespace(
            messages=messages[upto:], stats={"kept": len(messages) - upto}, state=new_state
        )

    def prepare(
        self, messages: list[dict[str, Any]], state: Any = None, tools: Any = None, **kw: Any
    ) -> Any:
        return self._prepare(messages, state, tools, **kw)

    async def aprepare(
        self, messages: list[dict[str, Any]], state: Any = None, tools: Any = None, **kw: Any
    ) -> Any:
        await asyncio.sleep(0)
        return self._prepare(messages, state, tools, **kw)


def fill(s: Session, n: int) -> None:
    s.extend(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]
    )


def test_prepare_passes_history_and_saves_state(store: BaseStore) -> None:
    s = Session(store, "p")
    fill(s, 5)
    cm = FakeCM()
    tools = [{"type": "function", "function": {"name": "f"}}]
    p = s.prepare(cm, tools=tools, extra="x")
    assert [m["content"] for m in p.messages] == ["m3", "m4"]
    assert cm.calls == [{"n": 5, "state": None, "tools": tools, "extra": "x"}]
    assert s.load_state() == ({"summarized_until": 3, "summary": "3 folded"}, 1)
    # the full history is untouched: the summary never overwrites messages
    assert len(s.messages) == 5
    # next turn: the stored state goes back into the manager
    s.append({"role": "user", "content": "m5"})
    s.prepare(cm)
    assert cm.calls[-1]["state"] == {"summarized_until": 3, "summary": "3 folded"}
    assert s.load_state() == ({"summarized_until": 4, "summary": "4 folded"}, 2)


def test_prepare_without_state_change_writes_nothing(store: BaseStore) -> None:
    s = Session(store, "same")
    fill(s, 2)
    s.prepare(FakeCM(keep=5))
    assert s.load_state() == (None, 0)
    fill(s, 4)
    s.prepare(FakeCM(keep=2))
    assert s.state_version == 1
    s.prepare(FakeCM(keep=2))  # same state again: no new version
    assert s.state_version == 1


def test_prepare_none_state_never_erases_a_summary(store: BaseStore) -> None:
    s = Session(store, "keep")
    fill(s, 3)
    s.save_state({"summary": "precious"})
    none_cm = SimpleNamespace(
        prepare=lambda messages, state=None, tools=None: SimpleNamespace(
            messages=messages, stats={}, state=None
        )
    )
    s.prepare(none_cm)
    assert s.load_state() == ({"summary": "precious"}, 1)


def test_prepare_retries_after_a_concurrent_save(store: BaseStore) -> None:
    s = Session(store, "race")
    fill(s, 6)
    rival = Session(store, "race")

    def race(call: int) -> None:
        if call == 1:  # another worker summarizes while we are preparing
            rival.append({"role": "user", "content": "late"})
            rival.save_state({"summarized_until": 1, "summary": "rival"}, 0)

    cm = FakeCM(before=race)
    p = s.prepare(cm)
    assert len(cm.calls) == 2
    assert cm.calls[1]["state"] == {"summarized_until": 1, "summary": "rival"}
    assert cm.calls[1]["n"] == 7  # the retry sees the rival's message too
    assert [m["content"] for m in p.messages] == ["m5", "late"]
    assert s.load_state() == ({"summarized_until": 5, "summary": "5 folded"}, 2)


def test_prepare_under_contention_returns_the_prompt_unsaved(store: BaseStore) -> None:
    """Every attempt loses the race to save its state: the last prompt (valid whoever saved
    the state) is returned, not thrown away, and its stats say the state was not saved."""
    s = Session(store, "hot")
    fill(s, 6)
    rival = Session(store, "hot")

    def always(call: int) -> None:
        _, version = rival.load_state()
        rival.save_state({"summarized_until": 1, "summary": f"rival {call}"}, version)

    cm = FakeCM(before=always)
    p = s.prepare(cm, retries=1)
    assert len(cm.calls) == 2
    assert [m["content"] for m in p.messages] == ["m4", "m5"]
    assert p.stats["state_saved"] is False
    assert (
        "conflict" in p.stats["state_save_error"].lower()
        or "version" in p.stats["state_save_error"]
    )
    assert p.state == {"summarized_until": 4, "summary": "4 folded"}
    assert s.state == {"summarized_until": 1, "summary": "rival 2"}  # the rival's stays


def test_prepare_says_whether_it_saved(store: BaseStore) -> None:
    s = Session(store, "said")
    fill(s, 6)
    assert s.prepare(FakeCM(keep=2)).stats["state_saved"] is True
    assert s.prepare(FakeCM(keep=2)).stats["state_saved"] is False  # same state: nothing new


def test_aprepare(store: BaseStore) -> None:
    async def main() -> None:
        s = Session(store, "async")
        await s.aextend([{"role": "user", "content": f"m{i}"} for i in range(4)])
        rival = Session(store, "async")
        raced = []

        def race(call: int) -> None:
            if call == 1:
                raced.append(True)
                rival.save_state({"summarized_until": 1, "summary": "rival"}, 0)

        cm = FakeCM(before=race)
        p = await s.aprepare(cm, tools=["t"])
        assert [m["content"] for m in p.messages] == ["m2", "m3"]
        assert raced and len(cm.calls) == 2 and cm.calls[0]["tools"] == ["t"]
        assert await s.aload_state() == ({"summarized_until": 2, "summary": "2 folded"}, 2)

    asyncio.run(main())


def test_concurrent_readers_of_one_handle_see_prefixes(store: BaseStore) -> None:
    writer = Session(store, "readers")
    shared = Session(store, "readers")
    seen: list[list[str]] = []
    lock = threading.Lock()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            got = [m["content"] for m in shared.messages]
            with lock:
                seen.append(got)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for i in range(100):
        writer.append({"role": "user", "content": str(i)})
    done.set()
    for t in threads:
        t.join()
    final = [str(i) for i in range(100)]
    assert [m["content"] for m in shared.messages] == final
    for got in seen:
        assert got == final[: len(got)]


def test_parent_id_is_looked_up_lazily(store: BaseStore) -> None:
    parent = Session(store, "root")
    child = parent.child("task")
    assert Session(store, child.id).parent_id == "root"
    ghost = Session(store, "not-yet")
    assert ghost.parent_id is None and ghost.parent() is None
