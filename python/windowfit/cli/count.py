"""``windowfit count FILE...``: tokens per file for one or more models, like ``wc``."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from windowfit.cli._inputs import add_format_argument, make_counter, read_history, read_text
from windowfit.cli._output import Out, print_json, progress

__all__ = ["add_parser", "run"]

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "count",
        help="tokens per file for one or more models, exact or marked as estimates, with a total",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="text files, or - for standard input")
    p.add_argument(
        "--model",
        "-m",
        action="append",
        dest="models",
        help="count for this model (repeat for several; default gpt-4o)",
    )
    p.add_argument(
        "--encoding", action="append", dest="encodings", help="count with this encoding too"
    )
    p.add_argument(
        "--messages",
        action="store_true",
        help="read each file as a chat history and count it as a request (message overhead "
        "included)",
    )
    add_format_argument(p)
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    specs: list[tuple[str, Any]] = []
    for name in args.models or ([] if args.encodings else ["gpt-4o"]):
        specs.append((name, make_counter(model=name)))
    for enc in args.encodings or []:
        specs.append((enc, make_counter(encoding=enc)))
    rows: list[dict[str, Any]] = []
    with progress("counting", len(args.files), enabled=len(args.files) > 3) as advance:
        for path in args.files:
            row: dict[str, Any] = {"file": path, "tokens": {}}
            if args.messages:
                history = read_history(path, args.format)
                row["messages"] = len(history.messages)
                row["format"] = history.format
                for name, c in specs:
                    row["tokens"][name] = c.count_messages(history.messages)
            else:
                text, valid = read_text(path)
                if not valid:
                    log.warning("%s is not valid UTF-8; bad bytes counted as U+FFFD", path)
                row["chars"] = len(text)
                for name, c in specs:
                    row["tokens"][name] = c.count(text)
            rows.append(row)
            advance(1)
    total = {name: sum(r["tokens"][name] for r in rows) for name, _ in specs}
    exact = {name: bool(c.is_exact) for name, c in specs}
    if args.json:
        models = [{"name": n, "tokenizer": c.name, "exact": exact[n]} for n, c in specs]
        print_json({"models": models, "files": rows, "total": total})
        return 0

    def cell(name: str, n: int) -> str:
        return f"{n:,}" if exact[name] else f"~{n:,}"

    columns = ["file", *(n if exact[n] else f"{n} (estimate)" for n, _ in specs)]
    table = [[r["file"], *(cell(n, r["tokens"][n]) for n, _ in specs)] for r in rows]
    if len(rows) > 1:
        table.append(["total", *(cell(n, total[n]) for n, _ in specs)])
    Out().table(columns, table)
    return 0
