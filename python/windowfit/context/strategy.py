"""Strategy choice: truncate only, or summarize what falls out of the window.

A score per strategy from the conversation's size and how often it was summarized lately,
weighted by the caller's preference (``fast``, ``balanced``, ``quality``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from windowfit.errors import InvalidArgumentError

__all__ = ["PREFERENCES", "StrategyDecision", "choose_strategy"]

PREFERENCES = ("fast", "balanced", "quality")
RECENT_SUMMARY_WINDOW = 20  # turns considered by the summarization frequency limit
SUMMARY_FREQUENCY_LIMIT = 3


@dataclass(frozen=True)
class StrategyDecision:
    """``strategy`` is ``"summarize"`` or ``"truncate"``; ``reason`` says why."""

    strategy: str
    reason: str
    scores: Mapping[str, float] = field(default_factory=dict)


_PREFERENCE_WEIGHTS = {
    "fast": {"truncate": 0.8, "summarize": 0.2},
    "balanced": {"truncate": 0.5, "summarize": 0.5},
    "quality": {"truncate": 0.2, "summarize": 0.8},
}


def choose_strategy(
    *,
    preference: str = "balanced",
    message_count: int,
    content_tokens: int,
    recent_summaries: int = 0,
    has_summarizer: bool = True,
    frequency_limit: int = SUMMARY_FREQUENCY_LIMIT,
    min_messages: int = 10,
) -> StrategyDecision:
    """Truncate-only or summarize, from preference, conversation size and summary frequency.

    The scoring: short conversations are cheaper to truncate; long ones are worth a
    summary; summarizing more than ``frequency_limit`` times in the recent turns is penalized;
    the preference weights the two scores (``fast`` 0.8/0.2, ``balanced`` 0.5/0.5, ``quality``
    0.2/0.8). Ties go to truncation (no cost, no latency).
    """
    if preference not in _PREFERENCE_WEIGHTS:
        raise InvalidArgumentError(f"preference must be one of {PREFERENCES}, not {preference!r}")
    if not has_summarizer:
        return StrategyDecision("truncate", "no summarizer configured")
    if preference == "fast":
        return StrategyDecision("truncate", "preference=fast: truncate only, no summarizer calls")
    if message_count < min_messages:
        return StrategyDecision(
            "truncate",
            f"{message_count} messages, under min_messages_before_summary={min_messages}",
        )
    if message_count < 10 and content_tokens < 600:
        return StrategyDecision(
            "truncate", f"short conversation ({message_count} messages, {content_tokens} tokens)"
        )
    truncate = (
        20.0 + (30 if message_count <= 50 else 0) + (30 if content_tokens <= 3000 else 0) + 20
    )
    summarize = 20.0 + (30 if message_count >= 10 else 0) + (30 if content_tokens >= 600 else 0)
    summarize += 20 if recent_summaries < frequency_limit else -50
    weights = _PREFERENCE_WEIGHTS[preference]
    scores = {
        "truncate": truncate * weights["truncate"],
        "summarize": summarize * weights["summarize"],
    }
    size = f"{message_count} messages, {content_tokens} tokens"
    if scores["summarize"] > scores["truncate"]:
        return StrategyDecision(
            "summarize", f"preference={preference}, {size}: a summary keeps what falls out", scores
        )
    if recent_summaries >= frequency_limit:
        why = f"{recent_summaries} summaries in the last {RECENT_SUMMARY_WINDOW} turns (limit {frequency_limit})"
    else:
        why = f"{size}: truncation is enough"
    return StrategyDecision("truncate", f"preference={preference}, {why}", scores)
