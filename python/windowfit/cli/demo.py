"""``windowfit demo [--history FILE]``: the showcase, on the bundled sample or your history."""

from __future__ import annotations

import argparse

from windowfit.cli._inputs import add_format_argument, read_history

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="count, fit, truncate and manage the bundled sample session or your own"
    )
    p.add_argument("--history", metavar="FILE", help="run the showcase on this chat history")
    add_format_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from windowfit.cli.showcase import run_demo

    if args.history is None:
        return run_demo()
    h = read_history(args.history, args.format)
    return run_demo(h.messages, name=h.source)
