"""The planner: where this call's window starts and whether something is summarized.

With ``stable_prefix`` the cut (and the summary) stays put while summary + recent messages are
under the high-water mark, then moves in one jump so the recent part is under the low-water
mark: consecutive prompts share their prefix and provider prompt caches keep hitting. Without
it the window slides every turn (the largest recent window that fits) and the summary is
refreshed when the newly evicted material reaches half the summary's size.
"""

from __future__ import annotations

import math
from typing import Any

from windowfit.context.budget import (
    MIN_SUMMARY_TOKENS,
    OVERSIZE_FACTOR,
    SUMMARY_LENGTH_RATIO,
    TARGET_HEADROOM,
    Budget,
    summary_target_tokens,
)
from windowfit.context.config import Settings
from windowfit.context.masker import Masker
from windowfit.context.plan import Job, Message, Plan
from windowfit.context.prepared import PreparedStats
from windowfit.context.state import Loaded
from windowfit.context.strategy import RECENT_SUMMARY_WINDOW, StrategyDecision, choose_strategy
from windowfit.context.window import Windows
from windowfit.fitting import fit
from windowfit.messages import SYSTEM_ROLES, copy_json, message_text, tool_units
from windowfit.summarize import Summarizer, detect_language

__all__ = ["Planner"]

#: How much an inline summarizer folds in one call at most: this many history budgets, and
#: this many messages (its cost grows with both), so a long imported history is folded a
#: share per call instead of stalling one call for seconds.
INLINE_FOLD_WINDOWS = 4
INLINE_FOLD_MESSAGES = 2000


class Planner:
    """Plans one call: decides the strategy and sets up a summarization job."""

    def __init__(self, settings: Settings, windows: Windows, masker: Masker) -> None:
        self.settings = settings
        self.counter = settings.counter
        self.windows = windows
        self.masker = masker

    def plan(
        self, msgs: list[Message], loaded: Loaded, summarizer: Summarizer | None, started: float
    ) -> Plan:
        """Where the window of ``msgs`` starts this call, and what to summarize first."""
        st, scan, b = loaded.state, loaded.scan, loaded.budget
        n = len(msgs)
        reset = "; ".join(loaded.reasons) or None
        stats: PreparedStats = {
            "model": self.settings.model,
            "exact": bool(getattr(self.counter, "is_exact", False)),
            **b.as_dict(),  # type: ignore[typeddict-item]  # the budget's keys are stats keys
            "turn": st["turn"],
            "messages_total": n,
            "tokens_full": scan["tokens"]
            + (self.settings.priming if n else 0)
            + loaded.tools_tokens,
            "tokens_tools": loaded.tools_tokens,
            "state_reset": reset is not None,
            "state_reset_reason": reset,
            "summary_triggered": False,
            "summary_failed": False,
            "summary_error": None,
            "summary_ms": None,
            "summary_target_tokens": None,
            "compacted": False,
        }
        plan = Plan(
            msgs=msgs,
            state=st,
            stats=stats,
            budget=b,
            tools_fp=loaded.tools_fp,
            last_user=scan["last_user"],
            system_idx=scan["system"],
            system_tokens=loaded.system_tokens,
            cut=loaded.cut,
            started=started,
            start_cut=loaded.cut,
            cut_tokens=loaded.cut_tokens,
            cut_check=loaded.cut_check,
        )
        if n == 0:
            plan.stats.update({"strategy": "keep", "strategy_reason": "empty history"})
            return plan
        if self.settings.stable_prefix:
            self._plan_stable(plan, loaded.summarized, summarizer)
        else:
            self._plan_sliding(plan, loaded.summarized, summarizer)
        return plan

    def _decide(
        self, plan: Plan, summarizer: Summarizer | None, catching_up: bool = False
    ) -> StrategyDecision:
        """Summarize or truncate. ``catching_up``: finishing the fold of a long import, where
        the frequency limit (against a summary remade on every cut) does not apply: under it
        an import of 10,000 messages took ~160 calls to fold, its middle neither sent nor in
        the summary meanwhile."""
        st = plan.state
        if summarizer is None:
            return StrategyDecision("truncate", "no summarizer configured")
        if not self.settings.trigger_ratio < 1.0:
            return StrategyDecision(
                "truncate",
                f"summarizing is off (trigger_ratio={self.settings.trigger_ratio} >= 1.0)",
            )
        if st["retry_turn"] > st["turn"]:
            return StrategyDecision(
                "truncate",
                f"summarizer backing off after {st['failures']} failures (retry at turn {st['retry_turn']})",
            )
        if (
            plan.budget.summary_budget * TARGET_HEADROOM
            < MIN_SUMMARY_TOKENS + self.windows.summary_overhead(st)
        ):
            return StrategyDecision(
                "truncate", f"summary budget too small ({plan.budget.summary_budget} tokens)"
            )
        recent = sum(1 for t in st["summary_turns"] if t > st["turn"] - RECENT_SUMMARY_WINDOW)
        if catching_up:
            recent = 0
        content = plan.stats["tokens_full"] - plan.budget.system_tokens - plan.stats["tokens_tools"]
        return choose_strategy(
            preference=self.settings.preference,
            message_count=len(plan.msgs),
            content_tokens=max(0, content),
            recent_summaries=recent,
            frequency_limit=self.settings.max_summaries_per_window,
            min_messages=self.settings.min_messages_before_summary,
        )

    def _plan_stable(self, plan: Plan, s: int, summarizer: Summarizer | None) -> None:
        """Cut stays put under the high-water mark; jumps to the low-water mark above it."""
        b, st, c = plan.budget, plan.state, self.counter
        # summary + recent tokens of the current window, from the carried totals: raw window
        # tokens, minus its system messages, minus what truncating tool outputs saves, plus a
        # user message pinned before the window. Exact up to orphans fit may still drop.
        cut = plan.cut
        window_raw = plan.state["scan"]["tokens"] - plan.cut_tokens
        window_system = sum(c.count_message(plan.msgs[i]) for i in plan.system_idx if i >= cut)
        _, _, saved = self.windows.window(plan, cut)
        user = self.windows.head_user(plan, cut)
        held = c.count_message(plan.msgs[user]) if user is not None else 0
        summary_tokens = sum(
            c.count_message(m) for m in self.windows.summary_messages(st["summary"], st)
        )
        recent = window_raw - window_system - saved + held
        # over the mark: masking old tool outputs first may keep the cut (and the summary)
        freed = self.masker.advance(plan) if summary_tokens + recent > b.high_water else 0
        recent -= freed
        if s < cut and self._catch_up(plan, s, cut, summarizer):
            return
        if summary_tokens + recent <= b.high_water:
            masked_note = (
                f"old tool outputs masked up to message {plan.state['mask_until']}; "
                if freed
                else ""
            )
            plan.stats.update(
                {
                    "strategy": "mask" if freed else "keep",
                    "strategy_reason": (
                        f"{masked_note}summary + recent = {summary_tokens + recent} tokens, under the "
                        f"high-water mark ({b.high_water})"
                    ),
                }
            )
            return
        new_cut = self._round_floor(plan, self.windows.cut_for(plan, plan.cut, b.low_water), b)
        if new_cut <= plan.cut and self.settings.min_recent_rounds:
            plan.stats.update(
                {
                    "strategy": "keep",
                    "strategy_reason": f"the newest {self.settings.min_recent_rounds} rounds stay verbatim",
                }
            )
            return
        if new_cut <= plan.cut:
            plan.stats.update(
                {
                    "strategy": "fallback",
                    "strategy_reason": "the newest tool round alone exceeds the low-water mark; fitting plainly",
                }
            )
            return
        decision = self._decide(plan, summarizer)
        plan.stats.update({"strategy": decision.strategy, "strategy_reason": decision.reason})
        if decision.strategy == "summarize":
            plan.job = self._make_job(plan, s, new_cut, summarizer)
            if plan.job is not None:
                return  # on failure the finish fits plainly at the old cut
        # truncate: the cut jumps without a summary; the gap stays pending for a later summary
        plan.cut = new_cut

    def _plan_sliding(self, plan: Plan, s: int, summarizer: Summarizer | None) -> None:
        """The largest recent window every turn; refresh the summary when enough fell out."""
        b, st = plan.budget, plan.state
        summary_msgs = self.windows.summary_messages(st["summary"], st)
        summary_tokens = sum(self.counter.count_message(m) for m in summary_msgs)
        recent_budget = max(0, b.history_budget - summary_tokens)
        new_cut = max(
            self._round_floor(plan, self.windows.cut_for(plan, s, recent_budget), b), plan.cut
        )
        pending = self.windows.tokens_between(plan.msgs, s, new_cut)
        threshold = max(
            self.settings.resummarize_ratio * st["summary_tokens"], 0.05 * b.history_budget
        )
        plan.cut = new_cut
        if new_cut > s and pending >= threshold:
            decision = self._decide(plan, summarizer)
            plan.stats.update({"strategy": decision.strategy, "strategy_reason": decision.reason})
            if decision.strategy == "summarize":
                plan.job = self._make_job(plan, s, new_cut, summarizer)
            return
        plan.stats.update(
            {
                "strategy": "keep" if pending == 0 else "truncate",
                "strategy_reason": (
                    f"sliding window; {pending} evicted tokens pending, summary refresh at {int(threshold)}"
                ),
            }
        )

    def _catch_up(self, plan: Plan, s: int, cut: int, summarizer: Summarizer | None) -> bool:
        """Fold what an inline summarizer's bounded fold left between the summary and the cut
        (a long imported history is folded a share per call), the cut staying put."""
        if not getattr(summarizer, "inline", False):
            return False
        decision = self._decide(plan, summarizer, catching_up=True)
        if decision.strategy != "summarize":
            return False
        plan.job = self._make_job(plan, s, cut, summarizer)
        if plan.job is None:
            return False
        plan.stats.update(
            {
                "strategy": "summarize",
                "strategy_reason": (
                    f"folding messages {s}..{cut}, evicted earlier and not yet summarized"
                ),
            }
        )
        return True

    def _round_floor(self, plan: Plan, new_cut: int, b: Budget) -> int:
        """``new_cut`` moved back so the newest ``min_recent_rounds`` rounds stay verbatim,
        when they fit beside a full summary; otherwise ``new_cut`` (the tool outputs in the
        window are already truncated, so only now does a round have to go)."""
        rounds = self.settings.min_recent_rounds
        if not rounds or new_cut <= plan.cut:
            return new_cut
        window, _, _ = self.windows.window(plan, plan.cut)
        if not window:
            return new_cut
        # fit's own round rule: the window holding the newest N user turns
        r = fit(
            window,
            2**62,
            counter=self.counter,
            keep_system=False,
            keep_last_user=False,
            max_turns=rounds,
            oversize="drop",  # a search, not a prompt: nothing to cut
        )
        start = plan.cut + r.kept[0] if r.kept else new_cut
        if start >= new_cut:
            return new_cut
        room = b.history_budget - b.summary_budget
        if self.windows.tokens_between(plan.msgs, start, len(plan.msgs)) <= room:
            return start
        return new_cut

    def _make_job(
        self, plan: Plan, s: int, new_cut: int, summarizer: Summarizer | None
    ) -> Job | None:
        """The summarization of ``msgs[s:new_cut]`` (chunked to the summarizer's input cap)."""
        st, b, c = plan.state, plan.budget, self.counter
        # How much one call may fold: the summarizer's own limit; else, for summarizers that
        # call a model, the history budget (their input must fit some context window too).
        limit_attr = getattr(summarizer, "max_input_tokens", None)
        cap: float
        max_messages: float = math.inf
        if isinstance(limit_attr, int) and limit_attr > 0:
            cap = limit_attr
        elif getattr(summarizer, "inline", False):
            # in-process and near-linear, yet a long imported history folded at once would
            # still stall this call: a share per call, the rest on the next calls
            cap = INLINE_FOLD_WINDOWS * max(1, b.history_budget)
            max_messages = INLINE_FOLD_MESSAGES
        else:
            cap = max(1, b.history_budget)
        hi = s
        fold_tokens = 0
        msgs = plan.msgs
        for start, end, _kind in tool_units(msgs[s:new_cut]):  # never fold half a tool round
            t = sum(
                c.count_message(msgs[k])
                for k in range(s + start, s + end)
                if msgs[k].get("role") not in SYSTEM_ROLES
            )
            if fold_tokens and (fold_tokens + t > cap or end > max_messages):
                break
            fold_tokens += t
            hi = s + end
        fold = [copy_json(dict(m)) for m in msgs[s:hi] if m.get("role") not in SYSTEM_ROLES]
        if not fold:
            return None
        # Detected per fold (new messages + the summary so far), so a conversation that
        # switches language gets its summary in the language it is mostly held in.
        language = self.settings.language or self._detect(fold, st["summary"])
        overhead = self.windows.summary_overhead(st, language)
        # The summary's share of the window, and never above the absolute cap: a summary that
        # grows with the model's window would crowd out the conversation it stands for.
        room = max(0, min(b.summary_budget, self.settings.summary_max_tokens) - overhead)
        # Aim below the hard room so a summarizer overshooting its target a little (LLMs do,
        # estimates do) still fits instead of failing the same way every turn.
        # A summarizer that measures with this manager's counter and keeps its target (the
        # offline one) never overshoots, so it gets the whole room: under the absolute cap the
        # 20% headroom would cost a fifth of the facts a summary can hold.
        exact = self._keeps_target(summarizer)
        headroom = 1.0 if exact else TARGET_HEADROOM
        # How long: a share of what was evicted, for a summarizer that writes (an LLM asked
        # for more writes more, and costs more). One that selects lines and keeps its target
        # (the offline one) aims at its whole room unless told otherwise: it never pads, and
        # after a cut the window is the low-water mark whatever the summary's size, so a
        # lower target only dropped lines the room was kept for.
        length = self.settings.summary_length_ratio
        if length is None:
            length = 1.0 if exact else SUMMARY_LENGTH_RATIO
        target = summary_target_tokens(
            st["evicted_tokens"] + fold_tokens, int(room * headroom), length
        )
        limit = min(room, max(int(target * OVERSIZE_FACTOR), target + 64))
        plan.stats["summary_target_tokens"] = target
        return Job(
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

    def _keeps_target(self, summarizer: Summarizer | None) -> bool:
        """The summarizer promises ``keeps_target`` and counts with this manager's tokenizer."""
        theirs = getattr(summarizer, "counter", None)
        if not getattr(summarizer, "keeps_target", False) or theirs is None:
            return False
        return theirs is self.counter or getattr(theirs, "name", None) == self.counter.name

    @staticmethod
    def _detect(fold: list[dict[str, Any]], previous: str) -> str:
        users = [message_text(m) for m in fold if m.get("role") == "user"]
        return detect_language(
            [previous, *users] if any(users) else [previous, *(message_text(m) for m in fold)]
        )
