"""The manager's recall stage: after the window is fitted, bring back the evicted units the
latest user message asks about, as one block right before that message.

The stage is a function of explicit inputs (:class:`RecallInput`) to explicit outputs
(:class:`RecallOutput`); the manager calls it once per ``prepare`` after the fit. It uses the
room the fit left under the prompt budget, at most ``recall_ratio`` of the prompt budget, so
the rest of the prompt is exactly what it would be without recall: everything before the
block is the same from call to call and the provider's prompt cache keeps hitting. The
recalled set is kept in the state while neither the latest user message nor the window's
start moves, so the calls of one agent turn send the same block (a stable prefix) even though
the pending tool round is part of the query; a kept block's stamps name the history length it
was chosen at, so it is the same text on every call.

A block is chosen only when the latest user message asks something (:func:`asks`: a question,
a request to be told or reminded, a reference to an earlier time) or an agent's tool round is
pending: a remark gets none, since a block for every remark moved on most turns of a chatty
conversation and broke the cached prefix. A request to go over the conversation as a whole
(:func:`asks_recap`, "can you recap what I told you?") mostly names nothing to look for: its
block takes all the room the prompt leaves (after what its own words find, when the prompt
lacks them), filled with the evicted exchanges that add the most the prompt does not already
say, per token: rare terms weigh most, and a term the summary, the window or an exchange chosen
before holds adds nothing (the core's ``RecallIndex.cover``).

It never raises: any failure (a bad embedder, an unreadable message) is logged and reported
in ``stats["recall_error"]``, and the prompt goes out without the block.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from windowfit import _core
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.messages import SYSTEM_ROLES, fingerprint, message_text
from windowfit.recalling import (
    Embedder,
    RecallResult,
    rebuild,
    recall,
    said_on_named_days,
    session_dates,
)

__all__ = [
    "DEFAULT_RECALL_RATIO",
    "apply_recall",
    "asks",
    "asks_recap",
    "recall_after_fit",
    "recall_input",
    "RecallInput",
    "RecallOutput",
    "RecallSettings",
    "recall_settings",
    "recall_stage",
]

logger = logging.getLogger(__name__)

#: The most of the prompt budget a recalled block may take. Measured with
#: benches/eval/eval_recall.py --dialogs 10: on real multi-day chats (MemoryBank's users played
#: one after another, 8k window) 0.15 / 0.2 / 0.25 / 0.35 give per-question recall 0.836 /
#: 0.852 / 0.868 / 0.889 of the whole history's and prefix share 0.897 / 0.886 / 0.877 / 0.866;
#: on the held-out generated dialogs (seeds 10-13) 0.25 gives 0.951 per question against
#: 0.945, prefix share 0.948 against 0.950. 0.25 is the largest share tried that keeps the
#: prefix share near 0.88 on real chats.
DEFAULT_RECALL_RATIO = 0.25
#: The most of the prompt budget what a recap's own words find may take; the rest of its
#: block goes to the evicted exchanges that add the most the prompt does not say. A recap's
#: words are mostly generic ("what did we talk about"), so more room for them only displaced
#: other exchanges: on MemoryBank at a 2k window, with ``recall_ratio`` 0.25,
#: end-of-conversation recall over a plain window went from +0.015 (0.15) to -0.033 when the
#: search took all of the ratio.
RECAP_SEARCH_RATIO = 0.15
#: A block smaller than this cannot hold a useful exchange: not tried.
MIN_ROOM = 48
#: The share of a message's terms already in the prompt above which nothing is recalled,
#: unless an evicted message outscores the prompt's best match ``OUTSCORED`` times.
COVERED = 0.8
#: How much better than anything in the window an evicted message must match a question
#: whose words the prompt already holds for recall to run. Measured with
#: benches/eval/eval_recall.py (annotated answers): on MemoryBank's users joined (8k window)
#: the term share alone gave per-question recall 0.706 of the whole history's at prefix share
#: 0.880; 1.0 / 1.5 / 2.0 give 0.774 / 0.755 / 0.745 at 0.856 / 0.872 / 0.878; on the generated
#: dialogs 0.949 became 0.986 / 0.984 / 0.978 at prefix share 0.940 / 0.948 / 0.948 (0.949).
#: A user's question only: an agent's tool round keeps the term share alone.
OUTSCORED = 1.5
#: How many of the best-scoring messages that comparison reads.
SCORED_HITS = 256
#: How much of the pending tool round joins the latest user message in the query.
PENDING_CHARS = 4000
#: How far back a recap's block looks for evicted exchanges, in messages (a recap reads each
#: once; its block is kept while the window does not move).
RECAP_LOOKBACK = 4000
#: The tokens a block's stamp takes, reserved per session a recap's block spans.
STAMP_TOKENS = 24
#: ``stats["recall_reason"]`` with recall switched off.
RECALL_OFF = "recall is off"


@dataclass(frozen=True)
class RecallSettings:
    enabled: bool
    ratio: float
    embedder: Embedder | None
    index: _core.RecallIndex

    @property
    def active(self) -> bool:
        """Recall runs: switched on, with a share of the budget to fill."""
        return self.enabled and self.ratio > 0


def recall_settings(enabled: Any, ratio: Any, embedder: Any) -> RecallSettings:
    """Validated recall settings (``enabled`` and ``ratio`` already resolved from env vars)."""
    if not isinstance(enabled, bool):
        raise ArgumentTypeError(f"recall must be a bool, not {type(enabled).__name__}")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 0.9:
        raise InvalidArgumentError(f"recall_ratio must be in [0, 0.9], got {ratio!r}")
    if embedder is not None and not callable(embedder):
        raise ArgumentTypeError("recall_embedder must be callable (texts -> vectors)")
    return RecallSettings(enabled, float(ratio), embedder, _core.RecallIndex())


@dataclass
class RecallInput:
    """What the stage reads: the full history, the fitted prompt and where each of its
    messages came from (a history index, -1 for the summary), the prompt's tokens and budget,
    the latest user message's index, the summary text, the window start and the state."""

    history: Sequence[Mapping[str, Any]]
    prompt: list[Any]
    sources: list[int]
    tokens: int
    budget: int
    last_user: int | None
    summary: str
    cut: int
    state: Mapping[str, Any]
    #: the room left beside a window at its high-water mark (what stays free until a cut)
    stable_room: int = 0
    #: the manager's conversation caps (``max_messages``, ``max_turns``): the block counts
    max_messages: int | None = None
    max_turns: int | None = None

    def leaves_out_any(self) -> bool:
        """Whether some history message is not in the prompt, told without building the set
        of them where the prompt has fewer history messages (-1 marks the summary's) than
        the history: a message in it twice only adds to that number."""
        n = len(self.history)
        return len(self.sources) - self.sources.count(-1) < n or len(self.in_prompt) < n

    @cached_property
    def in_prompt(self) -> set[int]:
        """The history messages the prompt holds, built when a block is searched or kept."""
        return {k for k in self.sources if k >= 0}


@dataclass
class RecallOutput:
    """The prompt with the block inserted, its tokens, the stage's stats and its state
    record (to store under ``state["recall"]``, None to drop it)."""

    prompt: list[Any]
    tokens: int
    stats: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] | None = None


def _query(history: Sequence[Mapping[str, Any]], last_user: int) -> str:
    """The latest user message, and for an agent the pending tool round after it."""
    query = message_text(history[last_user])
    if len(history) > last_user + 1 and history[-1].get("role") in ("tool", "function"):
        k = len(history) - 1
        while k > last_user + 1 and history[k].get("role") in ("tool", "function"):
            k -= 1
        pending = "\n".join(message_text(m) for m in history[k:])
        query = f"{query}\n{pending[:PENDING_CHARS]}"
    return query


def _recap(
    history: Sequence[Mapping[str, Any]],
    inp: RecallInput,
    room: int,
    counter: Any,
    named: RecallResult,
    index: _core.RecallIndex,
) -> RecallResult:
    """A recap's block: the units of ``named`` and, in the rest of ``room`` tokens, the evicted
    exchanges that add the most the prompt does not already say, per token (the core's
    ``RecallIndex.cover``: rare terms weigh most, a term the summary, the window or a unit
    chosen before holds adds nothing), in conversation order, stamped per session date."""
    fixed = [[u.start, u.end] for u in named.units]
    taken = {k for a, b in fixed for k in range(a, b)}
    hi = min((k for k in inp.sources if k >= inp.cut), default=len(history))
    lo = max(0, hi - RECAP_LOOKBACK)
    msgs = history if isinstance(history, list) else list(history)
    units = _core.recall_units(
        msgs, [(k, 0.0) for k in range(lo, hi)], lo, hi, inp.in_prompt | taken
    )
    spans = sorted({(a, b) for a, b, _, _ in units})
    each = counter.count_each_message(msgs[lo:hi])
    costs = [sum(each[a - lo : b - lo]) for a, b in spans]
    dates = session_dates(msgs, [a for a, _ in spans], index)
    joins = [
        k > 0 and spans[k - 1][1] == spans[k][0] and dates[k] in (None, dates[k - 1])
        for k in range(len(spans))
    ]
    said = "\n".join(message_text(m) for m in inp.prompt)
    room_left = max(0, room - named.tokens)
    order = index.cover(msgs, spans, costs, joins, said, room_left, STAMP_TOKENS)
    # the stamps may take more than reserved: leave out the last chosen until the block fits
    for keep in range(len(order), -1, -1):
        out = rebuild(
            history,
            sorted(fixed + _stretches(spans, joins, sorted(order[:keep]))),
            room,
            counter,
            lambda k: k not in inp.in_prompt,
            index=index,
        )
        if out is not None:
            return out
    return named


def _stretches(
    spans: list[tuple[int, int]], joins: list[bool], chosen: list[int]
) -> list[list[int]]:
    """The ``chosen`` of ``spans`` (ascending), each joined to the one before it when it
    ``joins`` it and both are chosen: a stretch takes one stamp."""
    out: list[list[int]] = []
    for k in chosen:
        if out and joins[k] and out[-1][1] == spans[k][0]:
            out[-1][1] = spans[k][1]
        else:
            out.append(list(spans[k]))
    return out


def _search(
    settings: RecallSettings,
    counter: Any,
    inp: RecallInput,
    query: str,
    room: int,
) -> RecallResult:
    """The evicted units (none in the prompt) that best match ``query`` within ``room``
    tokens, deduplicated against the summary."""
    return recall(
        inp.history,
        query,
        room,
        counter=counter,
        candidates=range(len(inp.history)),
        exclude=inp.in_prompt,
        exclude_text=inp.summary,
        index=settings.index,
        embedder=settings.embedder,
    )


def asks(text: str) -> bool:
    """Whether a user message asks something: a question, a request to be told or reminded,
    a reference to an earlier time ("recently", "last time"), in English or Chinese (the
    core's rule, ``_core.recall_asks``). A remark gets no block: a block for every remark
    moved on most turns of a chatty conversation and broke the cached prefix there, for turns
    nobody asked about."""
    return _core.recall_asks(text)


def asks_recap(text: str) -> bool:
    """Whether a user message asks to go over the conversation as a whole ("can you recap
    what I told you?", ``_core.recall_recaps``): it names nothing to look for, and everything
    said is what it is about, so its block takes all the room the prompt leaves, filled with
    the evicted exchanges that add the most the prompt does not already say."""
    return _core.recall_recaps(text)


def _covered(query: str, inp: RecallInput, index: _core.RecallIndex, asked: bool) -> bool:
    """Whether the prompt (window and summary) already holds at least ``COVERED`` of the
    query's distinct terms, numbers included: an agent's next observation or a follow-up on
    the current topic, not a question about something that left the window. Recalling for
    those would only move the block every call and break the cached prefix. A user's
    question (``asked``; not an agent's tool round) is not covered when an evicted message
    matches it far better than the prompt's (:func:`_outscored`), nor when it names a day
    whose messages left the window. The index answers for the history messages in the prompt
    (a cut tool output by its whole text); only the prompt's new messages (the summary) are
    read here."""
    before = range(len(inp.prompt) - 1)  # the prompt less its last message, as sent
    positions = [inp.sources[j] for j in before if inp.sources[j] >= 0]
    extra = "\n".join(message_text(inp.prompt[j]) for j in before if inp.sources[j] < 0)
    history = inp.history if isinstance(inp.history, list) else list(inp.history)
    shown = set(positions) | ({inp.last_user} if inp.last_user is not None else set())
    if said_on_named_days(history, query[:PENDING_CHARS], 0, len(history), shown, index):
        return False  # a day it names ("what did we say on June 28?") left the window
    terms, held, number_missing = index.coverage(history, query[:PENDING_CHARS], positions, extra)
    if not terms:
        return True
    if number_missing:
        return False  # a number the prompt lacks ("trip number 2") is what is being asked
    if held < COVERED * terms:
        return False
    # an agent's observation names what it works on, all of it in the window: scored, old
    # tool output outscored it on many calls and the block moved (agent runs: 32% -> 34% of
    # the whole history's tokens sent, prefix reuse 91% -> 89%), for no gain measured
    return not (asked and _outscored(query, history, inp.last_user, index, positions))


def _outscored(
    query: str,
    history: list[Any],
    last_user: int | None,
    index: _core.RecallIndex,
    positions: list[int],
) -> bool:
    """Whether an evicted message matches ``query`` better (``OUTSCORED`` times the score)
    than any history message in the prompt. The query's words may all be in the window
    ("what music do I like?" while music is being discussed) and still ask about something
    said long ago: the term count cannot tell, the scores can."""
    shown = set(positions)
    skip = set() if last_user is None else {last_user}
    hits = index.search(history, query[:PENDING_CHARS], 0, len(history), skip, SCORED_HITS)
    best_shown = max((s for k, s in hits if k in shown), default=0.0)
    best_gone = max((s for k, s in hits if k not in shown), default=0.0)
    return best_gone > OUTSCORED * best_shown


def _within_caps(result: RecallResult, inp: RecallInput) -> RecallResult:
    """The best-scoring units of ``result`` that keep the prompt within the conversation caps:
    a recalled message counts against ``max_messages`` like any other, a recalled user
    message against ``max_turns``."""
    if inp.max_messages is None and inp.max_turns is None or not result.units:
        return result
    convo = [m for m in inp.prompt if m.get("role") not in SYSTEM_ROLES]
    rooms = [
        inp.max_messages - len(convo) if inp.max_messages is not None else len(inp.history),
        inp.max_turns - sum(m.get("role") == "user" for m in convo)
        if inp.max_turns is not None
        else len(inp.history),
    ]
    blocks, at = [], 0
    for unit in result.units:  # conversation order; each unit's messages follow one another
        blocks.append((unit, result.messages[at : at + unit.end - unit.start]))
        at += unit.end - unit.start
    kept = []
    for unit, block in sorted(blocks, key=lambda b: -b[0].score):
        need = [len(block), sum(m.get("role") == "user" for m in block)]
        if all(n <= r for n, r in zip(need, rooms)):
            rooms = [r - n for n, r in zip(need, rooms)]
            kept.append((unit, block))
    if len(kept) == len(blocks):
        return result
    kept.sort(key=lambda b: b[0].start)
    out = RecallResult(skipped=result.skipped)
    for unit, block in kept:
        out.units.append(unit)
        out.messages.extend(block)
    out.tokens = sum(u.tokens for u in out.units)
    dropped = [{"start": u.start, "reason": "over max_messages/max_turns"} for u, _ in blocks]
    out.skipped += [d for d in dropped if all(d["start"] != u.start for u in out.units)]
    return out


def _none(inp: RecallInput, reason: str, **extra: Any) -> RecallOutput:
    return _unchanged(inp.prompt, inp.tokens, reason, **extra)


def _unchanged(prompt: list[Any], tokens: int, reason: str, **extra: Any) -> RecallOutput:
    stats = {"recalled": [], "tokens_recall": 0, "recall_reason": reason, **extra}
    return RecallOutput(prompt, tokens, stats)


def recall_stage(settings: RecallSettings, counter: Any, inp: RecallInput) -> RecallOutput:
    """The prompt with the evicted units the latest user message asks about (never raises)."""
    try:
        return _recall_stage(settings, counter, inp)
    except Exception as exc:  # recall is an extra: the prompt must go out regardless
        logger.warning("recall skipped: %s: %s", type(exc).__name__, exc)
        return _none(inp, "error", recall_error=f"{type(exc).__name__}: {exc}")


def _recall_stage(settings: RecallSettings, counter: Any, inp: RecallInput) -> RecallOutput:
    if not settings.active:
        return _none(inp, RECALL_OFF)
    history, last_user = inp.history, inp.last_user
    if last_user is None:
        return _none(inp, "no user message to answer")
    try:
        at = inp.sources.index(last_user)
    except ValueError:
        return _none(inp, "the latest user message is not in the prompt")
    n = len(history)
    if not inp.leaves_out_any():
        return _none(inp, "nothing has left the window")

    room = min(int(settings.ratio * inp.budget), inp.budget - inp.tokens)
    if room < MIN_ROOM:
        return _none(inp, f"no room under the budget ({max(room, 0)} tokens)")
    key = [last_user, inp.cut, fingerprint(history[last_user]), fingerprint(inp.summary)]
    record = inp.state.get("recall")
    result: RecallResult | None = None
    reused = False
    # the history length the block's stamps name: the one it was chosen at while it is kept
    # (stamped with the history's length now, a kept block changed on every call of a turn)
    stamped = n
    recap = False
    if isinstance(record, Mapping) and record.get("key") == key:
        total, recap = record.get("total"), record.get("recap") is True
        kept = total if isinstance(total, int) and not isinstance(total, bool) else n
        result = rebuild(
            history,
            record.get("units") or [],
            inp.budget - inp.tokens if recap else room,
            counter,
            lambda k: k not in inp.in_prompt,
            kept,
            index=settings.index,
        )
        reused = result is not None
        if result is None:
            # the window grew into the block's room: choose again within the room the window
            # leaves until its next cut, so the block stays put from here on
            room = min(room, inp.stable_room)
            recap = False
        else:
            stamped = kept
    query = _query(history, last_user) if result is None else ""
    # a query other than the user's text carries a pending tool round: an agent's turn asks
    plain = result is None and query == message_text(history[last_user])
    asks_something = result is not None or not plain or asks(query)
    covered = False
    if result is None and not asks_something:
        result = RecallResult()
    if result is None:
        covered = _covered(query, inp, settings.index, plain)
        # a recap names nothing to look for ("recap what I told you"): the evicted exchanges
        # that add the most in all the room left, after what its own words find ("what did we
        # say about the Lisbon trip?") when the prompt lacks it, in at most RECAP_SEARCH_RATIO;
        # one that names a day ("what did we talk about on June 28?") asks about that day only
        recap = plain and asks_recap(query) and not _core.recall_named_days(query)
        if recap:
            room = min(room, int(RECAP_SEARCH_RATIO * inp.budget))
        found = RecallResult() if covered else _search(settings, counter, inp, query, room)
        result = (
            _recap(history, inp, inp.budget - inp.tokens, counter, found, settings.index)
            if recap
            else found
        )
        covered = covered and not recap
    result = _within_caps(result, inp)
    new_record = {
        "key": key,
        "units": [[u.start, u.end] for u in result.units],
        "total": stamped,
        "recap": recap and bool(result.units),
    }
    if not result.messages:
        out = _none(
            inp,
            "the prompt already holds what the message is about"
            if covered
            else "the message asks nothing"
            if not asks_something
            else "nothing evicted matches the question",
        )
        out.record = new_record
        return out
    prompt = [*inp.prompt[:at], *result.messages, *inp.prompt[at:]]
    # where this prompt stops matching one without the block (for the prefix statistics)
    # (the prompt's tokens less the reply priming and what follows the block: the window
    # before it is thousands of messages, the part after it one or a few)
    after = sum(counter.count_message(m) for m in inp.prompt[at:])
    new_record["limit"] = inp.tokens - int(getattr(counter, "reply_priming", 0)) - after
    new_record["reused"] = reused
    stats = {
        "recalled": [u.as_dict() for u in result.units],
        "tokens_recall": result.tokens,
        "recall_reason": "kept from the previous call" if reused else "matches the question",
        "recall_skipped": result.skipped[:8],
    }
    return RecallOutput(prompt, inp.tokens + result.tokens, stats, new_record)


def recall_after_fit(
    settings: RecallSettings,
    counter: Any,
    plan: Any,
    fitted: Any,
    prompt: list[Any],
    summary: str,
    caps: tuple[int | None, int | None] = (None, None),
) -> RecallOutput:
    """The stage on the manager's final fit, ``prompt`` the manager's copy of its messages.
    Off, the input is not built: its sources are a pass over the whole prompt."""
    if not settings.active:
        return _unchanged(prompt, int(fitted.result.tokens), RECALL_OFF)
    return recall_stage(settings, counter, recall_input(plan, fitted, prompt, summary, caps))


def recall_input(
    plan: Any,
    fitted: Any,
    prompt: list[Any],
    summary: str,
    caps: tuple[int | None, int | None] = (None, None),
) -> RecallInput:
    """The stage's input from the manager's plan and final fit, ``prompt`` the manager's copy
    of the fit's messages (``caps``: the manager's ``max_messages`` and ``max_turns``)."""
    view, result = fitted.view, fitted.result
    return RecallInput(
        history=plan.msgs,
        prompt=prompt,  # read only: the stage inserts its block into a new list
        sources=[view.source[k] for k in result.kept],
        tokens=int(result.tokens),
        budget=plan.budget.prompt_budget,
        last_user=plan.last_user,
        summary=summary if view.summary_idx else "",
        cut=plan.cut,
        state=plan.state,
        stable_room=plan.budget.prompt_budget
        - plan.budget.system_tokens
        - plan.budget.high_water
        - int(plan.stats.get("reply_priming", 3)),
        max_messages=caps[0],
        max_turns=caps[1],
    )


def apply_recall(out: RecallOutput, stats: dict[str, Any], state: dict[str, Any]) -> list[Any]:
    """Record the stage's outcome in the call's stats and state; the prompt to send."""
    added = out.tokens - int(stats.get("tokens", out.tokens))
    if added:
        stats["tokens"] = out.tokens
        stats["tokens_total"] = out.tokens + int(stats.get("tokens_tools", 0))
        limit = int(stats["context_window"]) - int(stats["output_reserve"])
        stats["usage_ratio"] = round(stats["tokens_total"] / limit, 4) if limit else 0.0
        stats["tokens_saved"] = max(0, int(stats["tokens_full"]) - stats["tokens_total"])
        stats["messages_sent"] = len(out.prompt)
    stats.update(out.stats)
    _cap_prefix(stats, state.get("recall"), out.record)
    if out.record is None:
        state.pop("recall", None)
    else:
        state["recall"] = out.record
    return out.prompt


def _cap_prefix(stats: dict[str, Any], before: Any, now: Mapping[str, Any] | None) -> None:
    """The shared-prefix statistics, which the fit computed without the blocks: a prompt
    matches the previous one at most up to where either call placed a block, unless the
    same block stayed in the same place."""
    if "prefix_tokens_shared" not in stats:
        return
    caps = []
    if isinstance(now, Mapping) and "limit" in now and not now.get("reused"):
        caps.append(int(now["limit"]))
    if (
        isinstance(before, Mapping)
        and "limit" in before
        and not (isinstance(now, Mapping) and now.get("reused"))
    ):
        caps.append(int(before["limit"]))
    if caps and min(caps) < int(stats["prefix_tokens_shared"]):
        stats["prefix_tokens_shared"] = min(caps)
        tokens = max(1, int(stats.get("tokens", 1)))
        stats["prefix_shared_ratio"] = round(min(caps) / tokens, 4)
