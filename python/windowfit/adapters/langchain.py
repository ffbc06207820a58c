"""LangChain messages to and from windowfit's canonical (OpenAI chat) format, and LangChain
tools to OpenAI tool schemas (for counting them).

Needs ``langchain-core`` (``pip install 'windowfit[langchain]'``); the hooks built on these
conversions live in :mod:`windowfit.integrations.langchain`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, cast

from windowfit.adapters.canonical import Converted, Ref, json_arguments, make_tool_call
from windowfit.errors import missing_extra
from windowfit.messages import canonical_role

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "langchain", _exc) from _exc

__all__ = ["convert_new", "from_canonical", "message_dicts", "to_canonical", "tools_to_openai"]

logger = logging.getLogger(__name__)


def _known_role(message_type: str) -> str:
    """The canonical role of a LangChain message type; ``user`` for any other type."""
    role = canonical_role(message_type)
    return role if role in ("system", "user", "assistant", "tool") else "user"


def _fast_dict(message: BaseMessage) -> dict[str, Any] | None:
    """``convert_to_openai_messages`` output for the common plain-text messages, without its
    per-message overhead (hooks convert the whole history on every model call)."""
    content = message.content
    if not isinstance(content, str) or message.additional_kwargs.get("refusal"):
        return None
    if isinstance(message, AIMessage):
        if message.invalid_tool_calls:
            return None
        d: dict[str, Any] = {"role": "assistant"}
        if message.tool_calls:
            d["tool_calls"] = [
                # an id-less call goes on as None: the core's reader names message and field
                make_tool_call(cast("str", c["id"]), c["name"], json_arguments(c["args"]))
                for c in message.tool_calls
            ]
    elif isinstance(message, HumanMessage):
        d = {"role": "user"}
    elif isinstance(message, ToolMessage):
        d = {"role": "tool", "tool_call_id": message.tool_call_id}
    elif isinstance(message, SystemMessage):
        d = {"role": message.additional_kwargs.get("__openai_role__", "system")}
    else:
        return None
    if message.name:
        d["name"] = message.name
    d["content"] = content
    return d


def message_dicts(message: BaseMessage) -> list[dict[str, Any]]:
    """The canonical dicts of one LangChain message (usually one; a human turn carrying
    Anthropic-style ``tool_result`` blocks yields its tool messages too)."""
    fast = _fast_dict(message)
    if fast is not None:
        return [fast]
    try:
        dicts = list(convert_to_openai_messages([message]))
    except (ValueError, TypeError, KeyError) as exc:
        # unusual content blocks: count the text rather than fail the model call
        logger.debug("falling back to text for %s: %s", type(message).__name__, exc)
        role = getattr(message, "role", None) or _known_role(message.type)
        dicts = [{"role": role, "content": message.text}]
    if isinstance(message, AIMessage) and message.invalid_tool_calls and dicts:
        # ToolNode answers unparsable calls too; count them as calls so their answers pair up
        first = dicts[0]
        calls = list(first.get("tool_calls") or ())
        known = {c.get("id") for c in calls}
        for bad in message.invalid_tool_calls:
            if bad.get("id") and bad["id"] not in known:
                calls.append(
                    {
                        "id": bad["id"],
                        "type": "function",
                        "function": {
                            "name": bad.get("name") or "",
                            "arguments": json_arguments(bad.get("args")),
                        },
                    }
                )
        if calls:
            first["tool_calls"] = calls
    if len(dicts) > 1:
        # tool results answer the previous turn: they go first, as every chat API wants
        dicts.sort(key=lambda d: d.get("role") != "tool")
    return dicts


def to_canonical(
    messages: Iterable[Any], *, prefix: Sequence[dict[str, Any]] = ()
) -> Converted[BaseMessage]:
    """Canonical dicts for LangChain messages (or anything ``convert_to_messages`` accepts).

    ``prefix`` dicts (e.g. a system prompt to count) come first and map back to nothing.
    """
    items = convert_to_messages(list(messages))
    out: list[dict[str, Any]] = [dict(p) for p in prefix]
    origins: list[tuple[Ref, ...]] = [() for _ in prefix]
    for i, m in enumerate(items):
        for d in message_dicts(m):
            out.append(d)
            origins.append(((i, None),))
    return Converted(items, out, origins)


def from_canonical(messages: Iterable[Any]) -> list[BaseMessage]:
    """LangChain messages for canonical dicts."""
    return convert_to_messages([dict(m) for m in messages])


def convert_new(conv: Converted[BaseMessage]) -> Any:
    """``convert_new`` for :meth:`Converted.reassemble`: an edited tool result (a truncated
    output) is a copy of its ``ToolMessage`` (id, name, status, artifact survive); other new
    messages (the summary) are converted."""
    tools = {m.tool_call_id: m for m in conv.items if isinstance(m, ToolMessage)}

    def convert(dicts: Sequence[Any]) -> list[BaseMessage]:
        out: list[BaseMessage] = []
        for d in dicts:
            original = tools.get(d.get("tool_call_id")) if d.get("role") == "tool" else None
            if original is None:
                out.extend(from_canonical([d]))
            else:
                out.append(original.model_copy(update={"content": d.get("content") or ""}))
        return out

    return convert


def tools_to_openai(tools: Iterable[Any] | None) -> list[dict[str, Any]] | None:
    """OpenAI tool schemas of LangChain tools (for counting their tokens)."""
    if not tools:
        return None
    out = []
    for t in tools:
        try:
            out.append(convert_to_openai_tool(t))
        except Exception as exc:  # provider-native tool dicts and the like: count what we can
            logger.debug("cannot convert tool %r for counting: %s", t, exc)
            if isinstance(t, dict):
                out.append(t)
    return out
