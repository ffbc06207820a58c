"""The stats of one call (``Prepared.stats``; every key is documented on ``PreparedStats``).

Besides the sizes and the plan, it measures how much of the prompt the previous call's prompt
shared (the provider's prompt cache), from the ``prev`` record the state carries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from windowfit.context.config import Settings
from windowfit.context.plan import Fitted, Plan, View
from windowfit.context.prepared import LeftOut
from windowfit.context.window import Windows
from windowfit.fitting import FitResult
from windowfit.messages import fingerprint

__all__ = ["Stats"]

logger = logging.getLogger(__name__)


class Stats:
    """Fills a call's stats, including how much of the prompt the previous call shared."""

    def __init__(self, settings: Settings, windows: Windows) -> None:
        self.counter = settings.counter
        self.priming = settings.priming
        self.limit = settings.context_window - settings.output_reserve
        self.keep_recent = settings.keep_recent_tool_outputs
        self.windows = windows

    def fill(self, plan: Plan, fitted: Fitted, prepared: list[dict[str, Any]]) -> None:
        """``plan.stats`` completed for the prompt ``prepared``, and ``prev`` for next call."""
        st, stats, c = plan.state, plan.stats, self.counter
        view, r = fitted.view, fitted.result
        n = len(plan.msgs)
        kept = r.kept
        summary_tokens = self.windows.head_summary_tokens(view)
        tokens = int(r.tokens)
        recent = max(0, tokens - plan.system_tokens - summary_tokens - self.priming)
        sent_from_history = len(kept) - len(view.summary_idx)
        limit = self.limit
        stats.update(
            {
                "tokens": tokens,
                "tokens_system": plan.system_tokens,
                "tokens_summary": summary_tokens,
                "tokens_recent": recent,
                "tokens_total": tokens + stats["tokens_tools"],
                "usage_ratio": round((tokens + stats["tokens_tools"]) / limit, 4),
                "tokens_saved": max(0, stats["tokens_full"] - tokens - stats["tokens_tools"]),
                "messages_sent": len(prepared),
                "messages_dropped": n - sent_from_history,
                "messages_summarized": int(st["summarized_messages"]),
                "messages_pending": max(0, plan.cut - int(st["summarized_until"])),
                "summarized_until": int(st["summarized_until"]),
                "cut": plan.cut,
                "tool_outputs_truncated": view.truncated,
                "tool_tokens_truncated": view.truncated_tokens,
                "has_summary": bool(fitted.view.summary_idx),
            }
        )
        stats.setdefault("summary_dropped", False)
        self._fill_budget_use(plan, r)
        # Prefix shared with the previous call: the identical leading head messages, then (same
        # cut, same head) the window up to where the previous prompt ended. Only the few head
        # and new messages are counted here; the rest follows from the totals.
        head_kept = [k for k in kept[: view.head_len] if k < view.head_len]
        head_fps = [fingerprint(view.messages[k]) for k in head_kept]
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
                prev_end = self._unchanged_end(plan, int(prev.get("end", 0)))
                window_tokens = tokens - self.priming - sum(head_tokens)
                window_count = len(kept) - len(head_kept)
                k = len(kept) - 1
                while k >= len(head_kept) and view.source[kept[k]] >= prev_end:
                    window_tokens -= c.count_message(view.messages[kept[k]])
                    window_count -= 1
                    k -= 1
                shared_msgs += window_count
                shared_tokens += window_tokens
            elif same == len(head_fps) <= len(prev_head):
                more_msgs, more_tokens = self._moved_overlap(
                    plan, view, kept, len(head_kept), prev_head[same:], prev
                )
                shared_msgs += more_msgs
                shared_tokens += more_tokens
        stats.update(
            {
                "prefix_tokens_shared": shared_tokens,
                "prefix_messages_shared": shared_msgs,
                "prefix_shared_ratio": round(shared_tokens / max(1, tokens - self.priming), 4),
            }
        )
        st["prev"] = {"head": head_fps, "start": start, "end": end, "tools": plan.tools_fp}
        stats["elapsed_ms"] = round((time.perf_counter() - plan.started) * 1000, 3)
        logger.debug("turn %d left out: %s", st["turn"], stats["left_out"])
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

    def _fill_budget_use(self, plan: Plan, r: FitResult) -> None:
        """``budget_use`` (sent / prompt budget, the cache-stable window's utilization) and
        ``left_out``: why each message not sent verbatim was left out."""
        stats = plan.stats
        stats["budget_use"] = round(
            (stats["tokens"] + stats["tokens_tools"]) / max(1, plan.budget.prompt_budget), 4
        )
        lead = 0  # the leading system block is always sent, never "before the cut"
        while lead < len(plan.system_idx) and plan.system_idx[lead] == lead:
            lead += 1
        summarized = max(int(plan.state["summarized_until"]), lead)
        pending = max(0, plan.cut - summarized)
        folded = stats["messages_summarized"]
        by_fit = max(0, stats["messages_dropped"] - folded - pending)
        left_out: LeftOut = {}
        if folded:
            left_out["summarized"] = folded
        if pending:
            left_out["before_cut"] = pending
        if by_fit:
            left_out["fit"] = by_fit
            left_out["fit_reason"] = r.stats["stop_reason"]
        stats["left_out"] = left_out

    def _moved_overlap(
        self,
        plan: Plan,
        view: View,
        kept: list[int],
        first: int,
        rest: list[str],
        prev: Mapping[str, Any],
    ) -> tuple[int, int]:
        """Messages and tokens shared although the window moved: the previous prompt's extra
        head messages (a held user message) now open this window, or the new window opens
        with messages equal to the previous window's (a repeated question). Compared message
        by message from the previous window's start; usually the first comparison fails."""
        c, msgs, n = self.counter, 0, 0
        j = first
        for fp in rest:
            if j >= len(kept) or fingerprint(view.messages[kept[j]]) != fp:
                return msgs, n
            n += c.count_message(view.messages[kept[j]])
            msgs, j = msgs + 1, j + 1
        src = int(prev.get("start", -1))
        prev_end = self._unchanged_end(plan, int(prev.get("end", 0)))
        while 0 <= src < prev_end and j < len(kept):
            m = view.messages[kept[j]]
            sent_before = self.windows.sent_at(plan, src)
            if m is not sent_before and fingerprint(m) != fingerprint(sent_before):
                break
            n += c.count_message(m)
            msgs, j, src = msgs + 1, j + 1, src + 1
        return msgs, n

    def _unchanged_end(self, plan: Plan, prev_end: int) -> int:
        """Where the previous prompt's window stops being repeated verbatim: its end, the
        first message masked in this call, or the first tool output that was among the newest
        (sent whole) last call and is cut now."""
        # Positions are the previous prompt's: a caller that dropped summarized messages
        # shifted them (the state is anchored on content), so never past this history.
        prev_end = min(prev_end, len(plan.msgs))
        masked_from = plan.stats.get("masked_from")
        end = min(prev_end, masked_from) if isinstance(masked_from, int) else prev_end
        want, i = self.keep_recent, prev_end - 1
        whole = self.windows.outputs.recent(plan.msgs, plan.cut) if want else set()
        while want and i >= plan.cut:  # outputs before the window are not sent anyway
            if plan.msgs[i].get("role") == "tool":
                want -= 1
                if i not in whole and self.windows.sent_at(plan, i) is not plan.msgs[i]:
                    end = min(end, i)
            i -= 1
        return end
