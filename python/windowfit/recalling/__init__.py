"""Recall: bring back the earlier parts of a conversation that a question is about.

``wf.recall(history, query, budget)`` scores the messages of ``history`` against ``query``
with the core's incremental lexical index (BM25 over stemmed words, numbers, whole
identifiers and paths, CJK characters and pairs; ``windowfit._core.RecallIndex``) and returns
the best *whole units* that fit in ``budget`` tokens, exactly counted:

- a user turn with the reply it got, or a tool call with all its results (the core's own
  pairing rule: a recalled block never splits a pair);
- the exchange before a recalled one when it carries its context (a short or pronoun-led
  follow-up such as "what about the second one?");
- each unit's first message stamped with when it was said: the session date or timestamp in
  force there (a ``timestamp`` / ``created_at`` / ``date`` field, or a bracketed or labelled
  date opening a message) and its position in the history.

The result's ``messages`` are in conversation order, ready to be placed before the latest
user message; ``units`` says what came back and why. An optional ``embedder`` (a callable
mapping a list of texts to a list of vectors) reranks and extends the lexical candidates by
reciprocal-rank fusion; it is never required.

Bad input never raises from inside: an empty or huge query, a history of one message,
messages without text, lone surrogates and very long messages give nothing or a bounded,
valid block (invalid *arguments* raise ``windowfit`` errors naming the argument).
"""

from __future__ import annotations

import bisect
import logging
import math
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.messages import content_text
from windowfit.summarize.salience import STAMP_KEYS, said_at

__all__ = [
    "RecallResult",
    "RecalledUnit",
    "recall",
    "recall_terms",
    "said_on_named_days",
    "session_dates",
    "shared_index",
]

logger = logging.getLogger(__name__)

Message = Mapping[str, Any]
Embedder = Callable[[list[str]], Sequence[Sequence[float]]]

#: Lexical hits looked at per call: units are built around these only.
MAX_HITS = 64
#: A unit scoring below this share of the best one is not about the question.
MIN_SHARE = 0.2
#: How far back a unit looks for the session date in force.
DATE_LOOKBACK = 200
#: The most stamps whose day an index remembers (a history's sessions; past it, forgotten).
MAX_STAMP_DAYS = 65_536
#: What an exchange said on a day the query names scores besides its own match, as a share of
#: the query's best match: just under it, so the best match of the question's words, said on
#: another day, still comes before the day's other exchanges.
DAY_LIFT = 0.99
#: Tokens a stamp's count alone may exceed what it adds to the message it opens (the pieces
#: at the join can merge): the margin of the pre-check that spares a date lookup.
STAMP_JOIN_SLACK = 4
#: A unit whose terms a summary in the prompt holds at this share or more is not recalled.
HELD_BY_SUMMARY = 0.9
#: Below this many tokens left, no exchange fits: selection stops.
MIN_UNIT_TOKENS = 16
#: Reciprocal-rank fusion constant (the usual 60).
RRF_K = 60
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")

_SHARED: _core.RecallIndex | None = None


def shared_index() -> _core.RecallIndex:
    """The process-wide index ``recall`` uses when none is given (bounded, thread-safe)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = _core.RecallIndex()
    return _SHARED


def recall_terms(text: str) -> list[str]:
    """The terms recall scores ``text`` by (the core's text rules)."""
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be a str, not {type(text).__name__}")
    return _core.recall_terms(text)


@dataclass(frozen=True)
class RecalledUnit:
    """One recalled unit: ``history[start:end]``, its score, when it was said and why."""

    start: int
    end: int
    score: float
    tokens: int
    date: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "score": round(self.score, 3),
            "tokens": self.tokens,
            "date": self.date,
            "reason": self.reason,
        }


@dataclass
class RecallResult:
    """What ``recall`` brought back: ``messages`` (stamped copies, conversation order),
    ``units`` (what and why), ``tokens`` (``sum(count_message(m))`` of ``messages``) and
    ``skipped`` (candidates left out, with the reason)."""

    messages: list[Any] = field(default_factory=list)  # stamped copies and the inputs
    units: list[RecalledUnit] = field(default_factory=list)
    tokens: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Units
# ---------------------------------------------------------------------------------------------


def _unit_text(history: Sequence[Message], start: int, end: int, limit: int = 4000) -> str:
    parts = [content_text(history[k].get("content"))[:limit] for k in range(start, end)]
    return "\n".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------
# Stamps
# ---------------------------------------------------------------------------------------------


_STAMP_OPENERS = ("[", "(", "（", "【", "date", "time", "session", "日期", "时间", "会话")


class _OwnDates:
    """The date each position's message states itself (None for most), kept from call to
    call beside an index with the message object it was read from. A stretch of positions
    whose objects are the history's own (or equal copies) is not read again: one comparison
    of two list slices, done in C (holding the objects keeps their addresses from reuse). Threads
    sharing an index take ``lock`` around a lookup."""

    def __init__(self) -> None:
        self.objs: list[Message | None] = []
        self.owns: list[str | None] = []
        #: the positions whose message states a date, ascending
        self.stamps: list[int] = []
        #: the day each stamp falls on (the core's ``recall_stamp_days``), read once per stamp
        self.days: dict[str, tuple[int | None, int, int] | None] = {}
        self.lock = threading.Lock()

    def ready(self, n: int) -> None:
        if len(self.objs) > n + DATE_LOOKBACK:
            self.objs, self.owns = self.objs[:n], self.owns[:n]
            self.stamps = [k for k in self.stamps if k < n]
        if len(self.objs) < n:
            self.objs.extend([None] * (n - len(self.objs)))
            self.owns.extend([None] * (n - len(self.owns)))

    def read(self, history: Sequence[Message], lo: int, hi: int, own: Callable[..., Any]) -> None:
        """Bring positions ``lo..hi`` up to date with ``history``."""
        objs, owns = self.objs, self.owns
        try:
            # identical objects compare equal without a call; an equal copy states the same date
            if objs[lo:hi] == list(history[lo:hi]):
                return
        except Exception:  # noqa: BLE001 - a value whose == raises: read one by one
            pass
        for k in range(lo, hi):
            m = history[k]
            if objs[k] is m:
                continue
            date = own(m)
            had = owns[k]
            objs[k], owns[k] = m, date
            if bool(had) != bool(date):
                if date:
                    bisect.insort(self.stamps, k)
                else:
                    self.stamps.remove(k)

    def days_of(self, stamps: list[str]) -> list[tuple[int | None, int, int] | None]:
        """The day each of ``stamps`` falls on; a stamp not seen before is read by the core."""
        new = [s for s in stamps if s not in self.days]
        if new:
            if len(self.days) + len(new) > MAX_STAMP_DAYS:
                self.days.clear()
            self.days.update(zip(new, _core.recall_stamp_days(new)))
        return [self.days[s] for s in stamps]

    def last_before(self, start: int, lo: int) -> str | None:
        """The date stated last at a position in ``lo..=start``, if any."""
        j = bisect.bisect_right(self.stamps, start) - 1
        if j < 0 or self.stamps[j] < lo:
            return None
        return self.owns[self.stamps[j]]


#: Each index's :class:`_OwnDates`, gone with the index.
_OWN_DATES: weakref.WeakKeyDictionary[_core.RecallIndex, _OwnDates] = weakref.WeakKeyDictionary()


def _own_dates(index: _core.RecallIndex) -> _OwnDates:
    own = _OWN_DATES.get(index)
    if own is None:
        own = _OWN_DATES.setdefault(index, _OwnDates())
    return own


class _Dates:
    """The session date or timestamp in force at a position: its message's own, else the last
    one stated before it (a bounded look back). Each message's own date is remembered from
    call to call in ``known``."""

    def __init__(self, history: Sequence[Message], known: _OwnDates | None = None) -> None:
        self.history = history
        self.known = known if known is not None else _OwnDates()

    @staticmethod
    def own(m: Message) -> str | None:
        content = m.get("content")
        if isinstance(content, str):
            head = content[:12].lstrip().lower()
            if not head.startswith(_STAMP_OPENERS) and not any(key in m for key in STAMP_KEYS):
                return None  # the common case, decided without a regular expression
        if m.get("role") in ("tool", "function"):
            return None  # tool output opens with anything; a session date is not stated there
        return said_at(m, content[:200] if isinstance(content, str) else "")[0]

    def at(self, start: int) -> str | None:
        return self.many([start])[0]

    def many(self, positions: Sequence[int]) -> list[str | None]:
        """The date in force at each of ``positions``: the stretch they span read once."""
        if not positions:
            return []
        lo = max(0, min(positions) - DATE_LOOKBACK + 1)
        known = self.known
        with known.lock:
            known.ready(len(self.history))
            known.read(self.history, lo, max(positions) + 1, self.own)
            return [known.last_before(k, max(0, k - DATE_LOOKBACK + 1)) for k in positions]


def said_on_named_days(
    history: Sequence[Message],
    query: str,
    lo: int,
    hi: int,
    skip: set[int],
    index: _core.RecallIndex,
) -> list[int]:
    """The positions ``lo..hi`` (none of ``skip``) said on a day ``query`` names ("what did we
    talk about on June 28?"), by the session date or timestamp in force there (the core's
    ``recall_on_named_days``), ascending; empty when the query names no day."""
    if not _core.recall_named_days(query):
        return []
    known = _own_dates(index)
    start = max(0, lo - DATE_LOOKBACK + 1)
    with known.lock:
        known.ready(len(history))
        known.read(history, start, hi, _Dates.own)
        at = known.stamps[
            bisect.bisect_left(known.stamps, start) : bisect.bisect_left(known.stamps, hi)
        ]
        owns = [known.owns[k] or "" for k in at]  # a stamp position states one
        distinct = list(dict.fromkeys(owns))
        days = known.days_of(distinct)
    on_day = dict(zip(distinct, _core.recall_on_named_days(query, days)))
    out: list[int] = []
    for j, k in enumerate(at):
        if on_day[owns[j]]:
            end = min(at[j + 1] if j + 1 < len(at) else hi, k + DATE_LOOKBACK, hi)
            out.extend(p for p in range(max(k, lo), end) if p not in skip)
    return out


def _hits(
    history: list[Message],
    query: str,
    lo: int,
    hi: int,
    skip: set[int],
    index: _core.RecallIndex,
) -> list[tuple[int, float]]:
    """The messages of ``lo..hi`` (none of ``skip``) that match ``query``, best first. When it
    names a day, its other words are searched (the day's number and month are not a topic:
    "what did I say on May 7th?" is not about a 7) and what was said that day is raised
    (:func:`_lift_day`)."""
    on_day = said_on_named_days(history, query, lo, hi, skip, index)
    if not on_day:
        return index.search(history, query, lo, hi, skip, MAX_HITS)
    words = _core.recall_without_days(query)
    return _lift_day(history, index.search(history, words, lo, hi, skip, MAX_HITS), on_day)


def _lift_day(
    history: list[Message], hits: list[tuple[int, float]], on_day: list[int]
) -> list[tuple[int, float]]:
    """``hits`` with the positions ``on_day`` raised: each user message of the day (every
    message, on a day without one) scores its own match plus ``DAY_LIFT`` of the best match of
    all. So the day's exchanges that match the words come first, then the best match anywhere
    ("is my flight on May 4th confirmed?" asks about a booking made earlier), then the rest of
    the day, then the other matches; a day whose words match nothing still comes back. An
    exchange is raised once, by its user message, not once per message."""
    users = [k for k in on_day if history[k].get("role") == "user"] or on_day
    scores = dict(hits)
    lift = DAY_LIFT * (max(scores.values(), default=0.0) or 1.0)
    best = sorted(users, key=lambda k: (-scores.get(k, 0.0), k))[:MAX_HITS]
    scores.update((k, scores.get(k, 0.0) + lift) for k in best)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _stamp_text(date: str | None, start: int, total: int, zh: bool) -> str:
    if zh:
        when = f"{date}，" if date else ""
        return f"【回忆：{when}第 {start + 1}/{total} 条消息】"
    when = f"said {date}, " if date else ""
    return f"[Recalled from earlier: {when}message {start + 1} of {total}]"


def _stamped(message: Message, stamp: str) -> dict[str, Any]:
    """A copy of ``message`` whose content opens with ``stamp`` (the input is not changed)."""
    out = dict(message)
    content = message.get("content")
    if isinstance(content, str):
        out["content"] = f"{stamp}\n{content}" if content else stamp
    elif isinstance(content, list):
        out["content"] = [{"type": "text", "text": stamp}, *content]
    else:
        out["content"] = stamp
    return out


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    start: int
    end: int
    score: float
    reason: str
    #: the share of its terms a summary in the prompt already holds (None: not asked)
    held: float | None = None


def _fuse(
    pool: list[_Candidate], history: Sequence[Message], query: str, embedder: Embedder
) -> list[_Candidate]:
    """Reciprocal-rank fusion of the lexical order with the embedder's cosine order."""
    texts = [query] + [_unit_text(history, c.start, c.end) for c in pool]
    vectors = [list(map(float, v)) for v in embedder(texts)]
    if len(vectors) != len(texts):
        raise InvalidArgumentError(
            f"embedder returned {len(vectors)} vectors for {len(texts)} texts"
        )
    q = vectors[0]

    def cosine(v: list[float]) -> float:
        dot = sum(a * b for a, b in zip(q, v))
        norm = math.sqrt(sum(a * a for a in q)) * math.sqrt(sum(b * b for b in v))
        return dot / norm if norm else 0.0

    sims = [cosine(v) for v in vectors[1:]]
    lexical = sorted(range(len(pool)), key=lambda k: -pool[k].score)
    semantic = sorted(range(len(pool)), key=lambda k: -sims[k])
    fused = [0.0] * len(pool)
    for rank, k in enumerate(lexical):
        fused[k] += 1.0 / (RRF_K + rank + 1) if pool[k].score > 0 else 0.0
    for rank, k in enumerate(semantic):
        fused[k] += 1.0 / (RRF_K + rank + 1) if sims[k] > 0 else 0.0
    top = max(fused, default=0.0) or 1.0
    return [
        _Candidate(c.start, c.end, fused[k] / top, f"{c.reason}+embedding {sims[k]:.2f}")
        for k, c in enumerate(pool)
    ]


def _candidates(
    history: list[Message],
    hits: list[tuple[int, float]],
    lo: int,
    hi: int,
    skip: set[int],
) -> list[_Candidate]:
    """The exchanges around the hits that may be recalled (positions ``lo..hi`` not in
    ``skip``), scored by the sum of their messages' scores; with the exchange before a
    follow-up that needs it (the core's unit rules, ``_core.recall_units``)."""
    return [
        _Candidate(
            start,
            end,
            score,
            "matches the question" if lead is None else f"context of message {lead + 1}",
        )
        for start, end, score, lead in _core.recall_units(history, hits, lo, hi, skip)
    ]


# ---------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------


def recall(
    history: Sequence[Message],
    query: str,
    budget: int,
    *,
    counter: Counter | None = None,
    model: str | None = None,
    candidates: Iterable[int] | None = None,
    exclude: Iterable[int] = (),
    exclude_text: str = "",
    index: _core.RecallIndex | None = None,
    embedder: Embedder | None = None,
    min_share: float = MIN_SHARE,
) -> RecallResult:
    """The units of ``history`` that best answer ``query``, within ``budget`` tokens.

    ``candidates`` restricts recall to these positions (a ``range`` is cheapest) and
    ``exclude`` leaves these out (the manager passes what is already in its prompt); a unit is
    recalled only when all its messages are candidates. ``exclude_text``
    (a summary already in the prompt) drops units whose terms it already holds. ``index``
    defaults to the process-wide :func:`shared_index`; ``counter`` / ``model`` count the
    stamped messages exactly (``budget`` bounds ``sum(counter.count_message(m))``).
    ``min_share`` drops units scoring below that share of the best one.
    """
    if not isinstance(query, str):
        raise ArgumentTypeError(f"query must be a str, not {type(query).__name__}")
    budget = count_arg("budget", budget)
    if not 0.0 <= float(min_share) <= 1.0:
        raise InvalidArgumentError(f"min_share must be in [0, 1], got {min_share!r}")
    if embedder is not None and not callable(embedder):
        raise ArgumentTypeError("embedder must be callable (texts -> vectors)")
    c = resolve_counter(counter, model)
    msgs = history if isinstance(history, list) else list(history)
    n = len(msgs)
    if budget == 0 or not msgs or not query.strip():
        return RecallResult()
    lo, hi, skip = _bounds(candidates, exclude, n)
    ix = index if index is not None else shared_index()
    hits = _hits(msgs, query, lo, hi, skip, ix)
    pool = _candidates(msgs, hits, lo, hi, skip)
    if embedder is not None:
        if not pool:  # nothing lexical: let the embedder rank the latest candidates
            recent = [k for k in range(hi - 1, lo - 1, -1) if k not in skip][:MAX_HITS]
            pool = _candidates(msgs, [(k, 0.0) for k in recent], lo, hi, skip)
        if pool:
            pool = _fuse(pool, msgs, query, embedder)
    if exclude_text and pool:
        shares = ix.held_shares(msgs, [(p.start, p.end) for p in pool], exclude_text)
        for p, share in zip(pool, shares):
            p.held = share
    return _select(msgs, pool, budget, c, min_share, dates=_own_dates(ix))


def _bounds(
    candidates: Iterable[int] | None, exclude: Iterable[int], n: int
) -> tuple[int, int, set[int]]:
    """``candidates`` minus ``exclude`` as a span of positions and the positions it skips."""
    skip = {int(k) for k in exclude}
    if candidates is None:
        return 0, n, skip
    if isinstance(candidates, range) and candidates.step == 1:
        return max(0, candidates.start), min(n, max(0, candidates.stop)), skip
    wanted = {int(k) for k in candidates if 0 <= int(k) < n}
    if not wanted:
        return 0, 0, skip
    lo, hi = min(wanted), max(wanted) + 1
    return lo, hi, skip | {k for k in range(lo, hi) if k not in wanted}


def _select(
    msgs: Sequence[Message],
    pool: list[_Candidate],
    budget: int,
    counter: Counter,
    min_share: float,
    total: int | None = None,
    dates: _OwnDates | None = None,
) -> RecallResult:
    """Greedy by score: the best units that fit, deduplicated, then put in conversation order.
    ``total``: the history length the stamps name (default: ``len(msgs)``); ``dates``: the
    messages' own dates known from earlier calls."""
    out = RecallResult()
    best = max((p.score for p in pool), default=0.0)
    if best <= 0:
        return out
    dates_at = _Dates(msgs, dates)
    chosen: list[tuple[_Candidate, list[Any], int, str | None]] = []
    taken: set[int] = set()
    used = 0
    for cand in sorted(pool, key=lambda p: (-p.score, p.start)):
        if cand.score < min_share * best:
            break
        if any(k in taken for k in range(cand.start, cand.end)):
            continue
        if budget - used < MIN_UNIT_TOKENS:
            break
        # the cheap test first: counts are cached, a unit's terms are read from its text
        plain = sum(counter.count_message(m) for m in msgs[cand.start : cand.end])
        if used + plain > budget:
            out.skipped.append({"start": cand.start, "reason": f"{plain} tokens do not fit"})
            continue
        if cand.held is not None and cand.held >= HELD_BY_SUMMARY:
            out.skipped.append({"start": cand.start, "reason": "already in the summary"})
            continue
        # the stamp speaks the unit's language, so a kept block is rebuilt identically
        zh = bool(_CJK_RE.search(content_text(msgs[cand.start].get("content"))[:200]))
        # a unit that cannot take even a stamp without a date is passed over before its date
        # is looked up (a walk back through the session, the costly part of a selection)
        dateless = counter.count(_stamp_text(None, cand.start, total or len(msgs), zh))
        floor = max(0, dateless - STAMP_JOIN_SLACK)
        if used + plain + floor > budget:
            out.skipped.append(
                {"start": cand.start, "reason": f"{plain + floor} tokens do not fit"}
            )
            continue
        date = dates_at.at(cand.start)
        stamp = _stamp_text(date, cand.start, total or len(msgs), zh)
        block: list[Any] = [_stamped(msgs[cand.start], stamp), *msgs[cand.start + 1 : cand.end]]
        tokens = sum(counter.count_message(m) for m in block)
        if used + tokens > budget:
            out.skipped.append({"start": cand.start, "reason": f"{tokens} tokens do not fit"})
            continue
        used += tokens
        taken.update(range(cand.start, cand.end))
        chosen.append((cand, block, tokens, date))
    chosen.sort(key=lambda x: x[0].start)
    for cand, block, tokens, date in chosen:
        out.messages.extend(block)
        out.units.append(RecalledUnit(cand.start, cand.end, cand.score, tokens, date, cand.reason))
    out.tokens = used
    return out


def rebuild(
    history: Sequence[Message],
    spans: Sequence[Sequence[int]],
    budget: int,
    counter: Counter,
    allowed: Callable[[int], bool],
    total: int | None = None,
    index: _core.RecallIndex | None = None,
) -> RecallResult | None:
    """The block for units chosen earlier (``[start, end]`` pairs), stamped the same way
    (``total``: the history length its stamps named, default ``len(history)``); None when one
    of them is no longer a candidate or the block no longer fits. ``index``: the one the units
    were chosen with (the messages' dates it remembers are not read again)."""
    pool: list[_Candidate] = []
    for span in spans:
        if len(span) != 2 or not all(allowed(k) for k in range(int(span[0]), int(span[1]))):
            return None
        pool.append(_Candidate(int(span[0]), int(span[1]), 1.0, "kept from the previous call"))
    if not pool:
        return RecallResult()
    ix = index if index is not None else shared_index()
    out = _select(history, pool, budget, counter, 0.0, total, dates=_own_dates(ix))
    return out if len(out.units) == len(pool) else None


def session_dates(
    history: Sequence[Message], positions: Iterable[int], index: _core.RecallIndex | None = None
) -> list[str | None]:
    """The session date in force at each of ``positions`` (the one a stamp there names);
    ``index``'s memory of the messages' own dates is used and kept."""
    ix = index if index is not None else shared_index()
    return _Dates(history, _own_dates(ix)).many(list(positions))
