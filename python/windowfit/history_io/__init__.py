"""The import path ``windowfit.history_io`` of :mod:`windowfit.replay.history_io`."""

from __future__ import annotations

from windowfit.replay.history_io import (
    FORMATS,
    History,
    HistoryFormatError,
    dump_history,
    load_history,
)

__all__ = ["FORMATS", "History", "HistoryFormatError", "dump_history", "load_history"]
