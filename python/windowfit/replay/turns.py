"""Replay a recorded history turn by turn, as the agent that made it called its model.

At every point where the model answered (before each assistant message, and at the end when
the history does not end on one) the prefix so far is prepared twice — by ``wf.fit`` to the
prompt budget and by a ``wf.ContextManager`` with extractive summaries — and, when
``langchain-core`` is installed, trimmed by LangChain's ``trim_messages`` with the same
counting. Each call records what the prompt costs: tokens of the whole history, tokens sent,
the part of the prompt that repeats the previous call's prefix (what a provider's prompt cache
bills at the cached price), the running summary's size, and the time the call took.

:func:`replay` is what ``windowfit bench`` prints and plots; the context-quality evaluation
reuses it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from windowfit.errors import InvalidArgumentError

__all__ = ["SERIES", "ReplayResult", "Turn", "call_points", "replay"]

log = logging.getLogger(__name__)

#: The per-turn series of a replay, as plotted: name -> what it measures.
SERIES = {
    "whole_history": "tokens of the whole history",
    "fit": "tokens wf.fit sent (the baseline: the newest messages that fit, no summary)",
    "sent": "tokens the ContextManager sent",
    "cached_prefix": "tokens of its prompt that repeat the previous prompt's prefix",
    "summary": "tokens of the running summary in its prompt",
}


@dataclass
class Turn:
    """One model call of the replay."""

    messages: int  # messages in the history at this call
    whole: int  # tokens of the whole history (what sending everything would cost)
    fit_sent: int  # tokens wf.fit kept
    fit_prefix: int  # tokens of fit's prompt shared with its previous prompt (a cacheable prefix)
    sent: int  # tokens the ContextManager sent
    prefix: int  # tokens of the manager's prompt shared with its previous prompt
    summary: int  # tokens of the running summary in the manager's prompt
    fit_ms: float
    prepare_ms: float
    langchain_ms: float | None = None


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class ReplayResult:
    """The per-call figures of one replayed history, and what they add up to."""

    name: str
    model: str
    budget: int
    context_window: int
    prices: dict[str, float | None]  # USD per million input tokens: uncached, cached
    priming: int = 0  # tokens a request costs besides its messages
    turns: list[Turn] = field(default_factory=list)
    langchain_error: str | None = None

    def series(self) -> dict[str, list[int]]:
        """Tokens per call, by the names of :data:`SERIES`."""
        return {
            "whole_history": [t.whole for t in self.turns],
            "fit": [t.fit_sent for t in self.turns],
            "sent": [t.sent for t in self.turns],
            "cached_prefix": [t.prefix for t in self.turns],
            "summary": [t.summary for t in self.turns],
        }

    def cost(self, sent: int, cached: int) -> float | None:
        """Input cost in USD of ``sent`` tokens of which ``cached`` are billed as cache hits."""
        price, cached_price = self.prices["input"], self.prices["cached_input"]
        if price is None:
            return None
        return ((sent - cached) * price + cached * (cached_price or price)) / 1e6

    def totals(self) -> dict[str, Any]:
        """Sums over the calls: tokens, prefix reuse, costs and time per call (p50/p99, ms)."""
        ts = self.turns
        whole = sum(t.whole for t in ts)
        # an append-only history sent whole repeats the previous call's messages entirely
        whole_prefix = sum(max(0, a.whole - self.priming) for a in ts[:-1])
        sent, prefix = sum(t.sent for t in ts), sum(t.prefix for t in ts)
        fit_sent, fit_prefix = sum(t.fit_sent for t in ts), sum(t.fit_prefix for t in ts)
        lc = [t.langchain_ms for t in ts if t.langchain_ms is not None]
        limit = self.context_window
        return {
            "name": self.name,
            "model": self.model,
            "calls": len(ts),
            "messages": ts[-1].messages if ts else 0,
            "budget": self.budget,
            "whole_tokens": whole,
            "overflow_calls": sum(t.whole > limit for t in ts),
            "sent_tokens": sent,
            "prefix_tokens": prefix,
            "prefix_reuse": prefix / sent if sent else 0.0,
            "fit_sent_tokens": fit_sent,
            "fit_prefix_reuse": fit_prefix / fit_sent if fit_sent else 0.0,
            "saved": 1 - sent / whole if whole else 0.0,
            "cost_whole_cached": self.cost(whole, whole_prefix),
            "cost_whole_uncached": self.cost(whole, 0),
            "cost_fit_cached": self.cost(fit_sent, fit_prefix),
            "cost_cached": self.cost(sent, prefix),
            "cost_uncached": self.cost(sent, 0),
            "final_summary_tokens": ts[-1].summary if ts else 0,
            "fit_ms_p50": _pct([t.fit_ms for t in ts], 0.5),
            "fit_ms_p99": _pct([t.fit_ms for t in ts], 0.99),
            "prepare_ms_p50": _pct([t.prepare_ms for t in ts], 0.5),
            "prepare_ms_p99": _pct([t.prepare_ms for t in ts], 0.99),
            "langchain_ms_p50": _pct(lc, 0.5),
            "langchain_ms_p99": _pct(lc, 0.99),
            "langchain_error": self.langchain_error,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"totals": self.totals(), "turns": [asdict(t) for t in self.turns]}


def call_points(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """History lengths at which the model was called: before each assistant message, and at the
    end when the history does not end with the model's answer."""
    points = [k for k, m in enumerate(messages) if k and m.get("role") == "assistant"]
    if messages and messages[-1].get("role") != "assistant":
        points.append(len(messages))
    return points


def _shared_prefix(prev: Sequence[Any], cur: Sequence[Any], count: Callable[[Any], int]) -> int:
    """Tokens of the leading messages ``cur`` repeats from ``prev`` (the same objects or equal
    dicts): what a provider's prompt cache can serve."""
    tokens = 0
    for a, b in zip(prev, cur):
        if a is not b and a != b:
            break
        tokens += count(b)
    return tokens


def _langchain_trimmer(model: str, counter: Any) -> Callable[[list[Any], int], Any] | None:
    try:
        from langchain_core.messages import trim_messages

        from windowfit.adapters.langchain import from_canonical
        from windowfit.integrations.langchain import token_counter
    except ImportError:
        return None
    count = token_counter(model, counter=counter)

    def trim(history: list[Any], budget: int) -> Any:
        return trim_messages(
            history,
            max_tokens=budget,
            token_counter=count,
            strategy="last",
            include_system=True,
            start_on="human",
        )

    trim.convert = from_canonical  # type: ignore[attr-defined]
    return trim


def replay(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str = "gpt-4o",
    context_window: int | None = None,
    output_reserve: int | None = None,
    name: str = "history",
    langchain: bool = True,
    manager: Any = None,
    on_call: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay ``messages`` call by call through ``wf.fit``, a ``wf.ContextManager`` (extractive
    summaries, stable prefix; or ``manager``) and, with ``langchain`` and langchain-core
    installed, ``trim_messages``. The prompt budget is ``context_window - output_reserve``
    (defaults: the model's window and the manager's reserve). ``on_call(done, total)`` reports
    progress."""
    import windowfit as wf

    info = wf.get_model(model)
    if manager is None:
        manager = wf.ContextManager(
            model=model,
            context_window=context_window,
            output_reserve=output_reserve,
            summarizer=wf.ExtractiveSummarizer(),
            stable_prefix=True,
        )
    counter = manager.counter
    budget = manager.context_window - manager.output_reserve
    history = list(messages)
    points = call_points(history)
    result = ReplayResult(
        name,
        info.name,
        budget,
        manager.context_window,
        {"input": info.input_price, "cached_input": info.cached_input_price},
    )
    trimmer = _langchain_trimmer(model, counter) if langchain else None
    lc_history = None
    if trimmer is not None:
        try:
            lc_history = trimmer.convert(history)  # type: ignore[attr-defined]
            if len(lc_history) != len(history):
                raise InvalidArgumentError("the conversion changed the number of messages")
        except Exception as exc:  # noqa: BLE001 - a shape LangChain cannot convert: say so
            lc_history = None
            result.langchain_error = f"{type(exc).__name__}: {exc}"
            log.info("LangChain cannot convert %s: %s", name, exc)
    # per-message tokens once: count_messages is additive (README "Message counting")
    sizes = [counter.count_message(m) for m in history]
    priming = counter.count_messages(history[:1]) - sizes[0] if history else 0
    result.priming = priming
    size_of = {id(m): s for m, s in zip(history, sizes)}

    def count(m: Any) -> int:
        s = size_of.get(id(m))
        return s if s is not None else counter.count_message(m)

    state = None
    prev_fit: list[Any] = []
    done = 0
    for k in points:
        running = sum(sizes[:k])  # exact and cheap next to the calls below
        prefix = history[:k]
        t0 = time.perf_counter()
        try:
            fitted = wf.fit(prefix, budget, counter=counter).messages
        except wf.BudgetError:
            fitted = []  # the pins alone overflow: fit sends nothing, the manager truncates
        fit_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        p = manager.prepare(prefix, state)
        prepare_ms = (time.perf_counter() - t0) * 1e3
        state = p.state
        lc_ms = None
        if lc_history is not None and trimmer is not None and result.langchain_error is None:
            t0 = time.perf_counter()
            try:
                trimmer(lc_history[:k], budget)
                lc_ms = (time.perf_counter() - t0) * 1e3
            except Exception as exc:  # noqa: BLE001 - report LangChain's failure, keep going
                result.langchain_error = f"{type(exc).__name__}: {exc}"
        result.turns.append(
            Turn(
                messages=k,
                whole=running + (priming if k else 0),
                fit_sent=counter.count_messages(fitted) if fitted else 0,
                fit_prefix=_shared_prefix(prev_fit, fitted, count),
                sent=int(p.stats["tokens"]),
                prefix=int(p.stats["prefix_tokens_shared"]),
                summary=int(p.stats.get("tokens_summary", 0)),
                fit_ms=fit_ms,
                prepare_ms=prepare_ms,
                langchain_ms=lc_ms,
            )
        )
        prev_fit = fitted
        done += 1
        if on_call is not None:
            on_call(done, len(points))
    log.debug("replayed %s: %d calls", name, len(result.turns))
    return result
