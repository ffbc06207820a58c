"""The counting engine (hand-written pre-tokenizer, embedded vocabularies) against tiktoken.

tests/counting/test_encoding.py covers the shared corpus and hypothesis text; this file covers what a
hand-written splitter is most likely to get wrong: every Unicode scalar in the contexts where
the patterns' alternatives differ, pathological runs (megabytes of one class of character),
and ``count_until``, which must agree with the full count wherever it answers.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import windowfit as wf
from _corpus import corpus, tiktoken_cl100k, tiktoken_o200k
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REFERENCES = {"cl100k_base": tiktoken_cl100k, "o200k_base": tiktoken_o200k}

# Every scalar value except the surrogates, which a Python str can hold but UTF-8 cannot
# (test_encoding.py checks those).
SCALARS = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]

# Contexts that reach each alternative of both patterns: after a letter, a space, a
# digit, an apostrophe, a mark; before a line break; doubled; as a contraction's letter.
CONTEXTS = [
    "{c}",
    "a{c}b",
    " {c}x",
    "{c}{c} ",
    "1{c}2",
    "'{c}",
    "x'{c}",
    "\u0301{c}",
    "{c}\n",
    "A{c}a",
]


@pytest.fixture(scope="module", params=sorted(REFERENCES))
def pair(request: pytest.FixtureRequest) -> tuple[wf.Encoding, Any]:
    return wf.get_encoding(request.param), REFERENCES[request.param]()


def _first_difference(enc: wf.Encoding, ref: Any, texts: list[str]) -> str:
    for t in texts:
        if enc.encode_ordinary(t) != ref.encode_ordinary(t):
            return f"{ascii(t)}: windowfit {enc.encode_ordinary(t)} != tiktoken {ref.encode_ordinary(t)}"
    return "(only the batch differs)"


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_scalar_in_context(pair: tuple[wf.Encoding, Any], context: str) -> None:
    enc, ref = pair
    # 4,096 scalars per text keeps the count of calls small; a text that differs is then
    # searched scalar by scalar for the message.
    step = 4096
    for lo in range(0, len(SCALARS), step):
        chunk = SCALARS[lo : lo + step]
        text = "".join(context.format(c=c) for c in chunk)
        ours, theirs = enc.encode_ordinary(text), ref.encode_ordinary(text)
        if ours != theirs:
            singles = [context.format(c=c) for c in chunk]
            pytest.fail(
                f"scalars from U+{ord(chunk[0]):04X}: {_first_difference(enc, ref, singles)}"
            )
        assert enc.count(text) == len(theirs)


PATHOLOGICAL = {
    "1 MB of one letter": "a" * 1_000_000,
    "1 MB of one Han character": "\u4e2d" * 350_000,
    "spaces then a word": " " * 200_000 + "word",
    "spaces to the end": "x" + " " * 200_000,
    "newlines and spaces": "\n \n\t\r\n  " * 30_000,
    "digits": "0123456789" * 50_000,
    "Arabic-Indic digits": "\u0661\u0662\u0663" * 50_000,
    "punctuation": "!?.,;:-_/\\" * 50_000,
    "slashes and newlines": "/\n/" * 50_000,
    "apostrophes": "'s'S'll'LL'\u017f" * 30_000,
    "marks": "\u0301" * 100_000,
    "emoji": "\U0001f642" * 100_000,
    "mixed scripts": "Hello \u4e16\u754c \u043f\u0440\u0438\u0432\u0435\u0442 \u0645\u0631\u062d\u0628\u0627 12 "
    * 10_000,
    "letters and marks": "e\u0301E\u0301\u01c5a\u02b0" * 50_000,
}


@pytest.mark.parametrize("label", sorted(PATHOLOGICAL))
def test_pathological_runs(pair: tuple[wf.Encoding, Any], label: str) -> None:
    enc, ref = pair
    text = PATHOLOGICAL[label]
    expected = ref.encode_ordinary(text)
    assert enc.encode_ordinary(text) == expected, label
    assert enc.count(text) == len(expected), label


def _characters_of(token: bytes) -> str | None:
    try:
        return None if token.isascii() else token.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_runs_of_the_vocabularys_own_words(pair: tuple[wf.Encoding, Any]) -> None:
    """Every token of whole characters past ASCII, run together in random groups with and
    without spaces: the merges across characters, which the engine starts from whole
    characters, and the tokens that take part of a character with a neighbour (" \\xe2",
    "\u043e\\xd0"), where it starts from bytes."""
    enc, ref = pair
    words = sorted({w for t in ref._mergeable_ranks if (w := _characters_of(t))})
    rnd = random.Random(5)
    rnd.shuffle(words)
    runs, i = [], 0
    while i < len(words):
        k = rnd.randint(1, 8)
        runs.append(rnd.choice(["", "", " "]).join(words[i : i + k]))
        i += k
    for lo in range(0, len(runs), 500):
        text = "\n".join(runs[lo : lo + 500])
        theirs = ref.encode_ordinary(text)
        if enc.encode_ordinary(text) != theirs:
            pytest.fail(_first_difference(enc, ref, runs[lo : lo + 500]))
        assert enc.count(text) == len(theirs)


def test_count_until_agrees_with_count(pair: tuple[wf.Encoding, Any]) -> None:
    enc, ref = pair
    for s in corpus()[::5]:
        n = len(ref.encode_ordinary(s.text))
        assert enc.count_until(s.text, n) == n
        assert enc.count_until(s.text, n + 10) == n
        if n > 0:
            assert enc.count_until(s.text, n - 1) is None
            assert enc.count_until(s.text, 0) is None


def test_count_until_reads_only_what_it_needs(pair: tuple[wf.Encoding, Any]) -> None:
    enc, _ = pair
    # Every piece of this text is one token, so the answer for a small limit depends only
    # on the text's start: a tail that would change the full count is never reached.
    text = "word " * 1_000
    assert enc.count_until(text + "word", 5) is None
    assert enc.count_until("word word", 5) == 2
    assert enc.count_until("", 0) == 0
    with pytest.raises(TypeError):
        enc.count_until(b"bytes", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        enc.count_until("x", -1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(st.characters(codec="utf-8"), max_size=200), limit=st.integers(0, 80))
def test_property_count_until(pair: tuple[wf.Encoding, Any], text: str, limit: int) -> None:
    enc, ref = pair
    n = len(ref.encode_ordinary(text))
    assert enc.count_until(text, limit) == (n if n <= limit else None)
