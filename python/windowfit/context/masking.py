"""Observation masking (context editing): old tool results and old reasoning give way to a
short placeholder, in batches, so the prompt cache's prefix moves rarely.

A tool result older than the most recent ``keep`` results is replaced by one line naming the
tool and where the full output is: the file an ``ObservationTruncator`` saved it to when its
preview says so, else the message's index in the stored history (the store keeps it whole).
Reasoning the provider does not need back (``reasoning_content``, ``thinking`` parts) is
dropped from assistant messages older than the same boundary. A message carrying a provider
item that must pass through untouched (Anthropic ``redacted_thinking`` / ``compaction``
blocks, OpenAI encrypted reasoning or compaction items) is never edited: it is counted as it
is and never split.

The boundary (``mask_until``, carried in the manager's state) only moves when the newly
maskable part frees at least ``clear_at_least`` tokens: a small clearing would break the
cached prefix for little gain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "advance_mask",
    "is_passthrough",
    "masked",
    "maskable",
    "tool_name",
]

Message = Mapping[str, Any]

# Content part / item types a provider needs back byte for byte.
_PASSTHROUGH_TYPES = frozenset({"redacted_thinking", "compaction", "compaction_summary"})
_THINKING_TYPES = frozenset({"thinking", "reasoning"})
_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
# The note an ObservationTruncator leaves in a preview: "full output: <path>" or
# "full output saved to <path>".
_SAVED_RE = re.compile(r"full output(?: saved to|:)\s+(?!not saved|could not)([^\s\]]+)")


def is_passthrough(msg: Message) -> bool:
    """Whether ``msg`` holds a provider item that must be sent back untouched."""
    if "encrypted_content" in msg or msg.get("type") in _PASSTHROUGH_TYPES:
        return True
    content = msg.get("content")
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping) and (
                part.get("type") in _PASSTHROUGH_TYPES or "encrypted_content" in part
            ):
                return True
    return False


def _has_thinking(msg: Message) -> bool:
    if any(msg.get(k) for k in _REASONING_KEYS):
        return True
    content = msg.get("content")
    return isinstance(content, list) and any(
        isinstance(p, Mapping) and p.get("type") in _THINKING_TYPES for p in content
    )


def maskable(msg: Message) -> bool:
    """A tool result, or an assistant message with reasoning to drop; never a provider item."""
    role = msg.get("role")
    if role == "tool":
        return not is_passthrough(msg)
    return role == "assistant" and _has_thinking(msg) and not is_passthrough(msg)


def tool_name(msgs: Sequence[Message], i: int) -> str:
    """The name of the tool whose result is ``msgs[i]``: its ``name``, else the call's."""
    name = msgs[i].get("name")
    if isinstance(name, str) and name:
        return name
    call_id = msgs[i].get("tool_call_id")
    for j in range(i - 1, -1, -1):
        calls = msgs[j].get("tool_calls")
        if msgs[j].get("role") != "assistant" or not calls:
            continue
        for call in calls:
            if isinstance(call, Mapping) and call.get("id") == call_id:
                fn = call.get("function")
                if isinstance(fn, Mapping) and isinstance(fn.get("name"), str):
                    return fn["name"]
        break  # results follow their own call: an earlier call is not theirs
    return "tool"


def masked(
    msgs: Sequence[Message], i: int, language: str | None = None, *, saved_to: str | None = None
) -> dict[str, Any]:
    """``msgs[i]`` edited: a tool result becomes its placeholder (naming ``saved_to``, the file
    the manager's truncator saved the full output to, else the file a truncator named in the
    output itself, else the message's place in the stored history); an assistant message
    loses its reasoning. A new dict; the input is untouched."""
    msg = msgs[i]
    if msg.get("role") == "tool":
        content = msg.get("content")
        found = _SAVED_RE.search(content) if isinstance(content, str) and not saved_to else None
        name = tool_name(msgs, i)
        saved = saved_to or (found.group(1) if found else None)
        if language == "zh":
            where = saved or f"存档历史第 {i} 条消息"
            text = f"[{name} 的旧输出已清除以节省上下文；完整输出：{where}]"
        else:
            where = saved or f"message {i} of the stored history"
            text = f"[old output of {name} cleared to save context; full output: {where}]"
        return {**msg, "content": text}
    out = {k: v for k, v in msg.items() if k not in _REASONING_KEYS}
    content = msg.get("content")
    if isinstance(content, list):
        kept = [
            p for p in content if not (isinstance(p, Mapping) and p.get("type") in _THINKING_TYPES)
        ]
        out["content"] = kept if kept else ""
    return out


def _keep_boundary(msgs: Sequence[Message], keep: int) -> int:
    """Index of the ``keep``-th most recent tool result (``len(msgs)`` when keep is 0):
    nothing from there on is masked."""
    if keep <= 0:
        return len(msgs)
    seen = 0
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") == "tool":
            seen += 1
            if seen == keep:
                return i
    return 0


def advance_mask(
    msgs: Sequence[Message],
    mask_until: int,
    *,
    keep: int,
    clear_at_least: int,
    count: Callable[[Message], int],
) -> tuple[int, int]:
    """The new mask boundary and the tokens its move frees.

    Everything maskable before the boundary is masked. It moves to just before the ``keep``
    most recent tool results (a whole tool round stays together: the boundary lands on the
    oldest of those results' round) only when that frees at least ``clear_at_least`` tokens;
    otherwise it stays where it is and ``(mask_until, 0)`` is returned.
    """
    n = len(msgs)
    target = _keep_boundary(msgs, keep)
    # never between a call and its results: back to the assistant message that made the call
    while 0 < target < n and msgs[target].get("role") == "tool":
        target -= 1
    if target <= mask_until:
        return mask_until, 0
    freed = 0
    for i in range(mask_until, target):
        m = msgs[i]
        if maskable(m):
            freed += max(0, count(m) - count(masked(msgs, i)))
            if freed >= clear_at_least:
                # keep measuring only what is needed to decide; the move frees at least this
                return target, freed
    return mask_until, 0
