"""The canonical chat message on the Python side: its text, its copies, its fingerprint.

A message is an OpenAI-style dict (``role``, ``content`` as a str, None or a list of parts,
``tool_calls``, ``tool_call_id``); the adapters convert other shapes to it. Counting, fitting and
the tool-unit rules live in the Rust core; this module owns the few things Python needs to do
with a message itself, so that every layer reads text the same way.

The text rule (one for the whole package):

- ``content_text(content)``: a str as is; None is ""; a list of parts gives each part's text
  (a str part, a part's ``text``, else its ``refusal``) joined by newlines; any other value
  is its JSON. Media parts have no text here, so a converter can tell "no text" apart.
- ``message_text(message)``: what a reader (a summarizer, a language guess) sees of a whole
  message: the same parts, media parts as ``[image]`` / ``[audio]`` markers, then one
  ``name(arguments)`` line per tool call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SYSTEM_ROLES",
    "content_text",
    "copy_json",
    "fingerprint",
    "message_text",
    "next_unit",
]

Message = Mapping[str, Any]

#: roles that carry instructions rather than conversation (always sent, never summarized)
SYSTEM_ROLES = frozenset(("system", "developer"))

_IMAGE_TYPES = frozenset(("image_url", "image", "input_image"))
_AUDIO_TYPES = frozenset(("input_audio", "audio"))


def _part_text(part: Any, *, media: bool) -> str | None:
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return None
    if isinstance(part.get("text"), str):
        return str(part["text"])
    if isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    if media:
        kind = part.get("type")
        if kind in _IMAGE_TYPES:
            return "[image]"
        if kind in _AUDIO_TYPES:
            return "[audio]"
    return None


def _parts_text(content: Any, *, media: bool) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        texts = (_part_text(p, media=media) for p in content)
        return "\n".join(t for t in texts if t)
    return json.dumps(content, ensure_ascii=False, default=str)


def content_text(content: Any) -> str:
    """The text of a message ``content`` (see the module docstring for the rule)."""
    return _parts_text(content, media=False)


def message_text(message: Message) -> str:
    """The readable text of one message: content parts, media markers, tool-call lines."""
    parts = [_parts_text(message.get("content"), media=True)]
    for call in message.get("tool_calls") or ():
        fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        parts.append(f"{fn.get('name', '')}({args})")
    return "\n".join(p for p in parts if p)


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars); tuples become lists.

    Faster than ``copy.deepcopy`` (no memo) and, unlike a JSON round trip, it keeps values that
    are not JSON (they are shared, as messages never nest mutable non-JSON objects).
    """
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [copy_json(v) for v in value]
    return value


def fingerprint(message: Any) -> str:
    """A short content hash of a message (or any JSON value), stable across processes."""
    h = hashlib.blake2b(digest_size=8)
    if isinstance(message, Mapping) and isinstance(message.get("content"), (str, type(None))):
        # the common shape: hash the text directly, only the small rest as JSON
        h.update((message.get("content") or "").encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        message = {k: v for k, v in message.items() if k != "content"}
    try:
        data = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        data = repr(message)
    h.update(data.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def next_unit(messages: Sequence[Message], start: int, stop: int) -> int:
    """End (exclusive) of the unit at ``messages[start]``, within ``messages[:stop]``.

    A unit is a message plus the ``tool`` messages that answer it, so a fold never separates
    a tool call from its results. Only the boundary is needed here; the pairing rules
    themselves (and the Anthropic block shape) are the core's, applied when fitting.
    """
    end = start + 1
    while end < stop and messages[end].get("role") == "tool":
        end += 1
    return end
