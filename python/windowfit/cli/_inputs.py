"""Reading the commands' inputs: text files, chat histories and counters, with errors that
name the file (and for histories the line and field)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from windowfit.counting import Counter
from windowfit.replay.history_io import FORMATS, History, load_history

__all__ = [
    "CommandError",
    "add_format_argument",
    "make_counter",
    "max_input_bytes",
    "read_bytes",
    "read_chunks",
    "read_history",
    "read_text",
]


class CommandError(Exception):
    """Stops a command: ``main`` prints the message and exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


#: The most input a command reads (``--max-input-bytes``, ``WINDOWFIT_MAX_INPUT_BYTES``): a
#: command handed an endless stream (``/dev/zero``, a runaway pipe) stops instead of eating
#: the machine's memory.
DEFAULT_MAX_INPUT_BYTES = 256 << 20
_CHUNK = 1 << 20


def max_input_bytes(value: int | None = None) -> int:
    """The input cap: ``value``, else ``$WINDOWFIT_MAX_INPUT_BYTES``, else the default."""
    if value is None:
        env = os.environ.get("WINDOWFIT_MAX_INPUT_BYTES", "").strip()
        if not env:
            return DEFAULT_MAX_INPUT_BYTES
        try:
            value = int(env)
        except ValueError:
            raise CommandError(
                f"WINDOWFIT_MAX_INPUT_BYTES must be an integer, got {env!r}"
            ) from None
    if value < 1:
        raise CommandError(f"the input cap must be >= 1 byte, got {value}")
    return value


def read_chunks(path: str, limit: int | None = None) -> Iterator[bytes]:
    """The bytes of ``path`` (``-``: stdin) in chunks of at most 1 MiB, never more than the
    cap in all: a chunk past it raises ``CommandError`` instead. A caller may stop early."""
    cap = max_input_bytes(limit)
    size = 0
    try:
        with contextlib.ExitStack() as stack:
            f = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
            while True:
                chunk = f.read(min(_CHUNK, cap + 1 - size))
                if not chunk:
                    return
                size += len(chunk)
                if size > cap:
                    raise CommandError(
                        f"{path} holds more than {cap:,} bytes; raise --max-input-bytes "
                        "(or WINDOWFIT_MAX_INPUT_BYTES) or cut the input first"
                    )
                yield chunk
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}", 1) from e


def read_bytes(path: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (``-``: stdin), read in chunks and never more than the cap."""
    return b"".join(read_chunks(path, limit))


def read_text(path: str, limit: int | None = None) -> tuple[str, bool]:
    """The text of ``path`` (``-``: stdin) and whether it was valid UTF-8 (bad bytes become
    U+FFFD, as tiktoken counts them)."""
    raw = read_bytes(path, limit)
    text = raw.decode("utf-8", errors="replace")
    return text, not ("\ufffd" in text and "\ufffd".encode() not in raw)


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=FORMATS, help="the history's shape (default: detected from the file)"
    )


def read_history(path: str, fmt: str | None = None) -> History:
    """The history in ``path``; malformed files raise ``HistoryFormatError``."""
    return load_history(path, format=fmt, data=read_bytes(path))


def make_counter(model: str | None = None, encoding: str | None = None) -> Counter:
    return Counter(encoding=encoding) if encoding else Counter(model=model or "gpt-4o")
