"""``windowfit fit HISTORY --budget N``: write the fitted history and say what was dropped, why."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from windowfit.cli._inputs import CommandError, add_format_argument, make_counter, read_history
from windowfit.cli._output import Out, print_json

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fit",
        help="fit a chat history to a token budget; the fitted history goes to -o or stdout",
    )
    p.add_argument("history", help="chat history file (JSON, JSONL, ...), or - for stdin")
    p.add_argument("--budget", "-b", type=int, required=True, help="token budget of the prompt")
    p.add_argument("--model", "-m", default="gpt-4o", help="count with this model (gpt-4o)")
    add_format_argument(p)
    p.add_argument("--output", "-o", help="write the fitted history here (.jsonl: one per line)")
    p.add_argument("--jsonl", action="store_true", help="write JSONL (default for .jsonl names)")
    p.add_argument(
        "--start-on",
        choices=("user", "any"),
        default="user",
        help="before the latest user turn, grow by whole rounds (user) or by units (any)",
    )
    p.add_argument(
        "--unanswered",
        choices=("drop", "strip"),
        default="drop",
        help="drop calls never answered, or strip them and keep the assistant's text",
    )
    p.add_argument("--no-system", action="store_true", help="do not pin system messages")
    p.add_argument("--pin", type=int, action="append", default=[], help="also keep this index")
    p.add_argument("--json", action="store_true", help="print the report (and messages) as JSON")
    p.set_defaults(func=run)


def _why(message: dict[str, Any], repaired: set[int], index: int) -> str:
    if index in repaired:
        if message.get("role") == "tool" or message.get("tool_call_id") is not None:
            return "orphan tool result (its call is missing)"
        if message.get("role") == "user":
            return "orphan tool result (its call is missing)"
        return "tool call never answered"
    return "outside the window (budget)"


def _runs(dropped: list[dict[str, Any]]) -> list[list[Any]]:
    """Table rows: consecutive messages dropped for the same reason share one row."""
    rows: list[list[Any]] = []
    group: list[dict[str, Any]] = []

    def flush() -> None:
        if not group:
            return
        first, last = group[0], group[-1]
        span = str(first["index"]) if len(group) == 1 else f"{first['index']}-{last['index']}"
        lines = (
            "-"
            if first["line"] is None
            else str(first["line"])
            if len(group) == 1
            else f"{first['line']}-{last['line']}"
        )
        roles = sorted({d["role"] for d in group})
        tokens = sum(d["tokens"] for d in group)
        rows.append([span, lines, ", ".join(roles), f"{tokens:,}", first["why"]])
        group.clear()

    for d in dropped:
        if group and (d["index"] != group[-1]["index"] + 1 or d["why"] != group[-1]["why"]):
            flush()
        group.append(d)
    flush()
    return rows


def run(args: argparse.Namespace) -> int:
    import windowfit as wf
    from windowfit.replay.history_io import dump_history

    if args.budget < 0:
        raise CommandError(f"--budget must be >= 0, got {args.budget}")
    history = read_history(args.history, args.format)
    msgs = history.messages
    counter = make_counter(model=args.model)
    options: dict[str, Any] = {
        "keep_system": not args.no_system,
        "start_on": None if args.start_on == "any" else "user",
        "unanswered": args.unanswered,
        "pinned": args.pin,
    }
    try:
        r = wf.fit(msgs, args.budget, counter=counter, **options)
    except wf.BudgetError as e:
        raise CommandError(f"{history.source}: {e}") from e
    # what repair alone drops are the pairing problems; the rest fell outside the window
    repaired = set(wf.repair(msgs, unanswered=args.unanswered, counter=counter).dropped)
    dropped = [
        {
            "index": i,
            "line": history.lines[i],
            "role": msgs[i].get("role"),
            "tokens": counter.count_message(msgs[i]),
            "why": _why(msgs[i], repaired, i),
        }
        for i in r.dropped
    ]
    jsonl = args.jsonl or bool(args.output and args.output.endswith((".jsonl", ".ndjson")))
    text = dump_history(r.messages, jsonl=jsonl)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as e:
            raise CommandError(f"cannot write {args.output}: {e.strerror or e}", 1) from e
    report = {
        "source": history.source,
        "format": history.format,
        "budget": args.budget,
        "model": args.model,
        "tokens": r.tokens,
        "tokens_whole": counter.count_messages(msgs) if msgs else 0,
        "kept": r.kept,
        "dropped": dropped,
        "stop_reason": r.stats.get("stop_reason"),
        "output": args.output,
    }
    if args.json:
        if not args.output:
            report["messages"] = r.messages
        print_json(report)
        return 0
    if not args.output:
        sys.stdout.write(text)
    err = Out(sys.stderr)
    err.line(
        f"{history.source} ({history.format}): kept {len(r.kept)} of {len(msgs)} messages, "
        f"{r.tokens:,} of {report['tokens_whole']:,} tokens (budget {args.budget:,}, "
        f"{args.model}); stopped: {report['stop_reason']}"
    )
    if dropped:
        err.table(["messages", "lines", "role", "tokens", "why dropped"], _runs(dropped))
    return 0
