"""Fitting a history to a token budget, and repairing broken tool pairs.

The selection runs in Rust (``windowfit._core.fit_indices``): it reads the message dicts,
counts them through the counter's cache and picks the window; this module validates the
arguments and builds the result from the caller's own message objects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, BudgetError, InvalidArgumentError
from windowfit.messages import canonical_role, plain_message
from windowfit.truncation import truncate

__all__ = ["FitResult", "FitStats", "fit", "repair"]

logger = logging.getLogger(__name__)


class FitStats(Mapping[str, Any]):
    """The statistics of a fit: a read-only mapping.

    A cold fit counts only the messages its window can reach, so the tokens of far older
    dropped messages may not be known yet: ``stats["tokens_dropped"]`` counts them on first
    access (through the counter's cache) and is exact.
    """

    __slots__ = ("_data", "_pending", "_source")

    def __init__(
        self, data: dict[str, Any], pending: tuple[Any, list[Any], list[int]] | None = None
    ) -> None:
        self._data = data
        # (counter, messages, dropped indices) while tokens_dropped is unknown
        self._pending = pending
        self._source: tuple[_core.FitOutcome, dict[str, Any], Any, list[Any], list[int]] | None
        self._source = None

    @classmethod
    def _of(
        cls,
        raw: _core.FitOutcome,
        extra: dict[str, Any],
        counter: Counter,
        messages: list[Any],
        dropped: list[int],
    ) -> FitStats:
        """The stats of ``raw``, read from it on first access: most callers of a fit in an
        agent loop never look at them, and reading a dozen fields costs more than the
        selection of a short history."""
        stats = cls({})
        stats._source = (raw, extra, counter, messages, dropped)
        return stats

    def _dict(self) -> dict[str, Any]:
        if self._source is not None:
            raw, extra, counter, messages, dropped = self._source
            self._source = None
            data = {name: getattr(raw, name) for name in _STATS}
            data.update(extra)
            if data["tokens_dropped"] is None:
                self._pending = (counter, messages, dropped)
            self._data = data
        return self._data

    def __getitem__(self, key: str) -> Any:
        data = self._dict()
        if key == "tokens_dropped" and self._pending is not None:
            counter, messages, dropped = self._pending
            data["tokens_dropped"] = sum(counter.count_each_message([messages[i] for i in dropped]))
            self._pending = None
        return data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        shown = {
            k: ("<on access>" if k == "tokens_dropped" and self._pending else v)
            for k, v in self._dict().items()
        }
        return f"FitStats({shown!r})"


@dataclass(frozen=True)
class FitResult:
    """What ``fit`` chose.

    ``messages`` are the kept input objects themselves, in order (an assistant message whose
    unanswered calls were stripped is a new dict); ``kept`` and ``dropped`` partition
    ``range(len(input))``; ``tokens == counter.count_messages(messages) <= budget``.
    """

    messages: list[Any]
    kept: list[int]
    dropped: list[int]
    tokens: int
    budget: int | None
    stats: Mapping[str, Any] = field(default_factory=dict)


class _Options(TypedDict):
    """The selection options of ``_core.fit_indices``, checked once for both of its calls."""

    keep_system: bool
    keep_last_user: bool
    start_on_user: bool
    pinned: list[int]
    strip_unanswered: bool
    max_messages: int | None
    max_turns: int | None


def _budget(budget: Any) -> int:
    return count_arg("budget", budget, infinite=True)


def _as_list(messages: Any) -> list[Any]:
    if type(messages) is list:  # the usual history: no further checks
        return messages
    if isinstance(messages, (str, bytes, dict)):
        raise ArgumentTypeError(
            f"messages must be a list of message dicts, not {type(messages).__name__}"
        )
    if not isinstance(messages, Iterable):
        raise ArgumentTypeError(
            f"messages must be a list of message dicts, not {type(messages).__name__}"
        )
    return messages if isinstance(messages, list) else list(messages)


def _pins(pinned: Iterable[int], n: int) -> list[int]:
    out = []
    for p in pinned:
        p = count_arg("pinned index", p, minimum=-n)
        q = p + n if p < 0 else p
        if not 0 <= q < n:
            raise InvalidArgumentError(f"pinned index {p} is out of range for {n} messages")
        out.append(q)
    return out


def _stripped(message: Any, ids: Sequence[str]) -> Any:
    """A copy of ``message`` without the entries the core named: the tool calls in ``ids``
    (OpenAI or Anthropic) of a call message, or the tool results in ``ids`` of a message kept
    for its own text; an emptied (or empty) ``tool_calls`` list is left out."""
    drop = set(ids)
    copy = dict(plain_message(message))
    if "tool_calls" in copy:
        calls = [c for c in copy["tool_calls"] or () if plain_message(c).get("id") not in drop]
        if calls:
            copy["tool_calls"] = calls
        else:
            copy.pop("tool_calls")
    if copy.get("tool_call_id") in drop:
        copy.pop("tool_call_id")
    if isinstance(copy.get("content"), list):
        copy["content"] = [p for p in copy["content"] if not _names(p, drop)]
    return copy


def _names(part: Any, ids: set[str]) -> bool:
    """The content part is a ``tool_use`` or ``tool_result`` block of one of ``ids``."""
    p = plain_message(part)
    if not isinstance(p, Mapping):
        return False
    kind = p.get("type")
    if kind == "tool_use":
        return p.get("id") in ids
    return kind == "tool_result" and p.get("tool_use_id") in ids


def _empty(budget: int | None) -> FitResult:
    """The result for an empty history: nothing to send, so nothing is primed either."""
    stats: dict[str, Any] = {
        "pins_tokens": 0,
        "tokens_kept": 0,
        "tokens_dropped": 0,
        "messages_kept": 0,
        "messages_dropped": 0,
        "orphans_removed": 0,
        "unanswered_removed": 0,
        "calls_stripped": 0,
        "results_stripped": 0,
        "stop_reason": "all_fit",
        "results_truncated": 0,
        "round_dropped": 0,
        "budget": budget,
        "tokens": 0,
    }
    return FitResult([], [], [], 0, budget, stats)


_STATS = (
    "pins_tokens",
    "tokens_kept",
    "tokens_dropped",
    "messages_kept",
    "messages_dropped",
    "orphans_removed",
    "unanswered_removed",
    "calls_stripped",
    "results_stripped",
    "stop_reason",
)


def _result(
    messages: list[Any],
    raw: _core.FitOutcome,
    budget: int | None,
    counter: Counter,
    results_truncated: int = 0,
    round_dropped: int = 0,
) -> FitResult:
    kept, dropped = raw.kept, raw.dropped
    chosen = raw.pick(messages)  # in the core: kept can be 10,000 long
    stripped = raw.stripped
    if stripped:
        where = {i: pos for pos, i in enumerate(kept)}
        for i, ids in stripped:
            chosen[where[i]] = _stripped(messages[i], ids)
    tokens = raw.tokens if kept else 0  # an empty prompt primes no reply
    extra: dict[str, Any] = {
        "results_truncated": results_truncated,  # fit's oversize handling sets these two
        "round_dropped": round_dropped,
        "budget": budget,
        "tokens": tokens,
    }
    if (results_truncated or round_dropped) and raw.stop_reason == "all_fit":
        # the budget bound the window, though what is left of the cut round then fit whole
        extra["stop_reason"] = "budget"
    stats = FitStats._of(raw, extra, counter, messages, dropped)
    return FitResult(chosen, kept, dropped, tokens, budget, stats)


def fit(
    messages: Sequence[Any],
    budget: float,
    *,
    counter: Counter | None = None,
    model: str | None = None,
    keep_system: bool = True,
    keep_last_user: bool = True,
    start_on: Literal["user"] | None = "user",
    pinned: Iterable[int] = (),
    unanswered: Literal["drop", "strip"] = "drop",
    max_messages: int | None = None,
    max_turns: int | None = None,
    oversize: Literal["truncate", "drop", "raise"] = "truncate",
) -> FitResult:
    """Keep the pins and the longest recent window of ``messages`` that fits in ``budget``.

    Pins: system/developer messages (``keep_system``), the latest user message
    (``keep_last_user``) and the indices in ``pinned``. An assistant message with tool calls
    and all its results form one unit that is kept or dropped whole; unanswered calls and
    results without a call are dropped (``unanswered="strip"`` keeps the assistant's text and
    removes only the unanswered calls). Before the latest user message the window grows by
    whole rounds, so it starts on a user message (``start_on="user"``; ``None`` grows by units).

    ``max_messages`` and ``max_turns`` (user turns) cap the kept messages, pins included, on
    top of the budget: the window stops at the first unit or round that would pass a cap, so
    a call is never kept without its results. ``stats["stop_reason"]`` names the limit that
    stopped it: ``"budget"``, ``"max_messages"``, ``"max_turns"``, ``"start_on_user"`` or
    ``"all_fit"``. Pins are kept even when they alone pass a cap.

    ``oversize`` decides what happens when the round in progress (the messages after the latest
    user message) does not fit beside the pins: an agent that never sees its tool's result
    calls the tool again. ``"truncate"`` (the default, for agents) cuts the oversized tool
    results of that round, head and tail, to share what the budget leaves (those messages come
    back as new dicts); ``"drop"`` leaves the round out; ``"raise"`` raises ``BudgetError``.
    ``stats["results_truncated"]`` and ``stats["round_dropped"]`` (messages of the round still
    left out) report it.

    Raises ``BudgetError`` (a ``ValueError``) when the pins alone exceed the budget.
    """
    msgs = _as_list(messages)
    b = _budget(budget)
    cap_messages = None if max_messages is None else count_arg("max_messages", max_messages)
    cap_turns = None if max_turns is None else count_arg("max_turns", max_turns)
    if start_on is not None and (
        not isinstance(start_on, str) or canonical_role(start_on) != "user"
    ):
        raise InvalidArgumentError(f"start_on must be 'user' or None, not {start_on!r}")
    if unanswered not in ("drop", "strip"):
        raise InvalidArgumentError(f"unanswered must be 'drop' or 'strip', not {unanswered!r}")
    if oversize not in ("truncate", "drop", "raise"):
        raise InvalidArgumentError(
            f"oversize must be 'truncate', 'drop' or 'raise', not {oversize!r}"
        )
    c = resolve_counter(counter, model)
    if not msgs:
        return _empty(b)
    # the default (no pins) skips the loop: a fit per agent turn pays for every call here
    pins = [] if type(pinned) is tuple and not pinned else _pins(pinned, len(msgs))
    options: _Options = {
        "keep_system": bool(keep_system),
        "keep_last_user": bool(keep_last_user),
        "start_on_user": start_on is not None,
        "pinned": pins,
        "strip_unanswered": unanswered == "strip",
        "max_messages": cap_messages,
        "max_turns": cap_turns,
    }

    # The core reports the round in progress (after the latest user turn) and which of its
    # sendable messages the budget left out: the one rule of what a turn is lives there.
    history = msgs
    raw = _core.fit_indices(c, history, b, **options)
    lost = raw.round_lost
    if not lost:
        return _result(history, raw, b, c)
    truncated = 0
    if oversize == "raise":
        raise BudgetError(
            f"the round in progress does not fit: messages {lost} (after the latest user "
            f"message) are left out of budget {b}; oversize='truncate' cuts its tool results"
        )
    if oversize == "truncate":
        shrunk = _shrink_round(msgs, raw.round_start, raw.pins_tokens, b, c, set(pins))
        if shrunk is not None:
            history, truncated = shrunk
            raw = _core.fit_indices(c, history, b, **options)
            lost = raw.round_lost
    if lost:
        _log_round_cut(raw.round_start, len(history), lost, b)
    return _result(history, raw, b, c, truncated, len(lost))


def _log_round_cut(start: int, end: int, lost: list[int], budget: int) -> None:
    """Say what part of an oversized round in progress was kept. INFO, not a warning: the
    window is still valid, and the caller reads the same facts in ``stats``."""
    logger.info(
        "fit: the round in progress (messages %d to %d) is larger than budget %d: kept %d of "
        "its messages, left out %d (%s)",
        start,
        end - 1,
        budget,
        end - start - len(lost),
        len(lost),
        f"{lost[0]} to {lost[-1]}" if len(lost) > 1 else lost[0],
    )


def _shrink_round(
    messages: list[Any],
    start: int,
    pins_tokens: int,
    budget: int,
    counter: Counter,
    pinned: set[int],
) -> tuple[list[Any], int] | None:
    """``messages`` with the round's text tool results cut to share what the pins leave.

    Tool results are the text of ``role: "tool"`` messages and of Anthropic ``tool_result``
    blocks (their ``content`` string, or each text part of it). The cap is water-filled:
    results under it stay whole, the larger ones get the cap each. None when nothing can be
    cut or the round's other tokens alone do not fit.
    """
    rest = [i for i in range(start, len(messages)) if i not in pinned]
    places = {i: found for i in rest if (found := _result_texts(messages[i]))}
    if not places:
        return None
    bare = counter.count_each_message(
        [
            _with_texts(messages[i], dict.fromkeys(places[i], "")) if i in places else messages[i]
            for i in rest
        ]
    )
    room = budget - pins_tokens - counter.reply_priming - sum(bare)
    # a text's tokens are its own: a message's parts are counted one by one
    sizes = {
        (i, where): counter.count(text)
        for i, found in places.items()
        for where, text in found.items()
    }
    cap = _water_level(sorted(sizes.values()), room)
    if cap is None:
        return None
    cuts: dict[int, dict[tuple[int, ...], str]] = {}
    for (i, where), size in sizes.items():
        if size > cap:
            text = places[i][where]
            cut = truncate(text, cap, counter=counter, direction="head_tail").text
            cuts.setdefault(i, {})[where] = cut
    if not cuts:
        return None
    history = list(messages)
    for i, texts in cuts.items():
        history[i] = _with_texts(messages[i], texts)
    return history, sum(map(len, cuts.values()))


def _result_texts(message: Any) -> dict[tuple[int, ...], str]:
    """The tool-result texts of a message by place: ``()`` for a tool message's content,
    ``(k,)`` for block ``k``'s string content, ``(k, j)`` for text part ``j`` of its list."""
    if not isinstance(message, Mapping):
        return {}
    content = message.get("content")
    if message.get("role") == "tool":
        return {(): content} if isinstance(content, str) else {}
    found: dict[tuple[int, ...], str] = {}
    if not isinstance(content, list):
        return found
    for k, block in enumerate(content):
        if not (isinstance(block, Mapping) and block.get("type") == "tool_result"):
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            found[(k,)] = inner
        elif isinstance(inner, list):
            for j, part in enumerate(inner):
                if isinstance(part, Mapping) and part.get("type") == "text":
                    if isinstance(part.get("text"), str):
                        found[(k, j)] = part["text"]
    return found


def _with_texts(message: Mapping[str, Any], texts: Mapping[tuple[int, ...], str]) -> Any:
    """A copy of ``message`` with the result texts at the places of ``_result_texts``
    replaced (the caller's message and its blocks are left as they are)."""
    copy = dict(message)
    if () in texts:
        copy["content"] = texts[()]
        return copy
    content = list(copy["content"])
    for place, text in texts.items():
        k = place[0]
        block = dict(content[k])
        if len(place) == 1:
            block["content"] = text
        else:
            inner = list(block["content"])
            inner[place[1]] = dict(inner[place[1]], text=text)
            block["content"] = inner
        content[k] = block
    copy["content"] = content
    return copy


def _water_level(sizes: list[int], room: int) -> int | None:
    """The largest cap with ``sum(min(s, cap)) <= room`` (``sizes`` ascending), None if < 1."""
    left = len(sizes)
    for s in sizes:
        if s * left > room:
            cap = room // left
            return cap if cap >= 1 else None
        room -= s
        left -= 1
    return sizes[-1] if sizes else None


def repair(
    messages: Sequence[Any],
    *,
    unanswered: Literal["drop", "strip"] = "drop",
    counter: Counter | None = None,
    model: str | None = None,
) -> FitResult:
    """Drop tool results without a call and calls without all their results (no budget).

    For histories that are already broken: the result is always a valid request.
    """
    msgs = _as_list(messages)
    if unanswered not in ("drop", "strip"):
        raise InvalidArgumentError(f"unanswered must be 'drop' or 'strip', not {unanswered!r}")
    c = resolve_counter(counter, model)
    if not msgs:
        return _empty(None)
    raw = _core.repair_indices(c, msgs, strip_unanswered=unanswered == "strip")
    return _result(msgs, raw, None, c)
