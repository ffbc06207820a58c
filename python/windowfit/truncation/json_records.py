"""JSON compaction of tool outputs: a list-shaped JSON result (a list of objects, or an object
holding one) shown as one line per record with its most telling fields, so a cut keeps whole
records instead of half an object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from windowfit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["compact_json", "pick_key_fields"]


# Key names by role, most telling first; matched case- and separator-insensitively.
_LABEL_KEYS = (
    "title",
    "name",
    "subject",
    "summary",
    "label",
    "headline",
    "filename",
    "path",
    "url",
    "query",
    "message",
    "text",
    "description",
)
_TIME_KEYS = (
    "start",
    "starttime",
    "startdate",
    "startat",
    "date",
    "datetime",
    "time",
    "timestamp",
    "createdat",
    "created",
    "updatedat",
    "updated",
    "modified",
    "due",
    "deadline",
    "when",
    "end",
)
_ID_KEYS = ("id", "uuid", "key", "number", "uid", "sku", "ref")
_STATUS_KEYS = ("status", "state", "type", "kind", "level", "priority", "category", "severity")
_TOTAL_KEYS = (
    "total",
    "totalcount",
    "totalitems",
    "totalresults",
    "count",
    "numresults",
    "resultcount",
    "totalsize",
    "hits",
)
_VALUE_CHARS = 60  # a field's displayed value is cut to this many characters


def _norm(key: str) -> str:
    return re.sub(r"[\s_\-.]", "", key).lower()


def _role(key: str) -> tuple[int, int] | None:
    """(role rank, preference within the role) of a key name, or None if it has no role."""
    n = _norm(key)
    for rank, names in enumerate((_LABEL_KEYS, _TIME_KEYS, _ID_KEYS, _STATUS_KEYS)):
        if n in names:
            return rank, names.index(n)
    # composite names: "event_name", "startTime", "order_id", "payment_status"
    if n.endswith(("title", "name")):
        return 0, len(_LABEL_KEYS)
    if n.endswith(("date", "time")) or re.search(r"(?:[_\-.]at|[a-z]At)$", key):
        return 1, len(_TIME_KEYS)
    if n.startswith(("start", "created", "updated")):
        return 1, len(_TIME_KEYS) + 1
    if re.search(r"(?:^|[_\-.])id$|[a-z]Id$|ID$", key):
        return 2, len(_ID_KEYS)
    if n.endswith(("status", "state")):
        return 3, len(_STATUS_KEYS)
    return None


def _scalar(value: Any) -> str | None:
    """A short display of a field value: scalars as they are, the first scalar of an object
    (``{"dateTime": ..., "timeZone": ...}``), the first few of a list; None when empty."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        s = " ".join(value.split())
        if not s:
            return None
        return s if len(s) <= _VALUE_CHARS else s[: _VALUE_CHARS - 1] + "…"
    if isinstance(value, Mapping):
        for v in value.values():
            inner = _scalar(v) if not isinstance(v, (Mapping, list)) else None
            if inner is not None:
                return inner
        return None
    if isinstance(value, list):
        parts = [
            s for s in (_scalar(v) for v in value[:3] if not isinstance(v, (Mapping, list))) if s
        ]
        if not parts:
            return None
        s = "/".join(parts) + ("/…" if len(value) > 3 else "")
        return s if len(s) <= _VALUE_CHARS else s[: _VALUE_CHARS - 1] + "…"
    return None


def _get(record: Mapping[str, Any], path: str) -> Any:
    """``record[path]``, or a dotted path into nested objects (``"start.dateTime"``)."""
    if path in record:
        return record[path]
    cur: Any = record
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _records_of(data: Any) -> tuple[list[Mapping[str, Any]], int] | None:
    """(records, total) when ``data`` is list-shaped, else None.

    List-shaped: a non-empty list of objects, or an object whose one main list of objects
    (the longest, found at most two levels down) holds the records, next to an optional total.
    """
    if isinstance(data, list):
        if data and all(isinstance(r, Mapping) for r in data):
            return data, len(data)
        return None
    if not isinstance(data, Mapping):
        return None
    found: list[tuple[list[Mapping[str, Any]], Mapping[str, Any]]] = []

    def scan(obj: Mapping[str, Any], depth: int) -> None:
        for v in obj.values():
            if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v):
                found.append((v, obj))
            elif isinstance(v, Mapping) and depth < 2:
                scan(v, depth + 1)

    scan(data, 1)
    if not found:
        return None
    found.sort(key=lambda f: len(f[0]), reverse=True)
    if len(found) > 1 and len(found[1][0]) * 2 > len(found[0][0]):
        return None  # two lists of similar size: no main list to pick
    records, parent = found[0]
    total = len(records)
    for holder in (parent, data):
        for k, v in holder.items():
            is_count = isinstance(v, int) and not isinstance(v, bool)
            if is_count and _norm(k) in _TOTAL_KEYS and v >= len(records):
                return records, v
    return records, total


def pick_key_fields(records: Sequence[Mapping[str, Any]], limit: int = 3) -> list[str]:
    """Up to ``limit`` fields that describe each record: a label, a time, an id or a status,
    among the keys present (non-empty) in at least half the records."""
    sample = records[:200]  # a sample is enough to see which keys are common
    seen: dict[str, int] = {}
    order: dict[str, int] = {}
    for r in sample:
        for k, v in r.items():
            if isinstance(k, str) and _scalar(v) is not None:
                seen[k] = seen.get(k, 0) + 1
                order.setdefault(k, len(order))
    common = [k for k, n in seen.items() if n * 2 >= len(sample)]
    roles = {k: role for k in common if (role := _role(k)) is not None}
    chosen: list[str] = []
    for rank in range(4):
        ranked = sorted(
            (k for k in roles if roles[k][0] == rank),
            key=lambda k: (roles[k][1], order[k]),
        )
        if ranked:
            chosen.append(ranked[0])
        if len(chosen) == limit:
            return chosen
    # records with no recognizable keys: their first common fields, in document order
    for k in sorted(common, key=order.__getitem__):
        if len(chosen) == limit:
            break
        if k not in chosen:
            chosen.append(k)
    return chosen


@dataclass
class _Compacted:
    lines: list[str]  # one per record, "#i label (field, field)"
    total: int
    fields: list[str]


def _compact(data: Any, key_fields: Sequence[str] | None) -> _Compacted | None:
    found = _records_of(data)
    if found is None:
        return None
    records, total = found
    fields = list(key_fields) if key_fields else pick_key_fields(records)
    if not fields:
        return None
    lines = []
    for i, r in enumerate(records, 1):
        shown = [_scalar(_get(r, f)) for f in fields]
        first, rest = shown[0], [s for s in shown[1:] if s is not None]
        line = f"#{i}"
        if first is not None:
            line += f" {first}"
        if rest:
            line += f" ({', '.join(rest)})"
        lines.append(line)
    return _Compacted(lines, total, fields)


def _footer(total: int, shown: int) -> str:
    return f"({total:,} items)" if shown == total else f"({total:,} items, {shown:,} shown)"


def _looks_like_json(text: str) -> bool:
    """Starts like a JSON object or array (a cheap test before parsing a big output)."""
    head = text[:256].lstrip()[:1] or text.lstrip()[:1]
    return head in ("[", "{")


def _parse_json(text: str) -> Any:
    """The parsed JSON value, or None when ``text`` is not one JSON object or array."""
    if not _looks_like_json(text):  # skip the parse attempt for the common plain-text case
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _check_key_fields(key_fields: Any) -> tuple[str, ...] | None:
    if key_fields is None:
        return None
    if isinstance(key_fields, str):
        key_fields = (key_fields,)
    if not isinstance(key_fields, Sequence) or not all(isinstance(f, str) for f in key_fields):
        raise ArgumentTypeError("key_fields must be a sequence of field names (str)")
    if not key_fields or not all(key_fields):
        raise InvalidArgumentError("key_fields must name at least one field, and no empty names")
    return tuple(key_fields)


def compact_json(text: str, key_fields: Sequence[str] | None = None) -> str | None:
    """One short line per record of a list-shaped JSON ``text`` plus the total, or None.

    ``key_fields`` names the fields shown (dotted paths reach into nested objects: ``"start.
    dateTime"``); by default up to three are picked: a label, a time, an id or a status.
    Returns None when ``text`` is not JSON or not list-shaped. No limits apply here; the
    ``ToolOutputTruncator`` cuts the result to its limits.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be str, not {type(text).__name__}")
    fields = _check_key_fields(key_fields)
    c = _compact(_parse_json(text), fields)
    if c is None:
        return None
    return "\n".join([*c.lines, _footer(c.total, len(c.lines))])
