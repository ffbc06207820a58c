"""The ``ContextManager`` façade: the public calls, each a short pipeline of the stages.

``prepare`` is load → plan → (summarize) → settle → fit → stats:

- ``StateLoader`` (state.py) checks the carried state against the history and measures it;
- ``Planner`` (planner.py) decides where the window starts and what to summarize, using
  ``Windows`` (window.py), ``ToolOutputCap`` (tool_outputs.py) and ``Masker`` (masker.py);
- ``SummaryRunner`` (runner.py) calls the summarizer and settles its outcome into the state;
- ``Windows.fit_at`` fits the final prompt and ``Stats`` (stats.py) describes it.

Every stage is built from the frozen ``Settings`` (config.py) and takes what it works on as
arguments; ``prepare`` and ``aprepare`` share one body and differ only in how the summarizer
is run.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypedDict, TypeVar, cast, overload

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.context.budget import Budget, naming_tools
from windowfit.context.config import Settings
from windowfit.context.masker import Masker
from windowfit.context.plan import Fitted, Job, Message, Plan
from windowfit.context.planner import Planner
from windowfit.context.prepared import Prepared, PreparedStats
from windowfit.context.recall import RecallSettings, apply_recall, recall_after_fit
from windowfit.context.runner import SummaryRunner
from windowfit.context.state import StateLoader, cut_check, now
from windowfit.context.stats import Stats
from windowfit.context.strategy import choose_strategy
from windowfit.context.tool_outputs import ToolOutputCap
from windowfit.context.window import Windows
from windowfit.counting import Counter
from windowfit.errors import ArgumentTypeError, BudgetError, InvalidArgumentError
from windowfit.messages import SYSTEM_ROLES, plain_messages
from windowfit.recalling import Embedder
from windowfit.summarize import Summarizer

__all__ = ["ContextManager", "Prepared", "PreparedStats", "Recommendation"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Recommendation(TypedDict):
    """What :meth:`ContextManager.recommend` returns."""

    tokens: int
    limit: int
    usage_ratio: float
    history_tokens: int
    high_water: int
    urgency: str  # none, low, medium, high or critical
    needs_optimization: bool
    recommended_strategy: str
    reason: str
    message_count: int


class _Setting(Generic[T]):
    """A manager attribute read from its frozen settings; assigning one makes new settings
    (and new stages, which read them once)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Setting[T]: ...
    @overload
    def __get__(self, obj: ContextManager, owner: type) -> T: ...
    def __get__(self, obj: ContextManager | None, owner: type) -> T | _Setting[T]:
        if obj is None:
            return self
        return cast(T, getattr(obj.settings, self.name))

    def __set__(self, obj: ContextManager, value: T) -> None:
        obj._configure(obj.settings.with_changes(**{self.name: value}))


class ContextManager:
    """Keeps a conversation's prompt inside the context window, summarizing what falls out.

    >>> cm = ContextManager(model="gpt-4o")                     # doctest: +SKIP
    >>> p = cm.prepare(history, state=saved_state)              # doctest: +SKIP
    >>> client.chat.completions.create(model="gpt-4o", messages=p.messages)  # doctest: +SKIP
    >>> saved_state = p.state                                   # doctest: +SKIP

    ``messages`` passed to :meth:`prepare` must be the full, append-only history (the state's
    indices point into it); the list and its dicts are never modified. See the module
    docstring of ``windowfit.context`` for parameters, environment variables and budgets.
    """

    consumer: _Setting[str] = _Setting()
    model: _Setting[str | None] = _Setting()
    context_window: _Setting[int] = _Setting()
    output_reserve: _Setting[int] = _Setting()
    system_reserve: _Setting[int | None] = _Setting()
    history_ratio: _Setting[float] = _Setting()
    summary_ratio: _Setting[float] = _Setting()
    trigger_ratio: _Setting[float] = _Setting()
    target_ratio: _Setting[float] = _Setting()
    summary_length_ratio: _Setting[float | None] = _Setting()
    tool_output_max_tokens: _Setting[int | None] = _Setting()
    tool_output_direction: _Setting[str] = _Setting()
    tool_output_dir: _Setting[Path | None] = _Setting()
    preference: _Setting[str] = _Setting()
    stable_prefix: _Setting[bool] = _Setting()
    summary_role: _Setting[str] = _Setting()
    summary_timeout: _Setting[float | None] = _Setting()
    language: _Setting[str | None] = _Setting()
    summary_max_tokens: _Setting[int] = _Setting()
    min_messages_before_summary: _Setting[int] = _Setting()
    max_summaries_per_window: _Setting[int] = _Setting()
    resummarize_ratio: _Setting[float] = _Setting()
    max_messages: _Setting[int | None] = _Setting()
    max_turns: _Setting[int | None] = _Setting()
    min_recent_rounds: _Setting[int] = _Setting()
    keep_recent_tool_outputs: _Setting[int] = _Setting()
    mask_keep: _Setting[int] = _Setting()
    mask_clear_at_least: _Setting[int] = _Setting()
    recall: _Setting[bool] = _Setting()
    recall_ratio: _Setting[float] = _Setting()
    recall_embedder: _Setting[Embedder | None] = _Setting()
    recall_settings: _Setting[RecallSettings] = _Setting()
    counter: _Setting[Counter] = _Setting()
    summarizer: _Setting[Summarizer | None] = _Setting()

    def __init__(
        self,
        model: str | None = None,
        *,
        context_window: int | None = None,
        output_reserve: int | None = None,
        system_reserve: int | None = None,
        history_ratio: float | None = None,
        summary_ratio: float | None = None,
        trigger_ratio: float | None = None,
        target_ratio: float | None = None,
        summarizer: Any = None,
        tool_output_max_tokens: int | None = None,
        tool_output_direction: str | None = None,
        tool_output_dir: str | os.PathLike[str] | None = None,
        preference: str | None = None,
        stable_prefix: bool | None = None,
        counter: Any = None,
        summary_role: str | None = None,
        summary_timeout: float | None = None,
        summary_length_ratio: float | None = None,
        language: str | None = None,
        summary_max_tokens: int | None = None,
        min_messages_before_summary: int | None = None,
        max_summaries_per_window: int | None = None,
        resummarize_ratio: float | None = None,
        max_messages: int | None = None,
        max_turns: int | None = None,
        min_recent_rounds: int | None = None,
        keep_recent_tool_outputs: int | None = None,
        consumer: str | None = None,
        mask_keep: int | None = None,
        mask_clear_at_least: int | None = None,
        recall: bool | None = None,
        recall_ratio: float | None = None,
        recall_embedder: Embedder | None = None,
    ) -> None:
        options = dict(locals())
        for name in ("self", "model", "counter", "summarizer", "consumer", "__class__"):
            options.pop(name, None)
        self._configure(
            Settings.parse(
                model, counter=counter, summarizer=summarizer, consumer=consumer, **options
            )
        )

    def _configure(self, settings: Settings) -> None:
        """Build the stages from ``settings`` (each reads what it needs once)."""
        self.settings = settings
        outputs = ToolOutputCap(settings)
        masker = Masker(settings, outputs)
        self._windows = Windows(settings, outputs, masker)
        self._loader = StateLoader(settings)
        self._planner = Planner(settings, self._windows, masker)
        self._runner = SummaryRunner(settings)
        self._stats = Stats(settings, self._windows)

    @property
    def summarizing_enabled(self) -> bool:
        """False with no summarizer or with ``trigger_ratio >= 1.0`` (truncation only)."""
        return self.settings.summarizing_enabled

    def __repr__(self) -> str:
        s = self.settings
        return (
            f"ContextManager(model={s.model!r}, context_window={s.context_window}, "
            f"output_reserve={s.output_reserve}, preference={s.preference!r}, "
            f"stable_prefix={s.stable_prefix}, summarizer={s.summarizer!r})"
        )

    # -- prepare: the pipeline ------------------------------------------------------------------

    def _op_prepare(
        self,
        messages: Sequence[Message],
        state: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        summarize: bool = True,
    ) -> CallOp[Prepared]:
        """The prompt to send for ``messages`` (the full history), plus stats and new state.

        ``summarize=False`` never calls the summarizer (a summary is being made off the
        request path): what would have been summarized is fitted plainly this turn and
        ``stats["summary_deferred"]`` says so. In ``aprepare`` async summarizers are awaited
        and sync ones run in a thread.

        Raises ``windowfit.BudgetError`` only when the system messages and the latest user
        message alone do not fit the prompt budget.
        """
        started = time.perf_counter()
        msgs = as_list(messages)
        summarizer = self.settings.summarizer
        loaded = self._loader.load(msgs, state, tools)
        plan = self._planner.plan(msgs, loaded, summarizer, started)
        job = _deferred(plan, summarize)
        outcome = None
        if job is not None and summarizer is not None:
            outcome = yield call(self._runner, "run", job, summarizer)
        summary, language = self._runner.settle(plan, outcome)
        try:
            fitted = self._windows.fit_at(plan, plan.cut, summary, language)
        except BudgetError as exc:
            raise naming_tools(exc, plan.budget) from None
        self._record_window(plan, fitted)
        prepared = list(fitted.result.messages)
        self._stats.fill(plan, fitted, prepared)
        recalled = recall_after_fit(
            self.settings.recall_settings,
            self.settings.counter,
            plan,
            fitted,
            prepared,
            summary,
            (self.settings.max_messages, self.settings.max_turns),
        )
        prepared = apply_recall(recalled, cast(dict[str, Any], plan.stats), plan.state)
        plan.state["updated_at"] = now()
        return Prepared(messages=prepared, stats=plan.stats, state=plan.state)

    # one body, two methods: the summarizer is the only call that differs (``call`` makes it
    # ``run`` in ``prepare`` and awaits ``arun`` in ``aprepare``)
    prepare = blocking(_op_prepare)
    aprepare = awaitable(_op_prepare)

    def _op_summarize_after(
        self,
        messages: Sequence[Message],
        state: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> CallOp[dict[str, Any]]:
        """The state for the next request, with any summary it needs made now.

        Call it after the reply is stored (in a thread, a task or a save hook): the next
        :meth:`prepare` finds the summary in the state instead of waiting for a summarizer on
        the request path.
        """
        prepared = yield call(self, "prepare", messages, state=state, tools=tools)
        return cast(Prepared, prepared).state

    summarize_after = blocking(_op_summarize_after)
    asummarize_after = awaitable(_op_summarize_after)

    def _record_window(self, plan: Plan, fitted: Fitted) -> None:
        """The state's window fields after this call: the cut, the raw tokens before it, the
        window size it was made for and the user message held next to the summary."""
        st, msgs, c = plan.state, plan.msgs, self.settings.counter
        priming = self.settings.priming
        if plan.cut > plan.start_cut:
            plan.cut_tokens += c.count_messages(msgs[plan.start_cut : plan.cut]) - priming
        elif plan.cut < plan.start_cut:
            plan.cut_tokens = c.count_messages(msgs[: plan.cut]) - priming if plan.cut else 0
        st["cut"] = plan.cut
        st["cut_tokens"] = plan.cut_tokens
        if plan.cut != plan.start_cut or plan.cut_check is None:
            st["cut_check"] = cut_check(plan.cut, plan.cut_tokens, self.settings.counter_id, msgs)
        else:  # the cut and its tokens as loaded, which their check vouched for
            st["cut_check"] = plan.cut_check
        # lets a consumer sharing the session tell whether this summary suits its window
        st["context_window"] = self.settings.context_window
        view = fitted.view
        st["head_user"] = next((view.source[k] for k in view.pinned if view.source[k] >= 0), None)

    # -- the other public calls -----------------------------------------------------------------

    def budget(
        self, messages: Sequence[Message] = (), tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Budget:
        """The budgets for ``messages`` (their system messages) and ``tools``."""
        msgs = as_list(messages)
        c = self.settings.counter
        system = sum(c.count_message(m) for m in msgs if m.get("role") in SYSTEM_ROLES)
        return self.settings.budget(system, c.count_tools(tools) if tools else 0)

    def _budget(self, system_tokens: int, tools_tokens: int) -> Budget:
        """``Settings.budget`` (sessions size a borrowed summary with it)."""
        return self.settings.budget(system_tokens, tools_tokens)

    def recommend(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Recommendation:
        """Whether ``messages`` need optimizing, how urgently, and with which strategy."""
        msgs = as_list(messages)
        c = self.settings.counter
        tokens = (c.count_messages(msgs) if msgs else 0) + (c.count_tools(tools) if tools else 0)
        system = sum(c.count_message(m) for m in msgs if m.get("role") in SYSTEM_ROLES)
        b = self.settings.budget(system, c.count_tools(tools) if tools else 0)
        limit = self.settings.context_window - self.settings.output_reserve
        ratio = tokens / limit if limit else math.inf
        history = max(0, tokens - system - b.tools_tokens - self.settings.priming)
        if ratio > 1.0:
            urgency = "critical"
        elif history > b.high_water or ratio >= 0.95:
            urgency = "high"
        elif ratio >= 0.6:
            urgency = "medium"
        elif ratio >= 0.3:
            urgency = "low"
        else:
            urgency = "none"
        decision = choose_strategy(
            preference=self.settings.preference,
            message_count=len(msgs),
            content_tokens=history,
            has_summarizer=self.settings.summarizer is not None,
        )
        return {
            "tokens": tokens,
            "limit": limit,
            "usage_ratio": round(ratio, 4),
            "history_tokens": history,
            "high_water": b.high_water,
            "urgency": urgency,
            "needs_optimization": history > b.high_water or ratio > 1.0,
            "recommended_strategy": decision.strategy,
            "reason": decision.reason,
            "message_count": len(msgs),
        }

    def check_safety(
        self,
        messages: Sequence[Message],
        tools_count: int = 0,
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        tokens_per_tool_call: int | None = None,
    ) -> tuple[bool, str]:
        """Whether ``messages`` leave room for the reply and ``tools_count`` more tool calls.

        Each planned call is reserved ``tokens_per_tool_call`` (default: the tool-output cap, at
        most 1000) for its call and result; ``tools`` schemas are counted exactly.
        """
        if tools_count < 0:
            raise InvalidArgumentError(f"tools_count must be >= 0, got {tools_count}")
        msgs = as_list(messages)
        c = self.settings.counter
        tokens = c.count_messages(msgs) if msgs else 0
        schema = c.count_tools(tools) if tools else 0
        per_call = tokens_per_tool_call
        if per_call is None:
            per_call = min(1000, self.settings.tool_output_max_tokens or 1000)
        planned = tools_count * per_call
        limit = self.settings.context_window - self.settings.output_reserve
        need = tokens + schema + planned
        detail = (
            f"{need:,} of {limit:,} tokens ({need / limit:.0%}): messages {tokens:,}, "
            f"tool schemas {schema:,}, {tools_count} planned tool calls ~{planned:,}; "
            f"{self.settings.output_reserve:,} reserved for the reply"
        )
        if need <= limit:
            return True, f"ok: {detail}"
        return False, f"over the limit by {need - limit:,} tokens: {detail}; call prepare() first"


def as_list(messages: Any) -> list[Message]:
    if isinstance(messages, (str, bytes, Mapping)):
        raise ArgumentTypeError(
            f"messages must be a list of message dicts, not {type(messages).__name__}"
        )
    return plain_messages(messages if isinstance(messages, list) else list(messages))


def _deferred(plan: Plan, summarize: bool) -> Job | None:
    """The plan's summarization job, unless it is made off the request path this call."""
    plan.stats["summary_deferred"] = False
    if summarize or plan.job is None:
        return plan.job
    plan.job = None  # the finish fits at the old cut, as after a failed summary
    plan.stats["summary_deferred"] = True
    plan.stats["strategy_reason"] = (
        f"{plan.stats.get('strategy_reason', '')}; the summary is made off the request path"
    )
    return None
