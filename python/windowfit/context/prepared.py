"""What ``ContextManager.prepare`` returns: the prompt, its stats and the state for next turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

__all__ = ["LeftOut", "Prepared", "PreparedStats"]


class LeftOut(TypedDict, total=False):
    """Why messages were not sent verbatim (keys only where there were some)."""

    summarized: int  # folded into the summary
    before_cut: int  # evicted by the cut, not summarized yet
    fit: int  # left out by the final fit
    fit_reason: str  # the fit's ``stop_reason``


class PreparedStats(TypedDict, total=False):
    """``Prepared.stats``: how one call's prompt was built.

    Every key is present after ``prepare`` except ``masked_from`` / ``masked_until`` (only
    when old tool outputs were masked in this call) and ``invalid_skipped`` (added by
    ``Session.prepare`` when stored messages were left out as invalid).
    """

    model: str | None
    exact: bool  # the counter is exact for the model (not an estimate)
    # the budgets (``windowfit.context.budget``)
    context_window: int
    output_reserve: int
    system_tokens: int  # system messages, or ``system_reserve`` when larger
    tools_tokens: int  # tool schemas
    prompt_budget: int
    history_budget: int
    summary_budget: int
    high_water: int
    low_water: int
    turn: int
    # sizes: ``tokens`` is what is sent (reply priming included, tool schemas not)
    tokens: int
    tokens_system: int
    tokens_summary: int
    tokens_recent: int
    tokens_tools: int
    tokens_total: int  # tokens + tool schemas
    tokens_full: int  # sending the whole history (and the tool schemas)
    tokens_saved: int
    usage_ratio: float  # tokens_total over context_window - output_reserve
    budget_use: float  # tokens_total over the prompt budget
    messages_total: int
    messages_sent: int
    messages_dropped: int  # history messages not sent verbatim
    messages_summarized: int
    messages_pending: int  # evicted, not summarized yet
    left_out: LeftOut
    # the plan: ``keep``, ``mask``, ``summarize``, ``truncate`` or ``fallback``, and why
    strategy: str
    strategy_reason: str
    compacted: bool  # the cut moved
    cut: int
    summarized_until: int
    masked_from: int  # the first message masked in this call
    masked_until: int  # the new mask boundary
    # the summary
    summary_triggered: bool
    summary_failed: bool
    summary_error: str | None
    summary_ms: float | None
    summary_target_tokens: int | None
    summary_dropped: bool  # it did not fit beside the pins and was left out
    summary_deferred: bool  # made off the request path; this call fitted plainly
    has_summary: bool
    # the provider's prompt cache: the leading part identical to the previous call's prompt
    prefix_tokens_shared: int
    prefix_messages_shared: int
    prefix_shared_ratio: float
    tool_outputs_truncated: int
    tool_tokens_truncated: int
    # loaded state fields that were reset, and why ("; "-joined)
    state_reset: bool
    state_reset_reason: str | None
    elapsed_ms: float
    # recall of evicted messages the latest user message asks about (``windowfit.recall``, ``windowfit.recalling``)
    recalled: list[dict[str, Any]]  # each unit: where it came from, its tokens and score
    tokens_recall: int
    recall_reason: str
    recall_skipped: list[Any]  # units that matched but did not fit (the first 8)
    recall_error: str  # only when the stage failed and the prompt went out without it
    # added by ``Session.prepare``
    invalid_skipped: list[int]
    unreadable_skipped: list[int]  # of those, records that could not be decoded
    state_saved: bool  # False: other writers kept saving first; the prompt is still valid
    state_save_error: str


@dataclass(frozen=True)
class Prepared:
    """What to send (``messages``), how it was built (``stats``) and the state for next turn.

    ``messages`` holds the input message objects themselves, plus new dicts for the summary
    and for truncated tool outputs; ``state`` is JSON-serializable.
    """

    messages: list[dict[str, Any]]
    stats: PreparedStats
    state: dict[str, Any]

    @property
    def tokens(self) -> int:
        """Tokens of ``messages`` (reply priming included, tool schemas not)."""
        return int(self.stats["tokens"])
