"""The manager's state: the JSON carried from one call to the next, loaded and validated, and
the incremental scan of the history that it makes cheap.

State (``Prepared.state``): ``summary``, ``summary_tokens``, ``summarized_until`` (messages[:i]
are folded in), ``summarized_messages``, ``evicted_tokens``, ``cut`` (where the verbatim window
starts), ``language``, ``created_at`` / ``updated_at``, ``turn``, ``summaries``, ``failures`` /
``retry_turn`` / ``last_error`` (backoff), plus bookkeeping that makes the next call
incremental. A state whose history no longer matches (another conversation, rewritten
messages) is detected and replaced by a fresh one (``stats["state_reset"]``).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Mapping
from typing import Any

from windowfit.context.config import Settings
from windowfit.messages import SYSTEM_ROLES, copy_json, fingerprint

__all__ = ["STATE_VERSION", "StateKeeper", "now"]

logger = logging.getLogger(__name__)

STATE_VERSION = 1


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class StateKeeper(Settings):
    """Loads the caller's state and scans the history it describes."""

    def _load_state(self, state: Mapping[str, Any] | None) -> dict[str, Any]:
        fresh: dict[str, Any] = {
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
        if state is None:
            return fresh
        if not isinstance(state, Mapping):
            raise TypeError(
                f"state must be the dict returned in Prepared.state, not {type(state).__name__}"
            )
        if state.get("version") != STATE_VERSION:
            logger.warning("ignoring a context state of version %r", state.get("version"))
            return {**fresh, "reset_reason": f"state version {state.get('version')!r}"}
        out = copy_json(dict(state))  # never mutate the caller's state
        for key, value in fresh.items():
            out.setdefault(key, value)
        problem = _invalid(out)
        if problem is not None:
            logger.warning("ignoring a malformed context state: %s", problem)
            return {**fresh, "turn": _int_or(out.get("turn"), 0), "reset_reason": problem}
        return out

    @staticmethod
    def _rebase(msgs: list[Any], st: dict[str, Any]) -> bool:
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

    def _scan(self, msgs: list[Any], st: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """System indices, latest user and raw token total, incremental over new messages.

        Returns the scan and why the summary state had to be reset (None when it holds): a
        malformed state, or a history that no longer starts with the messages it summarized.
        """
        n = len(msgs)
        reset: str | None = st.pop("reset_reason", None)
        # A summary is valid only over the same history prefix it was made from.
        s = int(st.get("summarized_until", 0))
        why = None
        if s > n:
            why = f"summarized_until={s} is past the end of a history of {n} messages"
        elif s > 0 and st.get("anchor") != fingerprint(msgs[s - 1]):
            why = f"messages[{s - 1}] (the last summarized message) has changed"
        if why is not None and self._rebase(msgs, st):
            why = None
        if why is not None:
            logger.warning(
                "the history no longer matches the context state (%s): starting a fresh summary",
                why,
            )
            turn = st["turn"]
            st.clear()
            st.update(self._load_state(None), turn=turn)
            reset = why
        # Counting is incremental when the scanned prefix is unchanged (an append-only history).
        scan = st.get("scan")
        start = 0
        if isinstance(scan, Mapping) and scan.get("counter") == self._counter_id:
            m = _int_or(scan.get("n"), 0)
            if (
                0 < m <= n
                and scan.get("anchor") == fingerprint(msgs[m - 1])
                and _scan_fits(scan, m)
            ):
                start = m
        if start == 0 or not isinstance(scan, Mapping):
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
            if role in SYSTEM_ROLES:
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
            "anchor": fingerprint(msgs[n - 1]) if n else None,
            "incremental": start > 0,
        }, reset


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


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _invalid(st: dict[str, Any]) -> str | None:
    """What makes a loaded state unusable, checked field by field (None: usable).

    A state comes back from a store or a caller, so every field is checked before the
    planner trusts it: a wrong type or a negative count names the field.
    """
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


def _scan_fits(scan: Mapping[str, Any], m: int) -> bool:
    """Whether a carried scan of ``m`` messages is consistent enough to continue from."""
    system = scan.get("system")
    last = scan.get("last_user")
    return (
        isinstance(system, list)
        and all(0 <= _int_or(i, -1) < m for i in system)
        and (last is None or 0 <= _int_or(last, -1) < m)
        and _int_or(scan.get("tokens"), -1) >= 0
    )
