"""The framework-side pairing checkers of ``_pairing`` catch what they must: a window that
drops a call's result, keeps a result without its call, or splits them apart. They are the
integration tests' oracle, so they are tested on the frameworks' own objects here."""

from __future__ import annotations

from _pairing import (
    anthropic_problems,
    langchain_problems,
    pydantic_ai_problems,
    responses_problems,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


def test_langchain() -> None:
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "a"}])
    good = [SystemMessage("s"), HumanMessage("q"), call, ToolMessage("r", tool_call_id="a")]
    assert langchain_problems(good) == []
    assert langchain_problems(good[:3])  # unanswered
    assert langchain_problems([good[1], good[3]])  # orphan result
    assert langchain_problems([*good[:3], HumanMessage("x"), good[3]])  # split apart


def test_pydantic_ai() -> None:
    req = ModelRequest(parts=[UserPromptPart("q")])
    call = ModelResponse(parts=[ToolCallPart("f", {}, "a")])
    ret = ModelRequest(parts=[ToolReturnPart("f", "r", tool_call_id="a")])
    answer = ModelResponse(parts=[TextPart("done")])
    assert pydantic_ai_problems([req, call, ret, answer]) == []
    assert pydantic_ai_problems([req, call, answer])  # unanswered before the next response
    assert pydantic_ai_problems([req, ret, answer])  # orphan return
    # two requests in a row are one turn to PydanticAI
    assert pydantic_ai_problems([req, call, req, ret]) == []


def test_anthropic() -> None:
    use = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
    }
    res = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]}
    q = {"role": "user", "content": "q"}
    assert anthropic_problems([q, use, res]) == []
    assert anthropic_problems([q, use])  # unanswered
    assert anthropic_problems([q, {"role": "assistant", "content": "x"}, res])  # orphan result
    assert anthropic_problems([use, res])  # starts with the assistant


def test_responses() -> None:
    call = {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "a", "output": "r"}
    q = {"role": "user", "content": "q"}
    assert responses_problems([q, call, out]) == []
    assert responses_problems([q, call])
    assert responses_problems([q, out])
    assert responses_problems([q, out, call])  # the output before its call
