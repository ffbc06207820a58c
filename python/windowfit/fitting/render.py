"""A budgeted plain-text rendering of a history, for routers and classifiers.

A router or intent classifier reads the conversation as text inside its own prompt, with a
budget far smaller than the agent's (an 8,000-token router beside a 128k agent). The window is
chosen by ``fit`` itself, so the rendering keeps whole tool rounds and starts on a user turn
like every other window; only the layout is done here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, BudgetError
from windowfit.fitting.window import _as_list, _budget, fit
from windowfit.messages import SYSTEM_ROLES, canonical_role, message_text, plain_messages
from windowfit.truncation import truncate

__all__ = ["render_history"]


def _content_text(message: Mapping[str, Any]) -> str:
    """The message's text without its tool calls (they are rendered compactly instead)."""
    return message_text({"role": message.get("role"), "content": message.get("content")})


def _calls(message: Mapping[str, Any]) -> list[str]:
    """``name(args)`` per tool call (OpenAI ``tool_calls`` or Anthropic ``tool_use``)."""
    out = message_text({"tool_calls": message.get("tool_calls")}).splitlines()
    content = message.get("content")
    if isinstance(content, list):
        out += [
            f"{p.get('name', '')}({json.dumps(p.get('input'), ensure_ascii=False)})"
            for p in content
            if isinstance(p, Mapping) and p.get("type") == "tool_use"
        ]
    return out


def _line(message: Mapping[str, Any], tool_chars: int) -> str:
    role = canonical_role(str(message.get("role", "")))
    if role == "tool":
        text = _content_text(message)
        if len(text) > tool_chars:
            text = text[:tool_chars] + "…"
        return f"TOOL: {text}"
    label = role.upper()
    parts = [_content_text(message)]
    calls = _calls(message)
    if calls:
        shown = [c if len(c) <= tool_chars else c[:tool_chars] + "…" for c in calls]
        parts.append("[calls " + "; ".join(shown) + "]")
    return f"{label}: " + " ".join(p for p in parts if p)


def _header(summary: str) -> str:
    return f"[Earlier conversation summary]:\n{summary}\n"


def render_history(
    messages: Sequence[Any],
    budget: int,
    *,
    counter: Counter | None = None,
    model: str | None = None,
    summary: str | None = None,
    max_turns: int | None = None,
    max_messages: int | None = None,
    tool_chars: int = 200,
    keep_last_user: bool = True,
) -> str:
    """The newest part of ``messages`` as role-labelled lines within ``budget`` tokens.

    A summary of older turns, when given, comes first as a header and is counted in the
    budget (cut to the budget when it alone is larger). System messages are left out (the
    reader has its own prompt); tool calls show as ``[calls name(args)]`` and tool results as
    ``TOOL:`` lines, both cut to ``tool_chars`` characters. ``max_turns`` / ``max_messages``
    cap the window like ``fit``'s. The returned text's token count is at most ``budget``.

    The latest user message (an agent's task) is pinned as ``fit`` pins it
    (``keep_last_user``): it is rendered even when the turns after it fill the budget, and
    cut to the room left when it alone does not fit.
    """
    msgs = plain_messages(_as_list(messages))
    b = _budget(budget)
    if isinstance(tool_chars, bool) or not isinstance(tool_chars, int):
        raise ArgumentTypeError(f"tool_chars must be an int, not {type(tool_chars).__name__}")
    if summary is not None and not isinstance(summary, str):
        raise ArgumentTypeError(f"summary must be a str or None, not {type(summary).__name__}")
    c = resolve_counter(counter, model)
    header = _header(summary) if summary else ""
    if header and c.count(header) > b:
        return truncate(header, b, counter=c).text  # the summary alone fills the budget
    view = _View(b, c, header, tool_chars, keep_last_user, max_turns, max_messages)
    # The window is at the end of the history: read only a suffix long enough to hold it
    # (a rendered line costs at least a token), longer only when the window reached its start.
    # The suffix starts on a user message, so the latest one (the pin) is always inside it.
    span = 2 * b + 16
    while True:
        start = _suffix_start(msgs, span)
        text, whole = _render_window(msgs[start:], view)
        if whole or start == 0:
            return text
        span *= 4


@dataclass(frozen=True)
class _View:
    """What one rendering asks for: the budget, the counter, the summary header and the
    window's rules."""

    budget: int
    counter: Counter
    header: str
    tool_chars: int
    keep_last_user: bool
    max_turns: int | None
    max_messages: int | None


def _suffix_start(msgs: list[Any], span: int) -> int:
    """The start of a suffix of at least ``span`` messages that begins on a plain user
    message (a string from the user, answering no tool call): pairing never reaches across
    one, so the suffix's tool rounds are the whole history's. 0 when there is none."""
    i = len(msgs) - span
    while i > 0:
        m = msgs[i]
        if (
            isinstance(m, Mapping)
            and m.get("role") == "user"
            and isinstance(m.get("content"), str)
            and m.get("tool_call_id") is None
        ):
            return i
        i -= 1
    return 0


def _render_window(msgs: list[Any], view: _View) -> tuple[str, bool]:
    """The rendering of ``msgs`` within the view's budget, and whether it would be the same
    for any history ending with ``msgs`` (the window stopped on its budget, a cap or its pin,
    not at the start of ``msgs``)."""
    b, c, header = view.budget, view.counter, view.header
    convo = [m for m in msgs if not (isinstance(m, Mapping) and m.get("role") in SYSTEM_ROLES)]
    lines: dict[int, str] = {}

    def line(i: int) -> str:
        if i not in lines:
            lines[i] = _line(convo[i], view.tool_chars)
        return lines[i]

    def rendered(fit_budget: int) -> tuple[str, int, list[int], bool]:
        try:
            r = fit(
                convo,
                fit_budget,
                counter=c,
                keep_system=False,
                keep_last_user=view.keep_last_user,
                max_turns=view.max_turns,
                max_messages=view.max_messages,
            )
        except BudgetError:  # below the pins (or the reply priming): nothing fits
            return header, c.count(header), [], True
        stopped = r.stats["stop_reason"] in ("budget", "max_messages", "max_turns")
        kept_lines = [line(i) for i in r.kept]
        text = "\n".join([header, *kept_lines] if header else kept_lines)
        return text, c.count(text), r.kept, stopped

    # fit's window only grows with its budget, so the largest fit budget whose rendering
    # stays within ``b`` is found by bisection; the window one token larger shows whether the
    # history before ``msgs`` could have mattered.
    best: str = header
    best_kept: list[int] = []
    lo, hi = 0, (c.count_messages(convo) if convo else 0)
    while lo <= hi:
        mid = (lo + hi) // 2
        text, tokens, kept, _ = rendered(mid)
        if tokens <= b:
            best, best_kept, lo = text, kept, mid + 1
        else:
            hi = mid - 1
    _, tokens, _, stopped = rendered(lo)
    task = _last_user(convo) if view.keep_last_user else None
    if task is not None and task not in best_kept:
        return _with_cut_line(header, line(task), b, c), True
    return best, stopped and tokens > b


def _last_user(convo: list[Any]) -> int | None:
    """The index of the latest user message (the pin ``fit``'s ``keep_last_user`` keeps)."""
    for i in range(len(convo) - 1, -1, -1):
        if isinstance(convo[i], Mapping) and convo[i].get("role") in ("user", "human"):
            return i
    return None


def _with_cut_line(header: str, line: str, budget: int, counter: Counter) -> str:
    """``header`` and the head of ``line`` in at most ``budget`` tokens: the pinned task
    alone is larger than the room the header leaves."""
    room = budget - counter.count(header) - 1
    while room > 0:
        cut = truncate(line, room, counter=counter, direction="head").text
        text = f"{header}\n{cut}" if header else cut
        if counter.count(text) <= budget:
            return text
        room -= 1  # the tokens of a join can differ from the parts' sum
    return header
