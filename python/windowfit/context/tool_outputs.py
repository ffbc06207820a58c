"""The tool-output cap: oversized tool outputs in the window cut to the cap, the full output
saved to a file (named by its content, so the same output always names the same file and the
prompt stays the same turn after turn).
"""

from __future__ import annotations

from typing import Any

from windowfit.context.budget import Budget
from windowfit.context.config import Settings
from windowfit.context.masking import tool_name
from windowfit.context.plan import Message
from windowfit.truncation import ObservationTruncator

__all__ = ["Cut", "ToolOutputCap"]

_TRUNCATION_CACHE_SIZE = 512  # cut outputs remembered per cap
_TRUNCATORS = 4  # caps remembered

#: A tool message cut to the cap: the new message, the tokens that saves, the file holding the
#: full output (None when it was not saved).
Cut = tuple[dict[str, Any], int, "str | None"]


class ToolOutputCap:
    """Cuts the tool outputs a window sends to the cap (one truncator, and its memory of the
    outputs it cut, per cap: the same window is re-cut every turn)."""

    def __init__(self, settings: Settings) -> None:
        self.max_tokens = settings.tool_output_max_tokens
        self.direction = settings.tool_output_direction
        self.output_dir = settings.tool_output_dir
        self.counter = settings.counter
        self.keep_recent = settings.keep_recent_tool_outputs
        self._truncators: dict[int, ObservationTruncator] = {}  # by token cap

    def cap(self, b: Budget) -> int:
        """Tokens a tool output may keep (0: no cap): the setting, else half the low-water mark."""
        if self.max_tokens is not None:
            return self.max_tokens
        return max(64, b.low_water // 2)

    def truncated(self, msgs: list[Message], i: int, cap: int) -> Cut | None:
        """A copy of tool message ``msgs[i]`` with its output cut to ``cap`` tokens, the tokens
        that saves and the file holding the full output; None when it fits."""
        msg = msgs[i]
        content = msg.get("content")
        # A token covers at least one UTF-8 byte, so short outputs never need counting.
        if not isinstance(content, str) or len(content) * 4 <= cap:
            return None
        result = self._truncator(cap).truncate(tool_name(msgs, i), content)
        if not result["truncated"]:
            return None
        stats = result["stats"]
        saved = max(0, (stats["original_tokens"] or 0) - stats["kept_tokens"])
        return {**msg, "content": result["preview"]}, saved, result["full_output_path"]

    def recent(self, msgs: list[Message], lo: int = 0) -> set[int]:
        """Indices of the newest ``keep_recent_tool_outputs`` tool results: sent whole (up to
        the low-water mark), as the agent is acting on them; older ones are cut to the cap.
        Only positions from ``lo`` on are looked at (the callers ask about a window): a long
        dialog without tool calls is not walked to its start on every call."""
        want = self.keep_recent
        found: set[int] = set()
        i = len(msgs) - 1
        while want and i >= lo and len(found) < want:
            if msgs[i].get("role") == "tool":
                found.add(i)
            i -= 1
        return found

    def _truncator(self, cap: int) -> ObservationTruncator:
        """The truncator of tool outputs at ``cap`` tokens: JSON records compacted (ids, titles,
        times kept), the full output saved under ``tool_output_dir``. One per cap (the cap
        follows the budget, which rarely changes)."""
        truncator = self._truncators.get(cap)
        if truncator is None:
            truncator = ObservationTruncator(
                max_lines=None,
                max_bytes=None,
                max_tokens=cap,
                direction=self.direction,
                output_dir=self.output_dir,
                counter=self.counter,
                compact_json=True,
                cache_size=_TRUNCATION_CACHE_SIZE,
            )
            if len(self._truncators) >= _TRUNCATORS:
                self._truncators.pop(next(iter(self._truncators)), None)
            self._truncators[cap] = truncator
        return truncator
