"""The manager's environment variables, its measured defaults and where it saves cut tool
outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.truncation.saved_outputs import private_root

__all__ = [
    "DEFAULT_KEEP_RECENT",
    "DEFAULT_MASK_CLEAR_AT_LEAST",
    "DEFAULT_MASK_KEEP",
    "DEFAULT_TARGET_RATIO",
    "DEFAULT_TRIGGER_RATIO",
    "ENV_VARS",
    "default_tool_output_dir",
    "output_dir",
]

#: The water marks and observation masking defaults, chosen together on tuning data (dialog
#: seeds 0-5, the first 16 real agent runs) and checked on held-out data: see
#: benches/RESULTS.md, "Budget use and observation masking". A low-water mark well under the
#: high one leaves room for many calls after each cut (the cached prefix holds), masking keeps
#: the window's tokens down between cuts.
DEFAULT_TRIGGER_RATIO = 0.85
DEFAULT_TARGET_RATIO = 0.3
DEFAULT_MASK_KEEP = 3
DEFAULT_MASK_CLEAR_AT_LEAST = 2048
#: The newest tool output, the one the agent is acting on, is never cut to the cap (measured
#: cost on the tuning runs: 0.1 point of prefix reuse, no more tokens).
DEFAULT_KEEP_RECENT = 1


#: constructor parameter -> environment variable
ENV_VARS: dict[str, str] = {
    "model": "WINDOWFIT_MODEL",
    "context_window": "WINDOWFIT_CONTEXT_WINDOW",
    "output_reserve": "WINDOWFIT_OUTPUT_RESERVE",
    "system_reserve": "WINDOWFIT_SYSTEM_RESERVE",
    "history_ratio": "WINDOWFIT_HISTORY_RATIO",
    "summary_ratio": "WINDOWFIT_SUMMARY_RATIO",
    "trigger_ratio": "WINDOWFIT_TRIGGER_RATIO",
    "target_ratio": "WINDOWFIT_TARGET_RATIO",
    "summarizer": "WINDOWFIT_SUMMARIZER",
    "tool_output_max_tokens": "WINDOWFIT_TOOL_OUTPUT_MAX_TOKENS",
    "tool_output_direction": "WINDOWFIT_TOOL_OUTPUT_DIRECTION",
    "tool_output_dir": "WINDOWFIT_TOOL_OUTPUT_DIR",
    "preference": "WINDOWFIT_PREFERENCE",
    "stable_prefix": "WINDOWFIT_STABLE_PREFIX",
    "summary_role": "WINDOWFIT_SUMMARY_ROLE",
    "summary_timeout": "WINDOWFIT_SUMMARY_TIMEOUT",
    "summary_length_ratio": "WINDOWFIT_SUMMARY_LENGTH_RATIO",
    "language": "WINDOWFIT_LANGUAGE",
    "mask_keep": "WINDOWFIT_MASK_KEEP",
    "mask_clear_at_least": "WINDOWFIT_MASK_CLEAR_AT_LEAST",
    "counter": "WINDOWFIT_ENCODING",
    "summary_max_tokens": "WINDOWFIT_SUMMARY_MAX_TOKENS",
    "min_messages_before_summary": "WINDOWFIT_MIN_MESSAGES_BEFORE_SUMMARY",
    "max_summaries_per_window": "WINDOWFIT_MAX_SUMMARIES_PER_WINDOW",
    "resummarize_ratio": "WINDOWFIT_RESUMMARIZE_RATIO",
    "max_messages": "WINDOWFIT_MAX_MESSAGES",
    "max_turns": "WINDOWFIT_MAX_TURNS",
    "min_recent_rounds": "WINDOWFIT_MIN_RECENT_ROUNDS",
    "keep_recent_tool_outputs": "WINDOWFIT_KEEP_RECENT_TOOL_OUTPUTS",
    "recall": "WINDOWFIT_RECALL",
    "recall_ratio": "WINDOWFIT_RECALL_RATIO",
}


def default_tool_output_dir() -> Path:
    """Where cut tool outputs are saved by default: a folder of the user's own under the
    system's temporary directory (files are named by content, so a folder shared between
    processes of one user holds each output once)."""
    return private_root() / "tool-output"


def output_dir(value: Any) -> Path | None:
    """``tool_output_dir``: a folder, ``"off"`` (nothing saved: placeholders point into the
    stored history instead), or None for ``default_tool_output_dir()``."""
    if value is None:
        return default_tool_output_dir()
    if not isinstance(value, (str, os.PathLike)):
        raise ArgumentTypeError(f"tool_output_dir must be a path or 'off', not {value!r}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgumentError(f"tool_output_dir must be a path or 'off', not {value!r}")
    return None if text.strip().lower() == "off" else Path(text)
