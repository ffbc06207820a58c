"""Recorded histories: reading them from files (``load_history``) and replaying them call by
call (``replay``), as ``windowfit bench`` and the context-quality evaluation do."""

from __future__ import annotations

from windowfit.replay.history_io import (
    FORMATS,
    History,
    HistoryFormatError,
    dump_history,
    load_history,
)
from windowfit.replay.turns import SERIES, ReplayResult, Turn, call_points, replay

__all__ = [
    "FORMATS",
    "SERIES",
    "History",
    "HistoryFormatError",
    "ReplayResult",
    "Turn",
    "call_points",
    "dump_history",
    "load_history",
    "replay",
]
