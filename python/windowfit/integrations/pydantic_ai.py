"""PydanticAI integration: history processors and a capability that keep an agent's requests
inside the context window.

``ModelRequest`` s and ``ModelResponse`` s are converted part by part to canonical messages
(system prompts, user prompts, tool returns and retries become their own messages; a response
becomes one assistant message), fitted or prepared, and mapped back: untouched messages come back
as the very same objects, a request only some of whose parts are kept is a ``dataclasses.replace``
copy holding the kept parts (and every part windowfit does not model, such as instruction
deltas), and a ``ToolReturnPart`` is never left without its ``ToolCallPart``.

* :func:`history_processor` — a function for ``ProcessHistory(...)`` (PydanticAI 2) or
  ``history_processors=[...]`` (PydanticAI 1): sync or async, with or without ``RunContext``.
  PydanticAI stores what a history processor returns as the run's history.
* :class:`WindowfitCapability` (PydanticAI 2) — fits only what each request sends, so the run's
  history keeps every message; it counts the agent's instructions and tool definitions too.

Needs ``pip install 'windowfit[pydantic-ai]'``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from windowfit.context import ContextManager
from windowfit.errors import InvalidArgumentError
from windowfit.integrations._common import (
    missing_extra,
    resolve_counter,
    resolve_manager,
    start_on_rule,
)

try:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
    )
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra(__name__, "pydantic-ai", _exc) from _exc

from windowfit.adapters.canonical import Converted
from windowfit.adapters.pydantic_ai import (  # the conversions: re-exported
    convert_new,
    from_canonical,
    to_canonical,
)

try:  # PydanticAI 2's capabilities; version 1 has history_processors only
    from pydantic_ai.capabilities import AbstractCapability
except ImportError:  # pragma: no cover - PydanticAI 1
    AbstractCapability = None  # type: ignore[assignment,misc]
_repair_messages: Callable[..., list[ModelMessage]] | None
try:
    from pydantic_ai.messages import repair_messages as _repair_messages
except ImportError:  # pragma: no cover - older PydanticAI merges nothing we must mirror
    _repair_messages = None

__all__ = [
    "WindowfitCapability",
    "WindowfitHistory",
    "from_canonical",
    "history_processor",
    "to_canonical",
]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- processing


def _model_name(ctx: Any) -> str | None:
    model = getattr(ctx, "model", None)
    return getattr(model, "model_name", None)


def _instructions_prefix(
    request_context: Any, messages: Sequence[ModelMessage], always: bool = False
) -> list[dict[str, Any]]:
    """The instructions sent with the request, as a system message to count.

    ``always``: a (maybe empty) message even without instructions, so the canonical history
    a ContextManager sees keeps its indices from call to call."""
    params = getattr(request_context, "model_request_parameters", None)
    parts = getattr(params, "instruction_parts", None)
    if parts:
        text = "\n\n".join(p.content for p in parts if getattr(p, "content", None))
    else:
        last = next((m for m in reversed(messages) if isinstance(m, ModelRequest)), None)
        text = getattr(last, "instructions", None) or ""
    return [{"role": "system", "content": text}] if text or always else []


def _tool_schemas(request_context: Any) -> list[dict[str, Any]] | None:
    params = getattr(request_context, "model_request_parameters", None)
    tools = list(getattr(params, "function_tools", None) or ()) + list(
        getattr(params, "output_tools", None) or ()
    )
    if not tools:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description or "",
                "parameters": t.parameters_json_schema,
            },
        }
        for t in tools
    ]


@dataclasses.dataclass
class _Conversation:
    state: Any = None
    full: list[ModelMessage] = dataclasses.field(default_factory=list)
    sent: list[ModelMessage] = dataclasses.field(default_factory=list)


class WindowfitHistory:
    """The engine behind :func:`history_processor` and :class:`WindowfitCapability`.

    With ``budget`` it fits (``wf.fit``, counting with ``counter``, ``model`` or the run's model);
    otherwise it prepares through a ``ContextManager`` (``manager`` or ContextManager arguments)
    and keeps each conversation's summary state, keyed by ``conversation_id``, for the next call
    (the ``max_conversations`` most recent are kept in memory).

    A ContextManager needs the full, append-only history, but PydanticAI stores what a history
    processor returns as the history. So in processor use the full history is kept here too:
    when a call's messages start with the very objects the previous call returned, the full
    history is the previous one plus what was appended since.
    """

    def __init__(
        self,
        manager: Any = None,
        *,
        budget: int | None = None,
        model: str | None = None,
        counter: Any = None,
        keep_system: bool = True,
        keep_last_user: bool = True,
        start_on: str | None = "user",
        max_conversations: int = 256,
        context_window: int | None = None,
        **manager_kwargs: Any,
    ) -> None:
        self.budget = budget
        self.model = model
        self.counter = counter
        self.fit_kwargs: dict[str, Any] = {
            "keep_system": keep_system,
            "keep_last_user": keep_last_user,
            "start_on": start_on_rule(start_on),
        }
        self.manager: ContextManager | None
        if budget is None:
            self.manager = resolve_manager(
                manager, model=model, context_window=context_window, **manager_kwargs
            )
        else:
            if manager is not None or manager_kwargs or context_window is not None:
                raise InvalidArgumentError("pass budget= (plain fitting) or a manager, not both")
            self.manager = None
        self.max_conversations = max_conversations
        self._conversations: OrderedDict[Any, _Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self.last_stats: dict[str, Any] = {}

    # per conversation ---------------------------------------------------------------------

    def _key(self, ctx: Any, messages: Sequence[ModelMessage]) -> Any:
        key = getattr(ctx, "conversation_id", None)
        if key is None:
            key = next(
                (
                    m.conversation_id
                    for m in reversed(messages)
                    if getattr(m, "conversation_id", None)
                ),
                None,
            )
        return key

    def conversation(self, key: Any) -> _Conversation:
        """The record (summary state, full history) of conversation ``key``."""
        with self._lock:
            conv = self._conversations.get(key)
            if conv is None:
                conv = self._conversations[key] = _Conversation()
            self._conversations.move_to_end(key)
            while len(self._conversations) > self.max_conversations:
                self._conversations.popitem(last=False)
            return conv

    def full_history(self, key: Any) -> list[ModelMessage]:
        """The full history windowfit knows for conversation ``key`` (processor use)."""
        return list(self.conversation(key).full)

    @staticmethod
    def _extend(record: _Conversation, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        sent = record.sent
        if sent and len(messages) >= len(sent) and all(a is b for a, b in zip(messages, sent)):
            return record.full + list(messages[len(sent) :])
        return list(messages)  # a new or rewritten history: take it as the whole

    # the work ----------------------------------------------------------------------------

    def _counter(self, ctx: Any) -> Any:
        if self.counter is not None or self.model is not None:
            return resolve_counter(self.counter, self.model)
        name = _model_name(ctx)
        if name is None:
            raise InvalidArgumentError(
                "cannot tell which model to count for: pass model= or counter="
            )
        return resolve_counter(None, name)

    def _fit(
        self, conv: Converted[ModelMessage], ctx: Any, tools: Any, request_context: Any
    ) -> list[ModelMessage]:
        import windowfit as wf

        counter = self._counter(ctx)
        budget = max(self.budget - counter.count_tools(tools), 0)
        r = wf.fit(conv.messages, budget, counter=counter, **self.fit_kwargs)
        self.last_stats = dict(r.stats)
        window = conv.select(r.kept)
        return window if request_context is not None else _merge_requests(window)

    def _begin(
        self, messages: Sequence[ModelMessage], ctx: Any, request_context: Any
    ) -> tuple[_Conversation | None, Converted[ModelMessage], Any]:
        record = None
        history = list(messages)
        if self.manager is not None:
            record = self.conversation(self._key(ctx, messages))
            if request_context is None:  # processor use: PydanticAI keeps only what we return
                history = self._extend(record, messages)
        prefix = _instructions_prefix(request_context, history, always=self.manager is not None)
        conv = to_canonical(history, prefix=prefix)
        return record, conv, _tool_schemas(request_context)

    def process(
        self, messages: Sequence[ModelMessage], ctx: Any = None, *, request_context: Any = None
    ) -> list[ModelMessage]:
        """The messages to send (or keep): fitted or prepared."""
        record, conv, tools = self._begin(messages, ctx, request_context)
        if record is None or self.manager is None:
            return self._fit(conv, ctx, tools, request_context)
        p = self.manager.prepare(conv.messages, state=record.state, tools=tools)
        return self._finish(record, conv, p, request_context)

    async def aprocess(
        self, messages: Sequence[ModelMessage], ctx: Any = None, *, request_context: Any = None
    ) -> list[ModelMessage]:
        """Async :meth:`process`: the manager's summarizer may call an LLM."""
        record, conv, tools = self._begin(messages, ctx, request_context)
        if record is None or self.manager is None:
            return self._fit(conv, ctx, tools, request_context)
        p = await self.manager.aprepare(conv.messages, state=record.state, tools=tools)
        return self._finish(record, conv, p, request_context)

    def _finish(
        self, record: _Conversation, conv: Converted[ModelMessage], p: Any, request_context: Any
    ) -> list[ModelMessage]:
        self.last_stats = dict(p.stats)
        window = conv.reassemble(list(p.messages), convert_new(conv))
        if request_context is None:
            window = _merge_requests(window)
        with self._lock:
            if p.state is not None:
                record.state = p.state
            if request_context is None:
                record.full, record.sent = list(conv.items), list(window)
        return window


def _merge_requests(window: list[ModelMessage]) -> list[ModelMessage]:
    """Merge adjacent requests (a summary before a trimmed request, say) the way PydanticAI does
    at the start of every run, so a stored history never changes under us: that keeps the next
    processor call's messages the very objects this one returned."""
    if _repair_messages is None or not any(
        isinstance(a, ModelRequest) and isinstance(b, ModelRequest)
        for a, b in zip(window, window[1:])
    ):
        return window
    return _repair_messages(window, repair_last_response=False)


def history_processor(
    manager: Any = None,
    *,
    budget: int | None = None,
    model: str | None = None,
    counter: Any = None,
    asynchronous: bool = False,
    takes_ctx: bool = False,
    **kwargs: Any,
) -> Callable[..., Any]:
    """A PydanticAI history processor.

    ``budget=`` fits into that many tokens (counting with ``model``/``counter``; with
    ``takes_ctx=True`` and neither given, with the run's model); otherwise a ``ContextManager``
    (``manager`` or its arguments, e.g. ``model="gpt-4o"``) prepares a summarized window.
    ``asynchronous``/``takes_ctx`` pick which of PydanticAI's four processor signatures you get::

        processor = history_processor(budget=8000, model="gpt-4o")
        agent = Agent(model, capabilities=[ProcessHistory(processor)])

    The returned function has a ``.history`` attribute (the :class:`WindowfitHistory`).
    """
    h = WindowfitHistory(manager, budget=budget, model=model, counter=counter, **kwargs)
    fn: Callable[..., Any]
    if asynchronous and takes_ctx:

        async def fn(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
            return await h.aprocess(messages, ctx)

    elif asynchronous:

        async def fn(messages: list[ModelMessage]) -> list[ModelMessage]:
            return await h.aprocess(messages)

    elif takes_ctx:

        def fn(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
            return h.process(messages, ctx)

    else:

        def fn(messages: list[ModelMessage]) -> list[ModelMessage]:
            return h.process(messages)

    fn.history = h  # type: ignore[union-attr]
    return fn


if AbstractCapability is not None:

    @dataclasses.dataclass
    class WindowfitCapability(AbstractCapability[Any]):
        """Fit each model request's messages without touching the run's history (PydanticAI 2).

        Runs in ``prepare_model_request``, where the serving model, the instructions and the tool
        definitions are known; the history in ``RunContext.messages`` (and so
        ``result.all_messages()``) keeps everything::

            agent = Agent(model, capabilities=[WindowfitCapability(budget=8000, model="gpt-4o")])
            agent = Agent(model, capabilities=[WindowfitCapability(model="gpt-4o")])  # summaries
        """

        manager: Any = None
        budget: int | None = None
        model: str | None = None
        counter: Any = None
        options: dict[str, Any] = dataclasses.field(default_factory=dict)
        history: WindowfitHistory = dataclasses.field(init=False)

        def __post_init__(self) -> None:
            self.history = WindowfitHistory(
                self.manager,
                budget=self.budget,
                model=self.model,
                counter=self.counter,
                **self.options,
            )

        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None  # holds a manager/counter: not spec-serializable

        async def prepare_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
            request_context.messages = await self.history.aprocess(
                request_context.messages, ctx, request_context=request_context
            )
            return request_context

else:  # pragma: no cover - PydanticAI 1

    def __getattr__(name: str) -> Any:
        if name == "WindowfitCapability":
            raise ImportError(
                "WindowfitCapability needs PydanticAI 2 (capabilities); use history_processor"
            )
        raise AttributeError(name)
