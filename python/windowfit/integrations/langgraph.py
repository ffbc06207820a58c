"""LangGraph integration: a ``pre_model_hook`` that sends the model a fitted, summarized window.

The hook returns ``{"llm_input_messages": window}``, so the graph's ``messages`` keep the whole
history; the running summary state is written to a state key (``"windowfit"``), which the graph's
state schema must declare (use :class:`WindowfitAgentState`, or add the key to your own)::

    agent = create_react_agent(model, tools, pre_model_hook=pre_model_hook(model="gpt-4o"),
                               state_schema=WindowfitAgentState)

With ``budget=`` instead of a manager the hook only fits (``wf.fit``), with no summary and no
state. Needs ``pip install 'windowfit[langchain]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Annotated, Any

from windowfit.integrations._common import missing_extra

try:
    from langchain_core.messages import AnyMessage
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph.message import add_messages
    from langgraph.managed import RemainingSteps
    from typing_extensions import NotRequired, TypedDict
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "langchain", _exc) from _exc

from windowfit.integrations.langchain import Windower

__all__ = ["WindowfitAgentState", "pre_model_hook"]

logger = logging.getLogger(__name__)


class WindowfitAgentState(TypedDict):
    """``create_react_agent`` state with windowfit's summary state under ``windowfit``."""

    messages: Annotated[Sequence[AnyMessage], add_messages]
    remaining_steps: NotRequired[RemainingSteps]
    windowfit: NotRequired[dict[str, Any] | None]


def _get(state: Any, key: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(key, default)
    return getattr(state, key, default)  # pydantic state schemas


def pre_model_hook(
    manager: Any = None,
    *,
    model: str | None = None,
    budget: int | None = None,
    counter: Any = None,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    state_key: str | None = "windowfit",
    **manager_kwargs: Any,
) -> RunnableLambda:
    """A ``create_react_agent(pre_model_hook=...)`` node (sync and async).

    With a ``manager`` (or ContextManager arguments: ``model``, ``context_window``, ...) it runs
    ``ContextManager.prepare`` on the state's messages and saves the summary state under
    ``state_key`` (None: don't save it). With ``budget`` (and ``model`` or ``counter``) it just
    fits the messages into that many tokens. ``system``/``tools``: the agent's prompt and tools,
    counted against the budget (the agent adds them after the hook). ``.windower`` on the
    returned runnable gives access to ``last_stats``.
    """
    windower = Windower(manager, budget=budget, model=model, counter=counter, **manager_kwargs)
    key = state_key if windower.manager is not None else None

    def update(old: Any, window: list[Any], new: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"llm_input_messages": window}
        if key is not None and new is not None and new != old:
            out[key] = new
        logger.debug("windowfit pre_model_hook: %s", windower.last_stats)
        return out

    def hook(state: Any) -> dict[str, Any]:
        old = _get(state, key) if key else None
        window, new = windower(_get(state, "messages"), state=old, system=system, tools=tools)
        return update(old, window, new)

    async def ahook(state: Any) -> dict[str, Any]:
        old = _get(state, key) if key else None
        window, new = await windower.acall(
            _get(state, "messages"), state=old, system=system, tools=tools
        )
        return update(old, window, new)

    runnable = RunnableLambda(hook, afunc=ahook, name="windowfit_pre_model_hook")
    runnable.windower = windower  # type: ignore[attr-defined]
    return runnable
