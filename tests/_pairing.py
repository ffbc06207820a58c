"""Tool-call pairing checked on each framework's own objects.

The integration tests must not validate a window with windowfit's converter and
``history_problems``: a conversion bug would then hide itself. These checkers read only the
frameworks' public fields — LangChain ``AIMessage.tool_calls`` / ``ToolMessage.tool_call_id``,
PydanticAI ``ToolCallPart`` / ``ToolReturnPart`` / ``RetryPromptPart``, Anthropic
``tool_use`` / ``tool_result`` blocks, Responses ``function_call`` / ``function_call_output``
items — and apply each provider's rule: every call is answered, in the very next turn for
chat-shaped APIs, and every answer follows its call. Each returns the problems found (empty:
a request the provider accepts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _close(problems: list[str], open_ids: set[str], owner: int, where: str) -> None:
    if open_ids:
        problems.append(f"{owner}: calls {sorted(open_ids)} unanswered {where}")


def langchain_problems(messages: Sequence[Any]) -> list[str]:
    """OpenAI's rule on LangChain messages: an ``AIMessage`` with ``tool_calls`` is followed
    directly by one ``ToolMessage`` per call id, nothing else in between."""
    from langchain_core.messages import AIMessage, ToolMessage

    problems: list[str] = []
    open_ids: set[str] = set()
    owner = -1
    for k, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if m.tool_call_id not in open_ids:
                problems.append(f"{k}: ToolMessage {m.tool_call_id!r} answers no open call")
            open_ids.discard(m.tool_call_id)
            continue
        _close(problems, open_ids, owner, f"before message {k}")
        open_ids = set()
        if isinstance(m, AIMessage):
            ids = [c["id"] for c in m.tool_calls] + [c["id"] for c in m.invalid_tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"{k}: duplicate call ids {ids}")
            open_ids, owner = set(ids), k
    _close(problems, open_ids, owner, "at the end")
    return problems


def pydantic_ai_problems(messages: Sequence[Any]) -> list[str]:
    """PydanticAI's rule: each ``ToolCallPart`` of a ``ModelResponse`` is answered by a
    ``ToolReturnPart`` or ``RetryPromptPart`` with its ``tool_call_id`` before the next
    ``ModelResponse``, and every such answer answers a call of the response right before.
    Consecutive requests count as one (PydanticAI merges them before sending)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        ToolCallPart,
        ToolReturnPart,
    )

    problems: list[str] = []
    open_ids: set[str] = set()
    owner = -1
    for k, m in enumerate(messages):
        if isinstance(m, ModelResponse):
            _close(problems, open_ids, owner, f"before message {k}")
            ids = [p.tool_call_id for p in m.parts if isinstance(p, ToolCallPart)]
            if len(set(ids)) != len(ids):
                problems.append(f"{k}: duplicate call ids {ids}")
            open_ids, owner = set(ids), k
        elif isinstance(m, ModelRequest):
            for p in m.parts:
                is_answer = isinstance(p, ToolReturnPart) or (
                    isinstance(p, RetryPromptPart) and p.tool_name is not None
                )
                if is_answer:
                    if p.tool_call_id not in open_ids:
                        problems.append(
                            f"{k}: {type(p).__name__} {p.tool_call_id!r} answers no call"
                        )
                    open_ids.discard(p.tool_call_id)
        else:
            problems.append(f"{k}: not a ModelRequest or ModelResponse: {type(m).__name__}")
    _close(problems, open_ids, owner, "at the end")
    return problems


def _blocks(message: Any) -> list[Any]:
    content = message["content"] if isinstance(message, dict) else message.content
    return content if isinstance(content, list) else []


def _field(block: Any, name: str) -> Any:
    return block.get(name) if isinstance(block, dict) else getattr(block, name, None)


def anthropic_problems(messages: Sequence[Any]) -> list[str]:
    """Anthropic's rule: the ``tool_use`` blocks of an assistant message are answered by
    ``tool_result`` blocks in the next message, a user message; every ``tool_result`` answers
    a ``tool_use`` of the assistant message right before it; the conversation starts with a
    user message and alternates roles."""
    problems: list[str] = []
    open_ids: set[str] = set()
    owner = -1
    for k, m in enumerate(messages):
        role = m["role"] if isinstance(m, dict) else m.role
        if k == 0 and role != "user":
            problems.append(f"0: starts with {role!r}, not a user message")
        if k > 0:
            prev = messages[k - 1]
            if role == (prev["role"] if isinstance(prev, dict) else prev.role):
                problems.append(f"{k}: two {role} messages in a row")
        blocks = _blocks(m)
        if role == "user":
            for b in blocks:
                if _field(b, "type") == "tool_result":
                    tid = _field(b, "tool_use_id")
                    if tid not in open_ids:
                        problems.append(f"{k}: tool_result {tid!r} answers no tool_use")
                    open_ids.discard(tid)
            _close(problems, open_ids, owner, f"by message {k}")
            open_ids = set()
        else:
            _close(problems, open_ids, owner, f"before message {k}")
            ids = [_field(b, "id") for b in blocks if _field(b, "type") == "tool_use"]
            open_ids, owner = set(ids), k
    _close(problems, open_ids, owner, "at the end")
    return problems


CALL_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}


def responses_problems(items: Sequence[Any]) -> list[str]:
    """The Responses API's rule: every ``function_call`` (or ``custom_tool_call``) item has an
    output item with its ``call_id`` after it, and every output has its call before it."""
    problems: list[str] = []
    calls: dict[str, str] = {}  # call_id -> the output type it needs
    answered: set[str] = set()
    for k, it in enumerate(items):
        kind = _field(it, "type")
        cid = _field(it, "call_id")
        if kind in CALL_TYPES:
            if cid in calls:
                problems.append(f"{k}: duplicate call id {cid!r}")
            calls[cid] = CALL_TYPES[kind]
        elif kind in CALL_TYPES.values():
            if calls.get(cid) != kind or cid in answered:
                problems.append(f"{k}: {kind} {cid!r} answers no earlier call")
            answered.add(cid)
    for cid in calls.keys() - answered:
        problems.append(f"call {cid!r} has no output")
    return problems
