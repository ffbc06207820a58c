"""The canonical chat message on the Python side: its text, its copies, its fingerprint.

A message is an OpenAI-style dict (``role``, ``content`` as a str, None or a list of parts,
``tool_calls``, ``tool_call_id``); the adapters convert other shapes to it. Counting, fitting and
the tool-unit rules live in the Rust core; this module owns the few things Python needs to do
with a message itself, so that every layer reads text the same way, and exposes the core's
tool-unit analysis (``tool_units``, ``history_problems``) to Python callers.

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

from windowfit import _core

__all__ = [
    "ROLE_ALIASES",
    "SYSTEM_ROLES",
    "canonical_role",
    "content_text",
    "copy_json",
    "fingerprint",
    "history_problems",
    "message_text",
    "plain_message",
    "plain_messages",
    "tool_units",
]

Message = Mapping[str, Any]

#: roles that carry instructions rather than conversation (always sent, never summarized)
SYSTEM_ROLES = frozenset(("system", "developer"))

#: other names for the canonical roles: LangChain's message types, and the legacy
#: function-calling role, whose messages answer a call as tool messages do
ROLE_ALIASES: Mapping[str, str] = {"human": "user", "ai": "assistant", "function": "tool"}


def canonical_role(role: str) -> str:
    """The canonical (OpenAI chat) role for ``role`` or one of its :data:`ROLE_ALIASES`."""
    return ROLE_ALIASES.get(role, role)


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


def plain_message(obj: Any) -> Any:
    """A message (or content part, or tool call) as the dict windowfit reads.

    Dicts are returned as they are; an SDK object (an OpenAI ``ChatCompletionMessage``, an
    Anthropic ``Message`` or content block: pydantic models) is read through
    ``model_dump(mode="json", exclude_none=True)``, so the unset optional fields SDK responses
    carry are neither counted nor stored (an Anthropic ``Message`` response becomes its
    ``role`` and ``content``); an object with ``to_dict`` through that; anything
    else unchanged (the caller then reports its type). The core's message reader calls this
    for every value that is not a dict, the stores for every message they write.
    """
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        plain = dump(mode="json", exclude_none=True)
        if isinstance(plain, dict) and plain.get("type") == "message" and "role" in plain:
            # an Anthropic response: as a message of the next request, its role and content
            # (id, model, usage... are the response's, and the API refuses them back)
            return {"role": plain["role"], "content": plain.get("content", [])}
        return plain
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return obj


def plain_messages(messages: list[Any]) -> list[Any]:
    """``messages`` with SDK objects read as dicts (``plain_message``); the very list when it
    holds dicts only, as nearly every history does."""
    if _core._dicts_only(messages):  # one type check per message in the core
        return messages
    return [plain_message(m) for m in messages]


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
        # scalars (most values of a message or a state) are returned as they are without a call
        return {k: v if type(v) in _SCALARS else copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _SCALARS else copy_json(v) for v in value]
    return value


_SCALARS = frozenset((str, int, float, bool, type(None)))


def fingerprint(message: Any) -> str:
    """A short content hash of a message (or any JSON value), stable across processes."""
    key = _memo_key(message)
    if key is not None:
        found = _FINGERPRINTS.get(key)
        if found is None:
            if len(_FINGERPRINTS) >= _MEMO_ENTRIES:
                _FINGERPRINTS.clear()
            found = _FINGERPRINTS[key] = _fingerprint(message)
        return found
    return _fingerprint(message)


# The manager fingerprints the same few messages every turn (the summary anchor, the scanned
# prefix's last message, the head): a message whose values are all strings is remembered by
# its items. Equal items hash to the same fingerprint, so the memo can never answer wrong;
# the bounds keep what it holds of the caller's texts small.
_MEMO_ENTRIES = 256
_MEMO_CHARS = 16_384
_FINGERPRINTS: dict[tuple[tuple[str, str | None], ...], str] = {}


def _memo_key(message: Any) -> tuple[tuple[str, str | None], ...] | None:
    if type(message) is not dict:
        return None
    size = 0
    for k, v in message.items():
        if type(k) is not str or not (type(v) is str or v is None):
            return None  # a nested or non-string value could change in place
        size += len(v) if v is not None else 0
    return tuple(message.items()) if size <= _MEMO_CHARS else None


def _fingerprint(message: Any) -> str:
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


def tool_units(messages: Sequence[Message]) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` spans covering ``messages`` in order, never splitting a tool round.

    ``kind`` is ``"message"``, ``"tool_round"`` (a call message, OpenAI ``tool_calls`` or
    Anthropic ``tool_use`` blocks, and the run of result messages right after it) or
    ``"orphan"`` (a result message with no call before its run). The spans come from the
    core's pairing analysis, the very rule a fit applies.
    """
    return list(_core.tool_units(messages).units)


def history_problems(messages: Sequence[Message]) -> list[str]:
    """Ways a history would be rejected by a chat API, by message index; empty when valid.

    The rule is OpenAI's, which every provider shares in some form (Anthropic blocks
    included): a call message's calls are answered by the result messages right after it,
    each id once, and every result answers an open call of that message.
    """
    problems: list[str] = []
    for index, kind, ids in _core.tool_units(messages).problems:
        named = ", ".join(repr(i) for i in ids)
        if kind == "orphan":
            problems.append(f"message {index}: tool result {named} answers no pending call")
        else:
            problems.append(f"message {index}: tool call {named} is not answered")
    return problems
