"""LangChain integration: trim ``BaseMessage`` lists with ``wf.fit`` semantics, count tokens for
``trim_messages``, and a LangChain v1 agent middleware that sends a fitted, summarized window.

``trim`` never splits an assistant tool call from its ``ToolMessage`` s (``trim_messages`` can),
keeps system messages and the latest user message, and returns the caller's own message objects.

Needs ``pip install 'windowfit[langchain]'``; the middleware also needs ``langchain`` (v1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from windowfit.context import ContextManager
from windowfit.errors import InvalidArgumentError
from windowfit.integrations._common import (
    missing_extra,
    resolve_counter,
    resolve_manager,
    start_on_rule,
)

try:
    from langchain_core.messages import BaseMessage
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "langchain", _exc) from _exc

from windowfit.adapters.langchain import (  # the conversions: re-exported
    convert_new,
    from_canonical,
    message_dicts,
    to_canonical,
    tools_to_openai,
)

if TYPE_CHECKING:
    from langchain_core.messages import AnyMessage

__all__ = [
    "Windower",
    "WindowfitMiddleware",
    "WindowfitState",
    "from_canonical",
    "to_canonical",
    "token_counter",
    "tools_to_openai",
    "trim",
]

logger = logging.getLogger(__name__)


def token_counter(
    model: str | None = None, *, counter: Any = None
) -> Callable[[Sequence[BaseMessage]], int]:
    """A ``token_counter`` for ``langchain_core.messages.trim_messages`` (and anything else that
    takes a ``list[BaseMessage] -> int``), counting exactly like ``wf.fit``."""
    c = resolve_counter(counter, model)

    def count(messages: Sequence[BaseMessage]) -> int:
        return int(c.count_messages(to_canonical(messages).messages))

    count.__name__ = f"windowfit_token_counter[{model or 'counter'}]"
    return count


def trim(
    messages: Sequence[Any],
    budget: int,
    *,
    model: str | None = None,
    counter: Any = None,
    keep_system: bool = True,
    keep_last_user: bool = True,
    start_on: str | None = "user",
    pinned: Iterable[int] = (),
) -> list[BaseMessage]:
    """The longest recent window of ``messages`` within ``budget`` tokens, as ``wf.fit`` picks it.

    Like ``trim_messages(strategy="last", include_system=True, start_on="human")``, but tool calls
    and their results are kept or dropped together, the latest user message is always kept, and
    ``wf.BudgetError`` is raised when the pinned messages alone do not fit. ``pinned`` indexes
    ``messages``. Returns the input message objects.
    """
    import windowfit as wf

    conv = to_canonical(messages)
    pins = set(pinned)
    canon_pins = [ci for ci, refs in enumerate(conv.origins) if any(r[0] in pins for r in refs)]
    result = wf.fit(
        conv.messages,
        budget,
        counter=resolve_counter(counter, model),
        keep_system=keep_system,
        keep_last_user=keep_last_user,
        start_on=start_on_rule(start_on),
        pinned=canon_pins,
        oversize="drop",  # the caller's own objects come back, by index: nothing is cut
    )
    return conv.select(result.kept)


def _system_prefix(system: Any) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    return message_dicts(system)


class Windower:
    """Picks the messages one model call sends: ``wf.fit`` into ``budget`` tokens, or a
    ``ContextManager`` window with a running summary (``manager`` or ContextManager arguments).

    Shared by :class:`WindowfitMiddleware` and the LangGraph ``pre_model_hook``. The system
    prompt and tools sent with the call are counted against the budget but not returned.
    """

    def __init__(
        self,
        manager: Any = None,
        *,
        budget: int | None = None,
        model: str | None = None,
        counter: Any = None,
        context_window: int | None = None,
        start_on: str | None = "user",
        **manager_kwargs: Any,
    ) -> None:
        self.budget = budget
        self.start_on = start_on_rule(start_on)
        self.manager: ContextManager | None
        if budget is not None:
            if manager is not None or manager_kwargs or context_window is not None:
                raise InvalidArgumentError("pass budget= (plain fitting) or a manager, not both")
            self.counter = resolve_counter(counter, model)
            self.manager = None
        else:
            self.counter = counter
            self.manager = resolve_manager(
                manager, model=model, context_window=context_window, **manager_kwargs
            )
        self.last_stats: dict[str, Any] = {}

    def _fit(
        self, messages: Sequence[Any], system: Any, tools: Any
    ) -> tuple[list[BaseMessage], Any]:
        import windowfit as wf

        assert self.budget is not None  # plain fitting is the mode a budget chose
        conv = to_canonical(messages, prefix=_system_prefix(system))
        budget = self.budget - self.counter.count_tools(tools_to_openai(tools))
        r = wf.fit(conv.messages, max(budget, 0), counter=self.counter, start_on=self.start_on)
        self.last_stats = dict(r.stats)
        return conv.select(r.kept), None

    def __call__(
        self, messages: Sequence[Any], *, state: Any = None, system: Any = None, tools: Any = None
    ) -> tuple[list[BaseMessage], Any]:
        """``(window, new_state)`` for one model call."""
        if self.manager is None:
            return self._fit(messages, system, tools)
        conv = to_canonical(messages, prefix=_system_prefix(system))
        p = self.manager.prepare(conv.messages, state=state, tools=tools_to_openai(tools))
        self.last_stats = dict(p.stats)
        return conv.reassemble(list(p.messages), convert_new(conv)), p.state

    async def acall(
        self, messages: Sequence[Any], *, state: Any = None, system: Any = None, tools: Any = None
    ) -> tuple[list[BaseMessage], Any]:
        """Async ``__call__``: the manager's summarizer may call an LLM."""
        if self.manager is None:
            return self._fit(messages, system, tools)
        conv = to_canonical(messages, prefix=_system_prefix(system))
        p = await self.manager.aprepare(conv.messages, state=state, tools=tools_to_openai(tools))
        self.last_stats = dict(p.stats)
        return conv.reassemble(list(p.messages), convert_new(conv)), p.state


# --------------------------------------------------------------------------- v1 agent middleware

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ExtendedModelResponse
    from langgraph.types import Command
    from typing_extensions import NotRequired
except ImportError as _mw_exc:  # langchain-core without langchain v1: everything else still works
    _MIDDLEWARE_ERROR: ImportError | None = missing_extra(__name__, "langchain", _mw_exc)
else:
    _MIDDLEWARE_ERROR = None

    class WindowfitState(AgentState):
        """Agent state with windowfit's summary state under ``windowfit``."""

        windowfit: NotRequired[dict[str, Any] | None]

    class WindowfitMiddleware(AgentMiddleware):
        """Send the model a fitted, summarized window of the agent's history.

        The graph state keeps every message; each model call gets what ``ContextManager.prepare``
        makes of them (system prompt and tools counted), and the running summary state is saved
        in the ``windowfit`` state key; with ``budget=`` it only fits (``wf.fit``, no summary).
        Works in ``wrap_model_call`` because only there does the request carry the system prompt
        and tools, and only there can the messages sent differ from the state (a ``before_model``
        hook can only rewrite the state's history)::

            agent = create_agent(model, tools, middleware=[WindowfitMiddleware(model="gpt-4o")])
        """

        state_schema = WindowfitState
        state_key = "windowfit"

        def __init__(
            self,
            manager: Any = None,
            *,
            budget: int | None = None,
            model: str | None = None,
            counter: Any = None,
            context_window: int | None = None,
            **manager_kwargs: Any,
        ) -> None:
            super().__init__()
            self.windower = Windower(
                manager,
                budget=budget,
                model=model,
                counter=counter,
                context_window=context_window,
                **manager_kwargs,
            )

        @property
        def last_stats(self) -> dict[str, Any]:
            return self.windower.last_stats

        def _result(self, response: Any, old: Any, new: Any) -> Any:
            if new is None or new == old:
                return response
            return ExtendedModelResponse(
                model_response=response, command=Command(update={self.state_key: new})
            )

        def wrap_model_call(
            self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
        ) -> Any:
            old = request.state.get(self.state_key)
            window, new = self.windower(
                request.messages, state=old, system=request.system_message, tools=request.tools
            )
            sent = cast("list[AnyMessage]", window)  # from_canonical builds only these
            return self._result(handler(request.override(messages=sent)), old, new)

        async def awrap_model_call(
            self, request: ModelRequest, handler: Callable[[ModelRequest], Any]
        ) -> Any:
            old = request.state.get(self.state_key)
            window, new = await self.windower.acall(
                request.messages, state=old, system=request.system_message, tools=request.tools
            )
            sent = cast("list[AnyMessage]", window)  # from_canonical builds only these
            return self._result(await handler(request.override(messages=sent)), old, new)


def __getattr__(name: str) -> Any:
    if name in ("WindowfitMiddleware", "WindowfitState") and _MIDDLEWARE_ERROR is not None:
        raise _MIDDLEWARE_ERROR
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
