"""Budget arithmetic of one call: how a context window splits into prompt, history, summary
and water-mark budgets, and how long a summary should be (pure functions).

::

    prompt budget   = context_window - output_reserve - tool schemas      (hard limit)
    history budget  = (prompt budget - system messages) × history_ratio  (summary + recent)
    summary budget  = history budget × summary_ratio                     (summary cap)
    high-water mark = history budget × trigger_ratio    summarize / cut when above
    low-water mark  = history budget × target_ratio     recent messages after the cut
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from windowfit.errors import BudgetError

__all__ = ["Budget", "compute_budget", "naming_tools", "summary_target_tokens"]

#: A summary may overshoot its target this much before it counts as "oversize" and is rejected.
OVERSIZE_FACTOR = 3.0
TARGET_HEADROOM = 0.8  # targets use at most this share of the summary budget
MIN_SUMMARY_TOKENS = 48
#: How long a written (LLM) summary aims to be, as a share of the text it stands for.
SUMMARY_LENGTH_RATIO = 0.15


@dataclass(frozen=True)
class Budget:
    """The token budgets of one call (see the module docstring for the formulas)."""

    context_window: int
    output_reserve: int
    system_tokens: int
    tools_tokens: int
    prompt_budget: int
    history_budget: int
    summary_budget: int
    high_water: int
    low_water: int

    def as_dict(self) -> dict[str, int]:
        return {
            "context_window": self.context_window,
            "output_reserve": self.output_reserve,
            "system_tokens": self.system_tokens,
            "tools_tokens": self.tools_tokens,
            "prompt_budget": self.prompt_budget,
            "history_budget": self.history_budget,
            "summary_budget": self.summary_budget,
            "high_water": self.high_water,
            "low_water": self.low_water,
        }


def compute_budget(
    *,
    context_window: int,
    output_reserve: int,
    system_tokens: int = 0,
    tools_tokens: int = 0,
    history_ratio: float = 1.0,
    summary_ratio: float = 0.25,
    trigger_ratio: float = 0.8,
    target_ratio: float = 0.4,
    overhead: int = 0,
) -> Budget:
    """Split a context window into prompt, history, summary and water-mark budgets.

    ``overhead`` is the fixed cost of any prompt (the reply priming). All results are
    non-negative ints with ``low_water <= high_water <= history_budget <= prompt_budget`` and,
    when ``summary_ratio + target_ratio <= trigger_ratio``, ``summary_budget + low_water <=
    high_water`` (a fresh summary plus the kept window always lands under the trigger).
    """
    prompt = max(0, int(context_window) - int(output_reserve) - int(tools_tokens))
    available = max(0, prompt - int(system_tokens) - int(overhead))
    history = math.floor(available * history_ratio)
    return Budget(
        context_window=int(context_window),
        output_reserve=int(output_reserve),
        system_tokens=int(system_tokens),
        tools_tokens=int(tools_tokens),
        prompt_budget=prompt,
        history_budget=history,
        summary_budget=math.floor(history * summary_ratio),
        high_water=math.floor(history * trigger_ratio),
        low_water=math.floor(history * target_ratio),
    )


def naming_tools(error: BudgetError, budget: Budget) -> BudgetError:
    """``error`` saying what the tool schemas took from the window, when they took something:
    a prompt that does not fit because of them must say so, not only blame the messages."""
    if budget.tools_tokens <= 0:
        return error
    room = max(0, budget.context_window - budget.output_reserve)
    return BudgetError(
        f"{error}; the tool schemas take {budget.tools_tokens:,} of the {room:,} tokens the "
        f"window leaves beside the {budget.output_reserve:,} reserved for the reply, so "
        f"{budget.prompt_budget:,} remain for the messages: send fewer or shorter tools"
    )


def summary_target_tokens(
    evicted_tokens: int, summary_budget: int, ratio: float = SUMMARY_LENGTH_RATIO
) -> int:
    """The dynamic summary length: ``ratio`` of the evicted text, clamped to the budget.

    Never below a small floor (a useful summary needs a few lines) unless the budget is smaller.
    """
    want = math.ceil(max(0, evicted_tokens) * ratio)
    return max(0, min(int(summary_budget), max(MIN_SUMMARY_TOKENS, want)))
