"""The manager's state: the JSON carried from one call to the next, loaded and checked against
the history it comes with, and the incremental scan of that history which it makes cheap.

State (``Prepared.state``): ``summary``, ``summary_tokens``, ``summarized_until`` (messages[:i]
are folded in), ``summarized_messages``, ``evicted_tokens``, ``cut`` (where the verbatim window
starts), ``language``, ``created_at`` / ``updated_at``, ``turn``, ``summaries``, ``failures`` /
``retry_turn`` / ``last_error`` (backoff), plus bookkeeping that makes the next call
incremental (``scan``, ``cut_tokens``, ``mask_until``, ``head_user``, ``prev``).

A state comes back from a store or a caller, so :class:`StateLoader` is the one place that
trusts nothing in it. The summary fields are checked for type and range: a broken one, or a
history that no longer starts with the messages the summary was made from, resets the summary
(a fresh state). The bookkeeping is checked against the history: a carried scan must match its
own check digest and the roles it names, the cut must be one a plan could have made, the mask
boundary must leave the newest tool outputs whole, ``prev`` must have its shape. A broken one
is rebuilt or dropped alone. Every reset is named in ``stats["state_reset_reason"]``; none
changes what is sent except to send what a sound state sends.
"""

from __future__ import annotations

import datetime as _dt
import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from windowfit.context.budget import Budget
from windowfit.context.config import Settings
from windowfit.context.plan import Message
from windowfit.errors import ArgumentTypeError, MessageTypeError
from windowfit.messages import SYSTEM_ROLES, copy_json, fingerprint

__all__ = [
    "MAX_BACKOFF_TURNS",
    "STATE_VERSION",
    "Loaded",
    "Scan",
    "StateLoader",
    "fresh_state",
    "now",
]

logger = logging.getLogger(__name__)

STATE_VERSION = 1
#: The longest pause, in turns, after failed summaries before the summarizer is tried again.
MAX_BACKOFF_TURNS = 32


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Scan(TypedDict):
    """What one pass over the history found, carried so the next call scans only new messages."""

    n: int  # messages scanned
    counter: str  # the counter that measured ``tokens``
    tokens: int  # raw tokens of the messages, reply priming excluded
    system: list[int]  # indices of the system / developer messages
    last_user: int | None  # index of the latest user message
    anchor: str | None  # fingerprint of the last scanned message
    check: int  # checksum of the fields above: a scan edited after it was saved is rescanned


@dataclass
class Loaded:
    """A state checked against this call's history, and the history measured."""

    state: dict[str, Any]
    scan: Scan
    reasons: list[str]  # why loaded fields were reset (empty: the state was used whole)
    budget: Budget
    system_tokens: int  # all system messages, which are always sent
    tools_tokens: int
    tools_fp: str  # the tool schemas' fingerprint ("" without tools)
    base: int  # length of the leading system block: no window starts inside it
    summarized: int  # max(summarized_until, base): where unsummarized history starts
    cut: int  # where the verbatim window starts
    cut_tokens: int  # raw tokens of messages[:cut]
    cut_check: int | None  # the state's check of cut and cut_tokens, where it vouched for them


def fresh_state() -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
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
        "next_anchor": None,
        "head_user": None,
        "cut_tokens": 0,
        "scan": None,
        "prev": None,
    }


class StateLoader:
    """Loads the caller's state, checks it against the history, and scans the history."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.counter = settings.counter
        self.priming = settings.priming
        self.counter_id = settings.counter_id

    def load(
        self,
        msgs: list[Message],
        state: Mapping[str, Any] | None,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> Loaded:
        reasons: list[str] = []
        st = _parsed(state, reasons)
        st["turn"] += 1
        s = st["summarized_until"]
        if s and (s > len(msgs) or st["anchor"] != fingerprint(msgs[s - 1])):
            self._match_history(msgs, st, reasons)
        scan, incremental = self._scan(msgs, st, reasons)
        st["scan"] = scan
        c = self.counter
        tools_tokens = c.count_tools(tools) if tools else 0
        system_tokens = sum(c.count_message(msgs[i]) for i in scan["system"])
        budget = self.settings.budget(system_tokens, tools_tokens)
        system = scan["system"]
        base = 0  # the leading system block: no window starts inside it
        while base < len(system) and system[base] == base:
            base += 1
        summarized = max(st["summarized_until"], base)
        # Raw tokens before the recorded cut, carried in the state while the history only
        # grows, so the window's size is known without another pass over it; checked once
        # here, as its cut_check vouches for them or not.
        recorded, carried = st["cut"], self._vouched_cut_tokens(msgs, st, scan)
        cut = recorded
        if cut <= summarized:  # no pending gap: nothing to check
            cut = summarized
        else:
            cut = self._checked_cut(msgs, st, summarized, budget, scan, carried, reasons)
        # A cut planned again above, or a scan started afresh, leaves tokens of another cut.
        checked: int | None = None  # the state's check, kept on record while it holds
        if carried is not None and incremental and cut == recorded:
            cut_tokens, checked = carried, st["cut_check"]
        else:
            cut_tokens = c.count_messages(msgs[:cut]) - self.priming if cut else 0
        # the rest of the bookkeeping, each checked only when it is set
        if st.get("mask_until") is not None:
            self._check_mask(msgs, st, reasons)
        if st["head_user"] is not None:
            _check_head_user(msgs, st, cut, scan["last_user"], reasons)
        if st["retry_turn"] > st["turn"] + MAX_BACKOFF_TURNS:
            _reset_backoff(st, reasons)
        if st["prev"] is not None and not _prev_ok(st["prev"]):
            reasons.append(
                "state field 'prev' is malformed: the prefix shared with it is not measured"
            )
            st["prev"] = None
        return Loaded(
            state=st,
            scan=scan,
            reasons=reasons,
            budget=budget,
            system_tokens=system_tokens,
            tools_tokens=tools_tokens,
            tools_fp=fingerprint(tools) if tools else "",
            base=base,
            summarized=summarized,
            cut=cut,
            cut_tokens=cut_tokens,
            cut_check=checked,
        )

    # -- the summary against the history ----------------------------------------------------------

    def _match_history(self, msgs: list[Message], st: dict[str, Any], reasons: list[str]) -> None:
        """A summary is valid only over the history prefix it was made from: found again
        after the caller dropped some of it, else the summary state starts fresh."""
        n = len(msgs)
        s = int(st["summarized_until"])
        why = None
        if s > n:
            why = f"summarized_until={s} is past the end of a history of {n} messages"
        elif s > 0 and st.get("anchor") != fingerprint(msgs[s - 1]):
            why = f"messages[{s - 1}] (the last summarized message) has changed"
        if why is None or _rebase(msgs, st):
            return
        logger.warning(
            "the history no longer matches the context state (%s): starting a fresh summary", why
        )
        turn = st["turn"]
        st.clear()
        st.update(fresh_state(), turn=turn)
        reasons.append(why)

    # -- the scan ---------------------------------------------------------------------------------

    def _scan(
        self, msgs: list[Message], st: dict[str, Any], reasons: list[str]
    ) -> tuple[Scan, bool]:
        """System indices, latest user and raw token total, incremental over new messages."""
        n = len(msgs)
        carried = self._carried(msgs, st.get("scan"), reasons)
        system: list[int] = []
        last_user: int | None = None
        start = tokens = 0
        if carried is not None:
            start, system, last_user, tokens, _ = carried
        new = msgs[start:]
        try:
            roles = [m.get("role") for m in new]
        except AttributeError:
            bad = next(i for i, m in enumerate(new) if not isinstance(m, Mapping))
            raise MessageTypeError(
                f"messages[{start + bad}] must be a dict, not {type(new[bad]).__name__}"
            ) from None
        for k, role in enumerate(roles):
            if role in SYSTEM_ROLES:
                system.append(start + k)
            elif role == "user":
                last_user = start + k
        if not new and carried is not None:
            # nothing new since the carried scan (checked above): it stands as it is
            return carried[4], True
        if new:
            tokens += self.counter.count_messages(new) - self.priming
        anchor = fingerprint(msgs[n - 1]) if n else None
        scan: Scan = {
            "n": n,
            "counter": self.counter_id,
            "tokens": tokens,
            "system": system,
            "last_user": last_user,
            "anchor": anchor,
            "check": _scan_check(n, self.counter_id, tokens, system, last_user, anchor),
        }
        return scan, start > 0

    def _carried(
        self, msgs: list[Message], scan: Any, reasons: list[str]
    ) -> tuple[int, list[int], int | None, int, Scan] | None:
        """Where a carried scan lets this one start, what it found, and the scan itself;
        None: scan it all.

        A scan of another counter or of a history that changed since is simply not reused; a
        scan that is malformed, edited since it was saved, or names messages of the wrong
        role is not reused either, and that is reported."""
        if not isinstance(scan, Mapping) or scan.get("counter") != self.counter_id:
            return None
        m = _int_or(scan.get("n"), 0)
        if not 0 < m <= len(msgs) or scan.get("anchor") != fingerprint(msgs[m - 1]):
            return None
        problem = _scan_problem(scan, m, msgs)
        if problem is not None:
            reasons.append(f"state field 'scan' {problem}: the history is scanned again")
            return None
        return m, list(scan["system"]), scan["last_user"], scan["tokens"], cast(Scan, scan)

    # -- positions in the history -----------------------------------------------------------------

    def _checked_cut(
        self,
        msgs: list[Message],
        st: dict[str, Any],
        summarized: int,
        budget: Budget,
        scan: Scan,
        carried: int | None,
        reasons: list[str],
    ) -> int:
        """The carried cut when a plan could have made it, else ``summarized`` (re-planned).

        A cut leaves ``messages[summarized:cut]`` unsent until a summary takes them in, so it
        is only ever made under pressure: the window from the unit before it was over the
        low-water mark (or over ``max_messages`` / ``max_turns``). The window only grows after
        that, so a cut that does not meet this was not made by a plan."""
        n, cut = len(msgs), st["cut"]
        if cut > n:
            problem = f"({cut}) is past the end of a history of {n} messages"
        elif self._cut_made_under_pressure(msgs, cut, summarized, budget, scan, carried):
            return int(cut)
        else:
            problem = f"({cut}) leaves messages out of a window that has room for them"
        reasons.append(f"state field 'cut' {problem}: the window is planned again")
        st["cut"], st["cut_tokens"], st["head_user"] = summarized, None, None
        return summarized

    def _cut_made_under_pressure(
        self,
        msgs: list[Message],
        cut: int,
        summarized: int,
        budget: Budget,
        scan: Scan,
        carried: int | None,
    ) -> bool:
        s = self.settings
        u = cut - 1
        while u > summarized and msgs[u].get("role") == "tool":
            u -= 1  # a tool round is one unit with its call
        last_user = scan["last_user"]
        if last_user is not None and u < last_user:
            while u > summarized and msgs[u].get("role") != "user":
                u -= 1  # before the latest user message a window grows by whole rounds
        if s.max_messages is not None and len(msgs) - u > s.max_messages:
            return True
        if s.max_turns is not None:
            turns = sum(1 for m in msgs[u:] if m.get("role") == "user")
            if turns > s.max_turns:
                return True
        # raw tokens: a window with tool outputs cut or masked is never larger
        return bool(self._tokens_from(msgs, u, cut, scan, carried) > budget.low_water)

    def _tokens_from(
        self, msgs: list[Message], u: int, cut: int, scan: Scan, carried: int | None
    ) -> int:
        """Raw tokens of ``msgs[u:]`` (``u <= cut``): the scan's total less the ``carried``
        tokens before the cut (where the state's ``cut_check`` vouched for them), else
        counted: a steady call does not count its window again to check its own cut."""
        if carried is not None:
            between = self.counter.count_messages(msgs[u:cut]) - self.priming if u < cut else 0
            return scan["tokens"] - carried + between
        return self.counter.count_messages(msgs[u:]) - self.priming

    def _vouched_cut_tokens(
        self, msgs: list[Message], st: dict[str, Any], scan: Scan
    ) -> int | None:
        """The carried ``cut_tokens`` when the state's ``cut_check`` vouches for them and its
        ``cut`` (as recorded for this history and counter), else None."""
        cut, carried = st.get("cut"), st.get("cut_tokens")
        if (
            type(cut) is int
            and type(carried) is int
            and 0 <= carried <= scan["tokens"]
            and st.get("cut_check") is not None
            and st.get("cut_check") == cut_check(cut, carried, self.counter_id, msgs)
        ):
            return carried
        return None

    def _check_mask(self, msgs: list[Message], st: dict[str, Any], reasons: list[str]) -> None:
        """The mask boundary never reaches the newest tool outputs (the agent acts on them)."""
        until = st["mask_until"]
        s = self.settings
        keep = max(s.mask_keep, s.keep_recent_tool_outputs)
        if _int_or(until, -1) < 0:
            problem = f"must be a count, not {until!r}"
        elif until == 0 or s.mask_keep <= 0:
            return
        else:
            found = 0  # tool results from the boundary on, counted up to ``keep``
            for i in range(until, len(msgs)):
                if msgs[i].get("role") == "tool":
                    found += 1
                    if found >= keep:
                        return
            problem = f"({until}) would mask one of the newest {keep} tool outputs"
        reasons.append(
            f"state field 'mask_until' {problem}: nothing is masked until it moves again"
        )
        st.pop("mask_until", None)


# -- parsing the JSON ---------------------------------------------------------------------------

_COUNTS = (
    "summary_tokens",
    "summarized_until",
    "summarized_messages",
    "evicted_tokens",
    "cut",
    "turn",
    "summaries",
    "failures",
    "retry_turn",
    "cut_tokens",
)


def _parsed(state: Mapping[str, Any] | None, reasons: list[str]) -> dict[str, Any]:
    """The caller's state copied (never mutated), or a fresh one when it cannot be used."""
    fresh = fresh_state()
    if state is None:
        return fresh
    if not isinstance(state, Mapping):
        raise ArgumentTypeError(
            f"state must be the dict returned in Prepared.state, not {type(state).__name__}"
        )
    if state.get("version") != STATE_VERSION:
        logger.warning("ignoring a context state of version %r", state.get("version"))
        reasons.append(f"state version {state.get('version')!r}")
        return fresh
    out = copy_json(dict(state))
    for key, value in fresh.items():
        out.setdefault(key, value)
    problem = _invalid(out)
    if problem is not None:
        logger.warning("ignoring a malformed context state: %s", problem)
        reasons.append(problem)
        return {**fresh, "turn": _int_or(out.get("turn"), 0)}
    return out


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _invalid(st: dict[str, Any]) -> str | None:
    """What makes a loaded state's summary unusable, checked field by field (None: usable)."""
    for key in _COUNTS:
        value = st.get(key)
        if isinstance(value, float) and value.is_integer():
            value = st[key] = int(value)  # JSON from other writers may carry 3.0
        if isinstance(value, bool) or not isinstance(value, int):
            return f"state field {key!r} must be an int, not {type(value).__name__}"
        if value < 0:
            return f"state field {key!r} must be >= 0, got {value}"
    if not isinstance(st.get("summary"), str):
        if st.get("summary") is not None:
            return f"state field 'summary' must be a str, not {type(st['summary']).__name__}"
        st["summary"] = ""
    if st["summarized_until"] > 0 and not isinstance(st.get("anchor"), str):
        return "state field 'anchor' is missing while summarized_until > 0"
    if st["summary"] == "" and st["summary_tokens"] > 0:
        return "state field 'summary_tokens' > 0 with an empty summary"
    turns = st.get("summary_turns")
    if not isinstance(turns, list) or not all(_int_or(t, -1) >= 0 for t in turns):
        return "state field 'summary_turns' must be a list of turn numbers"
    for key in ("language", "mask_language", "last_error", "created_at", "updated_at", "head_user"):
        value = st.get(key)
        if value is not None and not isinstance(value, (str, int)):
            return f"state field {key!r} has type {type(value).__name__}"
    for key in ("anchor", "next_anchor"):  # fingerprints: a NaN here made the state non-JSON
        value = st.get(key)
        if value is not None and not isinstance(value, str):
            return f"state field {key!r} must be a fingerprint str or None, not {value!r}"
    return None


def _rebase(msgs: list[Message], st: dict[str, Any]) -> bool:
    """Find the summarized prefix again after the caller dropped some of it.

    The state is anchored on content: the last summarized message and the first one after
    it. A caller that keeps only part of the history (dropping messages the summary already
    holds) has them at smaller positions; the positions are shifted and the summary kept.
    False when neither fingerprint is found where it could be: a real mismatch.
    """
    s = int(st["summarized_until"])
    anchor, after = st.get("anchor"), st.get("next_anchor")
    n = len(msgs)
    new_s = None
    for j in range(min(s, n) - 1, -1, -1):
        fp = fingerprint(msgs[j])
        if fp == anchor and (after is None or j + 1 >= n or fingerprint(msgs[j + 1]) == after):
            new_s = j + 1
            break
        if after is not None and fp == after:
            new_s = j  # the summarized messages are all gone: msgs[j] is the first after
            break
    if new_s is None:
        return False
    shift = s - new_s
    st["summarized_until"] = new_s
    st["cut"] = max(int(st["cut"]) - shift, new_s)
    mask = st.get("mask_until")
    if isinstance(mask, int) and not isinstance(mask, bool) and mask > 0:
        st["mask_until"] = max(mask - shift, 0)  # positions follow the content, as the cut's
    st.update(
        head_user=None,
        scan=None,
        cut_tokens=0,
        anchor=fingerprint(msgs[new_s - 1]) if new_s else None,
    )
    if new_s == 0:
        st["anchor"] = None
    logger.info("the caller dropped %d summarized messages: the summary is kept", shift)
    return True


def cut_check(cut: int, cut_tokens: int, counter: str, msgs: list[Message]) -> int:
    """The integrity check of a recorded cut and its raw tokens before it (as the scan's: a CRC
    against edits, with the last message before the cut, as an anchor is)."""
    anchor = fingerprint(msgs[cut - 1]) if 0 < cut <= len(msgs) else None
    return zlib.crc32(f"{cut}|{cut_tokens}|{counter}|{anchor}".encode(errors="surrogatepass"))


def _scan_check(
    n: int, counter: str, tokens: int, system: list[int], last_user: int | None, anchor: str | None
) -> int:
    # an integrity check against edits, not a secret: a CRC of the fields is enough
    return zlib.crc32(
        f"{n}|{counter}|{tokens}|{system}|{last_user}|{anchor}".encode(errors="surrogatepass")
    )


def _scan_problem(scan: Mapping[str, Any], m: int, msgs: list[Message]) -> str | None:
    """Why a carried scan of ``msgs[:m]`` cannot be continued from (None: it can)."""
    system, last, tokens = scan.get("system"), scan.get("last_user"), scan.get("tokens")
    if type(system) is not list or type(tokens) is not int or tokens < 0:
        return "is malformed"
    if last is not None and not (type(last) is int and 0 <= last < m):
        return "is malformed"
    for i in system:
        if type(i) is not int or not 0 <= i < m:
            return "is malformed"
    # A scan without a check (saved before scans carried one, or its check removed) is not
    # trusted either: with the check dropped, an edited token total was carried on.
    check = scan.get("check")
    if check is None:
        return "carries no check"
    if check != _scan_check(m, str(scan["counter"]), tokens, system, last, scan.get("anchor")):
        return "was changed after it was saved"
    if last is not None and msgs[last].get("role") != "user":
        return "names messages of another role"
    for i in system:
        if msgs[i].get("role") not in SYSTEM_ROLES:
            return "names messages of another role"
    return None


# -- what the stats compare with ----------------------------------------------------------------


def _check_head_user(
    msgs: list[Message], st: dict[str, Any], cut: int, last_user: int | None, reasons: list[str]
) -> None:
    """The user message held next to the summary is the last one before the cut: it was the
    latest when the cut was made, and the history only grows after the cut since."""
    held = st["head_user"]
    if last_user is not None and last_user < cut:
        ok = held == last_user
    else:
        before = cut - 1
        while before >= 0 and msgs[before].get("role") != "user":
            before -= 1
        ok = held == before
    if not ok:
        reasons.append(
            f"state field 'head_user' ({held!r}) is not the last user message before the cut"
        )
        st["head_user"] = None


def _reset_backoff(st: dict[str, Any], reasons: list[str]) -> None:
    """A summarizer's backoff never reaches further than its longest pause."""
    reasons.append(
        f"state field 'retry_turn' ({st['retry_turn']}) is past the longest backoff "
        f"({MAX_BACKOFF_TURNS} turns): the summarizer may run again"
    )
    st["retry_turn"] = 0


def _prev_ok(prev: Any) -> bool:
    if type(prev) is not dict:
        return False
    head = prev.get("head")
    if type(head) is not list or type(prev.get("tools")) is not str:
        return False
    for h in head:
        if type(h) is not str:
            return False
    start, end = prev.get("start"), prev.get("end")
    return type(start) is int and start >= -1 and type(end) is int and end >= 0
