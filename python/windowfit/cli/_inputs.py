"""Reading the commands' inputs: text files, chat histories and counters, with errors that
name the file (and for histories the line and field)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from windowfit.counting import Counter
from windowfit.replay.history_io import FORMATS, History, load_history

__all__ = ["CommandError", "add_format_argument", "make_counter", "read_history", "read_text"]


class CommandError(Exception):
    """Stops a command: ``main`` prints the message and exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def read_text(path: str) -> tuple[str, bool]:
    """The text of ``path`` (``-``: stdin) and whether it was valid UTF-8 (bad bytes become
    U+FFFD, as tiktoken counts them)."""
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}", 1) from e
    text = raw.decode("utf-8", errors="replace")
    return text, not ("\ufffd" in text and "\ufffd".encode() not in raw)


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=FORMATS, help="the history's shape (default: detected from the file)"
    )


def read_history(path: str, fmt: str | None = None) -> History:
    """The history in ``path``; malformed files raise ``HistoryFormatError``."""
    try:
        return load_history(path, format=fmt)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}", 1) from e


def make_counter(model: str | None = None, encoding: str | None = None) -> Counter:
    return Counter(encoding=encoding) if encoding else Counter(model=model or "gpt-4o")
