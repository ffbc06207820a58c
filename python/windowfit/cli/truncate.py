"""``windowfit truncate FILE``: cut a file (or stdin) to a token/line/byte budget."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    trunc = sub.add_parser(
        "truncate",
        help="cut a file (or stdin) to a token/line/byte budget; text to stdout, stats to stderr",
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
        help="refuse input larger than this (default $WINDOWFIT_MAX_INPUT_BYTES or 256 MiB)",
    )
    trunc.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    import windowfit as wf
    from windowfit.cli._inputs import read_text
    from windowfit.truncation import DEFAULT_DIRECTION, TOKENS_OMITTED_MARKER, truncate

    if args.max_tokens is None and args.max_lines is None and args.max_bytes is None:
        print("windowfit truncate: give --max-tokens, --max-lines or --max-bytes", file=sys.stderr)
        return 2
    text, valid = read_text(args.file, args.max_input_bytes)
    if not valid:
        print(
            "windowfit truncate: input is not valid UTF-8; bad bytes shown as U+FFFD",
            file=sys.stderr,
        )
    try:
        counter = (
            wf.Counter(encoding=args.encoding)
            if args.encoding
            else wf.Counter(model=args.model or "gpt-4o")
        )
        start = time.perf_counter()
        t = truncate(
            text,
            args.max_tokens,
            direction=args.direction or DEFAULT_DIRECTION,
            counter=counter,
            marker=TOKENS_OMITTED_MARKER if args.marker is None else args.marker,
            head_ratio=args.head_ratio,
            max_lines=args.max_lines,
            max_bytes=args.max_bytes,
            lines=args.lines,
        )
        elapsed = time.perf_counter() - start
    except (ValueError, TypeError, KeyError) as e:
        print(f"windowfit truncate: {e}", file=sys.stderr)
        return 2
    sys.stdout.buffer.write(t.text.encode("utf-8"))
    sys.stdout.buffer.flush()
    what = "truncated" if t.truncated else "fits, unchanged"
    print(
        f"{what} ({t.direction}, {counter.name}): kept {t.tokens:,} of {t.original_tokens:,} "
        f"tokens, {t.kept_lines:,} of {t.original_lines:,} lines, {t.kept_bytes:,} of "
        f"{t.original_bytes:,} bytes; {t.omitted_tokens:,} tokens omitted; {elapsed * 1e3:.1f} ms",
        file=sys.stderr,
    )
    return 0
