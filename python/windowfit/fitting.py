"""Fitting a history to a token budget, and repairing broken tool pairs.

The selection runs in Rust (``windowfit._core.fit_indices``): it reads the message dicts,
counts them through the counter's cache and picks the window; this module validates the
arguments and builds the result from the caller's own message objects.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from windowfit import _core
from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["FitResult", "FitStats", "fit", "repair"]


class FitStats(Mapping[str, Any]):
    """The statistics of a fit: a read-only mapping.

    A cold fit counts only the messages its window can reach, so the tokens of far older
    dropped messages may not be known yet: ``stats["tokens_dropped"]`` counts them on first
    access (through the counter's cache) and is exact.
    """

    __slots__ = ("_data", "_pending")

    def __init__(
        self, data: dict[str, Any], pending: tuple[Any, list[Any], list[int]] | None = None
    ) -> None:
        self._data = data
        # (counter, messages, dropped indices) while tokens_dropped is unknown
        self._pending = pending

    def __getitem__(self, key: str) -> Any:
        if key == "tokens_dropped" and self._pending is not None:
            counter, messages, dropped = self._pending
            self._data["tokens_dropped"] = sum(
                counter.count_each_message([messages[i] for i in dropped])
            )
            self._pending = None
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        shown = {
            k: ("<on access>" if k == "tokens_dropped" and self._pending else v)
            for k, v in self._data.items()
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


def _budget(budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(f"budget must be a number of tokens, not {type(budget).__name__}")
    if isinstance(budget, float) and math.isnan(budget):
        raise ValueError("budget is NaN")
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget!r}")
    if isinstance(budget, float):
        if math.isinf(budget):
            return 2**63 - 1
        budget = math.floor(budget)
    return min(int(budget), 2**63 - 1)


def _as_list(messages: Any) -> list[Any]:
    if isinstance(messages, (str, bytes, dict)):
        raise TypeError(f"messages must be a list of message dicts, not {type(messages).__name__}")
    if not isinstance(messages, Iterable):
        raise TypeError(f"messages must be a list of message dicts, not {type(messages).__name__}")
    return messages if isinstance(messages, list) else list(messages)


def _pins(pinned: Iterable[int], n: int) -> list[int]:
    out = []
    for p in pinned:
        if isinstance(p, bool) or not isinstance(p, int):
            raise TypeError(f"pinned must hold message indices (int), not {type(p).__name__}")
        q = p + n if p < 0 else p
        if not 0 <= q < n:
            raise ValueError(f"pinned index {p} is out of range for {n} messages")
        out.append(q)
    return out


def _cap(name: str, value: Any) -> int | None:
    """A message or turn cap: None (no cap) or a non-negative int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int or None, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"{name} must be >= 0, got {value}")
    return min(value, 2**63 - 1)


def _stripped(message: Any, call_ids: Sequence[str]) -> Any:
    """A copy of ``message`` without the tool calls in ``call_ids`` (OpenAI or Anthropic)."""
    drop = set(call_ids)
    copy = dict(message)
    if copy.get("tool_calls"):
        calls = [c for c in copy["tool_calls"] if c.get("id") not in drop]
        if calls:
            copy["tool_calls"] = calls
        else:
            copy.pop("tool_calls")
    if isinstance(copy.get("content"), list):
        copy["content"] = [
            p
            for p in copy["content"]
            if not (isinstance(p, dict) and p.get("type") == "tool_use" and p.get("id") in drop)
        ]
    return copy


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
        "stop_reason": "all_fit",
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
    "stop_reason",
)


def _result(
    messages: list[Any], raw: _core.FitOutcome, budget: int | None, counter: Counter
) -> FitResult:
    kept, dropped = raw.kept, raw.dropped
    chosen = [messages[i] for i in kept]
    stripped = raw.stripped
    if stripped:
        where = {i: pos for pos, i in enumerate(kept)}
        for i, ids in stripped:
            chosen[where[i]] = _stripped(messages[i], ids)
    tokens = raw.tokens if kept else 0  # an empty prompt primes no reply
    data: dict[str, Any] = {name: getattr(raw, name) for name in _STATS}
    data["budget"] = budget
    data["tokens"] = tokens
    pending = None
    if data["tokens_dropped"] is None:
        pending = (counter, messages, dropped)
    return FitResult(chosen, kept, dropped, tokens, budget, FitStats(data, pending))


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

    Raises ``BudgetError`` (a ``ValueError``) when the pins alone exceed the budget.
    """
    msgs = _as_list(messages)
    b = _budget(budget)
    cap_messages = _cap("max_messages", max_messages)
    cap_turns = _cap("max_turns", max_turns)
    if start_on not in ("user", "human", None):
        raise ValueError(f"start_on must be 'user' or None, not {start_on!r}")
    if unanswered not in ("drop", "strip"):
        raise ValueError(f"unanswered must be 'drop' or 'strip', not {unanswered!r}")
    c = resolve_counter(counter, model)
    if not msgs:
        return _empty(b)
    raw = _core.fit_indices(
        c,
        msgs,
        b,
        keep_system=bool(keep_system),
        keep_last_user=bool(keep_last_user),
        start_on_user=start_on is not None,
        pinned=_pins(pinned, len(msgs)),
        strip_unanswered=unanswered == "strip",
        max_messages=cap_messages,
        max_turns=cap_turns,
    )
    return _result(msgs, raw, b, c)


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
        raise ValueError(f"unanswered must be 'drop' or 'strip', not {unanswered!r}")
    c = resolve_counter(counter, model)
    if not msgs:
        return _empty(None)
    raw = _core.repair_indices(c, msgs, strip_unanswered=unanswered == "strip")
    return _result(msgs, raw, None, c)
