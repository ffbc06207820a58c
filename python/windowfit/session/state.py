"""One session, several consumers: each ContextManager's state inside the stored record.

A router with a small budget and an agent with a large one read the same history; each
(``ContextManager(consumer=...)``) keeps its own summary state so neither resets the other.
The default consumer's state is the record itself (the layout before consumers existed), the
others' live under ``"consumers"``. A consumer without a summary yet starts from another's
summary when it fits its own summary room instead of summarizing again. Pure functions over
plain dicts: no store, no I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEFAULT_CONSUMER",
    "consumer_name",
    "own_state",
    "record_after",
    "slot",
    "with_consumer_state",
]

logger = logging.getLogger("windowfit.session")

DEFAULT_CONSUMER = "default"
_CONSUMERS = "consumers"

# Fields a borrowed summary keeps: what it holds and where it ends. The rest (cut, scan,
# backoff, turn counters) belongs to the consumer that made it.
_BORROWED = (
    "version",
    "summary",
    "summary_tokens",
    "summarized_until",
    "summarized_messages",
    "evicted_tokens",
    "language",
    "created_at",
    "anchor",
    "next_anchor",
)


def consumer_name(cm: Any) -> str:
    return str(getattr(cm, "consumer", None) or DEFAULT_CONSUMER)


def slot(stored: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """One consumer's state inside the stored record: the default consumer's is the record
    itself (as before consumers existed), the others' under ``"consumers"``."""
    if not stored:
        return None
    if name == DEFAULT_CONSUMER:
        own = {k: v for k, v in stored.items() if k != _CONSUMERS}
        return own or None
    others = stored.get(_CONSUMERS)
    state = others.get(name) if isinstance(others, Mapping) else None
    return dict(state) if isinstance(state, Mapping) else None


def _names(stored: Mapping[str, Any] | None) -> list[str]:
    if not stored:
        return []
    others = stored.get(_CONSUMERS)
    return [DEFAULT_CONSUMER, *(others if isinstance(others, Mapping) else ())]


def own_state(cm: Any, stored: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The state ``cm`` continues from: its own, else another consumer's summary that fits."""
    name = consumer_name(cm)
    own = slot(stored, name)
    if own is not None and own.get("summary"):
        return own
    cap = _summary_room(cm)
    best: dict[str, Any] | None = None
    for other in _names(stored):
        state = slot(stored, other) if other != name else None
        if not state or not state.get("summary"):
            continue
        tokens = state.get("summary_tokens")
        if not isinstance(tokens, int) or tokens > cap:
            continue
        # a summary made for a smaller window cut earlier than this consumer needs to
        window = state.get("context_window")
        if isinstance(window, int) and window < getattr(cm, "context_window", 0):
            continue
        if best is None or state.get("summarized_until", 0) > best.get("summarized_until", 0):
            best = state
    if best is None:
        return own
    borrowed = {k: best[k] for k in _BORROWED if k in best}
    borrowed["cut"] = borrowed.get("summarized_until", 0)
    logger.info("consumer %r starts from another consumer's summary", name)
    return borrowed


def _summary_room(cm: Any) -> int:
    """The largest summary ``cm`` could hold: its absolute cap and its summary budget."""
    cap = getattr(cm, "summary_max_tokens", None)
    budget = getattr(cm, "_budget", None)
    room = cap if isinstance(cap, int) else 0
    if callable(budget):
        try:
            room = min(room, int(budget(0, 0).summary_budget))
        except Exception:  # noqa: BLE001 - a manager without budgets borrows nothing
            return 0
    return room


# What a background summary changes in a consumer's state.
_SUMMARY_FIELDS = (
    *(k for k in _BORROWED if k != "version"),
    "summaries",
    "summary_turns",
    "failures",
    "retry_turn",
    "last_error",
)


def record_after(
    cm: Any, stored: Any, base: Any, new: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The record to save after a background summary made from ``base``, or None.

    ``stored`` is the record as it is now. When requests saved states meanwhile without a
    new summary (they fitted plainly while this one ran), the summary is carried onto the
    newest state; when anything else summarized meanwhile, this result is stale: None.
    """
    if new is None or new == base:
        return None
    current = slot(stored, consumer_name(cm))
    if current is None or current == base:
        return with_consumer_state(cm, stored, new)
    before = base or {}
    # "" / 0 / missing all mean "no summary yet"
    if any(
        (current.get(k) or None) != (before.get(k) or None) for k in ("summary", "summarized_until")
    ):
        return None
    merged = dict(current)
    merged.update({k: new[k] for k in _SUMMARY_FIELDS if k in new})
    if int(new.get("cut", 0)) >= int(current.get("cut", 0)):
        merged.update(cut=new.get("cut", 0), cut_tokens=new.get("cut_tokens", 0), head_user=None)
    return with_consumer_state(cm, stored, merged)


def with_consumer_state(
    cm: Any, stored: Mapping[str, Any] | None, new: Mapping[str, Any]
) -> dict[str, Any]:
    """The stored record with ``cm``'s state replaced by ``new``, the others untouched."""
    name = consumer_name(cm)
    others = dict(stored.get(_CONSUMERS) or {}) if stored else {}
    if name == DEFAULT_CONSUMER:
        out = {k: v for k, v in new.items() if k != _CONSUMERS}
    else:
        out = {k: v for k, v in (stored or {}).items() if k != _CONSUMERS}
        others[name] = dict(new)
    if others:
        out[_CONSUMERS] = others
    return out
