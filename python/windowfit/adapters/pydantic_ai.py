"""PydanticAI messages to and from windowfit's canonical (OpenAI chat) format, part by part.

``ModelRequest`` s and ``ModelResponse`` s become canonical messages (system prompts, user
prompts, tool returns and retries their own messages; a response one assistant message) and map
back: untouched messages come back as the very same objects, a request only some of whose parts
are kept is a ``dataclasses.replace`` copy holding the kept parts, and an edited tool result is a
copy of its original part.

Needs ``pip install 'windowfit[pydantic-ai]'``; the history processors and capability built on
these conversions live in :mod:`windowfit.integrations.pydantic_ai`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard

from windowfit.adapters.canonical import Converted, Ref, content_text, make_tool_call
from windowfit.errors import missing_extra
from windowfit.messages import SYSTEM_ROLES

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "pydantic-ai", _exc) from _exc

try:  # the common base of tool returns; older releases have ToolReturnPart alone
    from pydantic_ai.messages import BaseToolReturnPart
except ImportError:  # pragma: no cover
    BaseToolReturnPart = ToolReturnPart  # type: ignore[misc]

__all__ = ["convert_new", "from_canonical", "to_canonical"]


def _kind(part: Any) -> str:
    return str(getattr(part, "part_kind", ""))


def _answers_call(part: Any) -> TypeGuard[Any]:
    """A request part that answers a tool call (and must stay with it): a tool return, or a
    retry naming the tool. Both carry ``tool_call_id``; the guard tells the checker so, since
    the second is only recognised by its ``part_kind`` (it is deprecated in newer releases)."""
    if isinstance(part, BaseToolReturnPart):
        return True
    # the deprecated RetryPromptPart answers a call only when it names the tool
    return _kind(part) == "retry-prompt" and getattr(part, "tool_name", None) is not None


def _tool_content(part: Any) -> str:
    for method in ("model_response_str", "model_response"):
        fn = getattr(part, method, None)
        if callable(fn):
            try:
                return str(fn())
            except Exception:  # odd content: fall through to a plain rendering
                break
    content = getattr(part, "content", "")
    return (
        content
        if isinstance(content, str)
        else json.dumps(content, default=str, ensure_ascii=False)
    )


def _user_item(item: Any) -> dict[str, Any] | None:
    if isinstance(item, str):
        return {"type": "text", "text": item}
    if type(item).__name__ == "CachePoint":
        return None
    if isinstance(getattr(item, "content", None), str) and not hasattr(item, "url"):
        return {"type": "text", "text": item.content}  # TextContent and friends
    url = getattr(item, "url", None)
    kind = str(getattr(item, "kind", ""))
    if url is not None and kind.startswith("image"):
        return {"type": "image_url", "image_url": {"url": url}}
    if getattr(item, "is_image", False) and hasattr(item, "data_uri"):
        return {"type": "image_url", "image_url": {"url": item.data_uri}}
    # audio, video, documents: counted by name only; the provider bills them its own way
    name = url or getattr(item, "identifier", None) or type(item).__name__
    return {"type": "file", "file": {"filename": str(name)}}


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = [p for p in map(_user_item, content) if p is not None]
    return parts


def _response_to_canonical(msg: ModelResponse) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in msg.parts:
        if isinstance(part, ToolCallPart):
            calls.append(make_tool_call(part.tool_call_id, part.tool_name, part.args_as_json_str()))
        elif isinstance(part, TextPart):
            texts.append(part.content)
        elif _kind(part) == "thinking":
            # providers that take thinking back (Anthropic tool loops) bill it as input
            texts.append(getattr(part, "content", "") or "")
        elif _kind(part).startswith("builtin-tool"):
            body = (
                getattr(part, "args", None)
                if "call" in _kind(part)
                else getattr(part, "content", None)
            )
            rendered = json.dumps(body, default=str, ensure_ascii=False)
            texts.append(f"{getattr(part, 'tool_name', '')}: {rendered}")
        else:
            content = getattr(part, "content", None)
            if isinstance(content, str):
                texts.append(content)
    msg_dict: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        msg_dict["tool_calls"] = calls
    return msg_dict


def _request_to_canonical(
    i: int, msg: ModelRequest
) -> tuple[list[dict[str, Any]], list[tuple[Ref, ...]]]:
    tools: list[tuple[dict[str, Any], tuple[Ref, ...]]] = []
    others: list[tuple[dict[str, Any], tuple[Ref, ...]]] = []
    for j, part in enumerate(msg.parts):
        kind = _kind(part)
        if _answers_call(part):
            tools.append(
                (
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "content": _tool_content(part),
                    },
                    ((i, j),),
                )
            )
        elif isinstance(part, SystemPromptPart):
            others.append(({"role": "system", "content": part.content}, ((i, j),)))
        elif isinstance(part, UserPromptPart):
            others.append(({"role": "user", "content": _user_content(part.content)}, ((i, j),)))
        elif kind in ("retry-prompt", "retry-feedback"):
            others.append(({"role": "user", "content": _tool_content(part)}, ((i, j),)))
        elif kind == "compaction" and (summary := getattr(part, "content", None)):
            # an application-written summary: sent in the user voice
            others.append(({"role": "user", "content": summary}, ((i, j),)))
        # anything else (instruction/tool-availability deltas...) rides along with its request
    pairs = tools + others  # tool results answer the previous response: they go first
    return [p[0] for p in pairs], [p[1] for p in pairs]


def to_canonical(
    messages: Sequence[ModelMessage], *, prefix: Sequence[Mapping[str, Any]] = ()
) -> Converted[ModelMessage]:
    """Canonical dicts for PydanticAI messages, mapped back part by part.

    ``prefix`` dicts (e.g. instructions to count) come first and map back to nothing. A message
    with nothing to count (only instruction deltas, say) travels with the next message.
    """
    items = list(messages)
    out: list[dict[str, Any]] = [dict(p) for p in prefix]
    origins: list[tuple[Ref, ...]] = [() for _ in prefix]
    pending: list[Ref] = []  # content-less messages waiting for a message to ride with
    for i, msg in enumerate(items):
        refs: list[tuple[Ref, ...]]
        if isinstance(msg, ModelResponse):
            dicts, refs = [_response_to_canonical(msg)], [((i, None),)]
        else:
            dicts, refs = _request_to_canonical(i, msg)
        if not dicts:
            pending.append((i, None))
            continue
        if pending:
            refs[0] = tuple(pending) + refs[0]
            pending = []
        out.extend(dicts)
        origins.extend(refs)
    if pending and len(out) > len(prefix):
        origins[-1] = origins[-1] + tuple(pending)
    return Converted(items, out, origins, rebuild=_drop_parts)


def _drop_parts(msg: ModelMessage, dropped: frozenset[int]) -> ModelMessage | None:
    parts: list[Any] = [p for j, p in enumerate(msg.parts) if j not in dropped]
    if not any(_counts(p) for p in parts):
        return None  # only bookkeeping parts left: nothing to send
    # replace() keeps instructions, timestamps, run and conversation ids
    if isinstance(msg, ModelResponse):
        return dataclasses.replace(msg, parts=parts)
    return dataclasses.replace(msg, parts=parts)


def _counts(part: Any) -> bool:
    return (
        _answers_call(part)
        or isinstance(part, (SystemPromptPart, UserPromptPart))
        or _kind(part)
        in (
            "retry-prompt",
            "retry-feedback",
            "compaction",
        )
    )


def from_canonical(
    messages: Iterable[Mapping[str, Any]], *, tool_names: Mapping[str, str] | None = None
) -> list[ModelMessage]:
    """PydanticAI messages for canonical dicts: runs of system/user/tool messages make one
    ``ModelRequest``, an assistant message a ``ModelResponse``. ``tool_names`` maps call ids to
    tool names for tool messages without ``name``."""
    names = dict(tool_names or {})
    out: list[ModelMessage] = []
    parts: list[Any] = []

    def flush() -> None:
        if parts:
            out.append(ModelRequest(parts=list(parts)))
            parts.clear()

    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if role == "assistant":
            flush()
            rparts: list[Any] = []
            text = content_text(content)
            if text:
                rparts.append(TextPart(text))
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                names[call["id"]] = fn.get("name", "")
                rparts.append(
                    ToolCallPart(fn.get("name", ""), fn.get("arguments") or None, call["id"])
                )
            out.append(ModelResponse(parts=rparts))
        elif role == "tool":
            call_id = m.get("tool_call_id") or ""
            name = m.get("name") or names.get(call_id, "")
            parts.append(ToolReturnPart(name, content_text(content), call_id))
        elif role in SYSTEM_ROLES:
            parts.append(SystemPromptPart(content_text(content)))
        else:
            parts.append(
                UserPromptPart(content if isinstance(content, str) else content_text(content))
            )
    flush()
    return out


def _tool_returns(conv: Converted[ModelMessage]) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for i, msg in enumerate(conv.items):
        if isinstance(msg, ModelRequest):
            for j, part in enumerate(msg.parts):
                if _answers_call(part):
                    found[part.tool_call_id] = (i, j)
    return found


def convert_new(
    conv: Converted[ModelMessage],
) -> Callable[[Sequence[Mapping[str, Any]]], list[ModelMessage]]:
    """``convert_new`` for :meth:`Converted.reassemble`: an edited tool result (a truncated
    output) becomes a copy of its original part, so tool name, metadata and id survive."""
    returns = _tool_returns(conv)
    names = {
        part.tool_call_id: part.tool_name
        for msg in conv.items
        if isinstance(msg, ModelResponse)
        for part in msg.parts
        if isinstance(part, ToolCallPart)
    }

    def convert(dicts: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        edited: list[Any] = []
        source: list[ModelRequest] = []  # the request the edited parts came from

        def flush() -> None:
            if edited:
                # the original request's instructions, timestamp and ids stay with its parts
                out.append(dataclasses.replace(source[0], parts=list(edited)))
                edited.clear()
                source.clear()

        for d in dicts:
            call_id = d.get("tool_call_id") if d.get("role") == "tool" else None
            where = returns.get(call_id) if isinstance(call_id, str) else None
            if where is None:
                flush()
                out.extend(from_canonical([d], tool_names=names))
                continue
            i, j = where
            request = conv.items[i]
            if not isinstance(request, ModelRequest):  # never: returns index requests only
                continue
            if source and source[0] is not request:
                flush()
            source[:1] = [request]
            part: Any = request.parts[j]
            text = content_text(d.get("content"))
            edited.append(
                dataclasses.replace(part, content=text) if hasattr(part, "content") else part
            )
        flush()
        return out

    return convert
