"""OpenAI Responses API input items <-> canonical chat messages.

A Responses conversation is a flat list of items. Messages with a user, system or developer role
map one to one. The items one model response produces (``reasoning``, an assistant ``message``,
``function_call`` s, hosted-tool calls like ``web_search_call``) become one canonical assistant
message, so a reasoning item always travels with what follows it. Every ``*_call`` item with a
``call_id`` (``function_call``, ``custom_tool_call``, ``computer_call``, ``shell_call``...) is a
tool call answered by the matching ``*_call_output`` item, which becomes a canonical tool message;
``mcp_approval_request`` / ``mcp_approval_response`` pair the same way.

Items may be plain dicts (``TResponseInputItem``) or SDK objects (``response.output``); fitting
returns the caller's own objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .canonical import (
    Converted,
    Ref,
    as_dict,
    content_text,
    json_arguments,
    make_tool_call,
)
from .fitting import FittedItems, fit_converted

__all__ = [
    "call_key",
    "fit_responses",
    "from_responses",
    "new_items",
    "output_key",
    "to_responses",
]

# Calls run by the client: their output item must follow, answered or not.
_CLIENT_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
# Keys that are bookkeeping or opaque blobs: leaving them out of the text we count keeps an
# encrypted payload from being counted as if it were prose.
_UNCOUNTED_KEYS = frozenset({"id", "status", "type", "encrypted_content", "call_id"})


def _type(item: Mapping[str, Any]) -> str:
    t = item.get("type")
    if t is None and "role" in item:
        return "message"
    return str(t) if t is not None else ""


def call_key(item: Any) -> str | None:
    """The id a later output item answers, when ``item`` is a tool call; else None."""
    d = as_dict(item)
    t = _type(d)
    if t == "mcp_approval_request":
        return d.get("id")
    if t.endswith("_call") or t == "program":
        return d.get("call_id")
    return None


def output_key(item: Any) -> str | None:
    """The call id ``item`` answers, when it is a tool output; else None."""
    d = as_dict(item)
    t = _type(d)
    if t == "mcp_approval_response":
        return d.get("approval_request_id")
    if t == "local_shell_call_output":
        # this output names its call by "id" in the API schema
        return d.get("call_id") or d.get("id")
    if t.endswith("_output"):
        return d.get("call_id")
    return None


def _part_to_canonical(part: Any) -> dict[str, Any]:
    p = as_dict(part)
    if isinstance(p, str):
        return {"type": "text", "text": p}
    t = p.get("type")
    if t in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "text": p.get("text", "")}
    if t == "refusal":
        return {"type": "text", "text": p.get("refusal", "")}
    if t == "input_image":
        image: dict[str, Any] = {"url": p.get("image_url") or p.get("file_id") or ""}
        if p.get("detail") not in (None, "auto"):
            image["detail"] = p["detail"]
        return {"type": "image_url", "image_url": image}
    if t == "input_file":
        file = {k: p[k] for k in ("file_id", "file_data", "file_url", "filename") if k in p}
        return {"type": "file", "file": file}
    if t == "input_audio":
        return {"type": "input_audio", "input_audio": p.get("input_audio", {})}
    return {"type": "text", "text": _compact(p)}


def _part_to_responses(part: Mapping[str, Any], role: str) -> dict[str, Any]:
    t = part.get("type")
    if t == "text":
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": kind, "text": part.get("text", "")}
    if t == "image_url":
        image = part.get("image_url") or {}
        if isinstance(image, str):
            image = {"url": image}
        return {
            "type": "input_image",
            "image_url": image.get("url"),
            "detail": image.get("detail", "auto"),
        }
    if t == "file":
        return {"type": "input_file", **dict(part.get("file") or {})}
    if t == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio")}
    return {"type": "input_text", "text": content_text([part]) or json.dumps(part)}


def _content_to_canonical(content: Any) -> str | list[dict[str, Any]]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [_part_to_canonical(p) for p in content]


def _content_to_responses(content: Any, role: str) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [_part_to_responses(p, role) for p in content]


def _compact(d: Mapping[str, Any]) -> str:
    """Compact JSON of an item's meaningful fields: what we count for items without prose."""
    body = {k: v for k, v in d.items() if k not in _UNCOUNTED_KEYS}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)


def _assistant_piece(
    d: Mapping[str, Any], t: str, answered: set[str]
) -> tuple[str | None, dict | None]:
    """(text to count, tool call) contributed by one assistant-side item."""
    if t == "message":
        return content_text(_content_to_canonical(d.get("content"))), None
    if t == "reasoning":
        texts = [p.get("text", "") for p in map(as_dict, d.get("summary") or ())]
        texts += [p.get("text", "") for p in map(as_dict, d.get("content") or ())]
        return ("\n".join(texts) if texts else None), None
    key = call_key(d)
    if key is not None and (t in _CLIENT_CALLS or key in answered):
        if t == "function_call":
            return None, make_tool_call(key, d.get("name", ""), d.get("arguments"))
        if t == "custom_tool_call":
            return None, make_tool_call(key, d.get("name", ""), d.get("input", ""))
        if t == "mcp_approval_request":
            return None, make_tool_call(key, d.get("name", t), d.get("arguments"))
        return None, make_tool_call(key, d.get("name") or t, _compact(d))
    return _compact(d), None


def from_responses(items: Iterable[Any]) -> Converted[Any]:
    """Convert Responses API input items to canonical messages, remembering their origins."""
    items = list(items)
    dicts = [as_dict(it) for it in items]
    answered = {k for k in map(output_key, dicts) if k is not None}
    messages: list[dict[str, Any]] = []
    origins: list[tuple[Ref, ...]] = []

    group: list[int] = []  # consecutive assistant-side items -> one assistant message
    texts: list[str] = []
    calls: list[dict[str, Any]] = []

    def close_group() -> None:
        if not group:
            return
        msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
        if calls:
            msg["tool_calls"] = list(calls)
        messages.append(msg)
        origins.append(tuple((i, None) for i in group))
        group.clear()
        texts.clear()
        calls.clear()

    for i, d in enumerate(dicts):
        t = _type(d)
        role = d.get("role")
        out_key = output_key(d)
        if t == "message" and role in ("user", "system", "developer"):
            close_group()
            messages.append({"role": role, "content": _content_to_canonical(d.get("content"))})
            origins.append(((i, None),))
        elif out_key is not None:
            close_group()
            if t in ("function_call_output", "custom_tool_call_output"):
                output = d.get("output")
                content: Any = output if isinstance(output, str) else _content_to_canonical(output)
            elif t == "computer_call_output" and isinstance(d.get("output"), Mapping):
                shot = d["output"]
                url = shot.get("image_url") or shot.get("file_id") or ""
                content = [{"type": "image_url", "image_url": {"url": url}}]
            else:
                output = d.get("output")
                content = output if isinstance(output, str) else _compact(d)
            messages.append({"role": "tool", "tool_call_id": out_key, "content": content})
            origins.append(((i, None),))
        elif t == "additional_tools":
            close_group()
            messages.append({"role": "developer", "content": _compact(d)})
            origins.append(((i, None),))
        else:
            # assistant messages, reasoning, calls, hosted tools, references: the model's side
            text, call = _assistant_piece(d, t, answered)
            group.append(i)
            if text is not None:
                texts.append(text)
            if call is not None:
                calls.append(call)
    close_group()
    return Converted(items, messages, origins)


def to_responses(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Convert canonical messages to Responses API input items (``TResponseInputItem`` dicts)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            content = m.get("content")
            output = content if isinstance(content, str) else _content_to_responses(content, "user")
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": output}
            )
        elif role == "assistant":
            content = m.get("content")
            if content is not None and (content != "" or not m.get("tool_calls")):
                items.append(
                    {"role": "assistant", "content": _content_to_responses(content, "assistant")}
                )
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": fn.get("name", ""),
                        "arguments": json_arguments(fn.get("arguments")),
                    }
                )
        else:
            items.append(
                {"role": role, "content": _content_to_responses(m.get("content"), role or "user")}
            )
    return items


def new_items(conv: Converted[Any]) -> Callable[[Sequence[Mapping[str, Any]]], list[Any]]:
    """``convert_new`` for :meth:`Converted.reassemble` of Responses items: an edited tool
    result (a truncated output) becomes a copy of its original output item, so its type
    (``custom_tool_call_output``...) and fields survive; other new messages go through
    :func:`to_responses`."""
    outputs: dict[str, Any] = {}
    for item in conv.items:
        key = output_key(item)
        if key is not None:
            outputs[key] = item

    def convert(dicts: Sequence[Mapping[str, Any]]) -> list[Any]:
        out: list[Any] = []
        for d in dicts:
            call_id = d.get("tool_call_id") if d.get("role") == "tool" else None
            original = outputs.get(call_id) if isinstance(call_id, str) else None
            if original is None:
                out.extend(to_responses([d]))
                continue
            o = as_dict(original)
            content = d.get("content")
            if _type(o) in ("function_call_output", "custom_tool_call_output"):
                new_output = (
                    content if isinstance(content, str) else _content_to_responses(content, "user")
                )
                out.append({**o, "output": new_output})
            else:  # screenshots and structured outputs: nothing to cut, send the original
                out.append(original)
        return out

    return convert


def fit_responses(items: Iterable[Any], budget: int, **fit_kwargs: Any) -> FittedItems[Any]:
    """``wf.fit`` over Responses items: returns a :class:`~windowfit.adapters.FittedItems` whose
    ``items`` are the kept originals (calls with their outputs, reasoning with its turn)."""
    return fit_converted(from_responses(items), budget, **fit_kwargs)
