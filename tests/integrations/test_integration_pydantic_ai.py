"""PydanticAI integration, offline with the real package: FunctionModel agents with tools."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
import windowfit as wf
from _histories import request_problems
from _pairing import pydantic_ai_problems
from _tool_outputs import big_output
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from windowfit.integrations.pydantic_ai import (
    WindowfitCapability,
    WindowfitHistory,
    from_canonical,
    history_processor,
    to_canonical,
)

COUNTER = wf.Counter(model="gpt-4o")
INSTRUCTIONS = "You are a code assistant."


def conversation(n: int) -> list[ModelMessage]:
    out: list[ModelMessage] = [
        ModelRequest(
            parts=[SystemPromptPart("sys"), UserPromptPart("start")], instructions=INSTRUCTIONS
        )
    ]
    for i in range(n):
        out.append(
            ModelResponse(parts=[TextPart(f"step {i}"), ToolCallPart("read", {"i": i}, f"c{i}")])
        )
        out.append(
            ModelRequest(
                parts=[ToolReturnPart("read", "r" * 500, f"c{i}"), UserPromptPart(f"next {i}")],
                instructions=INSTRUCTIONS,
            )
        )
    out.append(ModelResponse(parts=[TextPart("done")]))
    return out


# --------------------------------------------------------------------------- conversion


@pytest.mark.filterwarnings("ignore:.*RetryPromptPart")  # deprecated, still in stored histories
def test_conversion_part_by_part() -> None:
    msgs = [
        ModelRequest(parts=[SystemPromptPart("sys"), UserPromptPart("hi")]),
        ModelResponse(
            parts=[
                ThinkingPart("hmm"),
                TextPart("calling"),
                ToolCallPart("f", {"a": 1}, "c1"),
                ToolCallPart("g", '{"b":2}', "c2"),
            ]
        ),
        ModelRequest(
            parts=[
                UserPromptPart("also this"),
                ToolReturnPart("f", {"ok": True}, "c1"),
                RetryPromptPart("bad args", tool_name="g", tool_call_id="c2"),
            ]
        ),
        ModelRequest(parts=[RetryPromptPart("no text please")]),
    ]
    conv = to_canonical(msgs)
    assert [m["role"] for m in conv.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
    ]
    assert conv.messages[2]["content"] == "hmm\ncalling"
    assert [c["function"]["arguments"] for c in conv.messages[2]["tool_calls"]] == [
        '{"a":1}',
        '{"b":2}',
    ]
    # tool returns go first although the user part came first in the request
    assert conv.origins[3:6] == [((2, 1),), ((2, 2),), ((2, 0),)]
    assert request_problems(conv.messages) == []  # the independent checker of _histories


def test_from_canonical() -> None:
    msgs = from_canonical(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {
                "role": "assistant",
                "content": "a",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "r"},
        ]
    )
    assert [type(m) for m in msgs] == [ModelRequest, ModelResponse, ModelRequest]
    assert isinstance(msgs[0].parts[0], SystemPromptPart) and isinstance(
        msgs[0].parts[1], UserPromptPart
    )
    ret = msgs[2].parts[0]
    assert isinstance(ret, ToolReturnPart) and ret.tool_name == "f" and ret.tool_call_id == "c"


def test_processor_round_trip_leaves_messages_identical() -> None:
    msgs = conversation(10)
    proc = history_processor(budget=1_000_000, model="gpt-4o")
    out = proc(msgs)
    assert len(out) == len(msgs) and all(a is b for a, b in zip(out, msgs))


def test_partly_kept_request_is_a_copy_keeping_the_rest() -> None:
    msgs = conversation(30)
    conv = to_canonical(msgs)
    r = wf.fit(conv.messages, 900, counter=COUNTER)
    out = conv.select(r.kept)
    # the system prompt is pinned, the first user prompt fell out: a copy with what is kept
    first = out[0]
    assert first is not msgs[0] and [type(p) for p in first.parts] == [SystemPromptPart]
    assert first.parts[0] is msgs[0].parts[0]
    assert first.instructions == INSTRUCTIONS and first.timestamp == msgs[0].timestamp
    assert len(msgs[0].parts) == 2  # the input is untouched
    # the window starts on a request whose tool return fell out with its call: user prompt only
    second = out[1]
    assert isinstance(second, ModelRequest) and [type(p) for p in second.parts] == [UserPromptPart]
    assert all(any(m is x for x in msgs) for m in out[2:])  # the rest are the caller's objects
    assert pydantic_ai_problems(out) == []
    # as a processor it merges the two adjacent requests, as PydanticAI would at the next run
    processed = history_processor(budget=900, model="gpt-4o")(msgs)
    assert [type(p) for p in processed[0].parts] == [SystemPromptPart, UserPromptPart]
    assert processed[1:] == out[2:] and all(a is b for a, b in zip(processed[1:], out[2:]))
    assert COUNTER.count_messages(to_canonical(processed).messages) <= 900


def test_unknown_parts_ride_along() -> None:
    @dataclasses.dataclass
    class Marker:
        part_kind: str = "marker"

    req = ModelRequest(
        parts=[ToolReturnPart("read", "x" * 4000, "c0"), UserPromptPart("go on"), Marker()]
    )
    msgs = [
        ModelRequest(parts=[UserPromptPart("a")]),
        ModelResponse(parts=[ToolCallPart("read", {}, "c0")]),
        req,
    ]
    out = history_processor(budget=200, model="gpt-4o")(msgs)
    assert len(out) == 1 and [type(p).__name__ for p in out[0].parts] == [
        "UserPromptPart",
        "Marker",
    ]
    # a message with nothing countable travels with the next one
    lone = ModelRequest(parts=[Marker()])
    conv = to_canonical([lone, *msgs])
    assert conv.origins[0] == ((0, None), (1, 0))


# --------------------------------------------------------------------------- agents


class Scripted:
    """A FunctionModel body: a tool call for each user prompt (two every third turn), then an
    answer once the tools returned; records what every call received."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1]
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(
                parts=[TextPart(f"answer {self.calls}: " + big_output(str(self.calls), 40))]
            )
        self.calls += 1
        parts: list[Any] = [
            ToolCallPart("read_file", {"path": f"src/{self.calls}.py"}, f"call_{self.calls}_a")
        ]
        if self.calls % 3 == 0:
            parts.append(
                ToolCallPart("grep", {"pattern": f"p{self.calls}"}, f"call_{self.calls}_b")
            )
        return ModelResponse(parts=parts)


def make_agent(script: Scripted, **kwargs: Any) -> Agent:
    agent = Agent(FunctionModel(script), instructions=INSTRUCTIONS, **kwargs)

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file."""
        return big_output(path)

    @agent.tool_plain
    def grep(pattern: str) -> str:
        """Search the repository."""
        return big_output(pattern, 300)

    return agent


TOOL_TOKENS: dict[str, int] = {}


def tool_tokens(agent: Agent) -> int:
    if "n" not in TOOL_TOKENS:
        schemas = []
        for t in agent._function_toolset.tools.values():  # the two tools above
            d = t.tool_def
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": d.name,
                        "description": d.description,
                        "parameters": d.parameters_json_schema,
                    },
                }
            )
        TOOL_TOKENS["n"] = COUNTER.count_tools(schemas)
    return TOOL_TOKENS["n"]


def check_call(messages: list[ModelMessage], budget: int, tools: int, prompt: str) -> None:
    assert pydantic_ai_problems(messages) == [], pydantic_ai_problems(messages)
    canon = to_canonical(messages).messages
    sent = [{"role": "system", "content": INSTRUCTIONS}, *canon]
    assert COUNTER.count_messages(sent) + tools <= budget
    assert any(
        isinstance(m, ModelRequest)
        and any(isinstance(p, UserPromptPart) and p.content == prompt for p in m.parts)
        for m in messages
    )


def drive(
    agent: Agent, script: Scripted, turns: int, budget: int, keep_history: bool
) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    done = 0
    for t in range(turns):
        prompt = f"turn {t}: read the next file"
        result = agent.run_sync(prompt, message_history=history)
        history = result.all_messages()
        assert len(script.seen) == done + 2
        for seen in script.seen[done:]:
            check_call(seen, budget, tool_tokens(agent), prompt)
        done = len(script.seen)
    if keep_history:
        assert len(history) == 4 * turns
    assert len(script.seen[-1]) < 30
    return history


def test_agent_200_turns_with_capability_keeps_the_whole_history() -> None:
    script, budget = Scripted(), 5000
    agent = make_agent(script, capabilities=[WindowfitCapability(budget=budget, model="gpt-4o")])
    history = drive(agent, script, 200, budget, keep_history=True)
    returns = [
        p
        for m in history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    assert len(returns) == 200 + 200 // 3


@pytest.mark.parametrize(
    "asynchronous,takes_ctx", [(False, False), (False, True), (True, False), (True, True)]
)
def test_agent_with_history_processor_variants(asynchronous: bool, takes_ctx: bool) -> None:
    script, budget = Scripted(), 5000
    proc = history_processor(
        budget=budget, model="gpt-4o", asynchronous=asynchronous, takes_ctx=takes_ctx
    )
    agent = make_agent(script, capabilities=[ProcessHistory(proc)])
    # the processor does not see the tool definitions: leave them room in its budget
    proc.history.budget = budget - tool_tokens(agent)
    drive(
        agent,
        script,
        200 if (asynchronous, takes_ctx) == (False, False) else 30,
        budget,
        keep_history=False,
    )


def test_processor_takes_the_run_model_from_ctx() -> None:
    script = Scripted()
    proc = history_processor(budget=3000, takes_ctx=True)
    agent = make_agent(script, capabilities=[ProcessHistory(proc)])
    with pytest.raises(wf.UnknownModelError):  # FunctionModel is no registered model
        agent.run_sync("hi")


def test_agent_200_turns_with_context_manager_capability() -> None:
    script, window, reserve = Scripted(), 9000, 1000
    cap = WindowfitCapability(
        model="gpt-4o",
        options={"context_window": window, "output_reserve": reserve},
    )
    agent = make_agent(script, capabilities=[cap])
    history = drive(agent, script, 200, window - reserve, keep_history=True)
    key = history[-1].conversation_id
    state = cap.history.conversation(key).state
    assert state["summary"] and state["summaries"] >= 1
    assert cap.history.last_stats["has_summary"]
    # the summary reached the model as a new system prompt part
    first = script.seen[-1][0]
    assert isinstance(first, ModelRequest) and any(
        isinstance(p, SystemPromptPart) and state["summary"][:40] in p.content for p in first.parts
    )


def test_processor_with_context_manager_keeps_the_full_history_itself() -> None:
    script, window, reserve = Scripted(), 9000, 1000
    proc = history_processor(
        model="gpt-4o",
        asynchronous=True,
        takes_ctx=True,
        context_window=window,
        output_reserve=reserve,
    )
    agent = make_agent(script, capabilities=[ProcessHistory(proc)])
    history: list[ModelMessage] = []
    for t in range(60):
        history = agent.run_sync(
            f"turn {t}: read the next file", message_history=history
        ).all_messages()
    h: WindowfitHistory = proc.history
    key = history[-1].conversation_id
    full = h.full_history(key)
    # PydanticAI kept the window; windowfit kept all 4 messages of every turn (less the last
    # answer, appended after the last processor call)
    assert len(history) < len(full) == 4 * 60 - 1
    assert h.conversation(key).state["summarized_until"] > 0
    assert not any(r["state_reset"] for r in [h.last_stats])
    assert pydantic_ai_problems(history) == []


def test_history_async_direct() -> None:
    h = WindowfitHistory(budget=800, model="gpt-4o")
    out = asyncio.run(h.aprocess(conversation(20)))
    assert COUNTER.count_messages(to_canonical(out).messages) <= 800
    with pytest.raises(ValueError):
        WindowfitHistory(object(), budget=10)


def test_run_context_annotation_is_detected() -> None:
    from pydantic_ai._utils import is_async_callable, takes_run_context

    for asynchronous in (False, True):
        for ctx in (False, True):
            fn = history_processor(
                budget=10, model="gpt-4o", asynchronous=asynchronous, takes_ctx=ctx
            )
            assert takes_run_context(fn) is ctx and bool(is_async_callable(fn)) is asynchronous
    assert RunContext  # imported for the annotations above


def test_edited_tool_return_is_a_copy_in_a_copy_of_its_request() -> None:
    from windowfit.adapters.pydantic_ai import convert_new as _convert_new

    req = ModelRequest(
        parts=[ToolReturnPart("read", "x" * 500, "c1"), ToolReturnPart("grep", "y", "c2")],
        instructions=INSTRUCTIONS,
    )
    msgs = [
        ModelRequest(parts=[UserPromptPart("go")]),
        ModelResponse(parts=[ToolCallPart("read", {}, "c1"), ToolCallPart("grep", {}, "c2")]),
        req,
    ]
    conv = to_canonical(msgs)
    edited = {**conv.messages[2], "content": "x … cut"}
    out = conv.reassemble(
        [conv.messages[0], conv.messages[1], edited, conv.messages[3]], _convert_new(conv)
    )
    assert out[0] is msgs[0] and out[1] is msgs[1]
    first, second = out[2], out[3]
    assert first.instructions == INSTRUCTIONS and first.timestamp == req.timestamp
    assert first.parts[0].content == "x … cut" and first.parts[0].tool_name == "read"
    assert first.parts[0].timestamp == req.parts[0].timestamp
    assert second.parts == [req.parts[1]] and req.parts[0].content == "x" * 500
    assert pydantic_ai_problems(out) == []
