"""OpenAI Agents SDK integration: a ``Session`` whose ``get_items`` returns a fitted window while
the full history stays in a windowfit store, and a ``call_model_input_filter`` that fits every
model call of a run (tool loops grow a run's input past what ``get_items`` returned).

Items are Responses API input items, stored as they are (a store keeps any JSON dict), so no
field the SDK needs is lost; fitting goes through :mod:`windowfit.adapters.openai_responses`,
which keeps ``function_call`` items with their outputs and reasoning with its turn.

Needs ``pip install 'windowfit[openai-agents]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from windowfit.errors import InvalidArgumentError
from windowfit.integrations._common import (
    missing_extra,
    resolve_counter,
    resolve_manager,
    start_on_rule,
)

try:
    from agents.run import CallModelData, ModelInputData
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "openai-agents", _exc) from _exc
try:
    from agents.memory import SessionSettings
except ImportError:  # pragma: no cover - SDKs before session settings
    SessionSettings = None  # type: ignore[assignment,misc]

from windowfit.adapters.canonical import Converted, as_dict
from windowfit.adapters.openai_responses import from_responses, new_items
from windowfit.session import Session
from windowfit.store.memory import MemoryStore

__all__ = ["WindowfitSession", "input_filter"]

logger = logging.getLogger(__name__)

# pop_item on an append-only store: a marker item hides the latest visible item
_POP = "windowfit.pop"


def _plain(item: Any) -> dict[str, Any]:
    d = as_dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump) and not isinstance(item, Mapping):
        d = dump(mode="json", exclude_none=True)
    return dict(d)


def _visible(stored: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in stored:
        if item.get("type") == _POP:
            if out:
                out.pop()
        else:
            out.append(item)
    return out


class _Fitter:
    """Fit (``budget``) or prepare (ContextManager) a list of Responses items."""

    def __init__(
        self,
        manager: Any,
        budget: int | None,
        model: str | None,
        counter: Any,
        reserve: int,
        start_on: str | None,
        manager_kwargs: dict[str, Any],
    ) -> None:
        if reserve < 0:
            raise InvalidArgumentError("reserve must be >= 0")
        self.budget, self.reserve = budget, reserve
        self.start_on = start_on_rule(start_on)
        if budget is not None:
            if manager is not None or manager_kwargs:
                raise InvalidArgumentError("pass budget= (plain fitting) or a manager, not both")
            self.counter = resolve_counter(counter, model)
            self.manager = None
        else:
            self.counter = counter
            self.manager = resolve_manager(manager, model=model, **manager_kwargs)
        self.last_stats: dict[str, Any] = {}

    def fit(self, conv: Converted[Any]) -> list[Any]:
        import windowfit as wf

        assert self.budget is not None, "the manager path prepares, it does not fit"
        r = wf.fit(
            conv.messages, self.budget - self.reserve, counter=self.counter, start_on=self.start_on
        )
        self.last_stats = dict(r.stats)
        return conv.select(r.kept)

    def finish(self, conv: Converted[Any], prepared: Any) -> list[Any]:
        self.last_stats = dict(prepared.stats)
        return conv.reassemble(list(prepared.messages), new_items(conv))


def _with_instructions(items: Sequence[Any], instructions: str | None) -> Converted[Any]:
    conv = from_responses(items)
    if instructions:
        # the instructions go out with every call: count them, never return them
        conv = Converted(
            conv.items,
            [{"role": "system", "content": instructions}, *conv.messages],
            [(), *conv.origins],
        )
    return conv


class WindowfitSession:
    """An Agents SDK ``Session`` backed by a windowfit store.

    ``get_items()`` returns the window to send: ``wf.fit`` into ``budget`` tokens, or a
    ``ContextManager`` window with a running summary (``manager`` or ContextManager arguments;
    the summary state is saved in the store). ``get_items(limit=n)`` returns the latest ``n``
    stored items unchanged, as the SDK expects for its own bookkeeping. ``reserve`` keeps room
    for the new turn's input, which the SDK appends after ``get_items``. Nothing is deleted:
    ``pop_item`` appends a marker that hides the latest item, ``clear_session`` deletes the
    session from the store::

        session = WindowfitSession("user-42", wf.SQLiteStore("sessions.db"), model="gpt-4o")
        result = await Runner.run(agent, "hi", session=session)
    """

    def __init__(
        self,
        session_id: str,
        store: Any = None,
        *,
        manager: Any = None,
        budget: int | None = None,
        model: str | None = None,
        counter: Any = None,
        instructions: str | None = None,
        reserve: int = 0,
        start_on: str | None = "user",
        session_settings: Any = None,
        **manager_kwargs: Any,
    ) -> None:
        if store is None:
            store = MemoryStore()
        self.session_id = session_id
        self.store = store
        self.session = Session(store, session_id)
        self.instructions = instructions
        # no default limit: a limit makes the SDK call get_items(limit=...), which is the raw tail
        self.session_settings = session_settings or (
            SessionSettings() if SessionSettings is not None else None
        )
        self._fitter = _Fitter(manager, budget, model, counter, reserve, start_on, manager_kwargs)

    @property
    def last_stats(self) -> dict[str, Any]:
        """Stats of the latest ``get_items()`` window."""
        return self._fitter.last_stats

    async def all_items(self) -> list[dict[str, Any]]:
        """Every visible item of the session, oldest first."""
        return _visible(await self.session.aload())

    async def get_items(self, limit: int | None = None) -> list[Any]:
        items = await self.all_items()
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        conv = _with_instructions(items, self.instructions)
        if not conv.messages:
            return []
        f = self._fitter
        if f.manager is None:
            return f.fit(conv)
        state, version = await self.session.aload_state()
        prepared = await f.manager.aprepare(conv.messages, state=state)
        if prepared.state is not None and prepared.state != state:
            try:
                await self.session.asave_state(prepared.state, version)
            except Exception as exc:  # another worker saved first: its state wins, ours is redone
                logger.info("session %r: summary state not saved (%s)", self.session_id, exc)
        return f.finish(conv, prepared)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await self.session.aextend([_plain(i) for i in items])

    async def pop_item(self) -> Any | None:
        items = await self.all_items()
        if not items:
            return None
        await self.session.aappend({"type": _POP})
        return items[-1]

    async def clear_session(self) -> None:
        self.session.delete()


def input_filter(
    *,
    budget: int,
    model: str | None = None,
    counter: Any = None,
    start_on: str | None = "user",
) -> Any:
    """A ``RunConfig(call_model_input_filter=...)`` fitting each model call's input into
    ``budget`` tokens (the agent's instructions included), so a long tool loop inside one run
    cannot overflow the window. Summaries belong to :class:`WindowfitSession`: a filter sees
    one call at a time and has no conversation to keep a summary for."""
    fitter = _Fitter(None, budget, model, counter, 0, start_on, {})

    def call_model_input_filter(data: CallModelData[Any]) -> ModelInputData:
        md = data.model_data
        conv = _with_instructions(md.input, md.instructions)
        if not conv.messages:
            return md
        return ModelInputData(input=fitter.fit(conv), instructions=md.instructions)

    call_model_input_filter.fitter = fitter  # type: ignore[attr-defined]
    return call_model_input_filter
