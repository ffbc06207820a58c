"""The `windowfit session list|show` and `windowfit usage` commands (registered in
windowfit.cli)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from windowfit.session import Session
from windowfit.session.state import DEFAULT_CONSUMER, slot
from windowfit.store.base import BaseStore, SessionInfo, StoreError

__all__ = [
    "add_store_arguments",
    "cmd_session_list",
    "cmd_session_show",
    "cmd_usage",
    "open_cli_store",
]

_DEFAULT_DB = "sessions.db"


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--db",
        metavar="PATH",
        help=f"SQLite store (default: $WINDOWFIT_DB or {_DEFAULT_DB})",
    )
    where.add_argument("--redis", metavar="URL", help="Redis store, e.g. redis://localhost:6379/0")
    parser.add_argument(
        "--prefix", default="windowfit", help="Redis key prefix (default: windowfit)"
    )


def open_cli_store(args: argparse.Namespace) -> BaseStore:
    if args.redis:
        from windowfit.store.redis import RedisStore

        return RedisStore(args.redis, prefix=args.prefix)
    from windowfit.store.sqlite import SQLiteStore

    path = args.db or os.environ.get("WINDOWFIT_DB") or _DEFAULT_DB
    if not os.path.exists(path):
        # a read-only command must not leave an empty database behind
        raise StoreError(f"no SQLite store at {path!r} (use --db PATH or --redis URL)")
    return SQLiteStore(path)


def _console(out: TextIO) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=out, soft_wrap=False)


# Control characters (C0, DEL, C1) and the bidirectional overrides: stored text, ids and model
# names come from callers and models, and printed raw they would drive the terminal (move the
# cursor, retitle the window, hide or reorder what follows).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable(text: Any) -> str:
    """``text`` with every control character written as a visible escape (``\\x1b``)."""
    return _CONTROL_RE.sub(_escape_control, str(text))


def _escape_control(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _time(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _preview(message: dict[str, Any], width: int) -> str:
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif content is None:
        text = ""
    else:
        text = json.dumps(content, ensure_ascii=False)
    calls = message.get("tool_calls")
    if calls:
        names = []
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            names.append(str((fn or {}).get("name") or (call or {}).get("name") or "?"))
        text = (text + " " if text else "") + f"[tool calls: {', '.join(names)}]"
    if message.get("tool_call_id"):
        text = f"[{message['tool_call_id']}] {text}"
    text = _printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _info_rows(info: SessionInfo, children: list[SessionInfo]) -> list[tuple[str, str]]:
    rows = [
        ("id", info.id),
        ("messages", str(info.length)),
        ("created", _time(info.created_at)),
        ("updated", _time(info.updated_at)),
        ("state version", str(info.state_version)),
    ]
    if info.parent_id is not None:
        rows += [("parent", info.parent_id), ("task", info.task or ""), ("status", info.status)]
        if info.result is not None:
            rows.append(("result", _preview({"content": info.result}, 200)))
    if info.meta:
        rows.append(("meta", json.dumps(info.meta, ensure_ascii=False)))
    if children:
        rows.append(
            ("children", ", ".join(f"{c.id} ({c.status}, {c.length} msgs)" for c in children))
        )
    return [(key, _printable(value)) for key, value in rows]


def _summaries(state: dict[str, Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """``(consumer, its state)`` for each consumer of a stored state that holds a summary."""
    if not state:
        return []
    others = state.get("consumers")
    names = [DEFAULT_CONSUMER, *(others if isinstance(others, dict) else ())]
    found = [(name, slot(state, name)) for name in names]
    return [(name, st) for name, st in found if st and st.get("summary")]


def _summary_rows(state: dict[str, Any] | None, width: int | None) -> list[tuple[str, str]]:
    rows = []
    for name, st in _summaries(state):
        label = "summary" if name == "default" else f"summary ({name})"
        text = str(st["summary"])
        if width is not None:
            text = _preview({"content": text}, width)
        head = (
            f"{st.get('summarized_messages', '?')} messages, {st.get('summary_tokens', '?')} tokens"
        )
        rows.append((label, f"[{head}] {text}"))
    return rows


def cmd_session_list(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Sessions, most recently updated first, with their length and summary."""
    out = out or sys.stdout
    limit = None if args.limit is None or args.limit <= 0 else args.limit
    try:
        with open_cli_store(args) as store:
            infos = store.list_sessions(limit)
            states = {i.id: Session(store, i.id).state for i in infos}
    except StoreError as exc:
        print(f"windowfit: {exc}", file=sys.stderr)
        return 1
    if args.json:
        doc = [
            {**i.to_dict(), "summaries": {n: st["summary"] for n, st in _summaries(states[i.id])}}
            for i in infos
        ]
        out.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return 0
    if not infos:
        out.write("no sessions\n")
        return 0
    rows = []
    for i in infos:
        summary = _summary_rows(states[i.id], 70)
        rows.append((i.id, str(i.length), _time(i.updated_at), summary[0][1] if summary else "-"))
    console = _console(out)
    if console is None:
        for row in rows:
            out.write(f"{row[0]:<24} {row[1]:>6}  {row[2]}  {row[3]}\n")
        return 0
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} sessions, most recently updated first")
    for name in ("id", "messages", "updated", "summary"):
        table.add_column(name, justify="right" if name == "messages" else "left")
    for row in rows:
        table.add_row(*(escape(v) for v in row))
    console.print(table)
    return 0


def cmd_session_show(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        with open_cli_store(args) as store:
            info = store.info(args.id)
            if info is None:
                print(f"windowfit: no session {args.id!r}", file=sys.stderr)
                return 1
            session = Session(store, args.id)
            messages = session.messages
            state = session.state
            children = store.children(args.id)
    except StoreError as exc:
        print(f"windowfit: {exc}", file=sys.stderr)
        return 1
    if args.json:
        doc = {
            **info.to_dict(),
            "state": state,
            "children": [c.id for c in children],
            "messages": messages,
        }
        out.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return 0
    shown = messages if args.limit is None or args.limit <= 0 else messages[-args.limit :]
    first = len(messages) - len(shown)
    console = _console(out)
    summaries = _summary_rows(state, None)
    if console is None:
        for key, value in _info_rows(info, children) + summaries:
            out.write(f"{key:>14}: {value}\n")
        for i, msg in enumerate(shown, start=first):
            out.write(f"{i:>5} {_printable(msg.get('role', '?')):<10} {_preview(msg, 100)}\n")
        return 0
    from rich.markup import escape
    from rich.table import Table

    head = Table(show_header=False, box=None, pad_edge=False)
    head.add_column(style="bold")
    head.add_column()
    for key, value in _info_rows(info, children):
        head.add_row(key, escape(value))
    console.print(head)
    for key, value in summaries:  # whole, unwrapped: the summary is what the model reads
        console.print(f"[bold]{escape(key)}[/bold]: {escape(value)}", soft_wrap=True)
    table = Table(title=f"messages {first}..{len(messages) - 1}" if shown else "no messages")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("content", overflow="fold")
    for i, msg in enumerate(shown, start=first):
        table.add_row(str(i), escape(_printable(msg.get("role", "?"))), escape(_preview(msg, 160)))
    console.print(table)
    return 0


def _cost(row: dict[str, Any]) -> str:
    if row["calls"] and row["unpriced_calls"] == row["calls"]:
        return "?"
    text = f"${row['cost']:.4f}"
    return f"≥{text}" if row["unpriced_calls"] else text


def _usage_filter(args: argparse.Namespace) -> str:
    """The filters of a usage query in words, for the "nothing recorded" message."""
    from windowfit.models import model_family

    parts = []
    if args.model:
        family = model_family(args.model)
        parts.append(f"model family {family!r} (any dated name of it)")
    if args.day:
        parts.append(f"day {args.day}")
    if args.session:
        parts.append(f"session {args.session!r}")
    return " for " + ", ".join(parts) if parts else ""


def cmd_usage(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from windowfit.usage import UsageTracker

    out = out or sys.stdout
    try:
        with open_cli_store(args) as store:
            tracker = UsageTracker(store)
            rows = tracker.rows(model=args.model, day=args.day, session_id=args.session)
            total = tracker.totals(model=args.model, day=args.day, session_id=args.session)
    except (StoreError, ValueError) as exc:
        print(f"windowfit: {exc}", file=sys.stderr)
        return 1
    if args.json:
        out.write(json.dumps({"rows": rows, "total": total}, indent=2) + "\n")
        return 0
    if not rows:
        print(f"windowfit: no usage recorded{_usage_filter(args)}", file=sys.stderr)
    columns = ("day", "model", "calls", "prompt", "cached", "completion", "cost")

    def cells(row: dict[str, Any], day: str, model: str) -> list[str]:
        return [
            _printable(day),
            _printable(model),
            f"{row['calls']:,}",
            f"{row['prompt_tokens']:,}",
            f"{row['cached_tokens']:,}",
            f"{row['completion_tokens']:,}",
            _cost(row),
        ]

    body = [cells(r, r["day"], r["model"]) for r in rows]
    foot = cells(total, "total", "")
    console = _console(out)
    if console is None:
        for line in [list(columns), *body, foot]:
            out.write("  ".join(f"{c:>12}" for c in line) + "\n")
        return 0
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="token usage by model and day (UTC)", show_footer=bool(rows))
    for i, name in enumerate(columns):
        table.add_column(
            name, footer=foot[i], justify="left" if i < 2 else "right", overflow="fold"
        )
    for line in body:
        table.add_row(*(escape(c) for c in line))
    console.print(table)
    if total["unpriced_calls"]:
        console.print(f"{total['unpriced_calls']} call(s) of models without prices: cost unknown")
    return 0
