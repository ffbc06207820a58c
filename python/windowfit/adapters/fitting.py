"""Run ``wf.fit`` / ``wf.ContextManager`` on a :class:`Converted` list and map the result back."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .canonical import Converted

__all__ = ["Fitted", "Prepared", "aprepare_converted", "fit_converted", "prepare_converted"]

T = TypeVar("T")


@dataclass
class Fitted(Generic[T]):
    """A fit mapped back to the caller's format.

    ``items`` are the kept originals (the same objects where untouched), ``messages`` the kept
    canonical messages, ``result`` the underlying ``wf.fit`` result (``kept``/``dropped`` index
    the canonical list).
    """

    items: list[T]
    messages: list[dict[str, Any]]
    result: Any

    @property
    def tokens(self) -> int:
        return int(self.result.tokens)

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.result.stats)


@dataclass
class Prepared(Generic[T]):
    """A ``ContextManager.prepare`` result mapped back: ``items`` to send, ``state`` to keep."""

    items: list[T]
    messages: list[dict[str, Any]]
    stats: dict[str, Any]
    state: Any


def fit_converted(conv: Converted[T], budget: int, **fit_kwargs: Any) -> Fitted[T]:
    """``wf.fit(conv.messages, budget, **fit_kwargs)`` with the kept indices mapped to items."""
    import windowfit as wf

    # Items are the caller's own objects, mapped back by index: a tool result cut to fit would
    # exist only in the canonical messages, so an oversized round is left out (and reported
    # in stats["round_dropped"]) unless the caller asks otherwise.
    fit_kwargs.setdefault("oversize", "drop")
    result = wf.fit(conv.messages, budget, **fit_kwargs)
    return Fitted(conv.select(result.kept), list(result.messages), result)


def _map_prepared(
    conv: Converted[T],
    prepared: Any,
    convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
) -> Prepared[T]:
    out = list(prepared.messages)
    return Prepared(conv.reassemble(out, convert_new), out, dict(prepared.stats), prepared.state)


def prepare_converted(
    conv: Converted[T],
    manager: Any,
    convert_new: Callable[[Sequence[Mapping[str, Any]]], list[T]],
    *,
    state: Any = None,
    **prepare_kwargs: Any,
) -> Prepared[T]:
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
) -> Prepared[T]:
    """Async :func:`prepare_converted` (the summarizer may call an LLM)."""
    prepared = await manager.aprepare(conv.messages, state=state, **prepare_kwargs)
    return _map_prepared(conv, prepared, convert_new)
