"""Windows: the virtual message list a fit sees (system, summary, a held user message, the
recent messages with oversized tool outputs truncated) and where a window may start.

A cut uses fit's unit logic, so it never separates a tool call from its results.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from windowfit._core import BudgetError  # the class fit raises
from windowfit.context.config import Settings
from windowfit.context.masker import Masker
from windowfit.context.plan import Fitted, Message, Plan, View
from windowfit.context.tool_outputs import ToolOutputCap
from windowfit.fitting import FitResult, fit
from windowfit.messages import SYSTEM_ROLES
from windowfit.summarize import detect_language

__all__ = ["Windows"]

logger = logging.getLogger(__name__)


class Windows:
    """Builds and measures the windows a plan chooses between: the head (system messages, the
    summary, a held user message) and the recent messages, tool outputs cut and masked."""

    def __init__(self, settings: Settings, outputs: ToolOutputCap, masker: Masker) -> None:
        self.counter = settings.counter
        self.priming = settings.priming
        self.language = settings.language
        self.summary_role = settings.summary_role
        self.stable_prefix = settings.stable_prefix
        self.max_messages = settings.max_messages
        self.max_turns = settings.max_turns
        self.outputs = outputs
        self.masker = masker

    def fit_at(self, plan: Plan, cut: int, summary: str, language: str | None = None) -> Fitted:
        """Fit system + summary + window(cut) to the prompt budget; drop the summary if it
        cannot fit beside the pins (then only BudgetError of the pins themselves escapes)."""
        view = self.view(plan, cut, summary, language)
        r = self._fit(view, plan.budget.prompt_budget)
        if r is None:
            # a held (no longer latest) user message is the first thing to give up
            view = self.view(plan, cut, summary, language, hold=False)
            r = self._fit(view, plan.budget.prompt_budget)
        if r is None:
            plan.stats["summary_dropped"] = True
            logger.warning(
                "the summary does not fit beside the system prompt and latest user message; sending without it"
            )
            view = self.view(plan, cut, "", language, hold=False)
            budget = plan.budget.prompt_budget  # a BudgetError of the pins alone is the caller's
            r = self._whole_if_fits(view, budget, self._fit_view(view, budget))
        return Fitted(cut, summary, view, r)

    def summary_messages(
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

    def summary_overhead(self, st: Mapping[str, Any], language: str | None = None) -> int:
        msgs = self.summary_messages("x", {**st, "summarized_messages": 99999}, language)
        return sum(self.counter.count_message(m) for m in msgs)

    def window(self, plan: Plan, lo: int) -> tuple[list[Message], int, int]:
        """``msgs[lo:]`` with oversized tool outputs truncated and, below the mask boundary,
        old ones masked (new dicts, inputs untouched); how many were edited, the tokens saved."""
        msgs = plan.msgs
        cap = self.outputs.cap(plan.budget)
        if cap <= 0:
            return msgs[lo:], 0, 0
        until = self.masker.until(plan)
        top = max(lo, until)
        if plan.trunc_from < 0 or top < plan.trunc_from:
            # scan only the part not scanned yet in this call
            hi = plan.trunc_from if plan.trunc_from >= 0 else len(msgs)
            whole = self.outputs.recent(msgs, top)
            # a recent output is cut only when it alone is over the low-water mark (a window
            # just cut must still hold it; the final fit would otherwise drop its whole round)
            whole_cap = max(cap, plan.budget.low_water)
            for i in range(top, hi):
                if msgs[i].get("role") == "tool":
                    cut = self.outputs.truncated(msgs, i, whole_cap if i in whole else cap)
                    if cut is not None:
                        plan.trunc[i] = cut[:2]
            plan.trunc_from = top
        count = saved = 0
        if lo < until:
            p = self.masker.prefix(plan, lo, until, cap)
            k = lo - p.base
            window = p.sent[k:]
            window += msgs[until:]
            count = p.edited_before[-1] - p.edited_before[k]
            saved = p.saved_before[-1] - p.saved_before[k]
        else:
            window = msgs[lo:]
        for i, (m, tokens) in plan.trunc.items():
            if i >= lo:
                window[i - lo] = m
                count += 1
                saved += tokens
        return window, count, saved

    def sent_at(self, plan: Plan, i: int) -> Message:
        """What this call's windows send for ``msgs[i]``: its cut or masked copy, or itself."""
        row = plan.trunc.get(i)
        if row is not None:
            return row[0]
        p = plan.masked
        if p is not None and plan.masked_from <= i < p.until:
            return p.sent[i - p.base]
        return plan.msgs[i]

    def head_user(self, plan: Plan, cut: int) -> int | None:
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

    def view(
        self, plan: Plan, cut: int, summary: str, language: str | None = None, *, hold: bool = True
    ) -> View:
        msgs, st = plan.msgs, plan.state
        head_src = [i for i in plan.system_idx if i < cut]
        head = [msgs[i] for i in head_src]
        summary_msgs = self.summary_messages(summary, st, language)
        summary_idx = list(range(len(head), len(head) + len(summary_msgs)))
        head += summary_msgs
        head_src += [-1] * len(summary_msgs)
        pinned = list(summary_idx)
        user = self.head_user(plan, cut)
        if user is not None and (hold or user == plan.last_user):
            pinned.append(len(head))
            head.append(msgs[user])  # the request stays verbatim next to the summary
            head_src.append(user)
        window, count, saved = self.window(plan, cut)
        return View(
            messages=head + window,
            source=head_src + list(range(cut, len(msgs))),
            head_len=len(head),
            summary_idx=summary_idx,
            pinned=pinned,
            truncated=count,
            truncated_tokens=saved,
        )

    def _fit(self, view: View, budget: int) -> FitResult | None:
        """The fit of ``view``; None when its pins alone are over ``budget``."""
        try:
            r = self._fit_view(view, budget)
        except BudgetError:
            if not view.pinned:
                raise
            return None
        return self._whole_if_fits(view, budget, r)

    def _whole_if_fits(self, view: View, budget: int, r: FitResult) -> FitResult:
        """The whole view when only the start-on-user rule left something out.

        Starting on a user message keeps a cut window well formed, but when nothing had to be
        cut (an assistant greeting before the first user message, say) dropping it loses
        context that fits. Refit by units and take that result if it sends everything.
        """
        if r.stats["stop_reason"] != "start_on_user":
            return r
        whole = self._fit_view(view, budget, start_on=None)
        return whole if whole.stats["stop_reason"] == "all_fit" else r

    def _fit_view(self, view: View, budget: int, **options: Any) -> FitResult:
        """``fit`` of the view with its pins and the configured caps (both fits of a turn)."""
        max_messages, max_turns = self._caps(view)
        return fit(
            view.messages,
            budget,
            counter=self.counter,
            pinned=view.pinned,
            max_messages=max_messages,
            max_turns=max_turns,
            **options,
        )

    def _caps(self, view: View) -> tuple[int | None, int | None]:
        """The message and turn caps for fitting ``view``: they count the conversation, so the
        system prompt and the summary messages are added on top (fit counts pins in its caps)."""
        if self.max_messages is None and self.max_turns is None:
            return None, None
        summary = set(view.summary_idx)
        extra = sum(
            1 for i, m in enumerate(view.messages) if i in summary or m.get("role") in SYSTEM_ROLES
        )
        turns = sum(1 for i in summary if view.messages[i].get("role") == "user")
        return (
            None if self.max_messages is None else self.max_messages + extra,
            None if self.max_turns is None else self.max_turns + turns,
        )

    def head_summary_tokens(self, view: View) -> int:
        return sum(self.counter.count_message(view.messages[i]) for i in view.summary_idx)

    def cut_for(self, plan: Plan, lo: int, budget: int) -> int:
        """Start of the longest recent window of ``msgs[lo:]`` within ``budget`` tokens.

        Uses fit's unit logic, so a cut never separates a tool call from its results and, before
        the latest user message, lands on a user message.
        """
        window, _, _ = self.window(plan, lo)
        if not window:
            return lo
        r = fit(
            window,
            budget + self.priming,
            counter=self.counter,
            keep_system=False,
            keep_last_user=False,
            max_messages=self.max_messages,
            max_turns=self.max_turns,
            # a search for where the window starts: in an agent loop (one user task, then
            # only calls and results) the whole window is the round in progress, and cutting
            # its results to fit would put the start back at ``lo`` every time
            oversize="drop",
        )
        if r.kept:
            return lo + r.kept[0]
        # Even the newest unit exceeds the budget: keep just that unit (fit trims it later).
        k = len(window) - 1
        while k > 0 and window[k].get("role") == "tool":
            k -= 1
        return lo + k

    def tokens_between(self, msgs: list[Message], lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        part = [m for m in msgs[lo:hi] if m.get("role") not in SYSTEM_ROLES]
        return self.counter.count_messages(part) - self.priming if part else 0
