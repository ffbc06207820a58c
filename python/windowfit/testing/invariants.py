"""The window invariants (ARCHITECTURE.md "Window invariants"), checked from the outside.

Nothing here calls ``fit``: pairing is re-derived from the messages alone, message by message,
and token figures come from the counter's public API (``count_message`` / ``count_messages``).
That independence is the point: the same checker judges ``wf.fit``, a framework integration
or a user's own trim policy.
"""

from __future__ import annotations

from collections import Counter as Multiset
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from windowfit.errors import InvalidArgumentError, WindowfitError
from windowfit.messages import SYSTEM_ROLES

__all__ = [
    "FIT_PROMISES",
    "INVARIANTS",
    "Analysis",
    "WindowInvariantError",
    "analyze",
    "call_ids",
    "check_window",
    "has_content",
    "is_system",
    "is_user_turn",
    "pins_tokens",
    "priming",
    "request_problems",
    "result_ids",
    "own_content",
    "strip_calls",
    "strip_results",
]

Msg = Mapping[str, Any]

#: The invariants :func:`check_window` checks, in the order it checks them.
INVARIANTS = ("budget", "order", "pins", "pairing", "contiguity", "maximality")

#: The options that hold a window to everything ``wf.fit`` promises beyond a valid window:
#: it starts on a user turn and no older round would have fit
#: (``check_window(msgs, r, budget, counter, **FIT_PROMISES)``).
FIT_PROMISES: dict[str, Any] = {"start_on": "user", "maximal": True}


class WindowInvariantError(WindowfitError, AssertionError):
    """A window breaks an invariant; ``invariant`` names which (one of :data:`INVARIANTS`)."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"window invariant {invariant!r} broken: {detail}")
        self.invariant = invariant
        self.detail = detail


# ----------------------------------------------------------------------------- message facts


def _content_list(m: Msg) -> list[Any]:
    c = m.get("content")
    return c if isinstance(c, list) else []


def call_ids(m: Msg) -> list[str]:
    """Ids of the calls a message makes: OpenAI ``tool_calls`` and Anthropic ``tool_use`` blocks."""
    ids = [c["id"] for c in (m.get("tool_calls") or [])]
    ids += [
        p["id"] for p in _content_list(m) if isinstance(p, dict) and p.get("type") == "tool_use"
    ]
    return ids


def result_ids(m: Msg) -> list[str]:
    """Ids a message answers: ``tool_call_id`` and Anthropic ``tool_result`` blocks."""
    ids = [m["tool_call_id"]] if m.get("tool_call_id") is not None else []
    ids += [
        p["tool_use_id"]
        for p in _content_list(m)
        if isinstance(p, dict) and p.get("type") == "tool_result"
    ]
    return ids


def has_content(m: Msg) -> bool:
    """The message says something besides tool calls."""
    c = m.get("content")
    if isinstance(c, str):
        return c != ""
    for p in _content_list(m):
        if isinstance(p, str) and p:
            return True
        if isinstance(p, dict):
            t = p.get("type")
            if t == "text" and p.get("text"):
                return True
            if t in ("image_url", "image", "input_audio", "file"):
                return True
            if t == "tool_result" and p.get("content"):
                return True
    return False


def is_system(m: Msg) -> bool:
    return m.get("role") in SYSTEM_ROLES


def is_user_turn(m: Msg) -> bool:
    """A user message that is not only a carrier of tool results."""
    return m.get("role") == "user" and not result_ids(m)


def _is_result_block(p: Any) -> bool:
    return isinstance(p, dict) and p.get("type") == "tool_result"


def own_content(m: Msg) -> bool:
    """The message carries ``tool_result`` blocks and says something besides them (a user's
    new text): if those results answer nothing, this is what is still sent."""
    parts = _content_list(m)
    if m.get("role") in ("tool", "function") or not any(_is_result_block(p) for p in parts):
        return False
    return has_content({"content": [p for p in parts if not _is_result_block(p)]})


def strip_results(m: Msg) -> dict[str, Any]:
    """``m`` without its tool results: what a message kept for its own content must look like."""
    out = {k: v for k, v in m.items() if k != "tool_call_id"}
    out["content"] = [p for p in _content_list(m) if not _is_result_block(p)]
    return out


def strip_calls(m: Msg, ids: Sequence[str]) -> dict[str, Any]:
    """``m`` without the call entries in ``ids``: what a stripped message must look like
    (an empty ``tool_calls`` list is left out too)."""
    out = dict(m)
    if "tool_calls" in m:
        keep = [c for c in m["tool_calls"] or () if c["id"] not in ids]
        if keep:
            out["tool_calls"] = keep
        else:
            del out["tool_calls"]
    if isinstance(m.get("content"), list):
        out["content"] = [
            p
            for p in m["content"]
            if not (isinstance(p, dict) and p.get("type") == "tool_use" and p.get("id") in ids)
        ]
    return out


# ----------------------------------------------------------------------------- the validator


def request_problems(msgs: Sequence[Msg]) -> list[str]:
    """Independent check of OpenAI's pairing rule, extended to Anthropic blocks: each result
    message answers calls of the nearest preceding call message with only result messages in
    between, each call id once; each call message has all its calls answered before the next
    non-result message. Returns the problems found (empty: a valid request)."""
    problems: list[str] = []
    open_ids: set[str] | None = None  # the calls still waiting, while inside a result run
    owner = -1
    for k, m in enumerate(msgs):
        rs, cs = result_ids(m), call_ids(m)
        if rs:
            if cs:
                problems.append(f"{k}: both calls and answers")
            if open_ids is None:
                problems.append(f"{k}: result {rs} does not follow a tool call message")
                continue
            for r in rs:
                if r not in open_ids:
                    problems.append(f"{k}: result {r!r} answers no open call of message {owner}")
                open_ids.discard(r)
            continue
        if open_ids:
            problems.append(f"{owner}: calls {sorted(open_ids)} unanswered before message {k}")
        open_ids = None
        if "tool_calls" in m and not m["tool_calls"]:
            problems.append(f"{k}: empty tool_calls list")
        if cs:
            if len(set(cs)) != len(cs):
                problems.append(f"{k}: duplicate call ids {cs}")
            open_ids, owner = set(cs), k
    if open_ids:
        problems.append(f"{owner}: calls {sorted(open_ids)} unanswered at the end")
    return problems


# ----------------------------------------------------------------------------- pairing


@dataclass
class Analysis:
    """The pairing of a history as the spec defines it."""

    verdict: list[str]  # "ok" | "orphan" | "unanswered"
    units: list[list[int]]  # message indices of each unit, head first; units in order
    unit_of: list[int | None]
    strips: dict[int, list[str]] = field(default_factory=dict)  # head -> unanswered ids removed
    # the messages as paired: those whose results answer nothing but which say something of
    # their own are here without their results (sent so, a plain message)
    paired: list[Msg] = field(default_factory=list)

    def valid(self, i: int) -> bool:
        return self.verdict[i] == "ok"


def analyze(msgs: Sequence[Msg], unanswered: str = "drop") -> Analysis:
    """Split a history into units (a message, or a call message with all its results) and mark
    orphan results and unanswered calls, re-derived message by message. A result message that
    cannot be sent but has content of its own loses its results and pairs again as the plain
    message it then is, until nothing changes."""
    paired = list(msgs)
    while True:
        a = _pairing(paired, unanswered)
        lost = [
            i
            for i, m in enumerate(paired)
            if not a.valid(i) and own_content(m) and not call_ids(m) and result_ids(m)
        ]
        if not lost:
            a.paired = paired
            return a
        for i in lost:
            paired[i] = strip_results(paired[i])


def _pairing(msgs: Sequence[Msg], unanswered: str) -> Analysis:
    n = len(msgs)
    calls = [call_ids(m) for m in msgs]
    answers = [result_ids(m) for m in msgs]
    a = Analysis(["ok"] * n, [], [None] * n)

    def add_unit(members: list[int]) -> None:
        for k in members:
            a.unit_of[k] = len(a.units)
        a.units.append(members)

    i = 0
    while i < n:
        if answers[i]:  # a result with no call message right before it
            a.verdict[i] = "orphan"
            i += 1
            continue
        if not calls[i]:
            add_unit([i])
            i += 1
            continue
        end = i + 1
        while end < n and answers[end] and not calls[end]:
            end += 1
        # a duplicated call id cannot be answered unambiguously
        once = {c for c, k in Multiset(calls[i]).items() if k == 1}
        answered: set[str] = set()
        members = [i]
        for j in range(i + 1, end):
            ids = answers[j]
            if len(set(ids)) == len(ids) and all(x in once and x not in answered for x in ids):
                answered.update(ids)
                members.append(j)
            else:
                a.verdict[j] = "orphan"
        still_open = [c for c in dict.fromkeys(calls[i]) if c not in answered]
        if not still_open:
            add_unit(members)
        elif unanswered == "strip" and (answered or has_content(msgs[i])):
            a.strips[i] = still_open
            add_unit(members)
        else:
            for k in members:
                a.verdict[k] = "unanswered"
        i = end
    return a


def _sent(msgs: Sequence[Msg], a: Analysis, i: int) -> Msg:
    m = a.paired[i] if a.paired else msgs[i]
    if i in a.strips or ("tool_calls" in m and not m["tool_calls"]):
        return strip_calls(m, a.strips.get(i, []))
    return m


def priming(counter: Any) -> int:
    """Tokens a request costs besides its messages, measured through the public API."""
    probe = {"role": "user", "content": "probe"}
    return int(counter.count_messages([probe]) - counter.count_message(probe))


def _pinned_units(
    msgs: Sequence[Msg],
    a: Analysis,
    *,
    keep_system: bool,
    keep_last_user: bool,
    pinned: Sequence[int],
) -> set[int]:
    n = len(msgs)
    units: set[int] = set()
    for p in pinned:
        q = p + n if p < 0 else p
        u = a.unit_of[q] if 0 <= q < n else None
        if u is None:
            raise InvalidArgumentError(f"pinned index {p} names no message that can be sent")
        units.add(u)
    if keep_system:
        units |= {u for i in range(n) if is_system(msgs[i]) and (u := a.unit_of[i]) is not None}
    if keep_last_user:
        users = [u for u, members in enumerate(a.units) if is_user_turn(a.paired[members[0]])]
        if users:
            units.add(users[-1])
    return units


def pins_tokens(
    messages: Sequence[Msg],
    counter: Any,
    *,
    keep_system: bool = True,
    keep_last_user: bool = True,
    pinned: Sequence[int] = (),
    unanswered: str = "drop",
) -> int:
    """What the pins alone cost, reply priming included: below this no window exists."""
    msgs = list(messages)
    if not msgs:
        return 0
    a = analyze(msgs, unanswered)
    units = _pinned_units(
        msgs, a, keep_system=keep_system, keep_last_user=keep_last_user, pinned=pinned
    )
    cost = sum(counter.count_message(_sent(msgs, a, i)) for u in units for i in a.units[u])
    return int(cost) + priming(counter)


# ----------------------------------------------------------------------------- check_window


def _cut_result_of(window_msg: Any, original: Any) -> bool:
    """``window_msg`` is ``original`` with only the text of its tool results cut: a tool
    message's content, or Anthropic ``tool_result`` blocks' content (string or text parts)."""
    if not (isinstance(window_msg, Mapping) and isinstance(original, Mapping)):
        return False
    if window_msg == original:
        return False
    return _blank_results(window_msg) == _blank_results(original)


def _blank_results(m: Mapping[str, Any]) -> Any:
    """``m`` with the texts of its tool results emptied."""
    out = dict(m)
    content = m.get("content")
    if m.get("role") == "tool":
        return {**out, "content": ""} if isinstance(content, str) else out
    if not isinstance(content, list):
        return out
    blocks: list[Any] = []
    for p in content:
        if _is_result_block(p) and isinstance(p.get("content"), str):
            p = {**p, "content": ""}
        elif _is_result_block(p) and isinstance(p.get("content"), list):
            inner = [
                {**q, "text": ""} if isinstance(q, dict) and q.get("type") == "text" else q
                for q in p["content"]
            ]
            p = {**p, "content": inner}
        blocks.append(p)
    out["content"] = blocks
    return out


def _is_sent_form(msgs: Sequence[Msg], a: Analysis, i: int, w: Any) -> bool:
    """``w`` is input message ``i`` as a window sends it: itself, an equal copy, its form
    stripped of unanswered calls, or a tool result cut to fit."""
    return msgs[i] is w or w == msgs[i] or w == _sent(msgs, a, i) or _cut_result_of(w, msgs[i])


def _reported_indices(
    msgs: Sequence[Msg], a: Analysis, window: Sequence[Any], kept: Sequence[int]
) -> list[int]:
    """A FitResult's own ``kept`` indices, checked against its messages: as many, rising,
    each message the input's at its index. Two inputs can send the same message (an empty
    assistant turn, and one whose empty ``tool_calls`` list is left out), so the window alone
    cannot say which was kept."""
    kept = list(kept)
    rising = all(i < j for i, j in zip(kept, kept[1:]))
    if len(kept) != len(window) or not rising or not all(0 <= i < len(msgs) for i in kept):
        raise WindowInvariantError(
            "order", f"kept indices {kept} are not {len(window)} rising input indices"
        )
    for k, (i, w) in enumerate(zip(kept, window)):
        if not _is_sent_form(msgs, a, i, w):
            raise WindowInvariantError(
                "order", f"kept indices {kept} do not match the messages (window message {k})"
            )
    return kept


def _kept_indices(msgs: Sequence[Msg], a: Analysis, window: Sequence[Any]) -> list[int]:
    """Map the window's messages back to input indices: by identity, else by equality (a
    stripped message equals the stripped original), always moving forward."""
    out: list[int] = []
    start = 0
    for k, w in enumerate(window):
        found = next((i for i in range(start, len(msgs)) if msgs[i] is w), None)
        if found is None:
            found = next(
                (i for i in range(start, len(msgs)) if w == msgs[i] or w == _sent(msgs, a, i)),
                None,
            )
        if found is None:  # a tool result that fit(oversize="truncate") cut to fit
            found = next((i for i in range(start, len(msgs)) if _cut_result_of(w, msgs[i])), None)
        if found is None:
            raise WindowInvariantError(
                "order",
                f"window message {k} is not an input message after index {start - 1} "
                "(reordered, duplicated or altered)",
            )
        out.append(found)
        start = found + 1
    return out


def check_window(
    messages: Sequence[Msg],
    result: Any,
    budget: int,
    counter: Any,
    *,
    keep_system: bool = True,
    keep_last_user: bool = True,
    start_on: str | None = None,
    pinned: Sequence[int] = (),
    unanswered: str = "drop",
    maximal: bool = False,
) -> None:
    """Raise :class:`WindowInvariantError` (an ``AssertionError``) naming the first broken
    window invariant of ``result`` as a window of ``messages`` under ``budget``.

    ``result`` is a ``wf.FitResult``, the list of messages a trim policy chose, or the
    exception it raised (only ``BudgetError`` when the pins alone exceed the budget passes).
    The keyword arguments are the pins and options the window was made with (``fit``'s).

    The defaults check what every valid window must be, whatever policy chose it: within
    the budget, in order, the pins kept (system messages and the latest user message), tool
    calls and results whole, and no hole after the window's first message. Two promises are
    ``fit``'s own and opt-in: ``start_on="user"`` (the window starts on a user turn, older
    context grows by whole rounds) and ``maximal=True`` (no older unit or round would have
    fit in the room left); :data:`FIT_PROMISES` sets both.
    """
    msgs = list(messages)
    n = len(msgs)
    a = analyze(msgs, unanswered)
    pins = _pinned_units(
        msgs, a, keep_system=keep_system, keep_last_user=keep_last_user, pinned=pinned
    )
    cost = [counter.count_message(_sent(msgs, a, i)) if a.valid(i) else 0 for i in range(n)]
    prime = priming(counter)
    floor = sum(cost[i] for u in pins for i in a.units[u]) + (prime if n else 0)

    # (1) budget
    if isinstance(result, BaseException):
        from windowfit import BudgetError

        if not isinstance(result, BudgetError):
            raise WindowInvariantError("budget", f"raised {result!r} instead of a window")
        if floor <= budget:
            raise WindowInvariantError(
                "budget", f"BudgetError although the pins ({floor} tokens) fit in {budget}"
            )
        return
    window = list(getattr(result, "messages", result))
    sent = counter.count_messages(window) if window else 0
    if sent > budget:
        raise WindowInvariantError("budget", f"{sent} tokens sent, budget {budget}")
    reported = getattr(result, "tokens", None)
    if reported is not None and reported != sent:
        raise WindowInvariantError("budget", f"reports {reported} tokens, the window counts {sent}")

    # (2) order: an order-preserving subsequence; a FitResult's indices partition the input
    if hasattr(result, "kept"):
        kept = _reported_indices(msgs, a, window, result.kept)
        if sorted(list(result.kept) + list(result.dropped)) != list(range(n)):
            raise WindowInvariantError("order", "kept and dropped do not partition the input")
    else:
        kept = _kept_indices(msgs, a, window)
    keep = set(kept)

    # (3) pins
    for u in sorted(pins):
        missing = [i for i in a.units[u] if i not in keep]
        if missing:
            raise WindowInvariantError(
                "pins", f"pinned message {a.units[u][0]} (unit {a.units[u]}) lost {missing}"
            )

    # (4) pairing: a request any provider accepts, and nothing invalid kept
    problems = request_problems(window)
    if problems:
        raise WindowInvariantError("pairing", "; ".join(problems))
    for i in kept:
        if not a.valid(i):
            raise WindowInvariantError("pairing", f"kept message {i} is {a.verdict[i]}")
        unit = a.unit_of[i]
        if unit is not None and not set(a.units[unit]) <= keep:
            raise WindowInvariantError(
                "pairing", f"message {i} kept without the rest of its tool unit {a.units[unit]}"
            )

    # (5) contiguity: from the window's start every sendable message is kept
    def pinned_msg(i: int) -> bool:
        u = a.unit_of[i]
        return u is not None and u in pins

    users = [i for i in range(n) if is_user_turn(a.paired[i]) and a.valid(i)]
    latest_user = users[-1] if users else None
    w = next((i for i in kept if not pinned_msg(i)), n)
    for i in range(w, n):
        if a.valid(i) and i not in keep:
            raise WindowInvariantError("contiguity", f"hole at {i} in a window starting at {w}")
    by_rounds = start_on is not None and latest_user is not None
    if by_rounds and w < latest_user:  # type: ignore[operator]
        u0 = max((i for i in users if i <= w), default=None)
        if u0 is None:
            raise WindowInvariantError("contiguity", f"window reaches {w}, before any user turn")
        if any(a.valid(i) and not pinned_msg(i) for i in range(u0, w)):
            raise WindowInvariantError("contiguity", f"window starts mid-round at {w}")

    # (6) maximality: the next older unit (or round) would not fit
    if not maximal:
        return
    room = budget - (sent if window else prime)
    nxt = max((i for i in range(w) if a.valid(i) and not pinned_msg(i)), default=None)
    if nxt is None:
        return
    if by_rounds and nxt < latest_user:  # type: ignore[operator]
        u0 = max((i for i in users if i <= nxt), default=None)
        if u0 is None:
            return  # only messages before the first user turn are left: start_on="user"
        step = [i for i in range(u0, w) if a.valid(i) and not pinned_msg(i)]
        what = f"round {u0}..{w - 1}"
    else:
        step = a.units[a.unit_of[nxt]]  # type: ignore[index]
        what = f"unit {step}"
    extra = sum(cost[i] for i in step)
    if extra <= room:
        raise WindowInvariantError(
            "maximality", f"the next older {what} ({extra} tokens) fits in the {room} left"
        )
