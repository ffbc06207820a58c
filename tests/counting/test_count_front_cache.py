"""The per-thread front cache of short texts (keyed by Python's ``str`` hash, confirmed by
the bytes) and the fast ``Counter.count`` method: the same counts as tiktoken warm or cold,
after colliding texts, after ``clear_cache``, across threads and counters; bounded; the
statistics still true; the method's arguments and errors as before."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import windowfit as wf
from _corpus import corpus, tiktoken_cl100k, tiktoken_o200k
from hypothesis import given, settings
from hypothesis import strategies as st
from windowfit import _core

# The front table's shape (src/cache.rs): 2**15 slots in sets of 4 ways, at most 2 MiB of
# text, texts of up to 1 KiB.
SETS, SLOTS, MAX_BYTES, MAX_LEN = 2**13, 2**15, 2 << 20, 1024


def short_texts() -> list[str]:
    return [s.text for s in corpus() if 0 < len(s.text.encode("utf-8", "replace")) <= MAX_LEN]


def in_new_thread(fn: Any) -> Any:
    """``fn()`` on a fresh thread (a fresh, empty front table), its result or its error."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # re-raised on the caller's thread
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_warm_counts_equal_tiktoken_on_every_short_corpus_text() -> None:
    texts, ref = short_texts(), tiktoken_cl100k()
    expected = [len(ref.encode_ordinary(t)) for t in texts]
    c = wf.Counter(encoding="cl100k_base", cache_entries=100_000)
    for _ in range(3):  # cold, then from the front table
        assert [c.count(t) for t in texts] == expected
        # equal strings that are other objects find the same entries
        assert [c.count("".join(list(t))) for t in texts] == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), min_size=1, max_size=20))
def test_warm_counts_equal_tiktoken_on_any_text(texts: list[str]) -> None:
    ref = tiktoken_o200k()
    c = wf.Counter(encoding="o200k_base", cache_entries=1_000)
    for t in texts + texts[::-1]:
        assert c.count(t) == len(ref.encode_ordinary(t)), t


def test_texts_colliding_in_one_set_keep_their_own_counts() -> None:
    # Many more texts than ways land in one set of the table: they evict each other, and
    # every count stays the reference's.
    buckets: dict[int, list[str]] = {}
    rng = random.Random(7)
    for i in range(120_000):
        t = f"{rng.choice(['note', 'ok', 'été', '数据'])} {i}"
        buckets.setdefault(hash(t) % SETS, []).append(t)
    same_set = max(buckets.values(), key=len)
    assert len(same_set) >= 12
    ref = tiktoken_cl100k()
    expected = [len(ref.encode_ordinary(t)) for t in same_set]

    def work() -> list[list[int]]:
        c = wf.Counter(encoding="cl100k_base", cache_entries=10_000)
        return [[c.count(t) for t in order] for order in (same_set, same_set[::-1], same_set)]

    first, backwards, again = in_new_thread(work)
    assert first == again == expected
    assert backwards == expected[::-1]


def test_hits_and_misses_count_front_hits_once() -> None:
    def work() -> tuple[dict[str, int], dict[str, int]]:
        c = wf.Counter(encoding="cl100k_base", cache_entries=100)
        for _ in range(5):
            assert c.count("hello world") == 2
        assert c.count("another text") == 2
        info = c.cache_info()
        c.clear_cache()
        return info, c.cache_info()

    info, cleared = in_new_thread(work)
    # a short text is kept from its second count on: "hello world" misses twice, then hits
    assert (info["hits"], info["misses"], info["size"]) == (3, 3, 1)
    assert (cleared["hits"], cleared["misses"], cleared["size"], cleared["capacity"]) == (
        0,
        0,
        0,
        100,
    )


def test_clear_cache_makes_front_entries_stale_on_every_thread() -> None:
    c = wf.Counter(encoding="o200k_base", cache_entries=1_000)
    text = f"front cache clear probe {random.random()}"
    expected = len(tiktoken_o200k().encode_ordinary(text))
    ready, cleared, done = threading.Event(), threading.Event(), []

    def other() -> None:
        assert c.count(text) == expected  # in this thread's front table now
        assert c.count(text) == expected
        ready.set()
        cleared.wait()
        before = c.cache_info()
        done.append((c.count(text), before, c.cache_info()))

    t = threading.Thread(target=other)
    t.start()
    ready.wait()
    c.clear_cache()
    cleared.set()
    t.join()
    n, before, after = done[0]
    assert n == expected
    # the front entry made before the clear was not used: a miss, counted again (and not
    # kept: the cleared cache sees the text for the first time)
    assert (before["hits"], before["misses"], before["size"]) == (0, 0, 0)
    assert (after["hits"], after["misses"], after["size"]) == (0, 1, 0)


def test_counters_of_other_tokenizers_do_not_share_front_entries() -> None:
    text = "नमस्ते दुनिया, Привет 你好世界"
    a, b = wf.Counter(encoding="cl100k_base"), wf.Counter(encoding="o200k_base")
    want_a = len(tiktoken_cl100k().encode_ordinary(text))
    want_b = len(tiktoken_o200k().encode_ordinary(text))
    assert want_a != want_b  # the probe must tell the two apart
    for _ in range(3):
        assert (a.count(text), b.count(text)) == (want_a, want_b)
    # private caches of one tokenizer: each its own statistics
    p, q = (wf.Counter(encoding="cl100k_base", cache_entries=10) for _ in range(2))
    for _ in range(3):  # kept from the second count on: one hit
        p.count(text)
    q.count(text)
    assert (p.cache_info()["hits"], q.cache_info()["hits"], q.cache_info()["misses"]) == (1, 0, 1)


def test_disabled_cache_keeps_nothing_in_front() -> None:
    def work() -> tuple[tuple[int, int], dict[str, int]]:
        c = wf.Counter(encoding="cl100k_base", cache_entries=0)
        for _ in range(3):
            assert c.count("hello world") == 2
        return _core._front_cache_stats(), c.cache_info()

    stats, info = in_new_thread(work)
    assert stats == (0, 0)
    assert (info["hits"], info["misses"], info["size"]) == (0, 3, 0)


def test_front_table_is_bounded() -> None:
    def work() -> list[tuple[int, int]]:
        c = wf.Counter(encoding="cl100k_base", cache_entries=1_000_000)
        seen = []
        for i in range(60_000):
            text = f"distinct short text number {i} " + "x" * (i % 200)
            c.count(text)
            c.count(text)  # kept from its second count on
            if i % 5_000 == 0:
                seen.append(_core._front_cache_stats())
        long = "long " * 400  # over 1 KiB: not kept in front
        c.count(long)
        c.count(long)
        seen.append(_core._front_cache_stats())
        return seen

    seen = in_new_thread(work)
    assert all(n <= SLOTS and b <= MAX_BYTES for n, b in seen), seen
    assert max(b for _, b in seen) > MAX_BYTES // 2  # it did fill up, and start over


def test_many_threads_counting_the_same_texts_agree_and_stats_add_up() -> None:
    texts = short_texts()[::3]
    ref = tiktoken_cl100k()
    expected = [len(ref.encode_ordinary(t)) for t in texts]
    c = wf.Counter(encoding="cl100k_base", cache_entries=50_000)
    barrier, errors = threading.Barrier(6), []

    def work(seed: int) -> None:
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        barrier.wait()
        for _ in range(3):
            for i in order:
                if (n := c.count(texts[i])) != expected[i]:
                    errors.append(f"thread {seed}: {texts[i][:40]!r} {n} != {expected[i]}")

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(work, range(6)))
    assert not errors, errors[:5]
    info = c.cache_info()
    nonempty = sum(1 for t in texts if t)
    assert info["hits"] + info["misses"] == 6 * 3 * nonempty


def test_str_subclasses_and_surrogates_are_counted_like_str() -> None:
    class Tagged(str):
        def __hash__(self) -> int:  # a different hash for equal text: must not matter
            return 12345

    ref = tiktoken_cl100k()
    c = wf.Counter(encoding="cl100k_base", cache_entries=100)
    for text in ["hello world", "naïve café", "\ud83d lone", "x\udfffy"]:
        want = len(ref.encode_ordinary(text))
        assert [c.count(text), c.count(Tagged(text)), c.count(text)] == [want] * 3, text


def test_count_method_arguments_and_errors() -> None:
    c = wf.Counter(model="gpt-4o")
    assert c.count("hello world") == c.count(text="hello world") == 2
    with pytest.raises(TypeError, match="text must be str, not int"):
        c.count(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        c.count()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="takes 1 positional"):
        c.count("a", "b")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        c.count(tex="a")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="not a subclass of Counter"):
        _core._fast_count(dict)  # type: ignore[arg-type]


def test_counter_keeps_its_model_without_an_instance_dict() -> None:
    c = wf.Counter(model="gpt-4o-mini")
    assert (c.model, c.name) == ("gpt-4o-mini", "gpt-4o-mini")
    e = wf.Counter(encoding="o200k_base")
    assert (e.model, e.name) == (None, "o200k_base")
    assert not hasattr(c, "__dict__")
    assert weakref.ref(c)() is c
    with pytest.raises(AttributeError):
        c.model = "other"  # type: ignore[misc]

    class Mine(wf.Counter):  # a user's subclass still counts (through the generic call)
        pass

    assert Mine(encoding="cl100k_base").count("hello world") == 2


def test_encoding_count_is_the_same_fast_method() -> None:
    ref = tiktoken_o200k()
    enc = wf.get_encoding("o200k_base")
    texts = short_texts()[::7]
    for _ in range(2):
        assert [enc.count(t) for t in texts] == [len(ref.encode_ordinary(t)) for t in texts]
    assert enc.count(text="hello world") == 2
    with pytest.raises(TypeError, match="text must be str, not bytes"):
        enc.count(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        enc.count()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        enc.count("a", limit=3)  # type: ignore[call-arg]


def run_with_front_budget(code: str, budget: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that reads ``WINDOWFIT_FRONT_CACHE_BYTES=budget`` at
    import (the variable is read once, so a running process cannot show it)."""
    env = {**os.environ, "WINDOWFIT_FRONT_CACHE_BYTES": budget}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )


@pytest.mark.parametrize(
    ("value", "expected"), [("0", "(0, 0) 2 1"), ("64", "(1, 11) 2 1"), ("lots", "(1, 11) 2 1")]
)
def test_front_cache_bytes_from_the_environment(value: str, expected: str) -> None:
    # 0 turns the front tables off (the shared cache still answers: one hit), 64 bytes still
    # hold a short text; a bad value is ignored with a warning (the 2 MiB default stays).
    code = (
        "import windowfit as wf\n"
        "from windowfit import _core\n"
        "c = wf.Counter(encoding='cl100k_base', cache_entries=10)\n"
        "n = [c.count('hello world') for _ in range(3)][-1]\n"
        "print(_core._front_cache_stats(), n, c.cache_info()['hits'])\n"
    )
    out = run_with_front_budget(code, value)
    assert out.stdout.strip() == expected
    assert ("WINDOWFIT_FRONT_CACHE_BYTES" in out.stderr) == (value == "lots")


# ----------------------------------------------------------------------------- the held table
# A plain `str` counted with the GIL held is also remembered by identity (src/cache/held.rs):
# the table holds a reference, so the address keeps naming the same immutable text.


def test_a_held_text_is_found_by_identity_and_released_by_clear_cache() -> None:
    def work() -> tuple[int, int, int, int, tuple[int, int], dict[str, int], int, tuple[int, int]]:
        c = wf.Counter(encoding="cl100k_base", cache_entries=100)
        text = "".join(["held ", "text ", str(random.random())])  # a fresh object
        before = sys.getrefcount(text)
        first = c.count(text)  # a first sight: counted, nothing kept
        unheld = sys.getrefcount(text)
        n = c.count(text)
        held = sys.getrefcount(text)
        assert c.count(text) == n == first  # the third call is a hit
        stats, info = _core._held_cache_stats(), c.cache_info()
        c.clear_cache()
        after = sys.getrefcount(text)
        return before, unheld, held, n, stats, info, after, _core._held_cache_stats()

    before, unheld, held, n, stats, info, after, cleared = in_new_thread(work)
    # one reference while held, none before the second count or after the clear
    assert unheld == before and held == before + 1 and after == before
    assert stats[0] == 1 and stats[1] > 0 and cleared == (0, 0)
    assert (info["hits"], info["misses"]) == (1, 2)
    assert n > 0


def test_texts_freed_and_reallocated_at_the_same_address_are_counted_again() -> None:
    # Were the table to keep addresses without references, a new text in a freed one's
    # memory would take its count. Each round frees the previous texts (held by the table
    # only while it has room) and makes new ones of the same sizes.
    ref, rng = tiktoken_o200k(), random.Random(3)
    words = ["alpha", "été", "数据", "42", " ", "\n", "naïve", "Ω"]

    def work() -> list[str]:
        c = wf.Counter(encoding="o200k_base", cache_entries=100_000)
        bad = []
        for _ in range(30):
            texts = [
                "".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(500)
            ]
            for t in texts + texts:
                if c.count(t) != len(ref.encode_ordinary(t)):
                    bad.append(t)
            del texts
        return bad

    assert in_new_thread(work) == []


@pytest.mark.parametrize("budget", ["0", "300", "4096"])
def test_held_texts_stay_within_four_times_the_front_budget(budget: str) -> None:
    code = (
        "import windowfit as wf\n"
        "from windowfit import _core\n"
        "c = wf.Counter(encoding='cl100k_base', cache_entries=10_000)\n"
        "seen = 0\n"
        "for i in range(3000):\n"
        "    t = f'text number {i} ' * (1 + i % 7)\n"
        "    c.count(t); c.count(t)\n"
        "    seen = max(seen, _core._held_cache_stats()[1])\n"
        "print(seen)\n"
    )
    seen = int(run_with_front_budget(code, budget).stdout)
    assert seen <= 4 * int(budget)
    assert (seen > 0) == (budget != "0")
