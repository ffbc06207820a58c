"""Run ``wf.fit`` / ``wf.ContextManager`` on a :class:`Converted` list and map the result back."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from windowfit.adapters.canonical import Converted
from windowfit.context import Prepared
from windowfit.fitting import FitResult, fit

__all__ = [
    "FittedItems",
    "PreparedItems",
    "aprepare_converted",
    "fit_converted",
    "prepare_converted",
]

T = TypeVar("T")


@dataclass
class FittedItems(Generic[T]):
    """A ``wf.fit`` result mapped back to the caller's format.

    ``items`` are the kept originals (the same objects where untouched); ``result`` is the
    ``wf.fit`` result itself (``kept``/``dropped`` index the canonical list).
    """

    items: list[T]
    result: FitResult

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The kept canonical messages."""
        return list(self.result.messages)

    @property
    def tokens(self) -> int:
        return int(self.result.tokens)

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.result.stats)


@dataclass
class PreparedItems(Generic[T]):
    """A ``ContextManager.prepare`` result mapped back: ``items`` to send; ``prepared`` is the
    manager's :class:`~windowfit.Prepared` (its canonical messages, stats and state)."""

    items: list[T]
    prepared: Prepared

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.prepared.messages)

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.prepared.stats)

    @property
    def state(self) -> dict[str, Any]:
        """The state to pass to the next ``prepare``."""
        return self.prepared.state


def fit_converted(conv: Converted[T], budget: int, **fit_kwargs: Any) -> FittedItems[T]:
    """``wf.fit(conv.messages, budget, **fit_kwargs)`` with the kept indices mapped to items."""
    # Items are the caller's own objects, mapped back by index: a tool result cut to fit would
    # exist only in the canonical messages, so an oversized round is left out (and reported
    # in stats["round_dropped"]) unless the caller asks otherwise.
    fit_kwargs.setdefault("oversize", "drop")
    result = fit(conv.messages, budget, **fit_kwargs)
    return FittedItems(conv.select(result.kept), result)


def _map_prepared(
    conv: Converted[T],
    prepared: Prepared,
    convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
) -> PreparedItems[T]:
    return PreparedItems(conv.reassemble(list(prepared.messages), convert_new), prepared)


def prepare_converted(
    conv: Converted[T],
    manager: Any,
    convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
    *,
    state: Any = None,
    **prepare_kwargs: Any,
) -> PreparedItems[T]:
    """``manager.prepare`` on the canonical list; outputs that are inputs map to originals and
    new messages (the summary, truncated tool results) go through ``convert_new``."""
    return _map_prepared(
        conv, manager.prepare(conv.messages, state=state, **prepare_kwargs), convert_new
    )


async def aprepare_converted(
    conv: Converted[T],
    manager: Any,
    convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
    *,
    state: Any = None,
    **prepare_kwargs: Any,
) -> PreparedItems[T]:
    """Async :func:`prepare_converted` (the summarizer may call an LLM)."""
    prepared = await manager.aprepare(conv.messages, state=state, **prepare_kwargs)
    return _map_prepared(conv, prepared, convert_new)
