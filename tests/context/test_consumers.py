"""Several consumers over one session: an agent with a large budget and a router with a small
one keep separate states, never reset each other, and the router reuses the agent's summary
when it fits instead of summarizing again. Run on the memory and SQLite stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _manager_checks import check_prompt, conversation
from _summarizers import Recorder
from windowfit.context import ContextManager


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        return wf.MemoryStore()
    return wf.SQLiteStore(str(tmp_path / "s.db"))


def _managers(
    agent_window: int = 20_000,
) -> tuple[ContextManager, Recorder, ContextManager, Recorder]:
    a_rec, r_rec = Recorder("AGENT"), Recorder("ROUTER")
    agent = ContextManager(
        model="gpt-4o",
        context_window=agent_window,
        output_reserve=1000,
        preference="quality",
        summarizer=a_rec,
    )
    router = ContextManager(
        model="gpt-4o",
        context_window=8000,
        output_reserve=500,
        preference="quality",
        summarizer=r_rec,
        consumer="router",
    )
    return agent, a_rec, router, r_rec


def test_consumers_keep_separate_states_and_never_reset_each_other(store: Any) -> None:
    agent, a_rec, router, r_rec = _managers()
    session = wf.Session(store, "s1")
    history = conversation(60, words=200, tools_every=4)
    agent_until: list[int] = []
    router_until: list[int] = []
    for k in range(0, len(history), 12):
        session.extend(history[k : k + 12])
        pa = session.prepare(agent)
        pr = session.prepare(router)
        check_prompt(agent, session.messages, pa)
        check_prompt(router, session.messages, pr)
        assert pa.stats["state_reset"] is False and pr.stats["state_reset"] is False
        agent_until.append(session.consumer_state("default")["summarized_until"])
        router_until.append(session.consumer_state("router")["summarized_until"])
        assert pa.tokens <= 19_000 and pr.tokens <= 7_500
    # each consumer's summary only moves forward: no one rolled another back
    assert agent_until == sorted(agent_until) and router_until == sorted(router_until)
    assert router_until[-1] > 0


def test_a_smaller_consumer_reuses_a_summary_that_fits(store: Any) -> None:
    agent, a_rec, router, r_rec = _managers(agent_window=9000)
    session = wf.Session(store, "s2")
    session.extend(conversation(40, words=200, tools_every=0))
    pa = session.prepare(agent)
    assert a_rec.calls >= 1 and pa.state["summary"].startswith("AGENT")
    pr = session.prepare(router)
    check_prompt(router, session.messages, pr)
    # the router starts from the agent's summary
    assert any("AGENT-" in str(m.get("content")) for m in pr.messages)
    assert session.consumer_state("router")["summary"].startswith(("AGENT", "ROUTER"))
    assert session.consumer_state("default") == pa.state  # the agent's state is untouched


def test_a_summary_too_large_for_the_consumer_is_not_borrowed(store: Any) -> None:
    agent, a_rec, _, _ = _managers(agent_window=9000)
    session = wf.Session(store, "s3")
    session.extend(conversation(40, words=200, tools_every=0))
    session.prepare(agent)
    tiny = ContextManager(
        model="gpt-4o",
        context_window=8000,
        output_reserve=500,
        summarizer=Recorder("TINY"),
        consumer="tiny",
        summary_max_tokens=1,
    )
    p = tiny.prepare(session.messages, state=None)
    borrowed = wf.session.own_state(tiny, session.state)
    assert borrowed is None
    check_prompt(tiny, session.messages, p)


def test_legacy_single_state_is_the_default_consumer(store: Any) -> None:
    agent, _, router, _ = _managers(agent_window=9000)
    session = wf.Session(store, "s4")
    session.extend(conversation(40, words=200, tools_every=0))
    pa = session.prepare(agent)
    assert session.state == pa.state  # stored as before while there is one consumer
    session.prepare(router)
    assert set(session.state["consumers"]) == {"router"}
    assert session.consumer_state("default") == pa.state


def test_bad_consumer_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="consumer") as info:
        ContextManager(model="gpt-4o", consumer="")
    assert isinstance(info.value, wf.WindowfitError)
