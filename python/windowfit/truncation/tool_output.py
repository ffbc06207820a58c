"""Tool outputs that fit the prompt: ``ToolOutputTruncator`` and ``compact_json``.

The tool-output truncator, made token-exact: an output over ``max_lines`` /
``max_bytes`` / ``max_tokens`` is cut head, tail or head + tail by ``wf.truncate``, its full
text is saved atomically under ``output_dir``, and the preview ends with a note that tells the
model where the full output is and how much was cut. The note counts against the limits.

Record compaction: a list-shaped JSON result (a list of objects, or an object holding one
main list of objects) becomes one short line per record (``#1 会议 (2026-01-01T10:00)``) plus
the total, before the same limits apply.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.counting import Counter, resolve_counter
from windowfit.errors import ArgumentTypeError, InternalError, InvalidArgumentError
from windowfit.truncation.json_records import (  # compact_json, pick_key_fields: re-exported
    _check_key_fields,
    _compact,
    _Compacted,
    _footer,
    _looks_like_json,
    _parse_json,
    compact_json,
    pick_key_fields,
)
from windowfit.truncation.saved_outputs import MAX_NAME_CHARS as MAX_NAME_CHARS  # re-exported
from windowfit.truncation.saved_outputs import (  # safe_file_stem: re-exported
    _content_name,
    _unique_name,
    _valid_utf8,
    safe_file_stem,
    save_output,
)
from windowfit.truncation.text import (
    DEFAULT_DIRECTION,
    DIRECTIONS,
    TOKENS_OMITTED_MARKER,
    Direction,
    Truncation,
    truncate,
)
from windowfit.truncation.text import _limit as check_limit

__all__ = [
    "ObservationTruncator",
    "ToolOutputTruncator",
    "compact_json",
    "pick_key_fields",
    "safe_file_stem",
]

logger = logging.getLogger(__name__)


#: Outputs up to this size are counted before they are cut (a second pass is cheap there).
_COUNT_FIRST_BYTES = 256 << 10
#: Above this size ``atruncate`` also moves the cutting off the event loop.
_ASYNC_INLINE_CHARS = 1 << 20


# --------------------------------------------------------------------------- measuring


#: Lines as the limits count them: one per newline plus a last line without one (the core's
#: rule, so the counts Python reports are the ones the cut enforced).
count_lines = _core.count_lines


def count_bytes(text: str) -> int:
    """UTF-8 size (lone surrogates, which some tools emit, count as their 3 encoded bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _limit(name: str, value: Any) -> int | None:
    """A limit as ``truncate`` checks it, and positive: an empty preview helps no agent."""
    n = check_limit(name, value)
    if n == 0:
        raise InvalidArgumentError(f"{name} must be a positive int, got 0")
    return n


@dataclass(frozen=True)
class _Limits:
    tokens: int | None
    lines: int | None
    bytes: int | None

    def overflow(self, counter: Counter, text: str) -> tuple[int, int, int]:
        """How far ``text`` is over each limit (tokens, lines, bytes); <= 0 means within."""
        return (
            counter.count(text) - self.tokens if self.tokens is not None else -1,
            count_lines(text) - self.lines if self.lines is not None else -1,
            count_bytes(text) - self.bytes if self.bytes is not None else -1,
        )

    def admits(self, counter: Counter, text: str) -> bool:
        return all(o <= 0 for o in self.overflow(counter, text))

    def minus(self, tokens: int, lines: int, nbytes: int) -> _Limits | None:
        """The limits left after reserving room; None when a limit has no room at all."""
        t = None if self.tokens is None else self.tokens - tokens
        ln = None if self.lines is None else self.lines - lines
        b = None if self.bytes is None else self.bytes - nbytes
        if any(v is not None and v < 0 for v in (t, ln, b)):
            return None
        return _Limits(t, ln, b)


# --------------------------------------------------------------------------- the truncator


@dataclass
class _Job:
    """One truncation between its measuring, its file write and its preview."""

    tool_name: str
    output: str
    metadata: Mapping[str, Any] | None
    start: float
    lines: int
    nbytes: int
    tokens: int | None
    over: list[str]  # the limits the output is over
    unsure: bool = False  # only the token limit may be over: a first cut decides
    compacted: _Compacted | None = None
    name: str = ""
    replaced: int = 0  # lone surrogates written to the file as U+FFFD
    cuts: dict[_Limits, Truncation] = field(default_factory=dict)  # by room, to reuse


class ToolOutputTruncator:
    """Keeps tool outputs within ``max_lines`` / ``max_bytes`` / ``max_tokens`` (None: no
    limit of that kind; the tightest wins) and saves what it cuts.

    ``truncate(tool_name, output, metadata=None)`` returns ``{"truncated", "preview",
    "full_output_path", "stats"}``. An output within every limit comes back as it is, with no
    file written. Otherwise the full output is written atomically to a new file in
    ``output_dir`` named after the tool, the preview is cut ``direction``-wise (``head``,
    ``tail``, ``head_tail``) and ends with a note saying where the full output is; the whole
    preview, note included, respects the limits. If the file cannot be written the error is
    logged, ``stats["save_error"]`` says why and the preview is returned all the same.

    With ``compact_json`` a list-shaped JSON output is shown as one line per record (see
    ``compact_json()``; ``key_fields`` picks the fields) before the limits apply.
    Tokens are counted with ``counter``, else the counter of ``model`` (default gpt-4o's).

    ``cache_size`` remembers that many results by (tool, output), for windows that show the
    same outputs every turn. With a cache and an ``output_dir`` the saved files are named by
    the output's content (``<tool>-<sha256 prefix>.txt``): showing an output again names the
    same file and writes nothing, so the preview (and a prompt cache's prefix) stays the same.
    """

    def __init__(
        self,
        max_lines: int | None = 2000,
        max_bytes: int | None = 51200,
        max_tokens: int | None = None,
        direction: str = DEFAULT_DIRECTION,
        output_dir: str | os.PathLike[str] | None = "tool-output",
        counter: Counter | None = None,
        model: str | None = None,
        compact_json: bool = True,
        key_fields: Sequence[str] | None = None,
        marker: str = TOKENS_OMITTED_MARKER,
        head_ratio: float = 0.5,
        cache_size: int = 0,
    ) -> None:
        self.limits = _Limits(
            _limit("max_tokens", max_tokens),
            _limit("max_lines", max_lines),
            _limit("max_bytes", max_bytes),
        )
        if self.limits == _Limits(None, None, None):
            raise InvalidArgumentError("give at least one of max_lines, max_bytes, max_tokens")
        if direction not in DIRECTIONS:
            raise InvalidArgumentError(
                f"direction must be one of {', '.join(DIRECTIONS)}; got {direction!r}"
            )
        if not isinstance(marker, str):
            raise ArgumentTypeError(f"marker must be str, not {type(marker).__name__}")
        if (
            isinstance(head_ratio, bool)
            or not isinstance(head_ratio, (int, float))
            or not (0.0 <= head_ratio <= 1.0)
        ):
            raise InvalidArgumentError(f"head_ratio must be a number in [0, 1], got {head_ratio!r}")
        self.direction: Direction = direction
        # None: nothing is saved and the preview is the bare cut (the context manager's mode:
        # the full output stays in the caller's history)
        self.output_dir = Path(output_dir) if output_dir is not None else None
        cache_size = count_arg("cache_size", cache_size)
        # results by output, for windows that show the same outputs every turn; with files,
        # named by content so a cached preview and its file always agree
        self._content_names = bool(cache_size) and self.output_dir is not None
        self._cache: OrderedDict[tuple[str, str], dict[str, Any]] | None = (
            OrderedDict() if cache_size else None
        )
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self.counter: Counter = resolve_counter(counter, model)
        self.compact_json = bool(compact_json)
        self.key_fields = _check_key_fields(key_fields)
        self.marker = marker
        self.head_ratio = float(head_ratio)

    @property
    def max_lines(self) -> int | None:
        return self.limits.lines

    @property
    def max_bytes(self) -> int | None:
        return self.limits.bytes

    @property
    def max_tokens(self) -> int | None:
        return self.limits.tokens

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(max_lines={self.max_lines}, max_bytes={self.max_bytes}, "
            f"max_tokens={self.max_tokens}, direction={self.direction!r}, "
            f"output_dir={str(self.output_dir) if self.output_dir else None!r}, "
            f"counter={self.counter.name!r})"
        )

    # ---------------------------------------------------------------- public

    def truncate(
        self, tool_name: str, output: str, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The preview of ``output`` within the limits, saving the full output if it is cut."""
        if self.output_dir is None:
            return self._in_memory(tool_name, output, metadata)
        hit = self._cached(tool_name, output, metadata)
        if hit is not None:
            return hit
        job = self._measure(tool_name, output, metadata)
        if job.unsure:
            self._settle(job)
        if not job.over:
            return self._remember(job, self._untouched(job))
        self._plan(job)
        path, error = self._save(job)
        return self._remember(job, self._finish(job, path, error))

    def _cached(
        self, tool_name: str, output: str, metadata: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """A remembered result for this output (a copy), or None."""
        if self._cache is None or metadata is not None:
            return None
        with self._cache_lock:
            hit = self._cache.get((tool_name, output))
            if hit is not None:
                self._cache.move_to_end((tool_name, output))
                return dict(hit)  # the stats are shared: treat them as read-only
        return None

    def _remember(self, job: _Job, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` kept for the next time this output is shown (a failed save too: the same
        output keeps the same preview, so a prompt built from it does not change)."""
        if self._cache is None or job.metadata is not None:
            return result
        with self._cache_lock:
            self._cache[(job.tool_name, job.output)] = dict(result)
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return result

    async def atruncate(
        self, tool_name: str, output: str, metadata: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``truncate`` for async agents: the file write (and, for big outputs, the cutting)
        runs in a worker thread, so the event loop is never blocked on disk."""
        big = isinstance(output, str) and len(output) > _ASYNC_INLINE_CHARS
        if self.output_dir is None:  # no disk: only the cutting, off the loop when big
            if big:
                return await asyncio.to_thread(self._in_memory, tool_name, output, metadata)
            return self._in_memory(tool_name, output, metadata)

        async def run(fn: Callable[..., Any], *args: Any) -> Any:
            return await asyncio.to_thread(fn, *args) if big else fn(*args)

        hit = self._cached(tool_name, output, metadata)
        if hit is not None:
            return hit
        job = await run(self._measure, tool_name, output, metadata)
        if job.unsure:
            await run(self._settle, job)
        if not job.over:
            return self._remember(job, self._untouched(job))
        await run(self._plan, job)
        path, error = await asyncio.to_thread(self._save, job)
        return self._remember(job, await run(self._finish, job, path, error))

    def _in_memory(
        self, tool_name: str, output: str, metadata: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """``truncate`` without a file: the bare cut, remembered when there is a cache."""
        hit = self._cached(tool_name, output, metadata)
        if hit is not None:
            return hit
        job = self._measure(tool_name, output, metadata)
        if job.unsure:
            cut = job.cuts[self.limits] = self._cut(output, self.limits)
            job.tokens = cut.original_tokens
            if cut.truncated:
                job.over.append("tokens")
        if not job.over:
            result = self._untouched(job)
        else:
            if self.compact_json:
                job.compacted = _compact(_parse_json(output), self.key_fields)
            if job.compacted is not None:
                result = self._finish(job, None, None)
            else:
                preview, omitted = self._plain_preview_bare(job)
                result = self._finish(job, None, None, preview, {"omitted_tokens": omitted})
        return self._remember(job, result)

    def _plain_preview_bare(self, job: _Job) -> tuple[str, int]:
        t = job.cuts.get(self.limits) or self._cut(job.output, self.limits)
        job.tokens = t.original_tokens
        return t.text, t.omitted_tokens

    # ---------------------------------------------------------------- steps

    def _measure(self, tool_name: str, output: str, metadata: Mapping[str, Any] | None) -> _Job:
        if not isinstance(tool_name, str):
            raise ArgumentTypeError(f"tool_name must be str, not {type(tool_name).__name__}")
        if not isinstance(output, str):
            hint = " (decode bytes first)" if isinstance(output, (bytes, bytearray)) else ""
            raise ArgumentTypeError(f"output must be str, not {type(output).__name__}{hint}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ArgumentTypeError(
                f"metadata must be a mapping or None, not {type(metadata).__name__}"
            )
        start = time.perf_counter()
        lim = self.limits
        lines, nbytes = count_lines(output), count_bytes(output)
        job = _Job(tool_name, output, metadata, start, lines, nbytes, None, [])
        if lim.lines is not None and lines > lim.lines:
            job.over.append("lines")
        if lim.bytes is not None and nbytes > lim.bytes:
            job.over.append("bytes")
        if job.over:
            return job  # cut anyway: the tokens come from the cut, no separate counting pass
        if (
            lim.tokens is not None
            and nbytes > _COUNT_FIRST_BYTES
            and not (self.compact_json and _looks_like_json(output))
        ):
            # Counting a big output and then cutting it would be two passes; the cut alone
            # tells both whether it fits and what to keep.
            job.unsure = True
            return job
        job.tokens = self.counter.count(output)
        if lim.tokens is not None and job.tokens > lim.tokens:
            job.over.append("tokens")
        return job

    def _settle(self, job: _Job) -> None:
        """Decide a big output's token limit with the first cut of its preview (kept for it)."""
        job.name = self._file_name(job, ".txt")
        path = str(self._directory() / job.name)
        room = self._first_room(self._plain_notes(job, path)[0])
        t = self._cut(job.output, room) if room is not None else self._cut(job.output, self.limits)
        job.cuts[room or self.limits] = t
        job.tokens = t.original_tokens
        job.unsure = False
        if self.limits.tokens is not None and job.tokens > self.limits.tokens:
            job.over.append("tokens")

    def _directory(self) -> Path:
        if self.output_dir is None:  # the in-memory path never reaches a file step
            raise InternalError("this truncator saves no files (output_dir=None)")
        return self.output_dir

    def _untouched(self, job: _Job) -> dict[str, Any]:
        stats = {
            "tool_name": job.tool_name,
            "direction": self.direction,
            "original_lines": job.lines,
            "original_bytes": job.nbytes,
            "original_tokens": job.tokens,
            "kept_lines": job.lines,
            "kept_bytes": job.nbytes,
            "kept_tokens": job.tokens,
            "omitted_tokens": 0,
            "compacted": False,
            "counter": self.counter.name,
            "time_ms": _ms(job.start),
        }
        if job.metadata is not None:
            stats["metadata"] = dict(job.metadata)
        return {"truncated": False, "preview": job.output, "full_output_path": None, "stats": stats}

    def _plan(self, job: _Job) -> None:
        """Decide whether the output is compacted, and the saved file's name."""
        if self.compact_json:
            job.compacted = _compact(_parse_json(job.output), self.key_fields)
        if not job.name or job.compacted:
            job.name = self._file_name(job, ".json" if job.compacted else ".txt")

    def _file_name(self, job: _Job, suffix: str) -> str:
        if self._content_names:
            return _content_name(job.tool_name, job.output, suffix)
        return _unique_name(job.tool_name, suffix)

    def _save(self, job: _Job) -> tuple[str | None, str | None]:
        text, job.replaced = _valid_utf8(job.output)
        try:
            path = save_output(self._directory(), job.name, text, reuse=self._content_names)
        except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
            error = f"{type(e).__name__}: {e}"
            logger.error(
                "cannot save the full output of tool %r to %s (%s); returning the preview only",
                job.tool_name,
                self.output_dir,
                error,
            )
            return None, error
        return str(path), None

    def _finish(
        self,
        job: _Job,
        path: str | None,
        error: str | None,
        preview: str | None = None,
        info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        if preview is not None and info is not None:
            pass  # cut already (in memory)
        elif job.compacted is not None:
            preview, info = self._compact_preview(job, path)
        else:
            preview, info = self._plain_preview(job, path)
        counter = self.counter
        kept = (counter.count(preview), count_lines(preview), count_bytes(preview))
        stats: dict[str, Any] = {
            "tool_name": job.tool_name,
            "direction": self.direction,
            "original_lines": job.lines,
            "original_bytes": job.nbytes,
            "original_tokens": job.tokens,
            "kept_lines": kept[1],
            "kept_bytes": kept[2],
            "kept_tokens": kept[0],
            "limited_by": self._binding(*kept),
            "over_limits": job.over,
            "compacted": job.compacted is not None,
            **info,
            "counter": counter.name,
            "save_error": error,
            "replaced_surrogates": job.replaced,
            "time_ms": _ms(job.start),
        }
        if job.metadata is not None:
            stats["metadata"] = dict(job.metadata)
        return {"truncated": True, "preview": preview, "full_output_path": path, "stats": stats}

    def _binding(self, tokens: int, lines: int, nbytes: int) -> list[str]:
        """The limit(s) the preview filled most (``tokens``, ``lines``, ``bytes``): the one
        that stopped the cut, whichever others the output was also over."""
        used = {
            name: value / limit
            for name, value, limit in (
                ("tokens", tokens, self.limits.tokens),
                ("lines", lines, self.limits.lines),
                ("bytes", nbytes, self.limits.bytes),
            )
            if limit is not None
        }
        top = max(used.values())
        return [name for name, share in used.items() if share >= top - 1e-9]

    # ---------------------------------------------------------------- previews

    def _cut(self, text: str, lim: _Limits) -> Truncation:
        return truncate(
            text,
            lim.tokens,
            direction=self.direction,
            counter=self.counter,
            marker=self.marker,
            head_ratio=self.head_ratio,
            max_lines=lim.lines,
            max_bytes=lim.bytes,
            count_total=True,  # the stats report the whole output's tokens: count it in the cut
        )

    def _plain_notes(self, job: _Job, path: str | None) -> list[Callable[[str, int | None], str]]:
        """The notes of a plain cut, longest first, as ``note(body, omitted)``; with
        ``omitted=None`` the widest the note can be."""
        where = f"full output saved to {path}" if path else "the full output could not be saved"
        hint = " — read it with offsets if you need more" if path else ""
        # before a cut only an upper bound of the total is known: a token is at least a byte
        widest_total = max(job.tokens or 0, job.nbytes)

        def numbers(body: str, omitted: int | None) -> tuple[int, int, int]:
            if omitted is None:
                return widest_total, widest_total, job.lines
            total = job.tokens if job.tokens is not None else widest_total
            return max(total - omitted, 0), total, count_lines(body)

        def long_note(body: str, omitted: int | None) -> str:
            kept, total, kept_lines = numbers(body, omitted)
            return (
                f"[output truncated: kept {kept:,} of {total:,} tokens "
                f"({kept_lines:,} of {job.lines:,} lines); {where}{hint}]"
            )

        def short_note(body: str, omitted: int | None) -> str:
            kept, total, _ = numbers(body, omitted)
            return f"[truncated {kept:,}/{total:,} tokens; full output: {path or 'not saved'}]"

        return [long_note, short_note]

    def _plain_preview(self, job: _Job, path: str | None) -> tuple[str, dict[str, Any]]:
        """The output cut to the limits minus room for the note, then the note."""

        last_body = [""]

        def attempt(lim: _Limits) -> tuple[str, int]:
            t = job.cuts.get(lim)
            if t is None:
                t = job.cuts[lim] = self._cut(job.output, lim)
            job.tokens = t.original_tokens
            last_body[0] = t.text
            return t.text, t.omitted_tokens

        for make in self._plain_notes(job, path):
            got = self._with_note(attempt, make)
            if got is not None:
                preview, omitted = got
                # the note's own figures: what it says was kept of the output
                kept = {
                    "kept_output_lines": count_lines(last_body[0]),
                    "kept_output_tokens": max((job.tokens or 0) - omitted, 0),
                }
                return preview, {"omitted_tokens": omitted, "note": True, **kept}
        # not even the short note fits: the bare cut
        text, omitted = attempt(self.limits)
        return text, {"omitted_tokens": omitted, "note": False}

    def _first_room(self, note_for: Callable[[str, int | None], str]) -> _Limits | None:
        """The limits less room for the widest note on a line of its own; None if no room."""
        widest = note_for("", None)
        return self.limits.minus(
            self.counter.count("\n" + widest), count_lines(widest), count_bytes(widest) + 1
        )

    def _with_note(
        self,
        attempt: Callable[[_Limits], tuple[str, int]],
        note_for: Callable[[str, int | None], str],
    ) -> tuple[str, int] | None:
        """``attempt`` under the limits less the note's room, then the note appended; retried
        with tighter limits while the joined preview is over (the note's numbers change, and
        tokens are not additive across the join). None when the note itself does not fit."""
        lim = self.limits
        room = self._first_room(note_for)
        for _ in range(4):
            if room is None:
                return None
            body, aux = attempt(room)
            preview = _join(body, note_for(body, aux))
            over = lim.overflow(self.counter, preview)
            if all(o <= 0 for o in over):
                return preview, aux
            room = room.minus(*(max(o, 0) for o in over))
        return None

    def _compact_preview(self, job: _Job, path: str | None) -> tuple[str, dict[str, Any]]:
        """Whole record lines, as many as the limits allow, the total, then the note."""
        c = job.compacted
        assert c is not None
        fields = ", ".join(c.fields)
        if job.tokens is None:
            job.tokens = self.counter.count(job.output)
        if path:
            where, short = f"saved to {path}", f"full output: {path}"
        elif self.output_dir is None:  # nothing is saved here: the caller keeps the output
            where, short = "is in the stored history", "the full output is in the history"
        else:
            where, short = "could not be saved", "full output: not saved"

        def long_note(body: str, shown: int | None) -> str:
            return (
                f"[JSON output shown as one line per record ({fields}); the full output "
                f"({job.tokens:,} tokens) {where}]"
            )

        def short_note(body: str, shown: int | None) -> str:
            return f"[JSON compacted; {short}]"

        costs = self.counter.count_many([ln + "\n" for ln in c.lines])

        def attempt(lim: _Limits) -> tuple[str, int]:
            return self._select_lines(c, costs, lim)

        info = {"records": len(c.lines), "total_records": c.total, "key_fields": list(c.fields)}
        for make in (long_note, short_note):
            got = self._with_note(attempt, make)
            if got is not None:
                preview, shown = got
                return preview, {**info, "records_shown": shown, "note": True}
        body, shown = attempt(self.limits)
        return body, {**info, "records_shown": shown, "note": False}

    def _select_lines(self, c: _Compacted, costs: list[int], lim: _Limits) -> tuple[str, int]:
        """As many whole record lines as fit ``lim`` with the footer, chosen ``direction``-wise
        from per-line costs, then re-measured and shrunk until the joined text fits.
        Returns (text, records shown)."""
        n, counter = len(c.lines), self.counter
        sizes = [count_bytes(ln) + 1 for ln in c.lines]
        gap = "…"

        def build(h: int, t: int) -> str:
            kept = c.lines[:h]
            if self.direction == "head_tail" and h + t < n:
                kept = [*kept, gap]
            return "\n".join([*kept, *c.lines[n - t :], _footer(c.total, h + t)])

        widest = f"({c.total:,} items, {c.total:,} shown)\n"
        if self.direction == "head_tail":
            widest += gap + "\n"
        room = lim.minus(counter.count(widest), count_lines(widest), count_bytes(widest))
        inf = math.inf

        def take(order: range, share: float, used: tuple[float, float, float]) -> int:
            assert room is not None
            left = [
                (inf if v is None else v * share) - u
                for v, u in zip((room.tokens, room.lines, room.bytes), used)
            ]
            k = 0
            for i in order:
                left = [left[0] - costs[i], left[1] - 1, left[2] - sizes[i]]
                if min(left) < 0:
                    break
                k += 1
            return k

        h = t = 0
        if room is not None:
            if self.direction == "head":
                h = take(range(n), 1.0, (0, 0, 0))
            elif self.direction == "tail":
                t = take(range(n - 1, -1, -1), 1.0, (0, 0, 0))
            else:
                h = take(range(n), self.head_ratio, (0, 0, 0))
                used = (sum(costs[:h]), h, sum(sizes[:h]))
                t = take(range(n - 1, h - 1, -1), 1.0, used)
                if h + t < n:  # the tail left part of its share: the head may use it
                    used = (used[0] + sum(costs[n - t :]), h + t, used[2] + sum(sizes[n - t :]))
                    h += take(range(h, n - t), 1.0, used)
        # Per-line costs approximate the joined text's; drop lines until the whole fits,
        # at least as many as the overflow says.
        while True:
            text = build(h, t)
            over = lim.overflow(counter, text)
            if all(o <= 0 for o in over) or h + t == 0:
                break
            drop_tok, drop_lines, drop_bytes = (max(o, 0) for o in over)
            while h + t and (drop_tok > 0 or drop_lines > 0 or drop_bytes > 0):
                i = n - t if t > h or (t == h and self.direction == "tail") else h - 1
                drop_tok, drop_lines, drop_bytes = (
                    drop_tok - costs[i],
                    drop_lines - 1,
                    drop_bytes - sizes[i],
                )
                if i == h - 1:
                    h -= 1
                else:
                    t -= 1
        if not lim.admits(counter, text):
            return "", 0
        return text, h + t


def _join(body: str, note: str) -> str:
    """``body`` then ``note`` on a line of its own."""
    if not body:
        return note
    return body + ("" if body.endswith("\n") else "\n") + note


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1e3, 3)


#: The earlier name of :class:`ToolOutputTruncator`, kept for code that imports it.
ObservationTruncator = ToolOutputTruncator
