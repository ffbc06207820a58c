"""The masking stage: old tool outputs below the mask boundary give way to placeholders
(``masking``), the boundary moves in batches, and the masked part of the window is kept from
one call to the next.
"""

from __future__ import annotations

import operator
from typing import Any

from windowfit.context.config import Settings
from windowfit.context.masking import advance_mask, maskable, masked
from windowfit.context.plan import MaskedPrefix, Message, Plan
from windowfit.context.tool_outputs import ToolOutputCap

__all__ = ["Masker"]

_MASKED_PREFIXES = 8  # conversations whose masked window prefix is remembered


class Masker:
    """Masks old tool outputs below the boundary carried in the state (``mask_until``)."""

    def __init__(self, settings: Settings, outputs: ToolOutputCap) -> None:
        self.keep = settings.mask_keep
        # the newest keep_recent_tool_outputs are never cut, so never masked either
        self.keep_whole = max(settings.mask_keep, settings.keep_recent_tool_outputs)
        self.clear_at_least = settings.mask_clear_at_least
        self.language = settings.language
        self.count = settings.counter.count_message
        self.outputs = outputs
        # the window below the mask boundary, by conversation (its first message's id)
        self._prefixes: dict[int, MaskedPrefix] = {}

    def until(self, plan: Plan) -> int:
        """Messages before this index have old tool output / reasoning masked (0: none)."""
        if self.keep <= 0:
            return 0
        value = plan.state.get("mask_until")
        return min(value, len(plan.msgs)) if isinstance(value, int) and value > 0 else 0

    def prefix(self, plan: Plan, lo: int, until: int, cap: int) -> MaskedPrefix:
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
        p = self._prefixes.get(slot)
        if p is not None and p.key == key:
            start = min(lo, p.base)
            if not all(map(operator.is_, msgs[max(lo, p.base) : until], p.source[lo - start :])):
                p = None  # another history, or one edited in place: build again
            elif lo < p.base:  # a window reaching further back: extend the copies down once
                p = self._rows(msgs, lo, p.base, key, p)
        else:
            p = None
        if p is None:
            p = self._rows(msgs, lo, until, key, None)
        if slot not in self._prefixes and len(self._prefixes) >= _MASKED_PREFIXES:
            self._prefixes.pop(next(iter(self._prefixes)), None)
        self._prefixes[slot] = p
        plan.masked, plan.masked_from = p, lo
        return p

    def _rows(
        self,
        msgs: list[Message],
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
        count = self.count
        for k, m in enumerate(sent):
            i = lo + k
            row: tuple[dict[str, Any], int] | None = None
            # an output over the cap is saved to a file first: the placeholder names it
            cut = self.outputs.truncated(msgs, i, cap) if m.get("role") == "tool" else None
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

    def advance(self, plan: Plan) -> int:
        """Move the mask boundary if that frees ``mask_clear_at_least`` tokens; the tokens freed
        (0: it stays, and the prompt prefix with it)."""
        if self.keep <= 0:
            return 0
        old = self.until(plan)
        new, freed = advance_mask(
            plan.msgs,
            max(old, plan.cut),
            keep=self.keep_whole,
            clear_at_least=self.clear_at_least,
            count=self.count,
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
