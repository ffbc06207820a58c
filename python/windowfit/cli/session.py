"""``windowfit session list``, ``windowfit session show ID`` and ``windowfit usage``: stored
sessions, their summaries and their cost."""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    from windowfit.cli.stores import add_store_arguments

    session = sub.add_parser("session", help="inspect stored sessions")
    session_sub = session.add_subparsers(dest="session_command", required=True)
    listing = session_sub.add_parser(
        "list", help="stored sessions, most recently updated first, with their summaries"
    )
    add_store_arguments(listing)
    listing.add_argument("--limit", type=int, default=50, help="at most N sessions (0: all)")
    listing.add_argument("--json", action="store_true", help="print the sessions as JSON")
    listing.set_defaults(func=_cmd_session_list)
    show = session_sub.add_parser(
        "show", help="a session's metadata, summaries, children and messages"
    )
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


def _cmd_session_list(args: argparse.Namespace) -> int:
    from windowfit.cli.stores import cmd_session_list

    return cmd_session_list(args)


def _cmd_session_show(args: argparse.Namespace) -> int:
    from windowfit.cli.stores import cmd_session_show

    return cmd_session_show(args)


def _cmd_usage(args: argparse.Namespace) -> int:
    from windowfit.cli.stores import cmd_usage

    return cmd_usage(args)
