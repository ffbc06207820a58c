"""Token-exact truncation of long texts (tool outputs, files, logs).

The cut runs in Rust (``windowfit._core.truncate_text``): it walks the pre-tokenizer's pieces
and encodes only the piece at the cut, so a 10 MB log costs one counting pass, not an encode.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.counting import Counter, resolve_counter

__all__ = ["DEFAULT_MARKER", "Truncation", "truncate"]

DEFAULT_MARKER: str = _core.DEFAULT_MARKER

Direction = Literal["head", "tail", "head_tail"]


@dataclass(frozen=True)
class Truncation:
    """The result of ``truncate``.

    ``text`` is the kept text, marker included, with ``tokens`` tokens by the counter used
    (``<= max_tokens``); ``truncated`` is False when the input fit and came back unchanged.
    ``text`` starts with ``input[:head_end]`` and ends with ``input[tail_start:]``.
    """

    text: str
    truncated: bool
    original_tokens: int
    tokens: int
    omitted_tokens: int
    original_lines: int
    kept_lines: int
    original_bytes: int
    kept_bytes: int
    head_end: int
    tail_start: int
    marker_used: bool
    direction: str


def _limit(name: str, value: Any) -> int | None:
    if value is None:
        return None
    return count_arg(name, value, infinite=True)  # beyond any text: no limit


def truncate(
    text: str,
    max_tokens: int | None = None,
    *,
    direction: Direction = "head",
    counter: Counter | None = None,
    model: str | None = None,
    marker: str = DEFAULT_MARKER,
    head_ratio: float = 0.5,
    max_lines: int | None = None,
    max_bytes: int | None = None,
) -> Truncation:
    """Cut ``text`` to at most ``max_tokens`` tokens (and ``max_lines`` / ``max_bytes``).

    ``direction``: ``"head"`` keeps the beginning, ``"tail"`` the end, ``"head_tail"`` both
    (split by ``head_ratio``) around ``marker``; ``{omitted}`` in the marker becomes the
    number of tokens cut. A marker that doesn't fit is dropped rather than exceed the limit.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if not isinstance(marker, str):
        raise TypeError(f"marker must be str, not {type(marker).__name__}")
    if direction not in ("head", "tail", "head_tail"):
        raise ValueError(f"direction must be 'head', 'tail' or 'head_tail', not {direction!r}")
    if isinstance(head_ratio, bool) or not isinstance(head_ratio, (int, float)):
        raise TypeError(f"head_ratio must be a number, not {type(head_ratio).__name__}")
    if not 0.0 <= head_ratio <= 1.0:  # also rejects NaN
        raise ValueError(f"head_ratio must be between 0 and 1, got {head_ratio}")
    c = resolve_counter(counter, model)
    raw = _core.truncate_text(
        c,
        text,
        max_tokens=_limit("max_tokens", max_tokens),
        max_lines=_limit("max_lines", max_lines),
        max_bytes=_limit("max_bytes", max_bytes),
        direction=direction,
        marker=marker,
        head_ratio=float(head_ratio),
    )
    if not raw.truncated:
        kept = text  # the caller's own string back, not an equal copy
    else:
        # Rebuild from the caller's characters (a lone surrogate was cut as one U+FFFD):
        # input[:head_end] + marker + input[tail_start:].
        head, tail, cut = raw.head_end, raw.tail_start, raw.text
        marker_text = cut[head : len(cut) - (len(text) - tail)]
        kept = text[:head] + marker_text + text[tail:]
    values = {f.name: getattr(raw, f.name) for f in fields(Truncation)}
    values["text"] = kept
    return Truncation(**values)
