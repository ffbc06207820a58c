"""The `windowfit` command line: demo, truncate, session and usage commands.

Each command lives in a small `_cmd_*` function registered in `build_parser`; output goes
through `rich` when installed, plain text otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="windowfit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="count, fit, truncate and manage a bundled sample session")
    demo.set_defaults(func=_cmd_demo)

    _add_session_commands(sub)

    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    from windowfit.demo import run_demo

    return run_demo()


def _add_session_commands(sub: argparse._SubParsersAction) -> None:
    from windowfit.store._cli import add_store_arguments

    session = sub.add_parser("session", help="inspect stored sessions")
    session_sub = session.add_subparsers(dest="session_command", required=True)
    show = session_sub.add_parser("show", help="a session's metadata, children and messages")
    show.add_argument("id", help="session id")
    add_store_arguments(show)
    show.add_argument("--limit", type=int, default=50, help="show the last N messages (0: all)")
    show.add_argument("--json", action="store_true", help="print the full session as JSON")
    show.set_defaults(func=_cmd_session_show)

    usage = sub.add_parser("usage", help="token usage and cost by model and day")
    add_store_arguments(usage)
    usage.add_argument("--day", help="one UTC day: YYYY-MM-DD or 'today'")
    usage.add_argument("--model", help="one model")
    usage.add_argument("--session", help="one session id")
    usage.add_argument("--json", action="store_true", help="print rows and total as JSON")
    usage.set_defaults(func=_cmd_usage)


def _cmd_session_show(args: argparse.Namespace) -> int:
    from windowfit.store._cli import cmd_session_show

    return cmd_session_show(args)


def _cmd_usage(args: argparse.Namespace) -> int:
    from windowfit.store._cli import cmd_usage

    return cmd_usage(args)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
