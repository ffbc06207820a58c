"""OpenAI Agents SDK integration, offline: a scripted Model, real Runner, windowfit stores."""

from __future__ import annotations

import asyncio
from typing import Any

import windowfit as wf
from _pairing import responses_problems
from _tool_outputs import big_output
from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from windowfit.adapters import from_responses
from windowfit.adapters.openai_responses import call_key, output_key
from windowfit.integrations.openai_agents import WindowfitSession, input_filter
from windowfit.store import MemoryStore

COUNTER = wf.Counter(model="gpt-4o")
set_tracing_disabled(True)  # offline: the SDK would try to export traces
INSTRUCTIONS = "You are a code assistant."


@function_tool
def read_file(path: str) -> str:
    """Read a file."""
    return big_output(path)


class ScriptedModel(Model):
    """Reasoning + a function call for each user turn, then an answer; records every input."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, list[Any]]] = []
        self.n = 0

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        self.seen.append((system_instructions, items))
        last = items[-1] if items else {}
        usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            text = ResponseOutputText(type="output_text", text=f"answer {self.n}", annotations=[])
            msg = ResponseOutputMessage(
                id=f"msg_{self.n}",
                type="message",
                role="assistant",
                status="completed",
                content=[text],
            )
            return ModelResponse(output=[msg], usage=usage, response_id=None)
        self.n += 1
        reasoning = ResponseReasoningItem(
            id=f"rs_{self.n}",
            type="reasoning",
            summary=[Summary(type="summary_text", text=f"need file {self.n}")],
        )
        call = ResponseFunctionToolCall(
            type="function_call",
            call_id=f"call_{self.n}",
            name="read_file",
            arguments=f'{{"path": "src/{self.n}.py"}}',
        )
        return ModelResponse(output=[reasoning, call], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - not used
        raise NotImplementedError


def check_input(instructions: str | None, items: list[Any], budget: int) -> None:
    assert responses_problems(items) == []
    conv = from_responses(items)
    sent = ([{"role": "system", "content": instructions}] if instructions else []) + conv.messages
    assert COUNTER.count_messages(sent) <= budget
    assert {call_key(i) for i in items} - {None} == {output_key(i) for i in items} - {None}


def run_turns(agent: Agent, session: WindowfitSession, turns: int, **kwargs: Any) -> None:
    async def main() -> None:
        for t in range(turns):
            await Runner.run(agent, f"turn {t}: read the next file", session=session, **kwargs)

    asyncio.run(main())


def test_session_fits_the_window_and_stores_everything() -> None:
    model, store = ScriptedModel(), MemoryStore()
    budget, turns = 6000, 100
    session = WindowfitSession(
        "user-1", store, budget=budget, model="gpt-4o", instructions=INSTRUCTIONS, reserve=50
    )
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    run_turns(
        agent,
        session,
        turns,
        run_config=RunConfig(call_model_input_filter=input_filter(budget=budget, model="gpt-4o")),
    )
    for instructions, items in model.seen:
        check_input(instructions, items, budget)
    stored = asyncio.run(session.all_items())
    # user message, reasoning, call, output, answer per turn: all stored
    assert len(stored) == 5 * turns
    assert sum(1 for i in stored if i.get("type") == "function_call_output") == turns
    window = asyncio.run(session.get_items())
    assert len(window) < len(stored)
    assert all(any(w is s for s in stored) for w in window)
    assert asyncio.run(session.get_items(limit=3)) == stored[-3:]
    # another handle on the same store sees the same history
    again = WindowfitSession("user-1", store, budget=budget, model="gpt-4o")
    assert len(asyncio.run(again.all_items())) == len(stored)


def test_session_with_context_manager_summarizes_into_the_store_state() -> None:
    model, store = ScriptedModel(), MemoryStore()
    window, reserve, turns = 9000, 1000, 60
    session = WindowfitSession(
        "user-2",
        store,
        model="gpt-4o",
        context_window=window,
        output_reserve=reserve,
        instructions=INSTRUCTIONS,
    )
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    run_turns(agent, session, turns)
    state = wf.Session(store, "user-2").state
    assert state and state["summary"]
    assert session.last_stats["has_summary"]
    # the first call of the last run got the summary as a system item, then the window
    first_of_last_run = model.seen[-2][1]
    assert (
        first_of_last_run[0]["role"] == "system"
        and state["summary"][:40] in first_of_last_run[0]["content"]
    )
    assert responses_problems(first_of_last_run) == []


def test_pop_and_clear() -> None:
    session = WindowfitSession("s", budget=1000, model="gpt-4o")

    async def main() -> None:
        await session.add_items(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        )
        assert await session.pop_item() == {"role": "assistant", "content": "b"}
        assert await session.get_items() == [{"role": "user", "content": "a"}]
        assert await session.get_items(limit=0) == []
        await session.add_items([{"role": "assistant", "content": "c"}])
        assert [i["content"] for i in await session.get_items()] == ["a", "c"]
        # nothing was deleted: the pop is a marker in the append-only store
        assert len(session.session.messages) == 4
        await session.clear_session()
        assert await session.get_items() == [] and await session.pop_item() is None

    asyncio.run(main())


def test_sdk_objects_are_stored_as_json() -> None:
    session = WindowfitSession("s", budget=1000, model="gpt-4o")
    call = ResponseFunctionToolCall(type="function_call", call_id="c", name="f", arguments="{}")

    async def main() -> None:
        await session.add_items([{"role": "user", "content": "x"}, call])
        items = await session.all_items()
        assert items[1] == {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}

    asyncio.run(main())


def test_input_filter_fits_a_long_single_run() -> None:
    model, budget = ScriptedModel(), 3000
    agent = Agent(name="coder", instructions=INSTRUCTIONS, model=model, tools=[read_file])
    history: list[Any] = []
    for t in range(8):  # a history carried by hand, no session: the filter alone keeps it fitting
        history.append({"role": "user", "content": f"turn {t}"})
        result = asyncio.run(
            Runner.run(
                agent,
                history,
                run_config=RunConfig(
                    call_model_input_filter=input_filter(budget=budget, model="gpt-4o")
                ),
            )
        )
        history = result.to_input_list()
    for instructions, items in model.seen:
        check_input(instructions, items, budget)
    assert len(model.seen[-1][1]) < len(history)
