"""Truncation that costs the output: the whole-input count only when asked for, whole-line
cuts (``lines=True``), and the one default direction. tiktoken is the oracle for every count.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import windowfit as wf
from _corpus import tiktoken_cl100k, tiktoken_o200k
from windowfit import _core
from windowfit.truncation import DEFAULT_DIRECTION, truncate

CL100K = wf.Counter(encoding="cl100k_base", cache_entries=0)
O200K = wf.Counter(encoding="o200k_base", cache_entries=0)
DIRECTIONS = ["head", "tail", "head_tail"]
BARE = "\n…\n"  # a marker that does not show the omitted count


def log(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = [
        "GET",
        "/api/v1/users",
        "200",
        "ms",
        "上下文",
        "naïve",
        "🙂",
        "  ",
        "\t",
        "{}",
        "x" * 40,
    ]
    return "".join(
        f"{i:06d} " + " ".join(rng.choice(words) for _ in range(rng.randint(0, 12))) + "\n"
        for i in range(n)
    )


def oracle(counter: wf.Counter):  # noqa: ANN201 - tiktoken's Encoding
    return tiktoken_cl100k() if counter is CL100K else tiktoken_o200k()


# --------------------------------------------------------------------------- the lazy total


@pytest.mark.parametrize("counter", [CL100K, O200K], ids=["cl100k", "o200k"])
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_total_is_counted_on_first_access_and_exact(counter: wf.Counter, direction: str) -> None:
    text = log(3000)
    enc = oracle(counter)
    raw = _core.truncate_text(counter, text, max_tokens=500, direction=direction, marker=BARE)
    assert raw.truncated and raw.original_tokens is None and raw.omitted_tokens is None
    assert raw.original_lines is None
    t = truncate(text, 500, direction=direction, counter=counter, marker=BARE)
    head, tail = text[: t.head_end], text[t.tail_start :]
    assert t.text == head + BARE + tail
    assert len(enc.encode_ordinary(t.text)) == t.tokens <= 500
    assert (t.head_tokens, t.tail_tokens) == (
        len(enc.encode_ordinary(head)),
        len(enc.encode_ordinary(tail)),
    )
    n = len(enc.encode_ordinary(text))
    assert t.original_tokens == n
    assert t.omitted_tokens == n - t.head_tokens - t.tail_tokens
    assert t.original_lines == text.count("\n")
    # Asked for up front, the same figures come from the cut itself.
    eager = _core.truncate_text(
        counter, text, max_tokens=500, direction=direction, marker=BARE, count_total=True
    )
    assert (eager.original_tokens, eager.omitted_tokens, eager.original_lines) == (
        n,
        t.omitted_tokens,
        t.original_lines,
    )
    assert eager.text == t.text


def test_a_marker_showing_the_count_gets_the_exact_count() -> None:
    text = log(2000, seed=3)
    enc = tiktoken_cl100k()
    marker = wf.TOKENS_OMITTED_MARKER
    raw = _core.truncate_text(CL100K, text, max_tokens=300, direction="head_tail", marker=marker)
    n = len(enc.encode_ordinary(text))
    assert raw.original_tokens == n
    head, tail = text[: raw.head_end], text[raw.tail_start :]
    omitted = n - len(enc.encode_ordinary(head)) - len(enc.encode_ordinary(tail))
    assert raw.text == head + marker.replace("{omitted}", str(omitted)) + tail


def test_the_default_marker_counts_nothing_beyond_the_cut() -> None:
    text = log(2000, seed=4)
    raw = _core.truncate_text(CL100K, text, max_tokens=300, direction="head_tail")
    assert raw.original_tokens is None and raw.omitted_tokens is None
    assert raw.text == text[: raw.head_end] + wf.DEFAULT_MARKER + text[raw.tail_start :]
    assert len(tiktoken_cl100k().encode_ordinary(raw.text)) == raw.tokens <= 300


PATHOLOGICAL = {
    "spaces": ("a" + " " * 997 + "\n") * 400,
    "contractions": "we'll they're I'M don't 's 'll 've " * 3000,
    "digits": "1234567890" * 20000,
    "crlf": "line\r\n\r\n  \t\r\n" * 5000,
    "cjk": "上下文窗口需要精确计数，工具输出往往是最大的部分。" * 3000,
    "one_word": "x" * 300_000,
    "mixed": log(6000, seed=7),
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL))
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_cut_without_the_total_is_exact_and_maximal_by_tiktoken(name: str, direction: str) -> None:
    """The walk reads windows from the kept end and trusts a piece only once the pieces after
    it have started: the kept text re-counted by tiktoken is within the limit and within two
    tokens of it, on texts whose pieces are long or depend on what follows."""
    text = PATHOLOGICAL[name]
    enc = tiktoken_cl100k()
    t = truncate(text, 2000, direction=direction, counter=CL100K, marker="")
    assert t.truncated and t.text == text[: t.head_end] + text[t.tail_start :]
    n = len(enc.encode_ordinary(t.text))
    assert n == t.tokens <= 2000
    assert n >= 1998 or name == "one_word", n
    assert t.original_tokens == len(enc.encode_ordinary(text))


def test_fitting_text_reports_its_counts() -> None:
    text = log(50)
    raw = _core.truncate_text(CL100K, text, max_tokens=10**6, marker=BARE)
    assert not raw.truncated
    assert raw.original_tokens == raw.tokens == len(tiktoken_cl100k().encode_ordinary(text))
    assert (raw.omitted_tokens, raw.original_lines) == (0, 50)


# --------------------------------------------------------------------------- whole lines


def _whole_lines_case(
    text: str, limit: int, direction: str, marker: str, counter: wf.Counter
) -> None:
    enc = oracle(counter)
    t = truncate(text, limit, direction=direction, counter=counter, marker=marker, lines=True)
    assert len(enc.encode_ordinary(t.text)) == t.tokens <= limit
    if not t.truncated:
        assert len(enc.encode_ordinary(text)) <= limit
        return
    a, b = t.head_end, t.tail_start
    assert a == 0 or text[a - 1] == "\n", f"head ends inside a line at {a}"
    assert b in (0, len(text)) or text[b - 1] == "\n", f"tail starts inside a line at {b}"
    shown = marker.replace("{omitted}", str(t.omitted_tokens)) if t.marker_used else ""
    assert t.text == text[:a] + shown + text[b:]
    if direction == "head" and a < len(text):
        # One more line does not fit (whatever the marker's number becomes).
        nl = text.find("\n", a)
        a2 = len(text) if nl < 0 else nl + 1
        grown = text[:a2] + (marker.replace("{omitted}", "0") if t.marker_used else "")
        assert len(enc.encode_ordinary(grown)) > limit - 2 or a2 == a
    if direction == "tail" and b > 0:
        b2 = text.rfind("\n", 0, b - 1) + 1
        grown = (marker.replace("{omitted}", "0") if t.marker_used else "") + text[b2:]
        assert len(enc.encode_ordinary(grown)) > limit - 2 or b2 == b


@pytest.mark.parametrize("counter", [CL100K, O200K], ids=["cl100k", "o200k"])
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("marker", ["", BARE, wf.DEFAULT_MARKER])
def test_lines_keeps_whole_lines_within_the_limit(
    counter: wf.Counter, direction: str, marker: str
) -> None:
    rng = random.Random(hash((direction, marker)) & 0xFFFF)
    for case in range(12):
        text = log(rng.randint(1, 400), seed=case)
        if case % 3 == 0:
            text = text.rstrip("\n")  # a last line without its newline is still a line
        limit = rng.choice([0, 1, 5, 20, 60, 200, 1000])
        _whole_lines_case(text, limit, direction, marker, counter)


def test_lines_with_one_long_line_keeps_nothing_rather_than_half_a_line() -> None:
    text = "word " * 5000
    t = truncate(text, 100, counter=CL100K, marker="", lines=True, direction="head")
    assert t.truncated and t.text == ""
    t = truncate("short\n" + text, 100, counter=CL100K, marker="", lines=True, direction="head")
    assert t.text == "short\n"


def test_lines_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from windowfit.cli import main

    f = tmp_path / "out.log"
    text = log(500)
    f.write_text(text, encoding="utf-8")
    args = ["truncate", str(f), "--max-tokens", "300", "--encoding", "cl100k_base"]
    assert main([*args, "--lines", "--direction", "tail"]) == 0
    kept = capsys.readouterr().out
    assert len(tiktoken_cl100k().encode_ordinary(kept)) <= 300
    suffix = kept.split("omitted]…\n", 1)[1]
    assert text.endswith(suffix) and text[len(text) - len(suffix) - 1] == "\n"


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [b"bytes", 12, None, ["a"]])
def test_non_str_text_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="text must be str"):
        truncate(bad, 10, counter=CL100K)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["lines", "count_total"])
def test_flags_must_be_bools(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        truncate("a b c", 1, counter=CL100K, **{name: 1})  # type: ignore[arg-type]


def test_a_100_mb_text_is_cut_within_a_small_multiple_of_its_size() -> None:
    """In a fresh interpreter, so the peak memory is this cut's alone: 100 MB (ASCII and not),
    every direction, whole lines, with and without the whole count."""
    code = (
        "import resource, sys\n"
        "sys.path[:0] = sys.argv[1:3]\n"
        "from test_truncate_lazy import CL100K, DIRECTIONS, log\n"
        "from windowfit.truncation import truncate\n"
        "unit = log(2000)\n"
        "text = unit * (100_000_000 // len(unit.encode()) + 1)\n"
        "size = len(text.encode())\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "for direction in DIRECTIONS:\n"
        "    for marker in ('[cut]', '[{omitted} tokens cut]'):\n"
        "        t = truncate(text, 2000, direction=direction, counter=CL100K, lines=True,\n"
        "                     marker=marker)\n"
        "        assert t.tokens <= 2000, (direction, marker, t.tokens)\n"
        "grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024\n"
        "print(size, grown)\n"
    )
    here, tests = Path(__file__).resolve().parent, Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code, str(here), str(tests)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    size, grown = map(int, done.stdout.split())
    assert size >= 100_000_000
    assert grown < 3 * size, f"the cut grew the peak memory by {grown / size:.1f}x the text"


# --------------------------------------------------------------------------- one default


def test_one_default_direction_everywhere(tmp_path: Path) -> None:
    from windowfit.context.config import Settings
    from windowfit.truncation import ObservationTruncator

    assert DEFAULT_DIRECTION == _core.DEFAULT_DIRECTION == wf.DEFAULT_DIRECTION
    text = log(400)
    assert truncate(text, 50, counter=CL100K).direction == DEFAULT_DIRECTION
    assert ObservationTruncator(output_dir=tmp_path).direction == DEFAULT_DIRECTION
    assert Settings.parse("gpt-4o").tool_output_direction == DEFAULT_DIRECTION
    assert _core.truncate_text(CL100K, text, max_tokens=50).direction == DEFAULT_DIRECTION
