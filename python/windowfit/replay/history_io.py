"""Read chat histories from files, in the shapes people keep them.

One entry point, :func:`load_history`, returns canonical (OpenAI chat) message dicts from:

- ``openai``: a JSON list of chat messages, or an object with a ``messages`` list
- ``jsonl``: one chat message per line (a log); blank lines are skipped
- ``langchain``: LangChain message dumps (``messages_to_dict`` or ``dumpd`` output; needs
  ``langchain-core``), converted by windowfit's LangChain integration
- ``anthropic``: Messages API requests (``{"system": ..., "messages": [...]}``) or message lists
  with ``tool_use`` / ``tool_result`` blocks, converted by windowfit's Anthropic adapter
- ``mini-swe-agent``: agent run files (``*.traj.json``); the final ``exit`` record (not a chat
  role) is dropped and each message keeps only its chat fields

The shape is detected from the file name and contents, or forced with ``format=``. Every
problem raises :class:`HistoryFormatError` naming the file, the line and the field; messages
themselves are checked by the counter's own reader (the one message model), whose error is
mapped back to the file line of the message.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from windowfit.errors import WindowfitError

__all__ = ["FORMATS", "History", "HistoryFormatError", "dump_history", "load_history"]

log = logging.getLogger(__name__)

FORMATS = ("openai", "jsonl", "langchain", "anthropic", "mini-swe-agent")

# the fields a chat message carries; agent run files add their own bookkeeping keys
_CHAT_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")
_CALL_FIELDS = ("id", "type", "function")
_LANGCHAIN_TYPES = frozenset({"human", "ai", "system", "tool", "chat", "function", "developer"})


class HistoryFormatError(WindowfitError, ValueError):
    """A history file that cannot be read; names the file, line and field."""

    def __init__(self, file: str, line: int | None, field: str | None, problem: str) -> None:
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")
        self.file, self.line, self.field, self.problem = file, line, field, problem


@dataclass
class History:
    """Messages read from one file, with where they came from."""

    messages: list[dict[str, Any]]
    source: str
    format: str
    #: file line of each message (1-based; None for one the file does not hold, such as an
    #: Anthropic top-level system prompt)
    lines: list[int | None]


# ----------------------------------------------------------------------------- JSON positions


def _line_at(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _array_offsets(text: str, start: int) -> list[int]:
    """Offsets of the elements of the JSON array opening at ``start`` (already valid JSON)."""
    dec = json.JSONDecoder()
    out: list[int] = []
    i = _skip_ws(text, start + 1)
    while i < len(text) and text[i] != "]":
        out.append(i)
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return out


def _member_offset(text: str, start: int, key: str) -> int | None:
    """Offset of the value of top-level member ``key`` of the JSON object opening at ``start``."""
    dec = json.JSONDecoder()
    i = _skip_ws(text, start + 1)
    while i < len(text) and text[i] == '"':
        name, i = dec.raw_decode(text, i)
        i = _skip_ws(text, _skip_ws(text, i) + 1)  # past the colon
        if name == key:
            return i
        _, i = dec.raw_decode(text, i)
        i = _skip_ws(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)
    return None


def _deepest(text: str) -> tuple[int, int]:
    """The deepest nesting of arrays and objects in ``text`` and where it is first reached."""
    depth = deepest = at = 0
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
        elif ch in "]}":
            depth -= 1
    return deepest, at


def _too_deep(source: str, text: str, first_line: int) -> HistoryFormatError:
    """JSON nested deeper than Python's parser recurses, named by the line of its deepest point."""
    deepest, at = _deepest(text)
    line = first_line + text.count("\n", 0, at)
    levels = f" ({deepest} levels)" if deepest else ""
    return HistoryFormatError(source, line, None, f"JSON nested too deeply{levels} to read")


# ----------------------------------------------------------------------------- shapes


def _detect(name: str, data: Any) -> str:
    if isinstance(data, Mapping):
        if "trajectory_format" in data or name.endswith(".traj.json"):
            return "mini-swe-agent"
        if "system" in data and isinstance(data.get("messages"), list):
            return "anthropic"
        items = data.get("messages")
    else:
        items = data
    if not isinstance(items, list):
        return "openai"  # reported as a wrong shape by the reader
    dicts = [m for m in items if isinstance(m, Mapping)]
    if dicts and all(
        ("lc" in m and "kwargs" in m) or (m.get("type") in _LANGCHAIN_TYPES and "data" in m)
        for m in dicts
    ):
        return "langchain"
    for m in dicts:
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return "anthropic"
    return "openai"


def _messages_of(
    text: str, data: Any, source: str, key_hint: str
) -> tuple[list[Any], list[int | None]]:
    """The message list of a JSON document and each message's line."""
    start = _skip_ws(text, 0)
    if isinstance(data, list):
        offsets = _array_offsets(text, start)
    elif isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        at = _member_offset(text, start, "messages")
        offsets = _array_offsets(text, at) if at is not None else []
        data = data["messages"]
    else:
        got = type(data).__name__
        raise HistoryFormatError(
            source, 1, "messages", f"expected {key_hint}, got a JSON {got} without a messages list"
        )
    lines: list[int | None] = [_line_at(text, o) for o in offsets]
    if len(lines) != len(data):
        lines = [None] * len(data)
    return list(data), lines


def _chat_only(m: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: m[k] for k in _CHAT_FIELDS if k in m}
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [
            {k: c[k] for k in _CALL_FIELDS if k in c} if isinstance(c, Mapping) else c
            for c in calls
        ]
    elif calls is None:
        out.pop("tool_calls", None)
    return out


def _check_shape(items: Sequence[Any], source: str, lines: Sequence[int | None]) -> None:
    """Each item is an object with a string role: the file's shape, before the reader's check."""
    for i, m in enumerate(items):
        if not isinstance(m, Mapping):
            got = type(m).__name__
            raise HistoryFormatError(
                source, lines[i], f"message {i}", f"expected an object, got {got}"
            )
        if "role" not in m:
            raise HistoryFormatError(source, lines[i], f"message {i}: role", "missing")
        if not isinstance(m["role"], str):
            got = type(m["role"]).__name__
            raise HistoryFormatError(
                source, lines[i], f"message {i}: role", f"expected a string, got {got}"
            )


def _langchain(items: list[Any], source: str, lines: list[int | None]) -> Any:
    try:
        from langchain_core.load import load
        from langchain_core.messages import messages_from_dict

        from windowfit.adapters.langchain import to_canonical
    except ImportError as exc:
        raise HistoryFormatError(
            source,
            None,
            None,
            "LangChain dumps need langchain-core: pip install 'windowfit[langchain]'",
        ) from exc
    objs = []
    for i, m in enumerate(items):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # load() is marked beta
                # a file is untrusted input: only message classes may be constructed
                obj = _lc_load(load, m) if "lc" in m else None
            objs.append(obj if obj is not None else messages_from_dict([m])[0])
        except Exception as exc:  # noqa: BLE001 - LangChain raises many kinds; name the message
            raise HistoryFormatError(
                source, lines[i], f"message {i}", f"not a LangChain message dump ({exc})"
            ) from exc
    # one LangChain message may become several canonical ones (tool results go first)
    return to_canonical(objs)


def _item_lines(conv: Any, lines: Sequence[int | None]) -> list[int | None]:
    """The file line of each converted message: the line of the item it came from."""
    return [lines[refs[0][0]] if refs else None for refs in conv.origins]


def _lc_load(load: Any, dump: Any) -> Any:
    try:
        return load(dump, allowed_objects="messages")
    except TypeError:  # a langchain-core from before allowed_objects
        return load(dump)


def _anthropic(data: Any, items: list[Any]) -> Any:
    from windowfit.adapters import from_anthropic

    system = data.get("system") if isinstance(data, Mapping) else None
    return from_anthropic(items, system=system)


# ----------------------------------------------------------------------------- reading


def _read_jsonl(text: str, source: str) -> tuple[list[Any], list[int | None]]:
    items: list[Any] = []
    lines: list[int | None] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            items.append(json.loads(raw))
        except json.JSONDecodeError as exc:
            raise HistoryFormatError(
                source, n, None, f"bad JSON at column {exc.colno}: {exc.msg}"
            ) from exc
        except RecursionError:
            raise _too_deep(source, raw, n) from None
        lines.append(n)
    return items, lines


def _validate(messages: list[dict[str, Any]], source: str, lines: list[int | None]) -> None:
    """Run the counter's reader over the messages and map its index to the file line."""
    import windowfit as wf

    try:
        wf.Counter.heuristic().count_messages(messages)
    except (wf.InvalidMessageError, wf.MessageTypeError) as exc:
        text = str(exc)
        line = None
        head, _, rest = text.partition(":")
        if head.startswith("message ") and head[8:].isdigit():
            i = int(head[8:])
            line = lines[i] if i < len(lines) else None
            raise HistoryFormatError(source, line, head, rest.strip()) from exc
        raise HistoryFormatError(source, line, None, text) from exc


def load_history(
    path: str | Path,
    *,
    format: str | None = None,
    text: str | None = None,
    data: bytes | None = None,
) -> History:
    """Read the history in ``path`` (``"-"``: standard input, or pass ``text``, or the file's
    bytes as ``data`` when the caller read them itself).

    ``format`` is one of :data:`FORMATS`; None detects it. Raises :class:`HistoryFormatError`
    (a ``ValueError``) naming the file, line and field, and ``OSError`` when the file cannot be
    read.
    """
    try:
        return _load_history(path, format, text, data)
    except RecursionError:  # a document deep enough for the parser, too deep for a later step
        source = "<stdin>" if str(path) == "-" else str(path)
        raise _too_deep(source, text or "", 1) from None


def _load_history(
    path: str | Path, format: str | None, text: str | None, read: bytes | None
) -> History:
    source = "<stdin>" if str(path) == "-" else str(path)
    if format is not None and format not in FORMATS:
        raise HistoryFormatError(source, None, "format", f"unknown {format!r}; one of {FORMATS}")
    if text is None:
        if read is not None:
            raw = read
        else:
            raw = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise HistoryFormatError(source, line, None, "not valid UTF-8") from exc
    if not text.strip():
        raise HistoryFormatError(source, 1, None, "empty file, expected a chat history")
    is_jsonl = format == "jsonl" or (format is None and source.endswith((".jsonl", ".ndjson")))
    data: Any = None
    if is_jsonl:
        items, lines = _read_jsonl(text, source)
    else:
        try:
            data = json.loads(text)
        except RecursionError:
            raise _too_deep(source, text, 1) from None
        except json.JSONDecodeError as exc:
            if format is None and exc.msg == "Extra data":
                # several JSON documents, one per line: a log without the .jsonl name
                items, lines = _read_jsonl(text, source)
                is_jsonl = True
            else:
                raise HistoryFormatError(
                    source, exc.lineno, None, f"bad JSON at column {exc.colno}: {exc.msg}"
                ) from exc
        if not is_jsonl:
            items, lines = _messages_of(text, data, source, "a list of chat messages")
    fmt = format or ("jsonl" if is_jsonl else _detect(source, data))
    if fmt == "jsonl" and not is_jsonl:
        items, lines = _read_jsonl(text, source)
    if fmt == "langchain":
        conv = _langchain(items, source, lines)
        return History(conv.messages, source, fmt, _item_lines(conv, lines))
    _check_shape(items, source, lines)
    if fmt == "mini-swe-agent":
        kept = [(m, ln) for m, ln in zip(items, lines) if m["role"] != "exit"]
        messages = [_chat_only(m) for m, _ in kept]
        lines = [ln for _, ln in kept]
    elif fmt == "anthropic":
        # a user turn may split into several messages: each keeps its turn's line
        conv = _anthropic(data, items)
        messages, lines = conv.messages, _item_lines(conv, lines)
    else:
        messages = [dict(m) for m in items]
    _validate(messages, source, lines)
    log.debug("read %d messages from %s (%s)", len(messages), source, fmt)
    return History(messages, source, fmt, lines)


def dump_history(messages: Sequence[Mapping[str, Any]], *, jsonl: bool = False) -> str:
    """Canonical messages as a JSON list (indented) or JSONL (one message per line)."""
    if jsonl:
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    return json.dumps(list(messages), ensure_ascii=False, indent=1) + "\n"
