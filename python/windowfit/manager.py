"""Compatibility alias: the context manager lives in the ``windowfit.context`` package."""

from __future__ import annotations

from windowfit.context import (
    ENV_VARS,
    Budget,
    ContextManager,
    Prepared,
    StrategyDecision,
    choose_strategy,
    compute_budget,
    summary_target_tokens,
)

__all__ = [
    "ENV_VARS",
    "Budget",
    "ContextManager",
    "Prepared",
    "StrategyDecision",
    "choose_strategy",
    "compute_budget",
    "summary_target_tokens",
]
