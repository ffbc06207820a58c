"""Token-exact truncation of long texts (tool outputs, files, logs).

The cut runs in Rust (``windowfit._core.truncate_text``): it decides whether the text fits by
counting only up to the limit, walks the pre-tokenizer's pieces from the end it keeps and
encodes only the piece at the cut, so cutting a 100 MB log to 2,000 tokens reads about what it
keeps. The whole text's count (``original_tokens``, ``omitted_tokens``) costs one more pass over
the whole input: it is taken only when the marker shows it (``{omitted}``; the default marker
does not), when ``count_total=True``, or on first access of those properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["DEFAULT_DIRECTION", "DEFAULT_MARKER", "TOKENS_OMITTED_MARKER", "Truncation", "truncate"]

#: Shows no number, so a default cut reads only what it keeps.
DEFAULT_MARKER: str = _core.DEFAULT_MARKER
#: Shows the omitted token count: the default of callers that count the whole input anyway
#: (``ToolOutputTruncator``, the CLI).
TOKENS_OMITTED_MARKER: str = _core.TOKENS_OMITTED_MARKER

Direction = Literal["head", "tail", "head_tail"]
DIRECTIONS: tuple[Direction, ...] = ("head", "tail", "head_tail")

#: The one default of every truncating entry point (``truncate``, ``ToolOutputTruncator``, the
#: manager's tool-output cap, the CLI); defined by the Rust core.
DEFAULT_DIRECTION: Direction = _core.DEFAULT_DIRECTION


@dataclass(frozen=True, eq=False)
class Truncation:
    """The result of ``truncate``.

    ``text`` is the kept text, marker included, with ``tokens`` tokens by the counter used
    (``<= max_tokens``); ``truncated`` is False when the input fit and came back unchanged.
    ``text`` starts with ``input[:head_end]`` and ends with ``input[tail_start:]``;
    ``head_tokens`` / ``tail_tokens`` count those parts alone.

    ``original_tokens``, ``omitted_tokens`` and ``original_lines`` describe the whole input:
    unless the cut already needed them they are computed on first access (one pass over the
    input, in parallel for long texts), then kept.
    """

    text: str
    truncated: bool
    tokens: int
    head_tokens: int
    tail_tokens: int
    kept_lines: int
    original_bytes: int
    kept_bytes: int
    head_end: int
    tail_start: int
    marker_used: bool
    direction: str
    _source: str = field(repr=False)
    _counter: Counter = field(repr=False)
    _totals: dict[str, int] = field(default_factory=dict, repr=False)

    @property
    def original_tokens(self) -> int:
        """Tokens of the whole input (counted on first access if the cut did not need it)."""
        if "tokens" not in self._totals:
            self._totals["tokens"] = self._counter.count(self._source)
        return self._totals["tokens"]

    @property
    def omitted_tokens(self) -> int:
        """``original_tokens - head_tokens - tail_tokens`` (at least 0): the marker's number."""
        if not self.truncated:
            return 0
        return max(0, self.original_tokens - self.head_tokens - self.tail_tokens)

    @property
    def original_lines(self) -> int:
        """Lines of the whole input, as the limits count them."""
        if "lines" not in self._totals:
            self._totals["lines"] = _core.count_lines(self._source)
        return self._totals["lines"]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Truncation):
            return NotImplemented
        return self._key() == other._key() and self._source == other._source

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[Any, ...]:
        return (
            self.text,
            self.truncated,
            self.tokens,
            self.head_end,
            self.tail_start,
            self.direction,
        )


def _limit(name: str, value: Any) -> int | None:
    if value is None:
        return None
    return count_arg(name, value, infinite=True)  # beyond any text: no limit


def truncate(
    text: str,
    max_tokens: int | None = None,
    *,
    direction: Direction = DEFAULT_DIRECTION,
    counter: Counter | None = None,
    model: str | None = None,
    marker: str = DEFAULT_MARKER,
    head_ratio: float = 0.5,
    max_lines: int | None = None,
    max_bytes: int | None = None,
    lines: bool = False,
    count_total: bool = False,
) -> Truncation:
    """Cut ``text`` to at most ``max_tokens`` tokens (and ``max_lines`` / ``max_bytes``).

    ``direction``: ``"head"`` keeps the beginning, ``"tail"`` the end, ``"head_tail"`` both,
    split by ``head_ratio``, around ``marker`` (default ``DEFAULT_DIRECTION``, ``"head"``);
    ``{omitted}`` in the marker becomes the number of tokens cut (e.g.
    ``marker=" …[{omitted} tokens omitted]… "``). A marker that doesn't fit is dropped
    rather than exceed the limit. ``lines=True`` cuts only at whole lines.

    Cost: about what is kept, so truncating a 100 MB text costs what a 1 MB one does;
    ``original_tokens`` is counted on first access. A marker showing ``{omitted}`` or
    ``count_total=True`` adds one pass over the whole input (in parallel on every core).
    """
    if not isinstance(text, str):
        raise ArgumentTypeError(f"text must be str, not {type(text).__name__}")
    if not isinstance(marker, str):
        raise ArgumentTypeError(f"marker must be str, not {type(marker).__name__}")
    if direction not in DIRECTIONS:
        raise InvalidArgumentError(
            f"direction must be 'head', 'tail' or 'head_tail', not {direction!r}"
        )
    if isinstance(head_ratio, bool) or not isinstance(head_ratio, (int, float)):
        raise ArgumentTypeError(f"head_ratio must be a number, not {type(head_ratio).__name__}")
    if not 0.0 <= head_ratio <= 1.0:  # also rejects NaN
        raise InvalidArgumentError(f"head_ratio must be between 0 and 1, got {head_ratio}")
    for name, flag in (("lines", lines), ("count_total", count_total)):
        if not isinstance(flag, bool):
            raise ArgumentTypeError(f"{name} must be a bool, not {type(flag).__name__}")
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
        lines=lines,
        count_total=count_total,
    )
    if not raw.truncated:
        kept = text  # the caller's own string back, not an equal copy
    else:
        # Rebuild from the caller's characters (a lone surrogate was cut as one U+FFFD):
        # input[:head_end] + marker + input[tail_start:].
        head, tail, cut = raw.head_end, raw.tail_start, raw.text
        marker_text = cut[head : len(cut) - (len(text) - tail)]
        kept = text[:head] + marker_text + text[tail:]
    totals = {}
    if raw.original_tokens is not None:
        totals["tokens"] = raw.original_tokens
    if raw.original_lines is not None:
        totals["lines"] = raw.original_lines
    copied = {
        name: getattr(raw, name)
        for name in (
            "truncated tokens head_tokens tail_tokens kept_lines original_bytes kept_bytes "
            "head_end tail_start marker_used direction"
        ).split()
    }
    return Truncation(text=kept, _source=text, _counter=c, _totals=totals, **copied)
