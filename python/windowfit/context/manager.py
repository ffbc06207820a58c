"""The ``ContextManager`` façade: the public calls, and the finishing step that applies a
summarization's outcome to the state and fits the final prompt.

One call runs plan → (summarize) → finish; ``prepare`` and ``aprepare`` share both ends and
differ only in how the summarizer is run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.context.budget import Budget
from windowfit.context.plan import Outcome, Plan
from windowfit.context.planner import Planner
from windowfit.context.recall import apply_recall, recall_input, recall_stage
from windowfit.context.runner import Runner
from windowfit.context.state import now
from windowfit.context.stats import Stats
from windowfit.context.strategy import choose_strategy
from windowfit.messages import SYSTEM_ROLES, fingerprint

__all__ = ["ContextManager", "Prepared"]

logger = logging.getLogger(__name__)

Message = Mapping[str, Any]

_MAX_BACKOFF_TURNS = 32


@dataclass(frozen=True)
class Prepared:
    """What to send (``messages``), how it was built (``stats``) and the state for next turn.

    ``messages`` holds the input message objects themselves, plus new dicts for the summary
    and for truncated tool outputs; ``state`` is JSON-serializable.
    """

    messages: list[dict[str, Any]]
    stats: dict[str, Any]
    state: dict[str, Any]

    @property
    def tokens(self) -> int:
        """Tokens of ``messages`` (reply priming included, tool schemas not)."""
        return int(self.stats["tokens"])


class ContextManager(Stats, Planner, Runner):
    """Keeps a conversation's prompt inside the context window, summarizing what falls out.

    >>> cm = ContextManager(model="gpt-4o")                     # doctest: +SKIP
    >>> p = cm.prepare(history, state=saved_state)              # doctest: +SKIP
    >>> client.chat.completions.create(model="gpt-4o", messages=p.messages)  # doctest: +SKIP
    >>> saved_state = p.state                                   # doctest: +SKIP

    ``messages`` passed to :meth:`prepare` must be the full, append-only history (the state's
    indices point into it); the list and its dicts are never modified. See the module
    docstring for parameters, environment variables and budgets.
    """

    # -- public API -----------------------------------------------------------------------------

    def budget(
        self, messages: Sequence[Message] = (), tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Budget:
        """The budgets for ``messages`` (their system messages) and ``tools``."""
        msgs = self._as_list(messages)
        system = sum(self.counter.count_message(m) for m in msgs if m.get("role") in SYSTEM_ROLES)
        return self._budget(system, self.counter.count_tools(tools) if tools else 0)

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
        plan = self._deferred(self._plan(messages, state, tools), summarize)
        outcome = (yield call(self, "_run_job", plan.job)) if plan.job is not None else None
        return self._finish(plan, outcome)

    # one body, two methods: the summarizer is the only call that differs (``call`` makes it
    # ``_run_job`` in ``prepare`` and awaits ``a_run_job`` in ``aprepare``)
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
        return cast(dict[str, Any], prepared.state)

    summarize_after = blocking(_op_summarize_after)
    asummarize_after = awaitable(_op_summarize_after)

    @staticmethod
    def _deferred(plan: Plan, summarize: bool) -> Plan:
        plan.stats["summary_deferred"] = False
        if not summarize and plan.job is not None:
            plan.job = None  # _finish fits at the old cut, as after a failed summary
            plan.stats["summary_deferred"] = True
            plan.stats["strategy_reason"] = (
                f"{plan.stats.get('strategy_reason', '')}; the summary is made off the request path"
            )
        return plan

    def recommend(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Whether ``messages`` need optimizing, how urgently, and with which strategy."""
        msgs = self._as_list(messages)
        c = self.counter
        tokens = (c.count_messages(msgs) if msgs else 0) + (c.count_tools(tools) if tools else 0)
        system = sum(c.count_message(m) for m in msgs if m.get("role") in SYSTEM_ROLES)
        b = self._budget(system, c.count_tools(tools) if tools else 0)
        limit = self.context_window - self.output_reserve
        ratio = tokens / limit if limit else math.inf
        history = max(0, tokens - system - b.tools_tokens - self._priming)
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
            preference=self.preference,
            message_count=len(msgs),
            content_tokens=history,
            has_summarizer=self.summarizer is not None,
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
            raise ValueError("tools_count must be >= 0")
        msgs = self._as_list(messages)
        c = self.counter
        tokens = c.count_messages(msgs) if msgs else 0
        schema = c.count_tools(tools) if tools else 0
        per_call = tokens_per_tool_call
        if per_call is None:
            per_call = min(1000, self.tool_output_max_tokens or 1000)
        planned = tools_count * per_call
        limit = self.context_window - self.output_reserve
        need = tokens + schema + planned
        detail = (
            f"{need:,} of {limit:,} tokens ({need / limit:.0%}): messages {tokens:,}, "
            f"tool schemas {schema:,}, {tools_count} planned tool calls ~{planned:,}; "
            f"{self.output_reserve:,} reserved for the reply"
        )
        if need <= limit:
            return True, f"ok: {detail}"
        return False, f"over the limit by {need - limit:,} tokens: {detail}; call prepare() first"

    def _finish(self, plan: Plan, outcome: Outcome | None) -> Prepared:
        st, stats = plan.state, plan.stats
        msgs = plan.msgs
        job = plan.job
        summary = st["summary"]
        language = st.get("language")
        if job is not None and outcome is not None:
            text, tokens, error = self._validate(job, outcome)
            stats["summary_triggered"] = True
            stats["summary_ms"] = round(outcome.elapsed_ms, 3)
            if error is None:
                summary = text or ""
                language = job.language
                st.update(
                    summary=summary,
                    summary_tokens=tokens,
                    summarized_until=job.hi,
                    summarized_messages=int(st["summarized_messages"]) + job.fold_count,
                    evicted_tokens=int(st["evicted_tokens"]) + job.fold_tokens,
                    language=language,
                    created_at=now(),
                    summaries=int(st["summaries"]) + 1,
                    failures=0,
                    retry_turn=0,
                    last_error=None,
                    anchor=fingerprint(msgs[job.hi - 1]),
                    next_anchor=fingerprint(msgs[job.hi]) if job.hi < len(msgs) else None,
                )
                st["summary_turns"] = [*st["summary_turns"], st["turn"]][-10:]
                plan.cut = job.new_cut
                stats["compacted"] = True
                logger.info(
                    "summarized %d messages (%d tokens) into %d tokens in %.1f ms",
                    job.fold_count,
                    job.fold_tokens,
                    tokens,
                    outcome.elapsed_ms,
                )
            else:
                # Transactional: nothing advances, the previous summary stays, retry later.
                failures = int(st["failures"]) + 1
                backoff = min(2 ** (failures - 1), _MAX_BACKOFF_TURNS)
                st.update(
                    failures=failures, retry_turn=st["turn"] + backoff, last_error=error[:500]
                )
                stats.update(
                    summary_failed=True,
                    summary_error=error,
                    strategy="fallback",
                    strategy_reason=f"summarizer failed ({error}); fitting plainly, retry at turn {st['retry_turn']}",
                )
                logger.warning("summarization failed (%s); falling back to plain fitting", error)
        elif plan.cut != plan.start_cut:
            stats["compacted"] = True

        fitted = plan.fitted
        if fitted is None or fitted.cut != plan.cut or fitted.summary != summary:
            fitted = self._fit_at(plan, plan.cut, summary, language)
        if plan.cut != plan.start_cut:
            plan.cut_tokens = (
                plan.cut_tokens
                + self.counter.count_messages(msgs[plan.start_cut : plan.cut])
                - self._priming
                if plan.cut > plan.start_cut
                else (
                    self.counter.count_messages(msgs[: plan.cut]) - self._priming if plan.cut else 0
                )
            )
        st["cut"] = plan.cut
        st["cut_tokens"] = plan.cut_tokens
        # lets a consumer sharing the session tell whether this summary suits its window
        st["context_window"] = self.context_window
        st["head_user"] = next(
            (fitted.view.source[k] for k in fitted.view.pinned if fitted.view.source[k] >= 0), None
        )
        prepared = list(fitted.result.messages)
        self._fill_stats(plan, fitted, prepared)
        prepared = apply_recall(
            recall_stage(self.recall_settings, self.counter, recall_input(plan, fitted, summary)),
            stats,
            st,
        )
        st["updated_at"] = now()
        return Prepared(messages=prepared, stats=stats, state=st)
