"""The manager's configuration: constructor arguments, ``WINDOWFIT_*`` variables, defaults.

An argument given to the constructor wins, then the environment variable, then the default.

Every parameter, its variable (``ENV_VARS``, in defaults.py) and its default are tabled in the README,
section "Configuration".

``trigger_ratio >= 1.0`` turns summarizing off (the window is only truncated), so a
deployment can roll summaries out in stages with one variable.

`WINDOWFIT_SUMMARIZER=llm` builds an `LLMSummarizer` from `WINDOWFIT_SUMMARY_MODEL`,
`WINDOWFIT_SUMMARY_BASE_URL`, `WINDOWFIT_SUMMARY_API_KEY`, `WINDOWFIT_SUMMARY_REQUEST_TIMEOUT`
and `WINDOWFIT_SUMMARY_MAX_RETRIES` (then the SDK's own `OPENAI_API_KEY` / `OPENAI_BASE_URL`).
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from windowfit._validate import count_arg
from windowfit.context.budget import Budget, compute_budget
from windowfit.context.defaults import (
    DEFAULT_KEEP_RECENT,
    DEFAULT_MASK_CLEAR_AT_LEAST,
    DEFAULT_MASK_KEEP,
    DEFAULT_TARGET_RATIO,
    DEFAULT_TRIGGER_RATIO,
    ENV_VARS,
    output_dir,
)
from windowfit.context.plan import MaskedPrefix
from windowfit.context.recall import DEFAULT_RECALL_RATIO, recall_settings
from windowfit.context.strategy import PREFERENCES
from windowfit.counting import Counter
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.models import UnknownModelError, get_model
from windowfit.observation import DEFAULT_DIRECTION, ObservationTruncator
from windowfit.summarize import ExtractiveSummarizer, LLMSummarizer

__all__ = ["ENV_VARS", "Settings"]

logger = logging.getLogger(__name__)


def _env_value(param: str) -> str | None:
    value = os.environ.get(ENV_VARS[param])
    return value.strip() if value is not None and value.strip() != "" else None


def _parse_bool(text: str, name: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={text!r}: expected true/false")


def _setting(param: str, arg: Any, default: Any, kind: type) -> Any:
    """The argument if given, else the environment variable parsed as ``kind``, else default."""
    if arg is not None:
        return arg
    raw = _env_value(param)
    if raw is None:
        return default
    name = ENV_VARS[param]
    try:
        if kind is bool:
            return _parse_bool(raw, name)
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        return raw
    except ValueError as exc:
        raise ValueError(f"invalid {name}={raw!r}: {exc}") from None


def _timeout(value: Any) -> float | None:
    """``summary_timeout`` in seconds, or None (no timeout) for infinity.

    Thread joins and event-loop timers overflow past ``threading.TIMEOUT_MAX`` (about 292
    years), so anything longer is "no timeout" too: it is checked here once, and the runner
    never sees a value its timeout machinery cannot take.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"summary_timeout must be a number of seconds, not {value!r}")
    if math.isnan(value) or value <= 0:
        raise InvalidArgumentError(f"summary_timeout must be > 0 (inf: no timeout), got {value!r}")
    return None if value >= threading.TIMEOUT_MAX else float(value)


class Settings:
    """The validated configuration of a ``ContextManager`` and what is derived from it once."""

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
        recall_embedder: Any = None,
    ) -> None:
        if consumer is not None and (not isinstance(consumer, str) or not consumer):
            raise InvalidArgumentError(f"consumer must be a non-empty str, not {consumer!r}")
        # Which reader of a shared session this manager is (an agent, a router): a Session
        # keeps one state per consumer.
        self.consumer: str = consumer or "default"
        self.model: str | None = _setting("model", model, None, str)
        info = None
        if self.model is not None:
            try:
                info = get_model(self.model)
            except UnknownModelError:
                if context_window is None and _env_value("context_window") is None:
                    raise
        window = _setting(
            "context_window", context_window, info.context_window if info else None, int
        )
        if window is None:
            raise ValueError("give model= (a registered model) or context_window=")
        self.context_window = count_arg("context_window", window, minimum=1)

        default_reserve = min(4096, self.context_window // 4)
        if info is not None and info.max_output_tokens > 0:
            default_reserve = min(default_reserve, info.max_output_tokens)
        self.output_reserve = count_arg(
            "output_reserve", _setting("output_reserve", output_reserve, default_reserve, int)
        )
        if not self.output_reserve < self.context_window:
            raise ValueError(
                f"output_reserve must be >= 0 and below context_window ({self.context_window}), "
                f"got {self.output_reserve}"
            )
        sys_reserve = _setting("system_reserve", system_reserve, None, int)
        self.system_reserve: int | None = (
            None if sys_reserve is None else count_arg("system_reserve", sys_reserve)
        )

        self.history_ratio = float(_setting("history_ratio", history_ratio, 1.0, float))
        self.summary_ratio = float(_setting("summary_ratio", summary_ratio, 0.25, float))
        self.trigger_ratio = float(
            _setting("trigger_ratio", trigger_ratio, DEFAULT_TRIGGER_RATIO, float)
        )
        self.target_ratio = float(
            _setting("target_ratio", target_ratio, DEFAULT_TARGET_RATIO, float)
        )
        self.summary_length_ratio = float(
            _setting("summary_length_ratio", summary_length_ratio, 0.15, float)
        )
        self._validate_ratios()

        cap = _setting("tool_output_max_tokens", tool_output_max_tokens, None, int)
        # 0 disables the cap
        self.tool_output_max_tokens: int | None = (
            None if cap is None else count_arg("tool_output_max_tokens", cap)
        )
        self.tool_output_direction = str(
            _setting("tool_output_direction", tool_output_direction, DEFAULT_DIRECTION, str)
        )
        if self.tool_output_direction not in ("head", "tail", "head_tail"):
            raise ValueError(
                f"tool_output_direction must be head, tail or head_tail, not {self.tool_output_direction!r}"
            )
        self.tool_output_dir: Path | None = output_dir(
            _setting("tool_output_dir", tool_output_dir, None, str)
        )
        self.preference = str(_setting("preference", preference, "balanced", str)).lower()
        if self.preference not in PREFERENCES:
            raise ValueError(f"preference must be one of {PREFERENCES}, not {self.preference!r}")
        self.stable_prefix = bool(_setting("stable_prefix", stable_prefix, True, bool))
        self.summary_role = str(_setting("summary_role", summary_role, "system", str)).lower()
        if self.summary_role not in ("system", "pair"):
            raise ValueError(f"summary_role must be 'system' or 'pair', not {self.summary_role!r}")
        self.summary_timeout: float | None = _timeout(
            _setting("summary_timeout", summary_timeout, 120.0, float)
        )
        lang = str(_setting("language", language, "auto", str)).lower()
        if lang not in ("auto", "zh", "en"):
            raise ValueError(f"language must be auto, zh or en, not {lang!r}")
        self.language: str | None = None if lang == "auto" else lang

        self._gates(
            summary_max_tokens,
            min_messages_before_summary,
            max_summaries_per_window,
            resummarize_ratio,
            max_messages,
            max_turns,
            min_recent_rounds,
            keep_recent_tool_outputs,
        )

        self._mask_settings(mask_keep, mask_clear_at_least)
        self.recall_settings = recall_settings(
            _setting("recall", recall, True, bool),
            _setting("recall_ratio", recall_ratio, DEFAULT_RECALL_RATIO, float),
            recall_embedder,
        )
        self.counter = self._make_counter(counter, info)
        self.summarizer = self._make_summarizer(summarizer)
        self._priming = int(getattr(self.counter, "reply_priming", 0))
        self._counter_id = (
            f"{type(self.counter).__name__}:{getattr(self.counter, 'name', None) or self.model}"
        )
        self._truncators: dict[int, ObservationTruncator] = {}  # by token cap
        # the window below the mask boundary, by conversation (its first message's id)
        self._masked_prefixes: dict[int, MaskedPrefix] = {}

    # -- construction helpers -------------------------------------------------------------------

    def _gates(
        self,
        summary_max_tokens: int | None,
        min_messages: int | None,
        max_summaries: int | None,
        resummarize_ratio: float | None,
        max_messages: int | None,
        max_turns: int | None,
        min_recent_rounds: int | None,
        keep_recent_tool_outputs: int | None,
    ) -> None:
        """When summarizing is allowed, how large a summary may get, and the window's caps."""
        ints = {
            "summary_max_tokens": (summary_max_tokens, 1024, 1),
            "min_messages_before_summary": (min_messages, 10, 0),
            "max_summaries_per_window": (max_summaries, 3, 0),
            "max_messages": (max_messages, None, 0),
            "max_turns": (max_turns, None, 0),
            "min_recent_rounds": (min_recent_rounds, 0, 0),
            "keep_recent_tool_outputs": (keep_recent_tool_outputs, DEFAULT_KEEP_RECENT, 0),
        }
        got: dict[str, int | None] = {}
        for name, (arg, default, low) in ints.items():
            value = _setting(name, arg, default, int)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ArgumentTypeError(f"{name} must be an int, not {type(value).__name__}")
                if value < low:
                    raise InvalidArgumentError(f"{name} must be >= {low}, got {value}")
            got[name] = value
        self.summary_max_tokens: int = got["summary_max_tokens"] or 1
        self.min_messages_before_summary: int = got["min_messages_before_summary"] or 0
        self.max_summaries_per_window: int = got["max_summaries_per_window"] or 0
        self.max_messages: int | None = got["max_messages"]
        self.max_turns: int | None = got["max_turns"]
        self.min_recent_rounds: int = got["min_recent_rounds"] or 0
        self.keep_recent_tool_outputs: int = got["keep_recent_tool_outputs"] or 0
        ratio = _setting("resummarize_ratio", resummarize_ratio, 0.5, float)
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 10:
            raise InvalidArgumentError(f"resummarize_ratio must be in (0, 10], got {ratio!r}")
        self.resummarize_ratio = float(ratio)

    @property
    def summarizing_enabled(self) -> bool:
        """False with no summarizer or with ``trigger_ratio >= 1.0`` (truncation only)."""
        return self.summarizer is not None and self.trigger_ratio < 1.0

    def _validate_ratios(self) -> None:
        checks = (
            (0 < self.history_ratio <= 1, "history_ratio must be in (0, 1]"),
            (0 <= self.summary_ratio < 1, "summary_ratio must be in [0, 1)"),
            (0 < self.trigger_ratio <= 1, "trigger_ratio must be in (0, 1]"),
            (
                0 < self.target_ratio < self.trigger_ratio,
                "target_ratio must be in (0, trigger_ratio)",
            ),
            (0 < self.summary_length_ratio <= 1, "summary_length_ratio must be in (0, 1]"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(
                    f"{message} (history={self.history_ratio}, summary={self.summary_ratio}, "
                    f"trigger={self.trigger_ratio}, target={self.target_ratio})"
                )
        if self.summary_ratio + self.target_ratio > self.trigger_ratio + 1e-9:
            # Otherwise a fresh summary plus the kept window could already exceed the trigger,
            # and every turn would summarize again.
            raise ValueError(
                f"summary_ratio + target_ratio ({self.summary_ratio} + {self.target_ratio}) must not "
                f"exceed trigger_ratio ({self.trigger_ratio})"
            )

    def _mask_settings(self, keep: int | None, clear_at_least: int | None) -> None:
        """Observation masking: how many recent tool outputs stay verbatim (0: no masking) and
        the fewest tokens one masking batch frees (so the cached prefix moves rarely)."""
        self.mask_keep = int(_setting("mask_keep", keep, DEFAULT_MASK_KEEP, int))
        if self.mask_keep < 0:
            raise ValueError(f"mask_keep must be >= 0 (0 disables masking), got {self.mask_keep}")
        self.mask_clear_at_least = int(
            _setting("mask_clear_at_least", clear_at_least, DEFAULT_MASK_CLEAR_AT_LEAST, int)
        )
        if self.mask_clear_at_least < 1:
            raise ValueError(f"mask_clear_at_least must be >= 1, got {self.mask_clear_at_least}")

    def _make_counter(self, counter: Any, info: Any) -> Any:
        if counter is not None:
            return counter
        encoding = _env_value("counter")
        if encoding is not None:
            return Counter(encoding=encoding)
        if info is not None:
            return Counter(model=self.model)
        if self.model is not None:
            logger.warning("model %r is not registered: counting with o200k_base", self.model)
        return Counter(encoding="o200k_base")

    def _make_summarizer(self, summarizer: Any) -> Any:
        choice = summarizer
        if choice is None:
            choice = _env_value("summarizer") or "extractive"
        if choice is False:
            return None
        if isinstance(choice, str):
            name = choice.lower()
            if name == "none":
                return None
            if name == "extractive":
                return ExtractiveSummarizer(counter=self.counter, language=self.language)
            if name == "llm":
                return LLMSummarizer(language=self.language)
            raise ValueError(
                f"summarizer must be a callable, 'extractive', 'llm' or 'none', not {choice!r}"
            )
        if isinstance(choice, ExtractiveSummarizer) and choice.counter is None:
            return choice.with_counter(self.counter)  # measure with the manager's tokenizer
        if not callable(choice) and not hasattr(choice, "asummarize"):
            raise TypeError(f"summarizer must be callable, not {type(choice).__name__}")
        return choice

    def __repr__(self) -> str:
        return (
            f"ContextManager(model={self.model!r}, context_window={self.context_window}, "
            f"output_reserve={self.output_reserve}, preference={self.preference!r}, "
            f"stable_prefix={self.stable_prefix}, summarizer={self.summarizer!r})"
        )

    @staticmethod
    def _as_list(messages: Any) -> list[Any]:
        if isinstance(messages, (str, bytes, Mapping)):
            raise TypeError(
                f"messages must be a list of message dicts, not {type(messages).__name__}"
            )
        return messages if isinstance(messages, list) else list(messages)

    def _budget(self, system_tokens: int, tools_tokens: int) -> Budget:
        system = max(system_tokens, self.system_reserve or 0)
        return compute_budget(
            context_window=self.context_window,
            output_reserve=self.output_reserve,
            system_tokens=system,
            tools_tokens=tools_tokens,
            history_ratio=self.history_ratio,
            summary_ratio=self.summary_ratio,
            trigger_ratio=self.trigger_ratio,
            target_ratio=self.target_ratio,
            overhead=self._priming,
        )
