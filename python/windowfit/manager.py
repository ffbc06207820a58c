"""The context manager: budgets, progressive transactional summarization, cache-stable windows.

``ContextManager.prepare(messages, state)`` turns a full, append-only chat history into the
prompt to send — system messages, a running summary of what fell out, and the recent messages
verbatim — within the model's context window, and returns the JSON state to pass back next turn::

    cm = wf.ContextManager(model="gpt-4o")
    p = cm.prepare(history, state=saved_state, tools=tools)
    reply = client.chat.completions.create(model="gpt-4o", messages=p.messages, tools=tools)
    saved_state = p.state          # JSON: store it beside the session

Configuration
-------------
Every parameter can also come from the environment; an argument given to the constructor
wins, then the variable, then the default.

| Parameter | Environment variable | Default |
|---|---|---|
| `model` | `WINDOWFIT_MODEL` | none: give `model` or `context_window` |
| `context_window` | `WINDOWFIT_CONTEXT_WINDOW` | the model's, from the registry |
| `output_reserve` | `WINDOWFIT_OUTPUT_RESERVE` | 4096, at most the model's output limit and 1/4 of the window |
| `system_reserve` | `WINDOWFIT_SYSTEM_RESERVE` | none: the system messages are measured |
| `history_ratio` | `WINDOWFIT_HISTORY_RATIO` | 1.0 |
| `summary_ratio` | `WINDOWFIT_SUMMARY_RATIO` | 0.25 |
| `trigger_ratio` | `WINDOWFIT_TRIGGER_RATIO` | 0.8 |
| `target_ratio` | `WINDOWFIT_TARGET_RATIO` | 0.4 |
| `summarizer` | `WINDOWFIT_SUMMARIZER` | `extractive` (or `llm`, `none`; or any callable) |
| `tool_output_max_tokens` | `WINDOWFIT_TOOL_OUTPUT_MAX_TOKENS` | auto: half the low-water mark; 0 disables |
| `tool_output_direction` | `WINDOWFIT_TOOL_OUTPUT_DIRECTION` | `head_tail` (or `head`, `tail`) |
| `preference` | `WINDOWFIT_PREFERENCE` | `balanced` (or `fast`, `quality`) |
| `stable_prefix` | `WINDOWFIT_STABLE_PREFIX` | true |
| `summary_role` | `WINDOWFIT_SUMMARY_ROLE` | `system` (or `pair`: a user/assistant pair) |
| `summary_timeout` | `WINDOWFIT_SUMMARY_TIMEOUT` | 120 seconds for one summarization |
| `summary_length_ratio` | `WINDOWFIT_SUMMARY_LENGTH_RATIO` | 0.15 of the evicted tokens |
| `language` | `WINDOWFIT_LANGUAGE` | `auto` (or `zh`, `en`) |
| `counter` | `WINDOWFIT_ENCODING` (an encoding name) | the model's tokenizer, else `o200k_base` |

`WINDOWFIT_SUMMARIZER=llm` builds an `LLMSummarizer` from `WINDOWFIT_SUMMARY_MODEL`,
`WINDOWFIT_SUMMARY_BASE_URL`, `WINDOWFIT_SUMMARY_API_KEY`, `WINDOWFIT_SUMMARY_REQUEST_TIMEOUT`
and `WINDOWFIT_SUMMARY_MAX_RETRIES` (then the SDK's own `OPENAI_API_KEY` / `OPENAI_BASE_URL`).

Budgets (seeds 000 and 004)
---------------------------
::

    prompt budget   = context_window - output_reserve - tool schemas      (hard limit)
    history budget  = (prompt budget - system messages) × history_ratio  (summary + recent)
    summary budget  = history budget × summary_ratio                     (summary cap)
    high-water mark = history budget × trigger_ratio    summarize / cut when above
    low-water mark  = history budget × target_ratio     recent messages after the cut

A summary aims at ``summary_length_ratio`` of everything evicted so far, within 80% of the
summary budget. With ``stable_prefix`` the cut (and the summary) stays put while summary +
recent messages are under the high-water mark, then moves in one jump so the recent part is
under the low-water mark: consecutive prompts share their prefix and provider prompt caches
keep hitting. Without it the window slides every turn (the largest recent window that fits)
and the summary is refreshed when the newly evicted material reaches half the summary's size.

Stats (``Prepared.stats``)
--------------------------
``tokens`` (sent, reply priming included), ``tokens_system`` / ``tokens_summary`` /
``tokens_recent`` (the layers), ``tokens_tools``, ``tokens_total`` (+ tool schemas),
``tokens_full`` (sending everything), ``tokens_saved``, ``usage_ratio`` (of window - reserve);
the budgets (``prompt_budget``, ``history_budget``, ``summary_budget``, ``high_water``,
``low_water``); ``messages_total`` / ``messages_sent`` / ``messages_dropped`` (not sent
verbatim) / ``messages_summarized`` / ``messages_pending`` (evicted, not yet summarized);
``strategy`` (``keep``, ``summarize``, ``truncate``, ``fallback``) and ``strategy_reason``;
``summary_triggered``, ``summary_failed``, ``summary_error``, ``summary_ms``,
``summary_target_tokens``, ``summary_dropped``, ``has_summary``; ``compacted`` (the cut
moved), ``cut``, ``summarized_until``; ``prefix_tokens_shared`` / ``prefix_messages_shared`` /
``prefix_shared_ratio`` (identical leading part of the previous call's prompt);
``tool_outputs_truncated``, ``tool_tokens_truncated``; ``state_reset``; ``turn``; ``elapsed_ms``.

State (``Prepared.state``)
--------------------------
JSON: ``summary``, ``summary_tokens``, ``summarized_until`` (messages[:i] are folded in),
``summarized_messages``, ``evicted_tokens``, ``cut`` (where the verbatim window starts),
``language``, ``created_at`` / ``updated_at``, ``turn``, ``summaries``, ``failures`` /
``retry_turn`` / ``last_error`` (backoff), plus bookkeeping that makes the next call
incremental. A state whose history no longer matches (another conversation, rewritten
messages) is detected and replaced by a fresh one (``stats["state_reset"]``).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import hashlib
import inspect
import json
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import windowfit as _wf  # attributes are read at call time: windowfit imports this module
from windowfit.models import UnknownModelError, get_model
from windowfit.summarize import (
    ExtractiveSummarizer,
    LLMSummarizer,
    detect_language,
    message_text,
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

logger = logging.getLogger(__name__)

Message = Mapping[str, Any]

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
    "preference": "WINDOWFIT_PREFERENCE",
    "stable_prefix": "WINDOWFIT_STABLE_PREFIX",
    "summary_role": "WINDOWFIT_SUMMARY_ROLE",
    "summary_timeout": "WINDOWFIT_SUMMARY_TIMEOUT",
    "summary_length_ratio": "WINDOWFIT_SUMMARY_LENGTH_RATIO",
    "language": "WINDOWFIT_LANGUAGE",
    "counter": "WINDOWFIT_ENCODING",
}

_SYSTEM_ROLES = frozenset(("system", "developer"))
_PREFERENCES = ("fast", "balanced", "quality")
_STATE_VERSION = 1
# A summary may overshoot its target this much before it counts as "oversize" and is rejected.
_OVERSIZE_FACTOR = 3.0
_TARGET_HEADROOM = 0.8  # targets use at most this share of the summary budget
_MIN_SUMMARY_TOKENS = 48
_MAX_BACKOFF_TURNS = 32
_RECENT_SUMMARY_WINDOW = 20  # turns considered by the summarization frequency limit
_SUMMARY_FREQUENCY_LIMIT = 3
_TRUNCATION_CACHE_SIZE = 512


# ---------------------------------------------------------------------------------------------
# Budget arithmetic (pure)
# ---------------------------------------------------------------------------------------------


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
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


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


def summary_target_tokens(evicted_tokens: int, summary_budget: int, ratio: float = 0.15) -> int:
    """Seed 003's dynamic summary length: ``ratio`` of the evicted text, clamped to the budget.

    Never below a small floor (a useful summary needs a few lines) unless the budget is smaller.
    """
    want = math.ceil(max(0, evicted_tokens) * ratio)
    return max(0, min(int(summary_budget), max(_MIN_SUMMARY_TOKENS, want)))


# ---------------------------------------------------------------------------------------------
# Strategy choice (seed 003)
# ---------------------------------------------------------------------------------------------


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
    frequency_limit: int = _SUMMARY_FREQUENCY_LIMIT,
) -> StrategyDecision:
    """Truncate-only or summarize, from preference, conversation size and summary frequency.

    Seed 003's scoring: short conversations are cheaper to truncate; long ones are worth a
    summary; summarizing more than ``frequency_limit`` times in the recent turns is penalized;
    the preference weights the two scores (``fast`` 0.8/0.2, ``balanced`` 0.5/0.5, ``quality``
    0.2/0.8). Ties go to truncation (no cost, no latency).
    """
    if preference not in _PREFERENCE_WEIGHTS:
        raise ValueError(f"preference must be one of {_PREFERENCES}, not {preference!r}")
    if not has_summarizer:
        return StrategyDecision("truncate", "no summarizer configured")
    if preference == "fast":
        return StrategyDecision("truncate", "preference=fast: truncate only, no summarizer calls")
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
        why = f"{recent_summaries} summaries in the last {_RECENT_SUMMARY_WINDOW} turns (limit {frequency_limit})"
    else:
        why = f"{size}: truncation is enough"
    return StrategyDecision("truncate", f"preference={preference}, {why}", scores)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Settings from arguments and environment
# ---------------------------------------------------------------------------------------------


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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _fingerprint(message: Any) -> str:
    """A short content hash of one message (stable across processes)."""
    h = hashlib.blake2b(digest_size=8)
    if isinstance(message, Mapping) and isinstance(message.get("content"), (str, type(None))):
        # fast path for the common shape: hash the text directly, the rest as JSON
        content = message.get("content") or ""
        rest = {k: v for k, v in message.items() if k != "content"}
        h.update(content.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        message = rest
    try:
        data = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        data = repr(message)
    h.update(data.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Internal plan of one call
# ---------------------------------------------------------------------------------------------


@dataclass
class _Job:
    """One summarization to run between planning and finishing."""

    messages: list[dict[str, Any]]
    previous: str
    target: int
    limit: int
    language: str
    lo: int
    hi: int
    new_cut: int
    fold_tokens: int
    fold_count: int


@dataclass
class _Plan:
    msgs: list[Any]
    state: dict[str, Any]
    stats: dict[str, Any]
    budget: Budget
    tools_fp: str
    last_user: int | None
    system_idx: list[int]
    system_tokens: int  # measured tokens of all system messages (all are always sent)
    cut: int  # window start used if no summary job succeeds (fallback / truncate / keep)
    job: _Job | None = None
    fitted: _Fitted | None = None  # a fit already made during planning, reused when it matches
    started: float = 0.0
    start_cut: int = 0  # the cut this call started from
    cut_tokens: int = 0  # raw tokens of msgs[:start_cut]
    # Truncated tool outputs by source index, computed once per call for msgs[trunc_from:]
    trunc: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)
    trunc_from: int = -1


@dataclass
class _Fitted:
    """A fit made for (cut, summary): reused by _finish when the final choice is the same."""

    cut: int
    summary: str  # the summary asked for ("" in the view if it had to be dropped)
    view: _View
    result: Any


@dataclass
class _Outcome:
    text: str | None
    error: str | None
    elapsed_ms: float


@dataclass
class _View:
    """The virtual list handed to fit: head (system, summary, latest user) + window."""

    messages: list[Any]
    source: list[int]  # source index per virtual message, -1 for summary messages
    head_len: int
    summary_idx: list[int]
    pinned: list[int]  # the summary and a held user message: pinned for fit
    truncated: int = 0
    truncated_tokens: int = 0


# ---------------------------------------------------------------------------------------------
# The manager
# ---------------------------------------------------------------------------------------------


class ContextManager:
    """Keeps a conversation's prompt inside the context window, summarizing what falls out.

    >>> cm = ContextManager(model="gpt-4o")                     # doctest: +SKIP
    >>> p = cm.prepare(history, state=saved_state)              # doctest: +SKIP
    >>> client.chat.completions.create(model="gpt-4o", messages=p.messages)  # doctest: +SKIP
    >>> saved_state = p.state                                   # doctest: +SKIP

    ``messages`` passed to :meth:`prepare` must be the full, append-only history (the state's
    indices point into it); the list and its dicts are never modified. See the module
    docstring for parameters, environment variables and budgets.
    """

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
        preference: str | None = None,
        stable_prefix: bool | None = None,
        counter: Any = None,
        summary_role: str | None = None,
        summary_timeout: float | None = None,
        summary_length_ratio: float | None = None,
        language: str | None = None,
    ) -> None:
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
        if window <= 0:
            raise ValueError(f"context_window must be > 0, got {window}")
        self.context_window = int(window)

        default_reserve = min(4096, self.context_window // 4)
        if info is not None and info.max_output_tokens > 0:
            default_reserve = min(default_reserve, info.max_output_tokens)
        self.output_reserve = int(_setting("output_reserve", output_reserve, default_reserve, int))
        if not 0 <= self.output_reserve < self.context_window:
            raise ValueError(
                f"output_reserve must be >= 0 and below context_window ({self.context_window}), "
                f"got {self.output_reserve}"
            )
        sys_reserve = _setting("system_reserve", system_reserve, None, int)
        if sys_reserve is not None and sys_reserve < 0:
            raise ValueError(f"system_reserve must be >= 0, got {sys_reserve}")
        self.system_reserve: int | None = sys_reserve

        self.history_ratio = float(_setting("history_ratio", history_ratio, 1.0, float))
        self.summary_ratio = float(_setting("summary_ratio", summary_ratio, 0.25, float))
        self.trigger_ratio = float(_setting("trigger_ratio", trigger_ratio, 0.8, float))
        self.target_ratio = float(_setting("target_ratio", target_ratio, 0.4, float))
        self.summary_length_ratio = float(
            _setting("summary_length_ratio", summary_length_ratio, 0.15, float)
        )
        self._validate_ratios()

        cap = _setting("tool_output_max_tokens", tool_output_max_tokens, None, int)
        if cap is not None and cap < 0:
            raise ValueError(f"tool_output_max_tokens must be >= 0 (0 disables), got {cap}")
        self.tool_output_max_tokens: int | None = cap
        self.tool_output_direction = str(
            _setting("tool_output_direction", tool_output_direction, "head_tail", str)
        )
        if self.tool_output_direction not in ("head", "tail", "head_tail"):
            raise ValueError(
                f"tool_output_direction must be head, tail or head_tail, not {self.tool_output_direction!r}"
            )
        self.preference = str(_setting("preference", preference, "balanced", str)).lower()
        if self.preference not in _PREFERENCES:
            raise ValueError(f"preference must be one of {_PREFERENCES}, not {self.preference!r}")
        self.stable_prefix = bool(_setting("stable_prefix", stable_prefix, True, bool))
        self.summary_role = str(_setting("summary_role", summary_role, "system", str)).lower()
        if self.summary_role not in ("system", "pair"):
            raise ValueError(f"summary_role must be 'system' or 'pair', not {self.summary_role!r}")
        self.summary_timeout = float(_setting("summary_timeout", summary_timeout, 120.0, float))
        if self.summary_timeout <= 0:
            raise ValueError(f"summary_timeout must be > 0, got {self.summary_timeout}")
        lang = str(_setting("language", language, "auto", str)).lower()
        if lang not in ("auto", "zh", "en"):
            raise ValueError(f"language must be auto, zh or en, not {lang!r}")
        self.language: str | None = None if lang == "auto" else lang

        self.counter = self._make_counter(counter, info)
        self.summarizer = self._make_summarizer(summarizer)
        self._priming = int(getattr(self.counter, "reply_priming", 0))
        self._counter_id = (
            f"{type(self.counter).__name__}:{getattr(self.counter, 'name', None) or self.model}"
        )
        self._trunc_cache: OrderedDict[tuple[str, int, str], tuple[str | None, int]] = OrderedDict()
        self._trunc_lock = threading.Lock()

    # -- construction helpers -------------------------------------------------------------------

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

    def _make_counter(self, counter: Any, info: Any) -> Any:
        if counter is not None:
            return counter
        encoding = _env_value("counter")
        if encoding is not None:
            return _wf.Counter(encoding=encoding)
        if info is not None:
            return _wf.Counter(model=self.model)
        if self.model is not None:
            logger.warning("model %r is not registered: counting with o200k_base", self.model)
        return _wf.Counter(encoding="o200k_base")

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

    # -- public API -----------------------------------------------------------------------------

    def budget(
        self, messages: Sequence[Message] = (), tools: Sequence[Mapping[str, Any]] | None = None
    ) -> Budget:
        """The budgets for ``messages`` (their system messages) and ``tools``."""
        msgs = self._as_list(messages)
        system = sum(self.counter.count_message(m) for m in msgs if m.get("role") in _SYSTEM_ROLES)
        return self._budget(system, self.counter.count_tools(tools) if tools else 0)

    def prepare(
        self,
        messages: Sequence[Message],
        state: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """The prompt to send for ``messages`` (the full history), plus stats and new state.

        Raises ``windowfit.BudgetError`` only when the system messages and the latest user
        message alone do not fit the prompt budget.
        """
        plan = self._plan(messages, state, tools)
        outcome = self._run_sync(plan.job) if plan.job is not None else None
        return self._finish(plan, outcome)

    async def aprepare(
        self,
        messages: Sequence[Message],
        state: Mapping[str, Any] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Prepared:
        """:meth:`prepare` for async code: async summarizers are awaited, sync ones run in a thread."""
        plan = self._plan(messages, state, tools)
        outcome = await self._run_async(plan.job) if plan.job is not None else None
        return self._finish(plan, outcome)

    def recommend(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Whether ``messages`` need optimizing, how urgently, and with which strategy (seed 003)."""
        msgs = self._as_list(messages)
        c = self.counter
        tokens = (c.count_messages(msgs) if msgs else 0) + (c.count_tools(tools) if tools else 0)
        system = sum(c.count_message(m) for m in msgs if m.get("role") in _SYSTEM_ROLES)
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

    # -- planning -------------------------------------------------------------------------------

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

    def _load_state(self, state: Mapping[str, Any] | None) -> dict[str, Any]:
        fresh: dict[str, Any] = {
            "version": _STATE_VERSION,
            "summary": "",
            "summary_tokens": 0,
            "summarized_until": 0,
            "summarized_messages": 0,
            "evicted_tokens": 0,
            "cut": 0,
            "language": None,
            "created_at": None,
            "updated_at": None,
            "turn": 0,
            "summaries": 0,
            "summary_turns": [],
            "failures": 0,
            "retry_turn": 0,
            "last_error": None,
            "anchor": None,
            "head_user": None,
            "cut_tokens": 0,
            "scan": None,
            "prev": None,
        }
        if state is None:
            return fresh
        if not isinstance(state, Mapping):
            raise TypeError(
                f"state must be the dict returned in Prepared.state, not {type(state).__name__}"
            )
        if state.get("version") != _STATE_VERSION:
            logger.warning("ignoring a context state of version %r", state.get("version"))
            return fresh
        out = _copy_json(dict(state))  # never mutate the caller's state
        for key, value in fresh.items():
            out.setdefault(key, value)
        try:
            for key in (
                "summary_tokens",
                "summarized_until",
                "summarized_messages",
                "evicted_tokens",
                "cut",
                "turn",
                "summaries",
                "failures",
                "retry_turn",
            ):
                out[key] = int(out[key])
            out["summary"] = str(out["summary"] or "")
        except (TypeError, ValueError):
            logger.warning("ignoring a malformed context state")
            return fresh
        return out

    def _scan(self, msgs: list[Any], st: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """System indices, latest user and raw token total, incremental over new messages.

        Returns the scan and whether the summary state had to be reset because the history no
        longer starts with the messages it summarized.
        """
        n = len(msgs)
        reset = False
        # A summary is valid only over the same history prefix it was made from.
        s = int(st.get("summarized_until", 0))
        if s > n or (s > 0 and st.get("anchor") != _fingerprint(msgs[s - 1])):
            logger.warning(
                "the history no longer matches the context state: starting a fresh summary"
            )
            turn = st["turn"]
            st.clear()
            st.update(self._load_state(None), turn=turn)
            reset = True
        # Counting is incremental when the scanned prefix is unchanged (an append-only history).
        scan = st.get("scan")
        start = 0
        if isinstance(scan, Mapping) and scan.get("counter") == self._counter_id:
            m = int(scan.get("n", 0))
            if 0 < m <= n and scan.get("anchor") == _fingerprint(msgs[m - 1]):
                start = m
        if start == 0:
            system: list[int] = []
            last_user: int | None = None
            tokens = 0
        else:
            system = [int(i) for i in scan.get("system", ())]
            last_user = scan.get("last_user")
            tokens = int(scan.get("tokens", 0))
        new = msgs[start:]
        try:
            roles = [m.get("role") for m in new]
        except AttributeError:
            bad = next(i for i, m in enumerate(new) if not isinstance(m, Mapping))
            raise TypeError(
                f"messages[{start + bad}] must be a dict, not {type(new[bad]).__name__}"
            ) from None
        for k, role in enumerate(roles):
            if role in _SYSTEM_ROLES:
                system.append(start + k)
            elif role == "user":
                last_user = start + k
        if new:
            tokens += self.counter.count_messages(new) - self._priming
        if int(st.get("cut", 0)) > n:
            st["cut"] = n
        return {
            "n": n,
            "counter": self._counter_id,
            "tokens": tokens,
            "system": system,
            "last_user": last_user,
            "anchor": _fingerprint(msgs[n - 1]) if n else None,
            "incremental": start > 0,
        }, reset

    def _plan(self, messages: Any, state: Mapping[str, Any] | None, tools: Any) -> _Plan:
        started = time.perf_counter()
        msgs = self._as_list(messages)
        st = self._load_state(state)
        st["turn"] += 1
        c = self.counter
        scan, reset = self._scan(msgs, st)
        st["scan"] = scan
        n = len(msgs)
        system_idx: list[int] = scan["system"]
        last_user: int | None = scan["last_user"]
        tools_tokens = c.count_tools(tools) if tools else 0
        system_tokens = sum(c.count_message(msgs[i]) for i in system_idx)
        b = self._budget(system_tokens, tools_tokens)
        # The window never starts inside the leading system block.
        base = 0
        while base < len(system_idx) and system_idx[base] == base:
            base += 1
        s = max(int(st["summarized_until"]), base)
        cut = min(max(int(st["cut"]), s), n)
        # Raw tokens before the cut, carried in the state while the history only grows, so the
        # window's size is known without another pass over it.
        cut_tokens = st.get("cut_tokens")
        if not (scan.pop("incremental") and isinstance(cut_tokens, int) and st.get("cut") == cut):
            cut_tokens = c.count_messages(msgs[:cut]) - self._priming if cut else 0
        stats: dict[str, Any] = {
            "model": self.model,
            "exact": bool(getattr(c, "is_exact", False)),
            **b.as_dict(),
            "turn": st["turn"],
            "messages_total": n,
            "tokens_full": scan["tokens"] + (self._priming if n else 0) + tools_tokens,
            "tokens_tools": tools_tokens,
            "state_reset": reset,
            "summary_triggered": False,
            "summary_failed": False,
            "summary_error": None,
            "summary_ms": None,
            "summary_target_tokens": None,
            "compacted": False,
        }
        plan = _Plan(
            msgs=msgs,
            state=st,
            stats=stats,
            budget=b,
            tools_fp=_fingerprint(tools) if tools else "",
            last_user=last_user,
            system_idx=system_idx,
            system_tokens=system_tokens,
            cut=cut,
            started=started,
            cut_tokens=cut_tokens,
        )
        plan.start_cut = cut
        if n == 0:
            plan.stats.update(strategy="keep", strategy_reason="empty history")
            return plan
        if self.stable_prefix:
            self._plan_stable(plan, s, base)
        else:
            self._plan_sliding(plan, s, base)
        return plan

    def _decide(self, plan: _Plan) -> StrategyDecision:
        st = plan.state
        if self.summarizer is None:
            return StrategyDecision("truncate", "no summarizer configured")
        if st["retry_turn"] > st["turn"]:
            return StrategyDecision(
                "truncate",
                f"summarizer backing off after {st['failures']} failures (retry at turn {st['retry_turn']})",
            )
        if (
            plan.budget.summary_budget * _TARGET_HEADROOM
            < _MIN_SUMMARY_TOKENS + self._summary_overhead(st)
        ):
            return StrategyDecision(
                "truncate", f"summary budget too small ({plan.budget.summary_budget} tokens)"
            )
        recent = sum(1 for t in st["summary_turns"] if t > st["turn"] - _RECENT_SUMMARY_WINDOW)
        content = plan.stats["tokens_full"] - plan.budget.system_tokens - plan.stats["tokens_tools"]
        return choose_strategy(
            preference=self.preference,
            message_count=len(plan.msgs),
            content_tokens=max(0, content),
            recent_summaries=recent,
        )

    def _fit_at(self, plan: _Plan, cut: int, summary: str, language: str | None = None) -> _Fitted:
        """Fit system + summary + window(cut) to the prompt budget; drop the summary if it
        cannot fit beside the pins (then only BudgetError of the pins themselves escapes)."""
        view = self._view(plan, cut, summary, language)
        r = self._fit(view, plan.budget.prompt_budget)
        if r is None:
            # a held (no longer latest) user message is the first thing to give up
            view = self._view(plan, cut, summary, language, hold=False)
            r = self._fit(view, plan.budget.prompt_budget)
        if r is None:
            plan.stats["summary_dropped"] = True
            logger.warning(
                "the summary does not fit beside the system prompt and latest user message; sending without it"
            )
            view = self._view(plan, cut, "", language, hold=False)
            r = self._fit(view, plan.budget.prompt_budget, raise_errors=True)
        return _Fitted(cut, summary, view, r)

    def _plan_stable(self, plan: _Plan, s: int, base: int) -> None:
        """Cut stays put under the high-water mark; jumps to the low-water mark above it."""
        b, st, c = plan.budget, plan.state, self.counter
        # summary + recent tokens of the current window, from the carried totals: raw window
        # tokens, minus its system messages, minus what truncating tool outputs saves, plus a
        # user message pinned before the window. Exact up to orphans fit may still drop.
        cut = plan.cut
        window_raw = plan.state["scan"]["tokens"] - plan.cut_tokens
        window_system = sum(c.count_message(plan.msgs[i]) for i in plan.system_idx if i >= cut)
        _, _, saved = self._window(plan, cut)
        user = self._head_user(plan, cut)
        held = c.count_message(plan.msgs[user]) if user is not None else 0
        summary_tokens = sum(c.count_message(m) for m in self._summary_messages(st["summary"], st))
        recent = window_raw - window_system - saved + held
        if summary_tokens + recent <= b.high_water:
            plan.stats.update(
                strategy="keep",
                strategy_reason=(
                    f"summary + recent = {summary_tokens + recent} tokens, under the high-water "
                    f"mark ({b.high_water})"
                ),
            )
            return
        new_cut = self._cut_for(plan, plan.cut, b.low_water)
        if new_cut <= plan.cut:
            plan.stats.update(
                strategy="fallback",
                strategy_reason="the newest tool round alone exceeds the low-water mark; fitting plainly",
            )
            return
        decision = self._decide(plan)
        plan.stats.update(strategy=decision.strategy, strategy_reason=decision.reason)
        if decision.strategy == "summarize":
            plan.job = self._make_job(plan, s, new_cut)
            if plan.job is not None:
                return  # on failure _finish fits plainly at the old cut
        # truncate: the cut jumps without a summary; the gap stays pending for a later summary
        plan.cut = new_cut

    def _plan_sliding(self, plan: _Plan, s: int, base: int) -> None:
        """The largest recent window every turn; refresh the summary when enough fell out."""
        b, st = plan.budget, plan.state
        summary_msgs = self._summary_messages(st["summary"], st)
        summary_tokens = sum(self.counter.count_message(m) for m in summary_msgs)
        recent_budget = max(0, b.history_budget - summary_tokens)
        new_cut = max(self._cut_for(plan, s, recent_budget), plan.cut)
        pending = self._tokens_between(plan.msgs, s, new_cut)
        threshold = max(0.5 * st["summary_tokens"], 0.05 * b.history_budget)
        plan.cut = new_cut
        if new_cut > s and pending >= threshold:
            decision = self._decide(plan)
            plan.stats.update(strategy=decision.strategy, strategy_reason=decision.reason)
            if decision.strategy == "summarize":
                plan.job = self._make_job(plan, s, new_cut)
            return
        plan.stats.update(
            strategy="keep" if pending == 0 else "truncate",
            strategy_reason=(
                f"sliding window; {pending} evicted tokens pending, summary refresh at {int(threshold)}"
            ),
        )

    def _make_job(self, plan: _Plan, s: int, new_cut: int) -> _Job | None:
        """The summarization of ``msgs[s:new_cut]`` (chunked to the summarizer's input cap)."""
        st, b, c = plan.state, plan.budget, self.counter
        # How much one call may fold: the summarizer's own limit; else, for summarizers that
        # call a model, the history budget (their input must fit some context window too).
        limit_attr = getattr(self.summarizer, "max_input_tokens", None)
        if isinstance(limit_attr, int) and limit_attr > 0:
            cap = limit_attr
        elif getattr(self.summarizer, "inline", False):
            cap = math.inf
        else:
            cap = max(1, b.history_budget)
        hi = s
        fold_tokens = 0
        msgs = plan.msgs
        while hi < new_cut:
            # advance one unit: a message plus the tool results that answer it
            j = hi + 1
            while j < new_cut and msgs[j].get("role") == "tool":
                j += 1
            t = sum(
                c.count_message(msgs[k])
                for k in range(hi, j)
                if msgs[k].get("role") not in _SYSTEM_ROLES
            )
            if fold_tokens and fold_tokens + t > cap:
                break
            fold_tokens += t
            hi = j
        fold = [copy.deepcopy(dict(m)) for m in msgs[s:hi] if m.get("role") not in _SYSTEM_ROLES]
        if not fold:
            return None
        # Detected per fold (new messages + the summary so far), so a conversation that
        # switches language gets its summary in the language it is mostly held in.
        language = self.language or self._detect(fold, st["summary"])
        overhead = self._summary_overhead(st, language)
        room = max(0, b.summary_budget - overhead)
        # Aim below the hard room so a summarizer overshooting its target a little (LLMs do,
        # estimates do) still fits instead of failing the same way every turn.
        target = summary_target_tokens(
            st["evicted_tokens"] + fold_tokens,
            int(room * _TARGET_HEADROOM),
            self.summary_length_ratio,
        )
        limit = min(room, max(int(target * _OVERSIZE_FACTOR), target + 64))
        plan.stats["summary_target_tokens"] = target
        return _Job(
            messages=fold,
            previous=st["summary"],
            target=target,
            limit=limit,
            language=language,
            lo=s,
            hi=hi,
            new_cut=new_cut,
            fold_tokens=fold_tokens,
            fold_count=len(fold),
        )

    @staticmethod
    def _detect(fold: list[dict[str, Any]], previous: str) -> str:
        users = [message_text(m) for m in fold if m.get("role") == "user"]
        return detect_language(
            [previous, *users] if any(users) else [previous, *(message_text(m) for m in fold)]
        )

    # -- windows and fitting --------------------------------------------------------------------

    def _summary_messages(
        self, summary: str, st: Mapping[str, Any], language: str | None = None
    ) -> list[dict[str, Any]]:
        if not summary:
            return []
        lang = language or st.get("language") or self.language or detect_language(summary)
        count = int(st.get("summarized_messages", 0))
        if lang == "zh":
            header = f"【早期对话摘要（已归档 {count} 条消息）】"
            ack = "好的，我会基于以上摘要继续。"
        else:
            header = f"[Summary of the earlier conversation ({count} messages archived)]"
            ack = "Understood. I'll continue with this context."
        text = f"{header}\n{summary}"
        if self.summary_role == "pair":
            return [{"role": "user", "content": text}, {"role": "assistant", "content": ack}]
        return [{"role": "system", "content": text}]

    def _summary_overhead(self, st: Mapping[str, Any], language: str | None = None) -> int:
        msgs = self._summary_messages("x", {**st, "summarized_messages": 99999}, language)
        return sum(self.counter.count_message(m) for m in msgs)

    def _tool_cap(self, b: Budget) -> int:
        if self.tool_output_max_tokens is not None:
            return self.tool_output_max_tokens
        return max(64, b.low_water // 2)

    def _truncated(self, msg: Message, cap: int) -> tuple[dict[str, Any], int] | None:
        """A copy of tool message ``msg`` with its output cut to ``cap`` tokens, or None."""
        content = msg.get("content")
        # A token covers at least one UTF-8 byte, so short outputs never need counting.
        if not isinstance(content, str) or len(content) * 4 <= cap:
            return None
        key = (content, cap, self.tool_output_direction)
        with self._trunc_lock:
            hit = self._trunc_cache.get(key)
            if hit is not None:
                self._trunc_cache.move_to_end(key)
        if hit is None:
            total = self.counter.count(content)
            if total <= cap:
                hit = (None, 0)
            else:
                text = _wf.truncate(
                    content, cap, direction=self.tool_output_direction, counter=self.counter
                ).text
                hit = (text, total - self.counter.count(text))
            with self._trunc_lock:
                self._trunc_cache[key] = hit
                if len(self._trunc_cache) > _TRUNCATION_CACHE_SIZE:
                    self._trunc_cache.popitem(last=False)
        text, saved = hit
        if text is None:
            return None
        return {**msg, "content": text}, saved

    def _window(self, plan: _Plan, lo: int) -> tuple[list[Any], int, int]:
        """``msgs[lo:]`` with oversized tool outputs truncated (new dicts, inputs untouched)."""
        msgs = plan.msgs
        cap = self._tool_cap(plan.budget)
        if cap > 0 and (plan.trunc_from < 0 or lo < plan.trunc_from):
            # scan only the part not scanned yet in this call
            hi = plan.trunc_from if plan.trunc_from >= 0 else len(msgs)
            for i in range(lo, hi):
                m = msgs[i]
                if m.get("role") == "tool":
                    cut = self._truncated(m, cap)
                    if cut is not None:
                        plan.trunc[i] = cut
            plan.trunc_from = lo
        window = msgs[lo:]
        count = saved = 0
        for i, (m, tokens) in plan.trunc.items():
            if i >= lo:
                window[i - lo] = m
                count += 1
                saved += tokens
        return window, count, saved

    def _head_user(self, plan: _Plan, cut: int) -> int | None:
        """The user message pinned right after the summary, if the window starts after it.

        That is the latest user message; with ``stable_prefix``, while the cut has not moved,
        it stays the one pinned when the cut was made even after newer user messages arrive, so
        the prompt prefix does not change under the provider's cache.
        """
        lu = plan.last_user
        if lu is not None and lu < cut:
            return lu
        held = plan.state.get("head_user")
        if (
            self.stable_prefix
            and isinstance(held, int)
            and 0 <= held < cut
            and cut == plan.start_cut
            and plan.msgs[held].get("role") == "user"
        ):
            return held
        return None

    def _view(
        self, plan: _Plan, cut: int, summary: str, language: str | None = None, *, hold: bool = True
    ) -> _View:
        msgs, st = plan.msgs, plan.state
        head_src = [i for i in plan.system_idx if i < cut]
        head = [msgs[i] for i in head_src]
        summary_msgs = self._summary_messages(summary, st, language)
        summary_idx = list(range(len(head), len(head) + len(summary_msgs)))
        head += summary_msgs
        head_src += [-1] * len(summary_msgs)
        pinned = list(summary_idx)
        user = self._head_user(plan, cut)
        if user is not None and (hold or user == plan.last_user):
            pinned.append(len(head))
            head.append(msgs[user])  # the request stays verbatim next to the summary
            head_src.append(user)
        window, count, saved = self._window(plan, cut)
        return _View(
            messages=head + window,
            source=head_src + list(range(cut, len(msgs))),
            head_len=len(head),
            summary_idx=summary_idx,
            pinned=pinned,
            truncated=count,
            truncated_tokens=saved,
        )

    def _fit(self, view: _View, budget: int, *, raise_errors: bool = False) -> Any:
        try:
            return _wf.fit(view.messages, budget, counter=self.counter, pinned=view.pinned)
        except _wf.BudgetError:
            if raise_errors or not view.pinned:
                raise
            return None

    def _head_summary_tokens(self, view: _View) -> int:
        return sum(self.counter.count_message(view.messages[i]) for i in view.summary_idx)

    def _cut_for(self, plan: _Plan, lo: int, budget: int) -> int:
        """Start of the longest recent window of ``msgs[lo:]`` within ``budget`` tokens.

        Uses fit's unit logic, so a cut never separates a tool call from its results and, before
        the latest user message, lands on a user message.
        """
        window, _, _ = self._window(plan, lo)
        if not window:
            return lo
        r = _wf.fit(
            window,
            budget + self._priming,
            counter=self.counter,
            keep_system=False,
            keep_last_user=False,
        )
        if r.kept:
            return lo + r.kept[0]
        # Even the newest unit exceeds the budget: keep just that unit (fit trims it later).
        k = len(window) - 1
        while k > 0 and window[k].get("role") == "tool":
            k -= 1
        return lo + k

    def _tokens_between(self, msgs: list[Any], lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        part = [m for m in msgs[lo:hi] if m.get("role") not in _SYSTEM_ROLES]
        return self.counter.count_messages(part) - self._priming if part else 0

    # -- running summarizers --------------------------------------------------------------------

    def _call_args(self, job: _Job) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (job.messages,), {
            "previous_summary": job.previous,
            "target_tokens": job.target,
            "language": job.language,
        }

    def _run_sync(self, job: _Job) -> _Outcome:
        fn = self.summarizer
        args, kwargs = self._call_args(job)
        t0 = time.perf_counter()
        if getattr(fn, "inline", False):
            try:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):
                    value = _run_awaitable(value, self.summary_timeout)
                return _Outcome(value, None, (time.perf_counter() - t0) * 1000)
            except Exception as exc:  # noqa: BLE001 - any summarizer failure is recoverable
                return _Outcome(None, _describe(exc), (time.perf_counter() - t0) * 1000)
        box: dict[str, Any] = {}

        def runner() -> None:
            try:
                value = fn(*args, **kwargs)
                if inspect.isawaitable(value):
                    value = asyncio.run(_as_coroutine(value))
                box["value"] = value
            except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
                box["error"] = exc

        # A daemon thread, so a summarizer that hangs can neither block this turn past the
        # deadline nor keep the interpreter alive at exit.
        thread = threading.Thread(target=runner, name="windowfit-summarizer", daemon=True)
        thread.start()
        thread.join(self.summary_timeout)
        elapsed = (time.perf_counter() - t0) * 1000
        if thread.is_alive():
            return _Outcome(None, f"timed out after {self.summary_timeout:g}s", elapsed)
        if "error" in box:
            return _Outcome(None, _describe(box["error"]), elapsed)
        return _Outcome(box.get("value"), None, elapsed)

    async def _run_async(self, job: _Job) -> _Outcome:
        fn = self.summarizer
        args, kwargs = self._call_args(job)
        t0 = time.perf_counter()
        try:
            if hasattr(fn, "asummarize"):
                awaitable = fn.asummarize(*args, **kwargs)
            elif getattr(fn, "inline", False):
                awaitable = _ready(fn(*args, **kwargs))
            elif _is_async_callable(fn):
                awaitable = fn(*args, **kwargs)
            else:
                awaitable = asyncio.to_thread(_call_and_resolve, fn, args, kwargs)
            value = await asyncio.wait_for(_as_coroutine(awaitable), self.summary_timeout)
            return _Outcome(value, None, (time.perf_counter() - t0) * 1000)
        except asyncio.TimeoutError:
            return _Outcome(
                None,
                f"timed out after {self.summary_timeout:g}s",
                (time.perf_counter() - t0) * 1000,
            )
        except Exception as exc:  # noqa: BLE001 - any summarizer failure is recoverable
            return _Outcome(None, _describe(exc), (time.perf_counter() - t0) * 1000)

    def _validate(self, job: _Job, outcome: _Outcome) -> tuple[str | None, int, str | None]:
        """The accepted summary text and its tokens, or the reason it is rejected."""
        if outcome.error is not None:
            return None, 0, outcome.error
        value = outcome.text
        if not isinstance(value, str):
            return None, 0, f"summarizer returned {type(value).__name__}, expected str"
        text = value.strip()
        if not text:
            return None, 0, "summarizer returned an empty summary"
        tokens = self.counter.count(text)
        if tokens > job.limit:
            return (
                None,
                tokens,
                (
                    f"summary of {tokens} tokens is oversize (target {job.target}, limit {job.limit})"
                ),
            )
        return text, tokens, None

    # -- finishing ------------------------------------------------------------------------------

    def _finish(self, plan: _Plan, outcome: _Outcome | None) -> Prepared:
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
                    created_at=_now(),
                    summaries=int(st["summaries"]) + 1,
                    failures=0,
                    retry_turn=0,
                    last_error=None,
                    anchor=_fingerprint(msgs[job.hi - 1]),
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
        st["head_user"] = next(
            (fitted.view.source[k] for k in fitted.view.pinned if fitted.view.source[k] >= 0), None
        )
        prepared = list(fitted.result.messages)
        self._fill_stats(plan, fitted, prepared)
        st["updated_at"] = _now()
        return Prepared(messages=prepared, stats=stats, state=st)

    def _fill_stats(self, plan: _Plan, fitted: _Fitted, prepared: list[Any]) -> None:
        st, stats, c = plan.state, plan.stats, self.counter
        view, r = fitted.view, fitted.result
        n = len(plan.msgs)
        kept = r.kept
        summary_tokens = self._head_summary_tokens(view)
        tokens = int(r.tokens)
        recent = max(0, tokens - plan.system_tokens - summary_tokens - self._priming)
        sent_from_history = len(kept) - len(view.summary_idx)
        limit = self.context_window - self.output_reserve
        stats.update(
            tokens=tokens,
            tokens_system=plan.system_tokens,
            tokens_summary=summary_tokens,
            tokens_recent=recent,
            tokens_total=tokens + stats["tokens_tools"],
            usage_ratio=round((tokens + stats["tokens_tools"]) / limit, 4),
            tokens_saved=max(0, stats["tokens_full"] - tokens - stats["tokens_tools"]),
            messages_sent=len(prepared),
            messages_dropped=n - sent_from_history,
            messages_summarized=int(st["summarized_messages"]),
            messages_pending=max(0, plan.cut - int(st["summarized_until"])),
            summarized_until=int(st["summarized_until"]),
            cut=plan.cut,
            tool_outputs_truncated=view.truncated,
            tool_tokens_truncated=view.truncated_tokens,
            has_summary=bool(fitted.view.summary_idx),
        )
        stats.setdefault("summary_dropped", False)
        # Prefix shared with the previous call: the identical leading head messages, then (same
        # cut, same head) the window up to where the previous prompt ended. Only the few head
        # and new messages are counted here; the rest follows from the totals.
        head_kept = [k for k in kept[: view.head_len] if k < view.head_len]
        head_fps = [_fingerprint(view.messages[k]) for k in head_kept]
        head_tokens = [c.count_message(view.messages[k]) for k in head_kept]
        last_source = view.source[kept[-1]] if kept else -1
        end = last_source + 1 if last_source >= 0 else plan.cut
        # where the sent window really starts (fit may have skipped a partial round)
        start = view.source[kept[len(head_kept)]] if len(kept) > len(head_kept) else end
        prev = st.get("prev") if isinstance(st.get("prev"), Mapping) else None
        shared_tokens = shared_msgs = 0
        if prev and prev.get("tools") == plan.tools_fp:
            prev_head = list(prev.get("head") or [])
            same = 0
            while same < min(len(prev_head), len(head_fps)) and prev_head[same] == head_fps[same]:
                same += 1
            shared_msgs, shared_tokens = same, sum(head_tokens[:same])
            if same == len(head_fps) == len(prev_head) and prev.get("start") == start:
                prev_end = int(prev.get("end", 0))
                window_tokens = tokens - self._priming - sum(head_tokens)
                window_count = len(kept) - len(head_kept)
                k = len(kept) - 1
                while k >= len(head_kept) and view.source[kept[k]] >= prev_end:
                    window_tokens -= c.count_message(view.messages[kept[k]])
                    window_count -= 1
                    k -= 1
                shared_msgs += window_count
                shared_tokens += window_tokens
        stats.update(
            prefix_tokens_shared=shared_tokens,
            prefix_messages_shared=shared_msgs,
            prefix_shared_ratio=round(shared_tokens / max(1, tokens - self._priming), 4),
        )
        st["prev"] = {"head": head_fps, "start": start, "end": end, "tools": plan.tools_fp}
        stats["elapsed_ms"] = round((time.perf_counter() - plan.started) * 1000, 3)
        logger.debug(
            "prepared turn %d: %d messages, %d tokens (system %d, summary %d, recent %d), strategy %s",
            st["turn"],
            len(prepared),
            tokens,
            plan.system_tokens,
            summary_tokens,
            recent,
            stats.get("strategy"),
        )


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists, scalars); faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_async_callable(fn: Any) -> bool:
    """An ``async def`` function, or an object whose class defines ``async def __call__``."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def _as_coroutine(awaitable: Any) -> Any:
    return await awaitable


async def _ready(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _call_and_resolve(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    value = fn(*args, **kwargs)
    if inspect.isawaitable(value):
        return asyncio.run(_as_coroutine(value))
    return value


def _run_awaitable(value: Any, timeout: float) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(_as_coroutine(value), timeout)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(bounded())
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
