"""Anthropic Messages API <-> canonical chat messages.

Anthropic keeps the system prompt outside the message list (``system=``) and carries tool traffic
as content blocks: an assistant turn holds ``tool_use`` blocks, and the next user turn answers
them with ``tool_result`` blocks (before any text of its own). Canonically the assistant turn is
one message with ``tool_calls`` and each ``tool_result`` a ``tool`` message, so a user turn may
become several canonical messages; fitting maps them back and, in the rare case only part of a
user turn is kept (its tool results fell out of the window, its text did not), returns a copy of
that turn without the dropped blocks. Blocks may be dicts or SDK objects (``response.content``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .canonical import (
    SYSTEM_ROLES,
    Converted,
    Ref,
    as_dict,
    content_text,
    make_tool_call,
)
from .fitting import FittedItems, fit_converted

__all__ = ["fit_anthropic", "from_anthropic", "new_messages", "to_anthropic"]

_DATA_URL = re.compile(r"^data:([^;,]+);base64,(.*)$", re.DOTALL)


def _compact(d: Mapping[str, Any]) -> str:
    body = {k: v for k, v in d.items() if k not in ("type", "id", "cache_control", "signature")}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)


def _source_url(source: Mapping[str, Any]) -> str:
    if source.get("type") == "base64":
        media = source.get("media_type", "application/octet-stream")
        return f"data:{media};base64,{source.get('data', '')}"
    return str(source.get("url") or source.get("file_id") or "")


def _url_source(url: str) -> dict[str, Any]:
    m = _DATA_URL.match(url)
    if m:
        return {"type": "base64", "media_type": m.group(1), "data": m.group(2)}
    return {"type": "url", "url": url}


def _block_to_part(block: Any) -> dict[str, Any]:
    b = as_dict(block)
    if isinstance(b, str):
        return {"type": "text", "text": b}
    t = b.get("type")
    if t == "text":
        return {"type": "text", "text": b.get("text", "")}
    if t == "image":
        return {"type": "image_url", "image_url": {"url": _source_url(b.get("source") or {})}}
    if t == "document":
        source = b.get("source") or {}
        if source.get("type") == "text":
            return {"type": "text", "text": source.get("data", "")}
        return {"type": "file", "file": {"file_data": _source_url(source)}}
    return {"type": "text", "text": _compact(b)}


def _part_to_block(part: Any) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    t = part.get("type")
    if t == "text":
        return {"type": "text", "text": part.get("text", "")}
    if t == "image_url":
        image = part.get("image_url") or {}
        url = image if isinstance(image, str) else image.get("url", "")
        return {"type": "image", "source": _url_source(url)}
    if t == "file":
        f = part.get("file") or {}
        url = f.get("file_data") or f.get("file_url") or ""
        return {"type": "document", "source": _url_source(url)}
    return {"type": "text", "text": content_text([part]) or json.dumps(part)}


def _tool_result_content(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [_block_to_part(b) for b in content]


def from_anthropic(messages: Iterable[Any], system: Any = None) -> Converted[Any]:
    """Convert Messages API ``messages`` (and the top-level ``system``) to canonical messages.

    The system prompt, when given, becomes canonical message 0 and maps back to no item.
    """
    items = list(messages)
    out: list[dict[str, Any]] = []
    origins: list[tuple[Ref, ...]] = []
    if system is not None:
        sys_content: Any = (
            system if isinstance(system, str) else [_block_to_part(b) for b in system]
        )
        out.append({"role": "system", "content": sys_content})
        origins.append(())
    for i, item in enumerate(items):
        m = as_dict(item)
        role = m.get("role")
        content = m.get("content")
        if role == "assistant":
            out.append(_assistant(content))
            origins.append(((i, None),))
            continue
        if isinstance(content, str) or content is None:
            out.append({"role": role or "user", "content": content or ""})
            origins.append(((i, None),))
            continue
        # a user turn: tool results first (they answer the previous turn), then its own content
        parts: list[dict[str, Any]] = []
        part_refs: list[Ref] = []
        for j, block in enumerate(content):
            b = as_dict(block)
            if isinstance(b, Mapping) and b.get("type") == "tool_result":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": b.get("tool_use_id"),
                        "content": _tool_result_content(b.get("content")),
                    }
                )
                origins.append(((i, j),))
            else:
                parts.append(_block_to_part(b))
                part_refs.append((i, j))
        if parts or not part_refs and not content:
            out.append({"role": role or "user", "content": parts})
            origins.append(tuple(part_refs) or ((i, None),))
    return Converted(items, out, origins, rebuild=_drop_blocks)


def _assistant(content: Any) -> dict[str, Any]:
    if content is None or isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        b = as_dict(block)
        t = b.get("type") if isinstance(b, Mapping) else "text"
        if t == "text":
            texts.append(b["text"] if isinstance(b, Mapping) else str(b))
        elif t == "tool_use":
            calls.append(make_tool_call(b.get("id", ""), b.get("name", ""), b.get("input") or {}))
        elif t == "thinking":
            # sent back on tool-use turns and billed then: count it
            texts.append(b.get("thinking", ""))
        elif t == "redacted_thinking":
            continue
        else:  # server tools and their results live inside the assistant turn
            texts.append(_compact(b))
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    return msg


def _drop_blocks(message: Any, dropped: frozenset[int]) -> Any:
    m = as_dict(message)
    kept = [b for j, b in enumerate(m.get("content") or ()) if j not in dropped]
    if not kept:
        return None
    return {**m, "content": kept}


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
    """Convert canonical messages to ``(system, messages)`` for ``client.messages.create``.

    System and developer messages are hoisted into ``system`` (a string, or text blocks when any
    of them has parts; None when there are none); runs of tool messages become one user turn of
    ``tool_result`` blocks.
    """
    systems = [m for m in messages if m.get("role") in SYSTEM_ROLES]
    system: Any = None
    if systems:
        if all(isinstance(m.get("content"), str) for m in systems):
            system = "\n\n".join(m["content"] for m in systems)
        else:
            system = [_part_to_block(p) for m in systems for p in _as_parts(m.get("content"))]
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush() -> None:
        if results:
            out.append({"role": "user", "content": list(results)})
            results.clear()

    for m in messages:
        role = m.get("role")
        if role in SYSTEM_ROLES:
            continue
        if role == "tool":
            content = m.get("content")
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id")}
            block["content"] = (
                content
                if isinstance(content, str) or content is None
                else [_part_to_block(p) for p in content]
            )
            if block["content"] is None:
                block["content"] = ""
            results.append(block)
            continue
        flush()
        content = m.get("content")
        if role == "assistant":
            calls = m.get("tool_calls") or ()
            if not calls:
                out.append({"role": "assistant", "content": _user_content(content)})
                continue
            blocks = [_part_to_block(p) for p in _as_parts(content) if not _empty_text(p)]
            for call in calls:
                fn = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": fn.get("name", ""),
                        "input": _input(fn.get("arguments")),
                    }
                )
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": _user_content(content)})
    flush()
    return system, out


def _as_parts(content: Any) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _empty_text(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and not part.get("text")


def _user_content(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return [_part_to_block(p) for p in content]


def _input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments:
        return {}
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {"input": arguments}
    # Anthropic wants an object; keep other JSON values reachable rather than failing the call
    return value if isinstance(value, dict) else {"input": value}


def new_messages(conv: Converted[Any]) -> Callable[[Sequence[Mapping[str, Any]]], list[Any]]:
    """``convert_new`` for :meth:`Converted.reassemble` of Anthropic messages: an edited tool
    result (a truncated output) becomes a copy of its original ``tool_result`` block
    (``is_error``, ``cache_control`` survive), runs of them one user turn; other new messages
    (a summary as a user/assistant pair) go through :func:`to_anthropic`."""
    blocks: dict[str, Any] = {}
    for item in conv.items:
        m = as_dict(item)
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            for block in m["content"]:
                b = as_dict(block)
                if isinstance(b, Mapping) and isinstance(b.get("tool_use_id"), str):
                    if b.get("type") == "tool_result":
                        blocks[b["tool_use_id"]] = b

    def convert(dicts: Sequence[Mapping[str, Any]]) -> list[Any]:
        out: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for d in dicts:
            call_id = d.get("tool_call_id") if d.get("role") == "tool" else None
            original = blocks.get(call_id) if isinstance(call_id, str) else None
            if original is not None:
                content = d.get("content")
                new = (
                    content
                    if isinstance(content, str)
                    else [_part_to_block(p) for p in content or ()]
                )
                results.append({**original, "content": new})
                continue
            if results:
                out.append({"role": "user", "content": list(results)})
                results.clear()
            out.extend(to_anthropic([d])[1])
        if results:
            out.append({"role": "user", "content": results})
        return out

    return convert


def fit_anthropic(
    messages: Iterable[Any], budget: int, *, system: Any = None, **fit_kwargs: Any
) -> FittedItems[Any]:
    """``wf.fit`` over Messages API messages; ``budget`` includes the system prompt.

    Returns a :class:`~windowfit.adapters.FittedItems` whose ``items`` are the kept messages (the
    caller's objects, or trimmed copies of partly kept user turns); ``system`` is unchanged.
    """
    return fit_converted(from_anthropic(messages, system), budget, **fit_kwargs)
