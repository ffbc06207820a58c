"""Anthropic integration: fit Messages API requests, count them with windowfit's estimate
calibrated from each response's reported ``usage``, and record usage (cache reads and writes
included) in a ``UsageTracker``.

Anthropic publishes no tokenizer, so ``Counter(model="claude-...")`` estimates (``is_exact`` is
False). Every recorded response teaches the counter the ratio between its estimate and the
input tokens Anthropic billed, so later budgets get tighter without getting unsafe::

    win = AnthropicWindow("claude-haiku-4-5", tracker=wf.UsageTracker(store))
    response = win.create(client, messages, system="Be brief.", max_tokens=1024)

Needs ``pip install 'windowfit[anthropic]'`` (the conversions in
:mod:`windowfit.adapters.anthropic` need nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from windowfit.errors import InvalidArgumentError
from windowfit.integrations._common import (
    missing_extra,
    resolve_counter,
    resolve_manager,
    start_on_rule,
)

try:
    import anthropic  # noqa: F401  (the SDK must be importable: responses are its objects)
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "anthropic", _exc) from _exc

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.adapters.anthropic import from_anthropic, new_messages
from windowfit.adapters.canonical import Converted
from windowfit.messages import SYSTEM_ROLES
from windowfit.models import get_model
from windowfit.usage import extract_usage

__all__ = ["AnthropicWindow", "count_tokens"]

logger = logging.getLogger(__name__)


def _tools(tools: Iterable[Any] | None) -> list[Mapping[str, Any]] | None:
    """Anthropic tool definitions in the shape ``Counter.count_tools`` reads (name,
    description, input_schema); server tools without a schema count by name."""
    if not tools:
        return None
    out: list[Mapping[str, Any]] = []
    for t in tools:
        d = (
            t
            if isinstance(t, Mapping)
            else getattr(t, "model_dump", lambda **_: {})(exclude_none=True)
        )
        if "name" in d:
            out.append(d)
    return out or None


def count_tokens(
    messages: Sequence[Any],
    *,
    system: Any = None,
    tools: Iterable[Any] | None = None,
    model: str | None = None,
    counter: Any = None,
) -> int:
    """Estimated input tokens of a Messages API request (system, messages and tools)."""
    c = resolve_counter(counter, model)
    conv = from_anthropic(messages, system)
    return int(c.count_messages(conv.messages)) + int(c.count_tools(_tools(tools)))


class AnthropicWindow:
    """Keeps Messages API requests for ``model`` inside its context window.

    ``fit`` picks the messages (``wf.fit``; tool_use / tool_result pairs stay together), or,
    with ``summarize=True`` / a ``manager``, ``prepare`` adds a running summary to ``system``.
    ``record`` stores a response's usage in ``tracker`` and calibrates the counter; ``create`` /
    ``acreate`` do fit, call and record in one go. ``budget``: prompt tokens allowed (default:
    the model's context window less the call's ``max_tokens``).
    """

    def __init__(
        self,
        model: str,
        *,
        counter: Any = None,
        tracker: Any = None,
        budget: int | None = None,
        manager: Any = None,
        summarize: bool = False,
        session_id: str | None = None,
        start_on: str | None = "user",
        **manager_kwargs: Any,
    ) -> None:
        self.model = model
        self.counter = resolve_counter(counter, model)
        self.tracker = tracker
        self.budget = budget
        self.session_id = session_id
        self.start_on = start_on_rule(start_on)
        self.manager = None
        if manager is not None or summarize or manager_kwargs:
            self.manager = resolve_manager(
                manager, model=None if manager is not None else model, **manager_kwargs
            )
        if tracker is not None:
            tracker.attach(model, self.counter)
        self.last_estimate: int | None = None
        self.last_stats: dict[str, Any] = {}

    # counting and fitting ---------------------------------------------------------------------

    def count(
        self, messages: Sequence[Any], *, system: Any = None, tools: Iterable[Any] | None = None
    ) -> int:
        """Estimated input tokens of a request (calibrated by the responses recorded so far)."""
        return count_tokens(messages, system=system, tools=tools, counter=self.counter)

    def _budget(self, max_tokens: int | None) -> int:
        if self.budget is not None:
            return self.budget
        info = get_model(self.model)
        reserve = max_tokens if max_tokens is not None else min(info.max_output_tokens, 4096)
        return info.context_window - reserve

    def fit(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Iterable[Any] | None = None,
        max_tokens: int | None = None,
    ) -> list[Any]:
        """The messages to send: the caller's own, the oldest dropped whole turns at a time."""
        import windowfit as wf

        conv = from_anthropic(messages, system)
        budget = self._budget(max_tokens) - int(self.counter.count_tools(_tools(tools)))
        r = wf.fit(conv.messages, max(budget, 0), counter=self.counter, start_on=self.start_on)
        self.last_stats = dict(r.stats)
        self.last_estimate = int(r.tokens) + int(self.counter.count_tools(_tools(tools)))
        return conv.select(r.kept)

    def _op_prepare(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Iterable[Any] | None = None,
        state: Any = None,
    ) -> CallOp[tuple[Any, list[Any], Any]]:
        """``(system, messages, state)`` through the ContextManager: the summary joins
        ``system`` (Anthropic has no system role in ``messages``), the window keeps the caller's
        messages, truncated tool results are copies (``aprepare``: an LLM summarizer is
        awaited)."""
        if self.manager is None:
            raise InvalidArgumentError(
                "prepare and aprepare need a manager: AnthropicWindow(model, summarize=True)"
            )
        conv = from_anthropic(messages, system)
        # the manager's prepare, or its aprepare awaited: the one call the twins make differently
        p = yield call(self.manager, "prepare", conv.messages, state=state, tools=_tools(tools))
        return self._split(conv, p, system, tools)

    prepare = blocking(_op_prepare)
    aprepare = awaitable(_op_prepare)

    def _split(
        self, conv: Converted[Any], p: Any, system: Any, tools: Any
    ) -> tuple[Any, list[Any], Any]:
        self.last_stats = dict(p.stats)
        known = conv.index_of()
        head = [m for m in p.messages if m.get("role") in SYSTEM_ROLES and id(m) not in known]
        rest = [m for m in p.messages if not (m.get("role") in SYSTEM_ROLES and id(m) not in known)]
        window = conv.reassemble(rest, new_messages(conv))
        new_system = _join_system(system, [m.get("content") for m in head])
        self.last_estimate = int(p.stats.get("tokens", 0)) + int(
            self.counter.count_tools(_tools(tools))
        )
        return new_system, window, p.state

    # the call and its usage --------------------------------------------------------------------

    def request(
        self,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Iterable[Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Keyword arguments for ``client.messages.create`` with the fitted messages."""
        out: dict[str, Any] = {"model": self.model, **kwargs}
        out["messages"] = self.fit(
            messages, system=system, tools=tools, max_tokens=kwargs.get("max_tokens")
        )
        if system is not None:
            out["system"] = system
        if tools is not None:
            out["tools"] = list(tools)
        return out

    def record(
        self, response: Any, *, estimated: int | None = None, session_id: str | None = None
    ) -> Any:
        """Record ``response``'s usage (cache reads/writes included) and calibrate the counter
        with the input tokens Anthropic billed vs ``estimated`` (default: the last fit's)."""
        estimate = self.last_estimate if estimated is None else estimated
        if self.tracker is not None:
            return self.tracker.record_response(
                response,
                model=self.model,
                session_id=session_id or self.session_id,
                estimated_prompt_tokens=estimate,
            )
        usage = extract_usage(response)
        if estimate and usage["prompt_tokens"] and not self.counter.is_exact:
            self.counter.calibrate(int(estimate), int(usage["prompt_tokens"]))
        return usage

    def _op_create(
        self,
        client: Any,
        messages: Sequence[Any],
        *,
        system: Any = None,
        tools: Iterable[Any] | None = None,
        **kwargs: Any,
    ) -> CallOp[Any]:
        """Fit, call ``client.messages.create``, record the usage; returns the response
        (``acreate``: the same with an ``AsyncAnthropic`` client)."""
        response = yield call(
            self, "_send", client, self.request(messages, system=system, tools=tools, **kwargs)
        )
        self.record(response)
        return response

    # One body: only sending the request differs (an AsyncAnthropic's create is awaited).
    create = blocking(_op_create)
    acreate = awaitable(_op_create)

    @staticmethod
    def _send(client: Any, request: dict[str, Any]) -> Any:
        return client.messages.create(**request)

    @staticmethod
    async def a_send(client: Any, request: dict[str, Any]) -> Any:
        return await client.messages.create(**request)


def _join_system(system: Any, extra: list[Any]) -> Any:
    """``system`` with the summary text(s) appended, in the form ``system`` already has."""
    texts = [
        e if isinstance(e, str) else "\n".join(p.get("text", "") for p in e or ()) for e in extra
    ]
    texts = [t for t in texts if t]
    if not texts:
        return system
    if system is None or isinstance(system, str):
        return "\n\n".join([system, *texts] if system else texts)
    return [*system, *({"type": "text", "text": t} for t in texts)]
