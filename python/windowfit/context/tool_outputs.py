"""Tool outputs in the window: oversized ones cut to the cap (the full output saved to a
file), old ones masked below the mask boundary, and that boundary's moves.

Observation masking is context editing: old tool results and reasoning give way to a short
placeholder (``masking``), in batches, so the prompt cache's prefix moves rarely.
"""

from __future__ import annotations

import operator
from typing import Any

from windowfit.context.budget import Budget
from windowfit.context.masking import advance_mask, maskable, masked, tool_name
from windowfit.context.plan import MaskedPrefix, Plan
from windowfit.context.state import StateKeeper
from windowfit.truncation import ObservationTruncator

__all__ = ["ToolOutputs"]

_TRUNCATION_CACHE_SIZE = 512  # cut outputs remembered per cap
_TRUNCATORS = 4  # caps remembered
_MASKED_PREFIXES = 8  # conversations whose masked window prefix is remembered


class ToolOutputs(StateKeeper):
    """Cuts and masks the tool outputs a window sends."""

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
