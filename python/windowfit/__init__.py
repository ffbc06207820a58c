"""windowfit: keep an LLM agent's prompt inside its context window.

Exact, cached token counting (a faster drop-in for tiktoken's counting), tool-pair-safe
fitting of long histories to a budget, token-exact truncation of tool outputs, running
summaries of what falls out, and durable sessions. The hot paths are Rust (``windowfit._core``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from windowfit._core import __version__
from windowfit.counting import (
    Counter,
    Encoding,
    MissingTokenizerError,
    count,
    encoding_for_model,
    get_encoding,
)
from windowfit.errors import (
    ArgumentTypeError,
    BudgetError,
    DisallowedSpecialTokenError,
    InvalidMessageError,
    MessageTypeError,
    UnknownEncodingError,
    VocabularyError,
    WindowfitError,
)
from windowfit.models import (
    ModelInfo,
    UnknownModelError,
    get_model,
    list_models,
    register_model,
)

if TYPE_CHECKING:
    from windowfit.context import (
        Budget,
        ContextManager,
        Prepared,
        StrategyDecision,
        choose_strategy,
        compute_budget,
    )
    from windowfit.fitting import FitResult, fit, render_history, repair
    from windowfit.recalling import RecallResult, recall
    from windowfit.session import Session
    from windowfit.session.summaries import await_summaries, wait_for_summaries
    from windowfit.store import (
        ConflictError,
        MemoryStore,
        PostgresStore,
        RedisStore,
        SQLiteStore,
        StoreCorruptError,
        StoreError,
        StoreOutcomeUnknownError,
        open_store,
    )
    from windowfit.summarize import (
        ExtractiveSummarizer,
        LLMSummarizer,
        Summarizer,
        SummaryError,
    )
    from windowfit.truncation import (
        DEFAULT_DIRECTION,
        DEFAULT_MARKER,
        TOKENS_OMITTED_MARKER,
        ObservationTruncator,
        ToolOutputTruncator,
        Truncation,
        compact_json,
        truncate,
    )
    from windowfit.usage import (
        Quota,
        QuotaExceededError,
        UsageTracker,
    )

#: The names imported on first use, by module: a process that only counts never imports the
#: fitting, the manager, the stores or the summarizers (``import windowfit`` took 165 ms with
#: them, most of a fresh process's load before its first count).
_LAZY: dict[str, tuple[str, ...]] = {
    "windowfit.context": (
        "Budget",
        "ContextManager",
        "Prepared",
        "StrategyDecision",
        "choose_strategy",
        "compute_budget",
    ),
    "windowfit.fitting": ("FitResult", "fit", "render_history", "repair"),
    "windowfit.recalling": ("RecallResult", "recall"),
    "windowfit.session": ("Session",),
    "windowfit.session.summaries": ("await_summaries", "wait_for_summaries"),
    "windowfit.store": (
        "ConflictError",
        "MemoryStore",
        "PostgresStore",
        "RedisStore",
        "SQLiteStore",
        "StoreCorruptError",
        "StoreError",
        "StoreOutcomeUnknownError",
        "open_store",
    ),
    "windowfit.summarize": ("ExtractiveSummarizer", "LLMSummarizer", "Summarizer", "SummaryError"),
    "windowfit.truncation": (
        "DEFAULT_DIRECTION",
        "DEFAULT_MARKER",
        "TOKENS_OMITTED_MARKER",
        "ObservationTruncator",
        "ToolOutputTruncator",
        "Truncation",
        "compact_json",
        "truncate",
    ),
    "windowfit.usage": ("Quota", "QuotaExceededError", "UsageTracker"),
}
_MODULE_OF = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'windowfit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})


__all__ = [
    "__version__",
    # counting
    "Counter",
    "Encoding",
    "get_encoding",
    "encoding_for_model",
    "count",
    # fitting
    "fit",
    "render_history",
    "repair",
    "FitResult",
    # truncation
    "truncate",
    "Truncation",
    "DEFAULT_DIRECTION",
    "DEFAULT_MARKER",
    "TOKENS_OMITTED_MARKER",
    "ToolOutputTruncator",
    "ObservationTruncator",
    "compact_json",
    # managing a conversation
    "ContextManager",
    "Prepared",
    "recall",
    "RecallResult",
    "Budget",
    "compute_budget",
    "StrategyDecision",
    "choose_strategy",
    "Summarizer",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "SummaryError",
    # sessions and usage
    "Session",
    "wait_for_summaries",
    "await_summaries",
    "SQLiteStore",
    "PostgresStore",
    "RedisStore",
    "MemoryStore",
    "open_store",
    "UsageTracker",
    "Quota",
    "QuotaExceededError",
    "ConflictError",
    "StoreCorruptError",
    "StoreError",
    "StoreOutcomeUnknownError",
    # models
    "ModelInfo",
    "get_model",
    "register_model",
    "list_models",
    # errors
    "ArgumentTypeError",
    "BudgetError",
    "DisallowedSpecialTokenError",
    "InvalidMessageError",
    "MessageTypeError",
    "MissingTokenizerError",
    "UnknownEncodingError",
    "UnknownModelError",
    "VocabularyError",
    "WindowfitError",
]
