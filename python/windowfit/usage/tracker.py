"""Token usage and cost tracking, persisted in a store so every worker sees the same totals.

Usage is normalized to one meaning whatever the provider: ``prompt_tokens`` is every input token
of the call, of which ``cached_tokens`` were read from the provider's prompt cache and
``cache_write_tokens`` were written to it (Anthropic cache creation). OpenAI already reports it
so; Anthropic's ``input_tokens`` excludes both cache parts, so they are added back.

Cost (USD) uses the model registry's prices (``windowfit.models``, per million tokens):
uncached input at ``input_price``, cache reads at ``cached_input_price`` (``input_price`` when
the registry has none), cache writes at ``input_price`` times a multiplier, output at
``output_price``. The cache-write multiplier is per provider by default: 1.25 for Anthropic
(its 5-minute cache; pass ``cache_write_multiplier=2.0`` for the 1-hour cache), 1.0 for the
others (OpenAI, DeepSeek and Qwen bill cache writes as ordinary input).
A model without prices in the registry has cost None; totals then add up the known costs and
count the rest in ``unpriced_calls``.

Days are UTC dates (``"2025-01-31"``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any, TypeVar

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.errors import ArgumentTypeError, InvalidArgumentError, WindowfitError
from windowfit.models import UnknownModelError, get_model, model_family
from windowfit.store.base import BaseStore, UsageRecord, UsageRow
from windowfit.store.memory import MemoryStore
from windowfit.usage.provider import extract_usage

__all__ = [
    "Quota",
    "QuotaExceededError",
    "UsageRecord",
    "UsageTracker",
    "extract_usage",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
# Cache writes cost input_price times this, by provider (others: 1.0).
CACHE_WRITE_MULTIPLIERS: dict[str, float] = {"anthropic": 1.25}
_TOTAL_KEYS = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "total_tokens",
    "cost",
    "calls",
    "unpriced_calls",
)


@dataclass(frozen=True)
class Quota:
    """A daily limit (UTC day) on tokens (prompt + completion) and/or cost in USD.

    ``model`` / ``session_id`` narrow it to one model or one session; by default it covers all.
    """

    tokens_per_day: int | None = None
    cost_per_day: float | None = None
    model: str | None = None
    session_id: str | None = None

    def __post_init__(self) -> None:
        if self.tokens_per_day is None and self.cost_per_day is None:
            raise InvalidArgumentError("a Quota needs tokens_per_day and/or cost_per_day")
        for name in ("tokens_per_day", "cost_per_day"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidArgumentError(f"{name} must be >= 0")

    def describe(self) -> str:
        scope = []
        if self.model:
            scope.append(f"model {self.model!r}")
        if self.session_id:
            scope.append(f"session {self.session_id!r}")
        return "daily quota" + (f" for {' and '.join(scope)}" if scope else "")


class QuotaExceededError(WindowfitError, RuntimeError):
    """A daily quota is used up. ``quota``, ``day``, ``used`` (tokens or USD) and ``limit``."""

    def __init__(self, quota: Quota, day: str, kind: str, used: float, limit: float) -> None:
        self.quota, self.day, self.kind, self.used, self.limit = quota, day, kind, used, limit
        if kind == "cost":
            amounts = f"${used:.4f} of ${limit:.4f}"
        else:
            amounts = f"{int(used):,} of {int(limit):,} tokens"
        super().__init__(f"{quota.describe()} exceeded on {day}: {amounts} used")


def _day_of(value: str | date | datetime | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc)
        return value.date().isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if value == "today":
        return _utc_day(time.time())
    try:
        return date.fromisoformat(value).isoformat()
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"day must be 'YYYY-MM-DD', a date or 'today', got {value!r}"
        ) from None


def _utc_day(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).date().isoformat()


def _timestamp(value: float | datetime | None) -> float:
    """A call's time in seconds since the epoch, one a UTC day can be named for."""
    if value is None:
        return time.time()
    if isinstance(value, datetime):
        ts = value.timestamp()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        ts = float(value)
    else:
        raise ArgumentTypeError(
            f"timestamp must be seconds since the epoch or a datetime, not {value!r}"
        )
    try:
        _utc_day(ts)
    except (OverflowError, OSError, ValueError):
        raise InvalidArgumentError(
            f"timestamp {value!r} is not a time a calendar day can be named for"
        ) from None
    return ts


def _totals(rows: Sequence[UsageRow]) -> dict[str, Any]:
    acc = UsageRow("", "")
    for row in rows:
        acc.add(row)
    return {
        "prompt_tokens": acc.prompt_tokens,
        "completion_tokens": acc.completion_tokens,
        "cached_tokens": acc.cached_tokens,
        "cache_write_tokens": acc.cache_write_tokens,
        "total_tokens": acc.prompt_tokens + acc.completion_tokens,
        "cost": round(acc.cost, 10),
        "calls": acc.calls,
        "unpriced_calls": acc.unpriced_calls,
    }


class UsageTracker:
    """Records each LLM call's usage and cost in ``store`` (a MemoryStore if None).

    ``counters``: ``{model: counter}`` of estimating counters (``is_exact`` False) to calibrate
    with the provider's real prompt token counts (see ``record``); ``attach`` adds more.
    ``quota``: one or more Quota; when one is exceeded ``on_quota`` decides: ``"raise"``
    QuotaExceededError (default), ``"warn"`` (log a warning) or a callable receiving the error.
    ``cache_write_multiplier``: price of a cache-write token as a multiple of the input price,
    for every model (default: per provider, see the module docs).
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        counters: Mapping[str, Any] | None = None,
        quota: Quota | Sequence[Quota] | None = None,
        on_quota: str | Callable[[QuotaExceededError], Any] = "raise",
        cache_write_multiplier: float | None = None,
    ) -> None:
        if store is None:
            store = MemoryStore()
        self.store = store
        self._counters: dict[str, Any] = {}
        for name, counter in (counters or {}).items():
            self.attach(name, counter)
        if quota is None:
            self.quotas: tuple[Quota, ...] = ()
        elif isinstance(quota, Quota):
            self.quotas = (quota,)
        else:
            self.quotas = tuple(quota)
        if not (callable(on_quota) or on_quota in ("raise", "warn")):
            raise InvalidArgumentError("on_quota must be 'raise', 'warn' or a callable")
        self.on_quota = on_quota
        if cache_write_multiplier is not None and cache_write_multiplier < 0:
            raise InvalidArgumentError("cache_write_multiplier must be >= 0")
        self.cache_write_multiplier = cache_write_multiplier
        self._unpriced_warned: set[str] = set()

    def __repr__(self) -> str:
        return f"UsageTracker({self.store!r})"

    # ------------------------------------------------------------------ counters

    def attach(self, model: str, counter: Any) -> None:
        """Calibrate ``counter`` with the real usage of ``model`` (and its dated variants)."""
        self._counters[_norm(model)] = counter

    def counter_for(self, model: str) -> Any:
        """The attached counter for ``model``: exact name, else the longest attached prefix."""
        key = _norm(model)
        if key in self._counters:
            return self._counters[key]
        best = None
        for name in self._counters:
            if (
                key.startswith(name)
                and key[len(name)] in "-@:."
                and (best is None or len(name) > len(best))
            ):
                best = name
        return None if best is None else self._counters[best]

    def _calibrate(self, model: str, estimated: int | None, actual: int) -> None:
        if estimated is None or estimated <= 0 or actual <= 0:
            return
        counter = self.counter_for(model)
        if counter is None or getattr(counter, "is_exact", True) is not False:
            return
        calibrate = getattr(counter, "calibrate", None)
        if calibrate is None:
            return
        try:
            calibrate(int(estimated), int(actual))
        except Exception:  # calibration is an optimization: never fail the recording
            logger.warning("calibrating the counter of %r failed", model, exc_info=True)

    # ------------------------------------------------------------------ cost

    def cost(
        self,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """USD cost of one call from the registry's prices; None if the model has none."""
        try:
            info = get_model(model)
        except UnknownModelError:
            info = None
        if info is None or info.input_price is None or info.output_price is None:
            if model not in self._unpriced_warned:
                self._unpriced_warned.add(model)
                logger.warning(
                    "no prices for model %r in the registry: its cost is recorded as unknown "
                    "(register_model(ModelInfo(..., input_price=..., output_price=...)))",
                    model,
                )
            return None
        cached_price = info.cached_input_price
        if cached_price is None:
            cached_price = info.input_price
        multiplier = self.cache_write_multiplier
        if multiplier is None:
            multiplier = CACHE_WRITE_MULTIPLIERS.get(info.provider, 1.0)
        uncached = prompt_tokens - cached_tokens - cache_write_tokens
        total = (
            uncached * info.input_price
            + cached_tokens * cached_price
            + cache_write_tokens * info.input_price * multiplier
            + completion_tokens * info.output_price
        )
        return total / 1_000_000

    # ------------------------------------------------------------------ recording

    def _make(
        self,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int,
        cache_write_tokens: int,
        session_id: str | None,
        timestamp: float | datetime | None,
    ) -> UsageRecord:
        if not isinstance(model, str) or not model.strip():
            raise InvalidArgumentError(f"model must be a non-empty str, got {model!r}")
        model = model.strip()
        counts = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached_tokens": cached_tokens,
            "cache_write_tokens": cache_write_tokens,
        }
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgumentError(f"{name} must be an int >= 0, got {value!r}")
        if cached_tokens + cache_write_tokens > prompt_tokens:
            raise InvalidArgumentError(
                f"cached_tokens + cache_write_tokens ({cached_tokens} + {cache_write_tokens}) "
                f"exceed prompt_tokens ({prompt_tokens}): prompt_tokens counts all input tokens, "
                "cache parts included (for Anthropic's raw usage use record_response)"
            )
        ts = _timestamp(timestamp)
        cost = self.cost(model, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens)
        return UsageRecord(
            ts=ts,
            day=_utc_day(ts),
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            cache_write_tokens=cache_write_tokens,
            cost=cost,
            session_id=session_id,
        )

    # Each operation is one generator yielding the store calls it needs (`call(store, ...)`);
    # `blocking` makes the sync method from it and `awaitable` the async twin, which awaits
    # the store's ``a``-prefixed methods: the two share one body and one signature.

    def _op_record(
        self,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        session_id: str | None = None,
        *,
        cache_write_tokens: int = 0,
        estimated_prompt_tokens: int | None = None,
        timestamp: float | datetime | None = None,
    ) -> CallOp[UsageRecord]:
        """Persist one call's usage; returns the record (with its cost).

        ``prompt_tokens`` counts all input tokens, ``cached_tokens`` and ``cache_write_tokens``
        included. ``estimated_prompt_tokens``: what windowfit counted for this prompt; with an
        estimating counter attached for ``model`` it calibrates that counter. The usage is
        stored before a quota check may raise QuotaExceededError.
        """
        rec = self._make(
            model,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
            cache_write_tokens,
            session_id,
            timestamp,
        )
        yield call(self.store, "record_usage", rec)
        self._calibrate(rec.model, estimated_prompt_tokens, prompt_tokens)
        for quota in self._quotas_for(rec):
            rows = yield call(
                self.store,
                "usage_rows",
                model=quota.model,
                day=rec.day,
                session_id=quota.session_id,
            )
            self._judge(quota, rec.day, rows, strict=True)
        return rec

    record = blocking(_op_record)
    arecord = awaitable(_op_record)

    def _op_record_response(
        self,
        response: Any,
        *,
        model: str | None = None,
        session_id: str | None = None,
        estimated_prompt_tokens: int | None = None,
    ) -> CallOp[UsageRecord]:
        """``record`` the usage of an OpenAI or Anthropic response (see ``extract_usage``)."""
        usage = extract_usage(response)
        name = model or usage["model"]
        if not name:
            raise InvalidArgumentError("the response does not name its model: pass model=")
        return (
            yield from self._op_record(
                name,
                usage["prompt_tokens"],
                usage["completion_tokens"],
                usage["cached_tokens"],
                session_id,
                cache_write_tokens=usage["cache_write_tokens"],
                estimated_prompt_tokens=estimated_prompt_tokens,
            )
        )

    record_response = blocking(_op_record_response)
    arecord_response = awaitable(_op_record_response)

    # ------------------------------------------------------------------ quotas

    def _quotas_for(self, rec: UsageRecord) -> list[Quota]:
        return [
            q
            for q in self.quotas
            if (q.model is None or q.model == rec.model)
            and (q.session_id is None or q.session_id == rec.session_id)
        ]

    def _judge(self, quota: Quota, day: str, rows: Sequence[UsageRow], *, strict: bool) -> None:
        t = _totals(rows)
        checks: list[tuple[str, float, float]] = []
        if quota.tokens_per_day is not None:
            checks.append(("tokens", t["total_tokens"], quota.tokens_per_day))
        if quota.cost_per_day is not None:
            checks.append(("cost", t["cost"], quota.cost_per_day))
        for kind, used, limit in checks:
            # after a call: over the limit; before one: at the limit already
            if used > limit or (not strict and used >= limit):
                self._exceeded(QuotaExceededError(quota, day, kind, used, limit))
                return

    def _exceeded(self, error: QuotaExceededError) -> None:
        if self.on_quota == "raise":
            raise error
        if self.on_quota == "warn":
            logger.warning("%s", error)
        else:
            self.on_quota(error)  # type: ignore[operator]

    def _op_check_quota(
        self, model: str | None = None, session_id: str | None = None
    ) -> CallOp[None]:
        """Before a call: act on (raise/warn) any quota already used up today.

        Only quotas that apply to ``model`` / ``session_id`` are checked (all when omitted).
        """
        day = _utc_day(time.time())
        for quota in self.quotas:
            if model is not None and quota.model not in (None, model):
                continue
            if session_id is not None and quota.session_id not in (None, session_id):
                continue
            rows = yield call(
                self.store, "usage_rows", model=quota.model, day=day, session_id=quota.session_id
            )
            self._judge(quota, day, rows, strict=False)

    check_quota = blocking(_op_check_quota)
    acheck_quota = awaitable(_op_check_quota)

    # ------------------------------------------------------------------ reports

    def _rows_op(self, report: Callable[[list[UsageRow]], _T], **query: Any) -> CallOp[_T]:
        """The store's rows for ``query``; a ``model`` selects its whole registry family.

        Calls are recorded under the name the provider returned (often dated:
        ``gpt-4o-2024-08-06``), so a report for ``gpt-4o`` takes every row whose model
        resolves to the same family, each still under its own name.
        """
        if "day" in query:
            query["day"] = _day_of(query["day"])
        model = query.pop("model", None)
        for name, value in (("model", model), ("session_id", query.get("session_id"))):
            if value is not None and not isinstance(value, str):
                raise ArgumentTypeError(f"{name} must be a str or None, not {value!r}")
        rows = yield call(self.store, "usage_rows", **query)
        if model is not None:
            family = model_family(model)
            rows = [r for r in rows if model_family(r.model) == family]
        return report(rows)

    def _op_rows(
        self,
        model: str | None = None,
        day: str | date | datetime | None = None,
        session_id: str | None = None,
    ) -> CallOp[list[dict[str, Any]]]:
        """One dict per (day, model): ``day``, ``model`` and the totals keys; sorted.

        ``model`` selects its family: ``"gpt-4o"`` also lists ``gpt-4o-2024-08-06``'s rows.
        """
        return (yield from self._rows_op(_per_row, model=model, day=day, session_id=session_id))

    def _op_totals(
        self,
        model: str | None = None,
        day: str | date | datetime | None = None,
        session_id: str | None = None,
    ) -> CallOp[dict[str, Any]]:
        """Summed usage: prompt/completion/cached/cache_write/total tokens, cost (USD of the
        priced calls), calls, unpriced_calls. ``day``: ``"YYYY-MM-DD"``, a date, or "today"."""
        return (yield from self._rows_op(_totals, model=model, day=day, session_id=session_id))

    def _op_by_model(
        self, day: str | date | datetime | None = None, session_id: str | None = None
    ) -> CallOp[dict[str, dict[str, Any]]]:
        """``{model: totals}``, models sorted by name."""
        return (yield from self._rows_op(_by_model, day=day, session_id=session_id))

    def _op_by_day(
        self, model: str | None = None, session_id: str | None = None
    ) -> CallOp[dict[str, dict[str, Any]]]:
        """``{day: totals}``, oldest day first."""
        return (yield from self._rows_op(_by_day, model=model, session_id=session_id))

    rows = blocking(_op_rows)
    arows = awaitable(_op_rows)
    totals = blocking(_op_totals)
    atotals = awaitable(_op_totals)
    by_model = blocking(_op_by_model)
    aby_model = awaitable(_op_by_model)
    by_day = blocking(_op_by_day)
    aby_day = awaitable(_op_by_day)


def _per_row(rows: Sequence[UsageRow]) -> list[dict[str, Any]]:
    return [{"day": r.day, "model": r.model, **_totals([r])} for r in rows]


def _by_model(rows: Sequence[UsageRow]) -> dict[str, dict[str, Any]]:
    return _group(rows, "model")


def _by_day(rows: Sequence[UsageRow]) -> dict[str, dict[str, Any]]:
    return _group(rows, "day")


def _group(rows: Sequence[UsageRow], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[UsageRow]] = {}
    for row in rows:
        groups.setdefault(getattr(row, key), []).append(row)
    return {k: _totals(groups[k]) for k in sorted(groups)}


def _norm(model: str) -> str:
    return model.rsplit("/", 1)[-1].strip().lower()
