"""Summarizers and a small manager shared by the consumer, anchor and background tests."""

from __future__ import annotations

from typing import Any

from windowfit.context import ContextManager


class Recorder:
    """An inline summarizer that counts its calls and tags its summaries ``TAG-n``."""

    inline = True

    def __init__(self, tag: str = "SUMMARY") -> None:
        self.tag = tag
        self.calls = 0

    def __call__(self, messages: list[Any], **kw: Any) -> str:
        self.calls += 1
        return f"{self.tag}-{self.calls}: earlier questions with tickets were answered."


def small_manager(summarizer: Any, **kw: Any) -> ContextManager:
    """A 6,000-token gpt-4o manager that summarizes readily (preference=quality)."""
    base: dict[str, Any] = {
        "model": "gpt-4o",
        "context_window": 6000,
        "output_reserve": 500,
        "preference": "quality",
    }
    return ContextManager(summarizer=summarizer, **{**base, **kw})
