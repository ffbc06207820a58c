"""``windowfit truncate FILE``: cut a file (or stdin) to a token/line/byte budget."""

from __future__ import annotations

import argparse
import codecs
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from windowfit.truncation import Truncation

#: The marker placeholder for the omitted count (the whole input's count is then needed).
OMITTED = "{omitted}"

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    trunc = sub.add_parser(
        "truncate",
        help="cut a file (or stdin) to a token/line/byte budget; text to stdout, stats to stderr",
        description=(
            "Cut a file (or stdin) to a token/line/byte budget; the text goes to stdout, the "
            "figures to stderr. A head cut (the default direction) whose --marker shows no "
            "{omitted} count reads its input in chunks and stops once the kept head is "
            "settled, in memory about 4x the head plus a few MiB, so an endless stream "
            "(/dev/zero) is cut without reaching the input cap. Every other cut (--direction "
            "tail or head_tail, or the default marker, which shows the omitted count) needs "
            "the input's end: it reads the whole input into memory, up to --max-input-bytes."
        ),
    )
    trunc.add_argument("file", help="the text file to cut, or - for standard input")
    trunc.add_argument("--max-tokens", type=int, help="at most this many tokens, marker included")
    trunc.add_argument("--max-lines", type=int, help="at most this many lines")
    trunc.add_argument("--max-bytes", type=int, help="at most this many UTF-8 bytes")
    trunc.add_argument(
        "--direction",
        choices=("head", "tail", "head_tail"),
        # None: truncate's own default (DEFAULT_DIRECTION), so there is one default to change
        help="keep the beginning, the end, or both (default: head)",
    )
    trunc.add_argument("--lines", action="store_true", help="cut only at whole lines")
    trunc.add_argument("--head-ratio", type=float, default=0.5, help="head_tail: the head's share")
    trunc.add_argument("--marker", help="text put where the cut is; {omitted} becomes the count")
    which = trunc.add_mutually_exclusive_group()
    which.add_argument("--model", help="count with this model's tokenizer (default gpt-4o)")
    which.add_argument("--encoding", help="count with this encoding (cl100k_base, o200k_base)")
    trunc.add_argument(
        "--max-input-bytes",
        type=int,
        help=(
            "refuse input larger than this (default $WINDOWFIT_MAX_INPUT_BYTES or 256 MiB); "
            "a streamed head cut stops before it"
        ),
    )
    trunc.set_defaults(func=run)


#: A head cut of the input read so far is the cut of the whole input once what was read
#: reaches this far past the kept head: 4 times the head, plus the windows the cut's piece
#: walk may read past it (at most about ``_WALK_BYTES_PER_TOKEN`` bytes per token of the
#: budget, the longest tokens being 128 bytes), plus ``_SETTLE_MARGIN``.
_HEAD_FACTOR = 4
_WALK_BYTES_PER_TOKEN = 1024
_SETTLE_MARGIN = 2 << 20


def _settled(kept_head_bytes: int, read_bytes: int, max_tokens: int | None) -> bool:
    need = _HEAD_FACTOR * kept_head_bytes + _WALK_BYTES_PER_TOKEN * (max_tokens or 0)
    return read_bytes >= need + _SETTLE_MARGIN


def _head_streamed(
    path: str, limit: int | None, cut: Callable[[str], Truncation], max_tokens: int | None
) -> tuple[Truncation, bool, bool]:
    """A head cut that reads the input in chunks and stops once the kept head is settled:
    the cut of what was read is then the cut of the whole input, whatever follows. Returns
    the cut, whether the input was read to its end, and whether what was read was valid
    UTF-8. Memory stays about ``_HEAD_FACTOR`` times the kept head plus a few MiB."""
    from windowfit.cli._inputs import read_chunks

    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    parts: list[str] = []
    size = 0  # UTF-8 bytes of the text decoded so far
    check_at = _SETTLE_MARGIN
    replaced = raw_fffd = False
    for chunk in read_chunks(path, limit):
        part = decoder.decode(chunk)
        parts.append(part)
        size += len(part.encode("utf-8"))
        replaced = replaced or "\ufffd" in part
        raw_fffd = raw_fffd or "\ufffd".encode() in chunk
        if size >= check_at:
            text = "".join(parts)
            parts = [text]
            t = cut(text)
            head = len(text[: t.head_end].encode("utf-8"))
            if t.truncated and _settled(head, size, max_tokens):
                return t, False, not (replaced and not raw_fffd)
            # the next try once what was read doubles: re-cutting costs O(input) in all
            check_at = max(size * 2, _HEAD_FACTOR * head + _SETTLE_MARGIN)
    tail = decoder.decode(b"", final=True)
    replaced = replaced or "\ufffd" in tail
    return cut("".join(parts) + tail), True, not (replaced and not raw_fffd)


def run(args: argparse.Namespace) -> int:
    import time

    import windowfit as wf
    from windowfit.cli._inputs import read_text
    from windowfit.truncation import DEFAULT_DIRECTION, TOKENS_OMITTED_MARKER, truncate

    if args.max_tokens is None and args.max_lines is None and args.max_bytes is None:
        print("windowfit truncate: give --max-tokens, --max-lines or --max-bytes", file=sys.stderr)
        return 2
    direction = args.direction or DEFAULT_DIRECTION
    marker = TOKENS_OMITTED_MARKER if args.marker is None else args.marker
    try:
        counter = (
            wf.Counter(encoding=args.encoding)
            if args.encoding
            else wf.Counter(model=args.model or "gpt-4o")
        )
    except (ValueError, TypeError, KeyError) as e:
        print(f"windowfit truncate: {e}", file=sys.stderr)
        return 2
    elapsed = 0.0

    def cut(text: str) -> Truncation:
        nonlocal elapsed
        start = time.perf_counter()
        t = truncate(
            text,
            args.max_tokens,
            direction=direction,
            counter=counter,
            marker=marker,
            head_ratio=args.head_ratio,
            max_lines=args.max_lines,
            max_bytes=args.max_bytes,
            lines=args.lines,
        )
        elapsed += time.perf_counter() - start
        return t

    # Only a head cut whose marker shows no count can stop reading early: a tail, both ends
    # or the omitted count ({omitted}) need the input's end.
    streams = direction == "head" and OMITTED not in marker
    try:
        if streams:
            t, whole, valid = _head_streamed(args.file, args.max_input_bytes, cut, args.max_tokens)
        else:
            text, valid = read_text(args.file, args.max_input_bytes)
            whole = True
            t = cut(text)
    except (ValueError, TypeError, KeyError) as e:
        print(f"windowfit truncate: {e}", file=sys.stderr)
        return 2
    if not valid:
        print(
            "windowfit truncate: input is not valid UTF-8; bad bytes shown as U+FFFD",
            file=sys.stderr,
        )
    sys.stdout.buffer.write(t.text.encode("utf-8"))
    sys.stdout.buffer.flush()
    what = "truncated" if t.truncated else "fits, unchanged"
    if whole:
        stats = (
            f"kept {t.tokens:,} of {t.original_tokens:,} tokens, {t.kept_lines:,} of "
            f"{t.original_lines:,} lines, {t.kept_bytes:,} of {t.original_bytes:,} bytes; "
            f"{t.omitted_tokens:,} tokens omitted"
        )
    else:
        stats = (
            f"kept {t.tokens:,} tokens, {t.kept_lines:,} lines, {t.kept_bytes:,} bytes; "
            f"stopped reading after {t.original_bytes:,} bytes (the head was settled)"
        )
    print(
        f"{what} ({t.direction}, {counter.name}): {stats}; {elapsed * 1e3:.1f} ms", file=sys.stderr
    )
    return 0
