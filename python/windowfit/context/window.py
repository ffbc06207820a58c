"""Windows: the virtual message list a fit sees (system, summary, a held user message, the
recent messages with oversized tool outputs truncated) and where a window may start.

A cut uses fit's unit logic, so it never separates a tool call from its results.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping
from typing import Any

from windowfit._core import BudgetError  # the class fit raises
from windowfit.context.budget import Budget
from windowfit.context.masking import advance_mask, maskable, masked, tool_name
from windowfit.context.plan import Fitted, MaskedPrefix, Plan, View
from windowfit.context.state import StateKeeper
from windowfit.fitting import fit
from windowfit.messages import SYSTEM_ROLES
from windowfit.observation import ObservationTruncator
from windowfit.summarize import detect_language

__all__ = ["Windows"]

logger = logging.getLogger(__name__)

Message = Mapping[str, Any]

_TRUNCATION_CACHE_SIZE = 512  # cut outputs remembered per cap
_TRUNCATORS = 4  # caps remembered
_MASKED_PREFIXES = 8  # conversations whose masked window prefix is remembered


class Windows(StateKeeper):
    """Builds and measures the windows a plan chooses between."""

    def _fit_at(self, plan: Plan, cut: int, summary: str, language: str | None = None) -> Fitted:
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
        return Fitted(cut, summary, view, r)

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

    def _tool_truncator(self, cap: int) -> ObservationTruncator:
        """The truncator of tool outputs at ``cap`` tokens: JSON records compacted (ids,
        titles, times kept), the full output saved under ``tool_output_dir`` (named by its
        content, so the same output always names the same file and the prompt stays the same
        turn after turn). One per cap (the cap follows the budget, which rarely changes), each
        remembering the outputs it cut: the same window is re-cut every turn."""
        truncator = self._truncators.get(cap)
        if truncator is None:
            truncator = ObservationTruncator(
                max_lines=None,
                max_bytes=None,
                max_tokens=cap,
                direction=self.tool_output_direction,
                output_dir=self.tool_output_dir,
                counter=self.counter,
                compact_json=True,
                cache_size=_TRUNCATION_CACHE_SIZE,
            )
            if len(self._truncators) >= _TRUNCATORS:
                self._truncators.pop(next(iter(self._truncators)), None)
            self._truncators[cap] = truncator
        return truncator

    def _truncated(
        self, msgs: list[Any], i: int, cap: int
    ) -> tuple[dict[str, Any], int, str | None] | None:
        """A copy of tool message ``msgs[i]`` with its output cut to ``cap`` tokens, the tokens
        that saves and the file holding the full output; None when it fits."""
        msg = msgs[i]
        content = msg.get("content")
        # A token covers at least one UTF-8 byte, so short outputs never need counting.
        if not isinstance(content, str) or len(content) * 4 <= cap:
            return None
        result = self._tool_truncator(cap).truncate(tool_name(msgs, i), content)
        if not result["truncated"]:
            return None
        stats = result["stats"]
        saved = max(0, (stats["original_tokens"] or 0) - stats["kept_tokens"])
        return {**msg, "content": result["preview"]}, saved, result["full_output_path"]

    def _recent_tool_outputs(self, msgs: list[Any]) -> set[int]:
        """Indices of the newest ``keep_recent_tool_outputs`` tool results: sent whole (up to
        the low-water mark), as the agent is acting on them; older ones are cut to the cap."""
        want = self.keep_recent_tool_outputs
        found: set[int] = set()
        i = len(msgs) - 1
        while want and i >= 0 and len(found) < want:
            if msgs[i].get("role") == "tool":
                found.add(i)
            i -= 1
        return found

    def _window(self, plan: Plan, lo: int) -> tuple[list[Any], int, int]:
        """``msgs[lo:]`` with oversized tool outputs truncated and, below the mask boundary,
        old ones masked (new dicts, inputs untouched); how many were edited, the tokens saved."""
        msgs = plan.msgs
        cap = self._tool_cap(plan.budget)
        if cap <= 0:
            return msgs[lo:], 0, 0
        until = self._mask_until(plan)
        top = max(lo, until)
        if plan.trunc_from < 0 or top < plan.trunc_from:
            # scan only the part not scanned yet in this call
            hi = plan.trunc_from if plan.trunc_from >= 0 else len(msgs)
            whole = self._recent_tool_outputs(msgs)
            # a recent output is cut only when it alone is over the low-water mark (a window
            # just cut must still hold it; the final fit would otherwise drop its whole round)
            whole_cap = max(cap, plan.budget.low_water)
            for i in range(top, hi):
                if msgs[i].get("role") == "tool":
                    cut = self._truncated(msgs, i, whole_cap if i in whole else cap)
                    if cut is not None:
                        plan.trunc[i] = cut[:2]
            plan.trunc_from = top
        count = saved = 0
        if lo < until:
            p = self._masked_prefix(plan, lo, until, cap)
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

    def _sent_at(self, plan: Plan, i: int) -> Any:
        """What this call's windows send for ``msgs[i]``: its cut or masked copy, or itself."""
        row = plan.trunc.get(i)
        if row is not None:
            return row[0]
        p = plan.masked
        if p is not None and plan.masked_from <= i < p.until:
            return p.sent[i - p.base]
        return plan.msgs[i]

    # -- observation masking (context editing) --------------------------------------------------

    def _mask_until(self, plan: Plan) -> int:
        """Messages before this index have old tool output / reasoning masked (0: none)."""
        if self.mask_keep <= 0:
            return 0
        value = plan.state.get("mask_until")
        return min(value, len(plan.msgs)) if isinstance(value, int) and value > 0 else 0

    def _masked_prefix(self, plan: Plan, lo: int, until: int, cap: int) -> MaskedPrefix:
        """The window's part below the mask boundary, ``msgs[lo:until]`` with old outputs
        masked (or, for provider items, truncated).

        The same old messages stay masked in every later prompt, so the copies are kept per
        conversation from one call to the next and reused while the boundary, the language,
        the cap and every source message in ``msgs[lo:until]`` are the same objects: a turn
        costs one identity check per message there (a C loop) and a list slice.
        """
        p = plan.masked
        if p is not None and plan.masked_from <= lo:
            return p  # checked against this history earlier in this call
        msgs = plan.msgs
        key = (until, plan.state.get("mask_language") or self.language, cap)
        slot = id(msgs[0])
        p = self._masked_prefixes.get(slot)
        if p is not None and p.key == key:
            start = min(lo, p.base)
            if not all(map(operator.is_, msgs[max(lo, p.base) : until], p.source[lo - start :])):
                p = None  # another history, or one edited in place: build again
            elif lo < p.base:  # a window reaching further back: extend the copies down once
                p = self._mask_rows(msgs, lo, p.base, key, p)
        else:
            p = None
        if p is None:
            p = self._mask_rows(msgs, lo, until, key, None)
        if slot not in self._masked_prefixes and len(self._masked_prefixes) >= _MASKED_PREFIXES:
            self._masked_prefixes.pop(next(iter(self._masked_prefixes)), None)
        self._masked_prefixes[slot] = p
        plan.masked, plan.masked_from = p, lo
        return p

    def _mask_rows(
        self,
        msgs: list[Any],
        lo: int,
        hi: int,
        key: tuple[int, str | None, int],
        above: MaskedPrefix | None,
    ) -> MaskedPrefix:
        """The masked copies of ``msgs[lo:hi]``, joined to ``above`` (the copies of
        ``msgs[hi:boundary]``) when given."""
        _, lang, cap = key
        sent = msgs[lo:hi]
        edited_before, saved_before = [0], [0]
        count = self.counter.count_message
        for k, m in enumerate(sent):
            i = lo + k
            row: tuple[dict[str, Any], int] | None = None
            # an output over the cap is saved to a file first: the placeholder names it
            cut = self._truncated(msgs, i, cap) if m.get("role") == "tool" else None
            if maskable(m):
                edited = masked(msgs, i, lang, saved_to=cut[2] if cut else None)
                saved = count(m) - count(edited)
                if saved > 0:  # a short output stays: its placeholder would be longer
                    row = (edited, saved)
            if row is None and cut is not None:  # a provider item is truncated, not masked
                row = (cut[0], cut[1])
            if row is not None:
                sent[k] = row[0]
            edited_before.append(edited_before[-1] + (row is not None))
            saved_before.append(saved_before[-1] + (row[1] if row is not None else 0))
        source = msgs[lo:hi]
        if above is not None:
            n, t = edited_before[-1], saved_before[-1]
            source += above.source
            sent += above.sent
            edited_before += [n + x for x in above.edited_before[1:]]
            saved_before += [t + x for x in above.saved_before[1:]]
        return MaskedPrefix(key, lo, source, sent, edited_before, saved_before)

    def _advance_mask(self, plan: Plan) -> int:
        """Move the mask boundary if that frees ``mask_clear_at_least`` tokens; the tokens freed
        (0: it stays, and the prompt prefix with it)."""
        if self.mask_keep <= 0:
            return 0
        old = self._mask_until(plan)
        new, freed = advance_mask(
            plan.msgs,
            max(old, plan.cut),
            # the newest keep_recent_tool_outputs are never cut, so never masked either
            keep=max(self.mask_keep, self.keep_recent_tool_outputs),
            clear_at_least=self.mask_clear_at_least,
            count=self.counter.count_message,
        )
        if new <= old or not freed:
            return 0
        plan.state["mask_until"] = new
        # the placeholders' language is fixed by the first batch: re-wording them when the
        # summary's detected language changes would break the cached prefix for nothing
        plan.state.setdefault("mask_language", plan.state.get("language") or self.language)
        start = max(old, plan.cut)
        plan.stats["masked_from"] = next(
            (i for i in range(start, new) if maskable(plan.msgs[i])), new
        )
        # the truncation cache and the masked copies were built with the old boundary
        plan.trunc.clear()
        plan.trunc_from = -1
        plan.masked, plan.masked_from = None, -1
        plan.stats["masked_until"] = new
        return freed

    def _head_user(self, plan: Plan, cut: int) -> int | None:
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
        self, plan: Plan, cut: int, summary: str, language: str | None = None, *, hold: bool = True
    ) -> View:
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
        return View(
            messages=head + window,
            source=head_src + list(range(cut, len(msgs))),
            head_len=len(head),
            summary_idx=summary_idx,
            pinned=pinned,
            truncated=count,
            truncated_tokens=saved,
        )

    def _fit(self, view: View, budget: int, *, raise_errors: bool = False) -> Any:
        try:
            max_messages, max_turns = self._caps(view)
            r = fit(
                view.messages,
                budget,
                counter=self.counter,
                pinned=view.pinned,
                max_messages=max_messages,
                max_turns=max_turns,
            )
        except BudgetError:
            if raise_errors or not view.pinned:
                raise
            return None
        return self._whole_if_fits(view, budget, r)

    def _whole_if_fits(self, view: View, budget: int, r: Any) -> Any:
        """The whole view when only the start-on-user rule left something out.

        Starting on a user message keeps a cut window well formed, but when nothing had to be
        cut (an assistant greeting before the first user message, say) dropping it loses
        context that fits. Refit by units and take that result if it sends everything.
        """
        if r.stats["stop_reason"] != "start_on_user":
            return r
        max_messages, max_turns = self._caps(view)
        whole = fit(
            view.messages,
            budget,
            counter=self.counter,
            pinned=view.pinned,
            start_on=None,
            max_messages=max_messages,
            max_turns=max_turns,
        )
        return whole if whole.stats["stop_reason"] == "all_fit" else r

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

    def _head_summary_tokens(self, view: View) -> int:
        return sum(self.counter.count_message(view.messages[i]) for i in view.summary_idx)

    def _cut_for(self, plan: Plan, lo: int, budget: int) -> int:
        """Start of the longest recent window of ``msgs[lo:]`` within ``budget`` tokens.

        Uses fit's unit logic, so a cut never separates a tool call from its results and, before
        the latest user message, lands on a user message.
        """
        window, _, _ = self._window(plan, lo)
        if not window:
            return lo
        r = fit(
            window,
            budget + self._priming,
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

    def _tokens_between(self, msgs: list[Any], lo: int, hi: int) -> int:
        if hi <= lo:
            return 0
        part = [m for m in msgs[lo:hi] if m.get("role") not in SYSTEM_ROLES]
        return self.counter.count_messages(part) - self._priming if part else 0
