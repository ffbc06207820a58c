"""Truncation: token-exact cuts of long texts (``truncate``), and tool outputs made to fit the
prompt (``ToolOutputTruncator``: the cut, the full output saved to a file, JSON records
compacted to one line each)."""

from __future__ import annotations

from windowfit.truncation.json_records import compact_json, pick_key_fields
from windowfit.truncation.saved_outputs import safe_file_stem
from windowfit.truncation.text import (
    DEFAULT_DIRECTION,
    DEFAULT_MARKER,
    DIRECTIONS,
    TOKENS_OMITTED_MARKER,
    Direction,
    Truncation,
    truncate,
)
from windowfit.truncation.tool_output import (
    ObservationTruncator,
    ToolOutputTruncator,
    count_lines,
)

__all__ = [
    "DEFAULT_DIRECTION",
    "DEFAULT_MARKER",
    "DIRECTIONS",
    "TOKENS_OMITTED_MARKER",
    "Direction",
    "ObservationTruncator",
    "ToolOutputTruncator",
    "Truncation",
    "compact_json",
    "count_lines",
    "pick_key_fields",
    "safe_file_stem",
    "truncate",
]
