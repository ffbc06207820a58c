"""The windowfit command line: count, fit, bench, models, demo, truncate, session, usage.

One module per command, each with ``add_parser(sub)`` registering its arguments and a ``run``
function; output goes through ``rich`` when installed, plain text otherwise, and ``--json``
gives scripts the same figures. Exit codes: 0 success, 1 a file that cannot be read or
written, 2 bad arguments or a malformed input (the message names file, line and field).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from windowfit.cli import bench, count, demo, fit, models, session, truncate
from windowfit.cli._inputs import CommandError
from windowfit.cli._output import fail

__all__ = ["build_parser", "main"]

_COMMANDS = (count, fit, bench, models, demo, truncate, session)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="windowfit", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    import windowfit as wf
    from windowfit.errors import WindowfitError

    # the library's errors (the core's classes are listed too while they do not all derive
    # from WindowfitError yet)
    library_errors = (
        WindowfitError,
        wf.UnknownModelError,
        wf.BudgetError,
        wf.InvalidMessageError,
        wf.MessageTypeError,
        wf.VocabularyError,
        wf.UnknownEncodingError,
        wf.MissingTokenizerError,
    )

    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="windowfit: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except CommandError as e:
        return fail(args.command, str(e), e.code)
    except library_errors as e:
        # bad input named by the library (file, line, field; unknown model; budget)
        return fail(args.command, str(e))


if __name__ == "__main__":
    sys.exit(main())
