"""The manager's configuration: constructor arguments and ``WINDOWFIT_*`` variables, parsed
once into a frozen ``Settings``.

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

import dataclasses
import logging
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

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
from windowfit.context.recall import DEFAULT_RECALL_RATIO, RecallSettings, recall_settings
from windowfit.context.strategy import PREFERENCES
from windowfit.counting import Counter
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.models import ModelInfo, UnknownModelError, get_model
from windowfit.recalling import Embedder
from windowfit.summarize import ExtractiveSummarizer, LLMSummarizer, Summarizer
from windowfit.truncation import DEFAULT_DIRECTION

__all__ = ["ENV_VARS", "Settings"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    """The validated configuration of a ``ContextManager`` and what is derived from it once.

    Built by :meth:`parse` from constructor arguments and the environment; frozen, so every
    stage reads the same values for the manager's lifetime (a change makes a new one).
    """

    consumer: str
    model: str | None
    context_window: int
    output_reserve: int
    system_reserve: int | None
    history_ratio: float
    summary_ratio: float
    trigger_ratio: float
    target_ratio: float
    summary_length_ratio: float | None  # None: the whole room for an exact extractive summarizer
    tool_output_max_tokens: int | None  # None: the cap follows the budget; 0: no cap
    tool_output_direction: str
    tool_output_dir: Path | None
    preference: str
    stable_prefix: bool
    summary_role: str
    summary_timeout: float | None  # None: no timeout
    language: str | None  # None: detected per summary
    summary_max_tokens: int
    min_messages_before_summary: int
    max_summaries_per_window: int
    resummarize_ratio: float
    max_messages: int | None
    max_turns: int | None
    min_recent_rounds: int
    keep_recent_tool_outputs: int
    mask_keep: int  # 0: no masking
    mask_clear_at_least: int
    recall: bool
    recall_ratio: float
    recall_embedder: Embedder | None
    #: the recall stage's settings and its index of evicted messages (grown incrementally)
    recall_settings: RecallSettings
    counter: Counter
    summarizer: Summarizer | None
    #: tokens every prompt costs for the reply's priming
    priming: int
    #: names the counter in a carried scan: another counter's totals are never reused
    counter_id: str

    @classmethod
    def parse(
        cls,
        model: str | None = None,
        *,
        counter: Any = None,
        summarizer: Any = None,
        consumer: str | None = None,
        **options: Any,
    ) -> Settings:
        """Settings from constructor arguments (``None``: the variable, else the default)."""
        unknown = set(options) - set(_OPTION_PARSERS)
        if unknown:
            raise ArgumentTypeError(f"unexpected setting(s): {', '.join(sorted(unknown))}")
        name = _setting("model", model, None, str)
        info = _model_info(name, options.get("context_window"))
        values: dict[str, Any] = {"consumer": _consumer(consumer), "model": name}
        values.update(_window(info, options.get("context_window"), options.get("output_reserve")))
        for parse in _PARSERS:
            values.update(parse(options))
        made = _counter(counter, info, name)
        values["summarizer"] = _summarizer(summarizer, made, values["language"])
        return cls(**values, **_counted(made, name))

    def with_changes(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (a new counter re-derives what depends on it)."""
        if "counter" in changes:
            changes.update(_counted(changes["counter"], self.model))
        if {"recall", "recall_ratio", "recall_embedder"} & set(changes):
            recall = {k: changes.get(k, getattr(self, k)) for k in _RECALL_OPTIONS}
            changes.update(_recall(recall))
        return dataclasses.replace(self, **changes)

    @property
    def summarizing_enabled(self) -> bool:
        """False with no summarizer or with ``trigger_ratio >= 1.0`` (truncation only)."""
        return self.summarizer is not None and self.trigger_ratio < 1.0

    def budget(self, system_tokens: int, tools_tokens: int) -> Budget:
        """The budgets of a call whose system messages and tool schemas take these tokens."""
        return compute_budget(
            context_window=self.context_window,
            output_reserve=self.output_reserve,
            system_tokens=max(system_tokens, self.system_reserve or 0),
            tools_tokens=tools_tokens,
            history_ratio=self.history_ratio,
            summary_ratio=self.summary_ratio,
            trigger_ratio=self.trigger_ratio,
            target_ratio=self.target_ratio,
            overhead=self.priming,
        )


# -- reading one value ----------------------------------------------------------------------


def _env_value(param: str) -> str | None:
    value = os.environ.get(ENV_VARS[param])
    return value.strip() if value is not None and value.strip() != "" else None


def _parse_bool(text: str, name: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise InvalidArgumentError(f"{name}={text!r}: expected true/false")


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
        raise InvalidArgumentError(f"invalid {name}={raw!r}: {exc}") from None


def _choice(param: str, arg: Any, default: str, allowed: tuple[str, ...]) -> str:
    value = str(_setting(param, arg, default, str)).lower()
    if value not in allowed:
        raise InvalidArgumentError(f"{param} must be one of {allowed}, not {value!r}")
    return value


def _count(param: str, arg: Any, default: int | None, low: int) -> int | None:
    value = _setting(param, arg, default, int)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{param} must be an int, not {type(value).__name__}")
    if value < low:
        raise InvalidArgumentError(f"{param} must be >= {low}, got {value}")
    return value


def _required(value: T | None) -> T:
    assert value is not None  # a default is given, so there always is a value
    return value


# -- groups of settings -----------------------------------------------------------------------


def _consumer(consumer: Any) -> str:
    """Which reader of a shared session this manager is (an agent, a router): a Session keeps
    one state per consumer."""
    if consumer is not None and (not isinstance(consumer, str) or not consumer):
        raise InvalidArgumentError(f"consumer must be a non-empty str, not {consumer!r}")
    return consumer or "default"


def _model_info(model: str | None, context_window: Any) -> ModelInfo | None:
    if model is None:
        return None
    try:
        return get_model(model)
    except UnknownModelError:
        if context_window is None and _env_value("context_window") is None:
            raise
        return None


def _window(info: ModelInfo | None, context_window: Any, output_reserve: Any) -> dict[str, Any]:
    window = _setting("context_window", context_window, info.context_window if info else None, int)
    if window is None:
        raise InvalidArgumentError("give model= (a registered model) or context_window=")
    window = count_arg("context_window", window, minimum=1)
    default_reserve = min(4096, window // 4)
    if info is not None and info.max_output_tokens > 0:
        default_reserve = min(default_reserve, info.max_output_tokens)
    reserve = count_arg(
        "output_reserve", _setting("output_reserve", output_reserve, default_reserve, int)
    )
    if not reserve < window:
        raise InvalidArgumentError(
            f"output_reserve must be >= 0 and below context_window ({window}), got {reserve}"
        )
    return {"context_window": window, "output_reserve": reserve}


def _reserve(o: dict[str, Any]) -> dict[str, Any]:
    value = _setting("system_reserve", o.get("system_reserve"), None, int)
    return {"system_reserve": None if value is None else count_arg("system_reserve", value)}


def _ratios(o: dict[str, Any]) -> dict[str, Any]:
    def ratio(name: str, default: float) -> float:
        return float(_setting(name, o.get(name), default, float))

    r: dict[str, Any] = {
        "history_ratio": ratio("history_ratio", 1.0),
        "summary_ratio": ratio("summary_ratio", 0.25),
        "trigger_ratio": ratio("trigger_ratio", DEFAULT_TRIGGER_RATIO),
        "target_ratio": ratio("target_ratio", DEFAULT_TARGET_RATIO),
    }
    length = _setting("summary_length_ratio", o.get("summary_length_ratio"), None, float)
    r["summary_length_ratio"] = None if length is None else float(length)
    _check_ratios(r)
    return r


def _check_ratios(r: dict[str, Any]) -> None:
    checks = (
        (0 < r["history_ratio"] <= 1, "history_ratio must be in (0, 1]"),
        (0 <= r["summary_ratio"] < 1, "summary_ratio must be in [0, 1)"),
        (0 < r["trigger_ratio"] <= 1, "trigger_ratio must be in (0, 1]"),
        (0 < r["target_ratio"] < r["trigger_ratio"], "target_ratio must be in (0, trigger_ratio)"),
        (
            r["summary_length_ratio"] is None or 0 < r["summary_length_ratio"] <= 1,
            "summary_length_ratio must be in (0, 1]",
        ),
    )
    for ok, message in checks:
        if not ok:
            raise InvalidArgumentError(
                f"{message} (history={r['history_ratio']}, summary={r['summary_ratio']}, "
                f"trigger={r['trigger_ratio']}, target={r['target_ratio']})"
            )
    if r["summary_ratio"] + r["target_ratio"] > r["trigger_ratio"] + 1e-9:
        # Otherwise a fresh summary plus the kept window could already exceed the trigger,
        # and every turn would summarize again.
        raise InvalidArgumentError(
            f"summary_ratio + target_ratio ({r['summary_ratio']} + {r['target_ratio']}) must "
            f"not exceed trigger_ratio ({r['trigger_ratio']})"
        )


def _tool_outputs(o: dict[str, Any]) -> dict[str, Any]:
    cap = _setting("tool_output_max_tokens", o.get("tool_output_max_tokens"), None, int)
    return {
        "tool_output_max_tokens": None if cap is None else count_arg("tool_output_max_tokens", cap),
        "tool_output_direction": _choice(
            "tool_output_direction",
            o.get("tool_output_direction"),
            DEFAULT_DIRECTION,
            ("head", "tail", "head_tail"),
        ),
        "tool_output_dir": output_dir(
            _setting("tool_output_dir", o.get("tool_output_dir"), None, str)
        ),
    }


def _style(o: dict[str, Any]) -> dict[str, Any]:
    """How the window is kept and how a summary is worded and placed."""
    lang = _choice("language", o.get("language"), "auto", ("auto", "zh", "en"))
    return {
        "preference": _choice("preference", o.get("preference"), "balanced", PREFERENCES),
        "stable_prefix": bool(_setting("stable_prefix", o.get("stable_prefix"), True, bool)),
        "summary_role": _choice(
            "summary_role", o.get("summary_role"), "system", ("system", "pair")
        ),
        "summary_timeout": _timeout(
            _setting("summary_timeout", o.get("summary_timeout"), 120.0, float)
        ),
        "language": None if lang == "auto" else lang,
    }


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


def _gates(o: dict[str, Any]) -> dict[str, Any]:
    """When summarizing is allowed, how large a summary may get, and the window's caps."""
    ratio = _setting("resummarize_ratio", o.get("resummarize_ratio"), 0.5, float)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 10:
        raise InvalidArgumentError(f"resummarize_ratio must be in (0, 10], got {ratio!r}")
    return {
        "summary_max_tokens": _required(
            _count("summary_max_tokens", o.get("summary_max_tokens"), 1536, 1)
        ),
        "min_messages_before_summary": _required(
            _count("min_messages_before_summary", o.get("min_messages_before_summary"), 10, 0)
        ),
        "max_summaries_per_window": _required(
            _count("max_summaries_per_window", o.get("max_summaries_per_window"), 3, 0)
        ),
        "resummarize_ratio": float(ratio),
        "max_messages": _count("max_messages", o.get("max_messages"), None, 0),
        "max_turns": _count("max_turns", o.get("max_turns"), None, 0),
        "min_recent_rounds": _required(
            _count("min_recent_rounds", o.get("min_recent_rounds"), 0, 0)
        ),
        "keep_recent_tool_outputs": _required(
            _count(
                "keep_recent_tool_outputs",
                o.get("keep_recent_tool_outputs"),
                DEFAULT_KEEP_RECENT,
                0,
            )
        ),
    }


def _masking(o: dict[str, Any]) -> dict[str, Any]:
    """Observation masking: how many recent tool outputs stay verbatim (0: no masking) and
    the fewest tokens one masking batch frees (so the cached prefix moves rarely)."""
    keep = int(_setting("mask_keep", o.get("mask_keep"), DEFAULT_MASK_KEEP, int))
    if keep < 0:
        raise InvalidArgumentError(f"mask_keep must be >= 0 (0 disables masking), got {keep}")
    least = int(
        _setting(
            "mask_clear_at_least", o.get("mask_clear_at_least"), DEFAULT_MASK_CLEAR_AT_LEAST, int
        )
    )
    if least < 1:
        raise InvalidArgumentError(f"mask_clear_at_least must be >= 1, got {least}")
    return {"mask_keep": keep, "mask_clear_at_least": least}


def _recall(o: dict[str, Any]) -> dict[str, Any]:
    """Recall of evicted messages the latest user message asks about: on or off, the most of
    the prompt budget its block may take, and an optional embedder fused with the lexical
    scores."""
    made = recall_settings(
        _setting("recall", o.get("recall"), True, bool),
        _setting("recall_ratio", o.get("recall_ratio"), DEFAULT_RECALL_RATIO, float),
        o.get("recall_embedder"),
    )
    return {
        "recall": made.enabled,
        "recall_ratio": made.ratio,
        "recall_embedder": made.embedder,
        "recall_settings": made,
    }


_RECALL_OPTIONS = ("recall", "recall_ratio", "recall_embedder")
_PARSERS: tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] = (
    _reserve,
    _ratios,
    _tool_outputs,
    _style,
    _gates,
    _masking,
    _recall,
)
#: The keyword options ``parse`` takes besides model, counter, summarizer and consumer.
_OPTION_PARSERS = (
    "context_window",
    "output_reserve",
    "system_reserve",
    "history_ratio",
    "summary_ratio",
    "trigger_ratio",
    "target_ratio",
    "summary_length_ratio",
    "tool_output_max_tokens",
    "tool_output_direction",
    "tool_output_dir",
    "preference",
    "stable_prefix",
    "summary_role",
    "summary_timeout",
    "language",
    "summary_max_tokens",
    "min_messages_before_summary",
    "max_summaries_per_window",
    "resummarize_ratio",
    "max_messages",
    "max_turns",
    "min_recent_rounds",
    "keep_recent_tool_outputs",
    "mask_keep",
    "mask_clear_at_least",
    "recall",
    "recall_ratio",
    "recall_embedder",
)


# -- the counter and the summarizer -----------------------------------------------------------


def _counter(counter: Any, info: ModelInfo | None, model: str | None) -> Counter:
    if counter is not None:
        return cast(Counter, counter)  # any object with Counter's methods will do
    encoding = _env_value("counter")
    if encoding is not None:
        return Counter(encoding=encoding)
    if info is not None:
        return Counter(model=model)
    if model is not None:
        logger.warning("model %r is not registered: counting with o200k_base", model)
    return Counter(encoding="o200k_base")


def _counted(counter: Counter, model: str | None) -> dict[str, Any]:
    """What the settings derive from the counter."""
    name = getattr(counter, "name", None) or model
    return {
        "counter": counter,
        "priming": int(getattr(counter, "reply_priming", 0)),
        "counter_id": f"{type(counter).__name__}:{name}",
    }


def _summarizer(choice: Any, counter: Counter, language: str | None) -> Summarizer | None:
    if choice is None:
        choice = _env_value("summarizer") or "extractive"
    if choice is False:
        return None
    if isinstance(choice, str):
        name = choice.lower()
        if name == "none":
            return None
        if name == "extractive":
            return ExtractiveSummarizer(counter=counter, language=language)
        if name == "llm":
            return LLMSummarizer(language=language)
        raise InvalidArgumentError(
            f"summarizer must be a callable, 'extractive', 'llm' or 'none', not {choice!r}"
        )
    if isinstance(choice, ExtractiveSummarizer) and choice.counter is None:
        return choice.with_counter(counter)  # measure with the manager's tokenizer
    if not callable(choice) and not hasattr(choice, "asummarize"):
        raise ArgumentTypeError(f"summarizer must be callable, not {type(choice).__name__}")
    return cast(Summarizer, choice)
