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
            return fresh
        out = copy_json(dict(state))  # never mutate the caller's state
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
        if s > n or (s > 0 and st.get("anchor") != fingerprint(msgs[s - 1])):
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
            if 0 < m <= n and scan.get("anchor") == fingerprint(msgs[m - 1]):
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
