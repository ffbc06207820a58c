"""LangChain / LangGraph integration, offline with the real packages and a scripted fake model."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import windowfit as wf
from _histories import request_problems
from _pairing import langchain_problems
from _tool_outputs import WORDS
from _tool_outputs import big_output as tool_output
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field
from windowfit.integrations.langchain import (
    Windower,
    from_canonical,
    to_canonical,
    token_counter,
    trim,
)
from windowfit.integrations.langgraph import WindowfitAgentState, pre_model_hook

COUNTER = wf.Counter(model="gpt-4o")


# this test's outputs draw from four more words (its expectations were measured on them)
def big_output(seed: str, words: int = 900) -> str:
    return tool_output(seed, words, vocabulary=(*WORDS, "nu", "xi", "pi", "rho"))


@tool
def read_file(path: str) -> str:
    """Read a file and return its whole text."""
    return big_output(path)


@tool
def grep(pattern: str) -> str:
    """Search the repository."""
    return big_output("grep" + pattern, 300)


TOOLS = [read_file, grep]
TOOL_SCHEMAS = [convert_to_openai_tool(t) for t in TOOLS]


def script(turns: int) -> Iterator[AIMessage]:
    """Per turn: a model call asking for tools (two every third turn), then an answer."""
    for t in range(turns):
        calls = [{"name": "read_file", "args": {"path": f"src/{t}.py"}, "id": f"call_{t}_a"}]
        if t % 3 == 0:
            calls.append({"name": "grep", "args": {"pattern": f"p{t}"}, "id": f"call_{t}_b"})
        yield AIMessage(content="" if t % 2 else f"looking at {t}", tool_calls=calls)
        yield AIMessage(content=f"answer {t}: " + big_output(f"a{t}", 40))


class RecordingChat(GenericFakeChatModel):
    """LangChain's fake chat model, bindable to tools, recording what each call receives."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingChat:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _history(n: int) -> list[BaseMessage]:
    ms: list[BaseMessage] = [SystemMessage("sys")]
    for i in range(n):
        ms += [
            HumanMessage(f"q{i} " + "x" * 200),
            AIMessage("", tool_calls=[{"name": "f", "args": {"a": i}, "id": f"c{i}"}]),
            ToolMessage("y" * 400, tool_call_id=f"c{i}"),
            AIMessage(f"answer {i}"),
        ]
    return ms


# --------------------------------------------------------------------------- trim / counter


def test_trim_matches_trim_messages_and_returns_the_same_objects() -> None:
    ms = _history(20)
    counter = token_counter("gpt-4o")
    for budget in (300, 500, 1200, 5000):
        ours = trim(ms, budget, model="gpt-4o")
        theirs = trim_messages(
            ms,
            max_tokens=budget,
            token_counter=counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        assert ours == theirs
        assert all(any(o is m for m in ms) for o in ours)
        assert counter(ours) <= budget


def test_trim_never_orphans_tool_messages_where_trim_messages_does() -> None:
    ms = [
        SystemMessage("sys"),
        HumanMessage("do it"),
        AIMessage(
            "",
            tool_calls=[{"name": "f", "args": {}, "id": "a"}, {"name": "f", "args": {}, "id": "b"}],
        ),
        ToolMessage("r" * 3000, tool_call_id="a"),
        ToolMessage("short", tool_call_id="b"),
    ]
    counter = token_counter("gpt-4o")
    theirs = trim_messages(
        ms, max_tokens=200, token_counter=counter, strategy="last", include_system=True
    )
    assert isinstance(theirs[-1], ToolMessage)  # trim_messages keeps an orphan result
    ours = trim(ms, 200, model="gpt-4o")
    assert ours == [ms[0], ms[1]]
    assert langchain_problems(ours) == []


def test_trim_keeps_pins_and_raises_when_they_do_not_fit() -> None:
    ms = _history(10)
    out = trim(ms, 300, model="gpt-4o", pinned=[1])
    assert out[0] is ms[0] and out[1] is ms[1]
    assert ms[-4] in out  # the latest user message
    with pytest.raises(wf.BudgetError):
        trim([SystemMessage("z " * 600), HumanMessage("hi")], 100, model="gpt-4o")


def test_token_counter_counts_like_the_counter() -> None:
    ms = _history(3)
    assert token_counter(counter=COUNTER)(ms) == COUNTER.count_messages(to_canonical(ms).messages)


def test_conversion_round_trip_and_invalid_tool_calls() -> None:
    ms = _history(2)
    back = from_canonical(to_canonical(ms).messages)
    assert [type(m) for m in back] == [type(m) for m in ms]
    assert [m.content for m in back] == [m.content for m in ms]
    bad = AIMessage(
        "", invalid_tool_calls=[{"name": "f", "args": "{oops", "id": "bad1", "error": None}]
    )
    conv = to_canonical(
        [HumanMessage("x"), bad, ToolMessage("error: bad args", tool_call_id="bad1")]
    )
    assert conv.messages[1]["tool_calls"][0]["id"] == "bad1"
    assert request_problems(conv.messages) == []  # the independent checker of _histories


def test_dict_and_tuple_messages_are_accepted() -> None:
    out = trim([("system", "s"), {"role": "user", "content": "hi"}], 100, model="gpt-4o")
    assert isinstance(out[0], SystemMessage) and isinstance(out[1], HumanMessage)


# --------------------------------------------------------------------------- agents


def _check_call(messages: list[BaseMessage], budget: int, latest_user: BaseMessage) -> None:
    """What one model call received: a valid history, within budget (tools included)."""
    assert langchain_problems(messages) == [], langchain_problems(messages)
    canon = to_canonical(messages).messages
    assert COUNTER.count_messages(canon) + COUNTER.count_tools(TOOL_SCHEMAS) <= budget
    assert any(m is latest_user or (m.id and m.id == latest_user.id) for m in messages)


def _react_agent(model: RecordingChat, hook: Any, prompt: str) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver

    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # create_react_agent is deprecated in favour of create_agent
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(
            model,
            TOOLS,
            prompt=prompt,
            pre_model_hook=hook,
            state_schema=WindowfitAgentState,
            checkpointer=InMemorySaver(),
        )


def _drive(
    agent: Any, model: RecordingChat, turns: int, prompt: str, budget: int
) -> dict[str, Any]:
    """Run ``turns`` user turns; check every model call got a valid history within ``budget``
    (system prompt, summary and tools included) that holds the latest user message."""
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": 50}
    calls = 0
    for t in range(turns):
        state = agent.invoke({"messages": [HumanMessage(f"turn {t}: read src/{t}.py")]}, config)
        latest_user = [m for m in state["messages"] if isinstance(m, HumanMessage)][-1]
        assert len(model.seen) == calls + 2  # one call for the tools, one for the answer
        for seen in model.seen[calls:]:
            assert isinstance(seen[0], SystemMessage) and seen[0].content == prompt
            _check_call(seen, budget, latest_user)
        calls = len(model.seen)
    msgs = state["messages"]
    # the graph state keeps the whole history
    assert sum(isinstance(m, HumanMessage) for m in msgs) == turns
    assert sum(isinstance(m, ToolMessage) for m in msgs) == turns + (turns + 2) // 3
    assert len(msgs) == 4 * turns + (turns + 2) // 3
    # ... while the model saw a window
    assert len(model.seen[-1]) < 40 < len(msgs)
    return state


PROMPT = "You are a code assistant."


def test_langgraph_react_agent_200_turns_with_fitting_pre_model_hook() -> None:
    turns, budget = 200, 5000
    model = RecordingChat(messages=script(turns))
    hook = pre_model_hook(budget=budget, model="gpt-4o", system=PROMPT, tools=TOOLS)
    state = _drive(_react_agent(model, hook, PROMPT), model, turns, PROMPT, budget)
    assert "windowfit" not in state  # plain fitting keeps no state


def test_langgraph_react_agent_200_turns_with_context_manager() -> None:
    turns, window, reserve = 200, 9000, 1000
    model = RecordingChat(messages=script(turns))
    hook = pre_model_hook(
        model="gpt-4o",
        context_window=window,
        output_reserve=reserve,
        system=PROMPT,
        tools=TOOLS,
    )
    state = _drive(_react_agent(model, hook, PROMPT), model, turns, PROMPT, window - reserve)
    summary = state["windowfit"]["summary"]
    assert summary and state["windowfit"]["summarized_until"] > 0
    # the model saw the running summary as a system message after the prompt
    assert any(
        isinstance(m, SystemMessage) and summary[:40] in m.content for m in model.seen[-1][1:]
    )
    assert hook.windower.last_stats["has_summary"]
    # big tool outputs reached the model cut; the state keeps them whole
    full = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    cut = [
        m
        for seen in model.seen
        for m in seen
        if isinstance(m, ToolMessage) and m.content != full[m.tool_call_id]
    ]
    # cut means fewer tokens (a marker may make a barely-cut text a character longer)
    counter = wf.Counter(model="gpt-4o")
    assert cut and all(counter.count(m.content) < counter.count(full[m.tool_call_id]) for m in cut)
    # copies of the originals: id, name and call id survive the edit
    original = {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}
    assert all(m.id == original[m.tool_call_id].id for m in cut)
    assert all(m.name == original[m.tool_call_id].name in ("read_file", "grep") for m in cut)
    # old outputs were masked (on by default): the placeholder names its own tool, while the
    # newest outputs the model saw were never masked
    masked = [m for m in cut if "cleared to save context" in m.content]
    assert masked and all(f"old output of {m.name} " in m.content for m in masked)
    newest = [m for m in model.seen[-1] if isinstance(m, ToolMessage)][-3:]
    assert newest and not any("cleared to save context" in m.content for m in newest)


def test_langchain_agent_200_turns_with_middleware() -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from windowfit.integrations.langchain import WindowfitMiddleware

    turns, window, reserve = 200, 9000, 1000
    model = RecordingChat(messages=script(turns))
    mw = WindowfitMiddleware(model="gpt-4o", context_window=window, output_reserve=reserve)
    agent = create_agent(
        model, TOOLS, system_prompt=PROMPT, middleware=[mw], checkpointer=InMemorySaver()
    )
    state = _drive(agent, model, turns, PROMPT, window - reserve)
    assert state["windowfit"]["summary"] and state["windowfit"]["summaries"] >= 1
    assert mw.last_stats["tokens_total"] <= window - reserve


class StubManager:
    """The ContextManager contract (prepare/aprepare -> messages, stats, state) in a few lines:
    fit, and put one summary system message (new dict) after the system prompt."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.calls = 0

    def prepare(self, messages: list[dict[str, Any]], state: Any = None, tools: Any = None) -> Any:
        self.calls += 1
        reserve = COUNTER.count_tools(tools) + 60
        r = wf.fit(messages, self.budget - reserve, counter=COUNTER)
        dropped = len(r.dropped)
        summarized = max(dropped, (state or {}).get("summarized", 0))
        out = list(r.messages)
        if dropped:
            at = 1 if out and out[0].get("role") == "system" else 0
            out.insert(at, {"role": "system", "content": f"Summary of {dropped} earlier messages."})
        stats = {"dropped": dropped}
        return type(
            "P", (), {"messages": out, "stats": stats, "state": {"summarized": summarized}}
        )()

    async def aprepare(
        self, messages: list[dict[str, Any]], state: Any = None, tools: Any = None
    ) -> Any:
        return self.prepare(messages, state=state, tools=tools)


def test_middleware_plumbing_with_a_stub_manager() -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver
    from windowfit.integrations.langchain import WindowfitMiddleware

    turns, budget = 40, 6000
    model = RecordingChat(messages=script(turns))
    manager = StubManager(budget)
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=PROMPT,
        middleware=[WindowfitMiddleware(manager)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}, "recursion_limit": 50}
    for t in range(turns):
        state = agent.invoke({"messages": [HumanMessage(f"turn {t}")]}, config)
    assert manager.calls == len(model.seen) == 2 * turns
    assert state["windowfit"]["summarized"] > 0
    assert any(
        isinstance(m, SystemMessage) and m.content.startswith("Summary") for m in model.seen[-1]
    )
    assert len(state["messages"]) == 4 * turns + (turns + 2) // 3


def test_windower_async_and_manager_mode() -> None:
    ms = _history(30)
    w = Windower(StubManager(800))
    window, state = asyncio.run(w.acall(ms, system="sys prompt"))
    assert state["summarized"] > 0
    assert isinstance(window[0], SystemMessage) and window[0].content.startswith("Summary")
    assert all(any(m is o for o in ms) for m in window[1:])
    with pytest.raises(ValueError):
        Windower(StubManager(1), budget=10, model="gpt-4o")


def test_pre_model_hook_async_fit_mode() -> None:
    ms = _history(30)
    hook = pre_model_hook(budget=600, counter=COUNTER)
    out = asyncio.run(hook.ainvoke({"messages": ms}))
    assert set(out) == {"llm_input_messages"}
    assert COUNTER.count_messages(to_canonical(out["llm_input_messages"]).messages) <= 600


def test_fast_conversion_matches_convert_to_openai_messages() -> None:
    from langchain_core.messages import convert_to_openai_messages
    from windowfit.adapters.langchain import _fast_dict

    ms = [
        SystemMessage("s"),
        SystemMessage("d", additional_kwargs={"__openai_role__": "developer"}),
        HumanMessage("h", name="bob"),
        HumanMessage(""),
        AIMessage("a"),
        AIMessage("", tool_calls=[{"name": "f", "args": {"q": "é", "n": [1, 2]}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1", name="f"),
    ]
    for m in ms:
        fast = _fast_dict(m)
        assert fast == convert_to_openai_messages(m), m


def test_edited_tool_message_is_a_copy_of_the_original() -> None:
    from windowfit.adapters.langchain import convert_new as _convert_new

    ms = [
        HumanMessage("go", id="h1"),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("x" * 500, tool_call_id="c1", name="f", id="t1", artifact={"raw": 1}),
    ]
    conv = to_canonical(ms)
    summary = {"role": "system", "content": "summary"}
    edited = {**conv.messages[2], "content": "x … cut"}
    out = conv.reassemble([summary, conv.messages[0], conv.messages[1], edited], _convert_new(conv))
    assert isinstance(out[0], SystemMessage) and out[0].content == "summary"
    assert out[1] is ms[0] and out[2] is ms[1]
    tm = out[3]
    assert isinstance(tm, ToolMessage) and tm.content == "x … cut"
    assert (tm.id, tm.name, tm.tool_call_id, tm.artifact) == ("t1", "f", "c1", {"raw": 1})
    assert ms[2].content == "x" * 500
