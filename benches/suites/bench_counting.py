"""Counting speed: the test corpus (tests/_corpus.py: ~9,800 texts, 4.8 MB of English and
Chinese dialog, code, JSON, logs, mixed and edge cases), counted one text at a time on one
thread, side by side with tiktoken and quicktok.

    make release && .venv/bin/python -m pytest benches/suites/bench_counting.py --benchmark-only \\
        --benchmark-columns=min,median,mean,rounds --benchmark-group-by=param:encoding

- **tiktoken**: ``len(enc.encode_ordinary(t))`` per text (the baseline of issue 2).
- **quicktok**: ``enc.count(t)`` per text (the fastest exact counter on PyPI).
- **windowfit cold**: ``counter.count(t)`` per text with the counter's cache emptied before
  every round (a private counter, so other tests' warm entries never leak in).
- **windowfit warm**: the same after one pass: every count is a cache hit (hashing only).
- **windowfit uncached**: ``cache_entries=0``, the pure tokenizer plus the call.
- **count_many cold / warm**: the whole corpus in one call (GIL released, rayon on all cores:
  2 on the reference machine).
- **tiktoken batch**: ``encode_ordinary_batch(texts, num_threads=2)``, for the parallel rows.

Every benchmark checks its counts against tiktoken's. ``benches/reports/report_counting.py`` prints
the same comparison as a markdown table without pytest-benchmark.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import windowfit as wf
from _corpus import corpus, quicktok_encoding, tiktoken_cl100k, tiktoken_o200k

TEXTS = [s.text for s in corpus()]
ENCODINGS = ["cl100k_base", "o200k_base"]
REFERENCE: dict[str, Callable[[], Any]] = {
    "cl100k_base": tiktoken_cl100k,
    "o200k_base": tiktoken_o200k,
}
CACHE = 2_000_000  # room for the whole corpus: nothing is evicted while warm


@pytest.fixture(scope="module", params=ENCODINGS)
def encoding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def expected(encoding: str) -> list[int]:
    enc = REFERENCE[encoding]()
    return [len(enc.encode_ordinary(t)) for t in TEXTS]


def test_tiktoken(benchmark: Any, encoding: str, expected: list[int]) -> None:
    enc = REFERENCE[encoding]()
    result = benchmark.pedantic(
        lambda: [len(enc.encode_ordinary(t)) for t in TEXTS], rounds=5, warmup_rounds=1
    )
    assert result == expected


def test_tiktoken_batch_2_threads(benchmark: Any, encoding: str, expected: list[int]) -> None:
    enc = REFERENCE[encoding]()
    result = benchmark.pedantic(
        lambda: [len(ids) for ids in enc.encode_ordinary_batch(TEXTS, num_threads=2)],
        rounds=5,
        warmup_rounds=1,
    )
    assert result == expected


def test_quicktok(benchmark: Any, encoding: str, expected: list[int]) -> None:
    qt = quicktok_encoding(encoding)
    result = benchmark.pedantic(lambda: [qt.count(t) for t in TEXTS], rounds=10, warmup_rounds=1)
    assert result == expected


def test_windowfit_cold(benchmark: Any, encoding: str, expected: list[int]) -> None:
    c = wf.Counter(encoding=encoding, cache_entries=CACHE)
    result = benchmark.pedantic(
        lambda: [c.count(t) for t in TEXTS], setup=c.clear_cache, rounds=10, warmup_rounds=1
    )
    assert result == expected
    # every round really was cold: the only hits are the corpus's repeated texts
    assert c.cache_info()["hits"] == len(TEXTS) - len(set(TEXTS))


def test_windowfit_warm(benchmark: Any, encoding: str, expected: list[int]) -> None:
    c = wf.Counter(encoding=encoding, cache_entries=CACHE)
    assert [c.count(t) for t in TEXTS] == expected
    result = benchmark.pedantic(lambda: [c.count(t) for t in TEXTS], rounds=50, warmup_rounds=1)
    assert result == expected


def test_windowfit_uncached(benchmark: Any, encoding: str, expected: list[int]) -> None:
    c = wf.Counter(encoding=encoding, cache_entries=0)
    result = benchmark.pedantic(lambda: [c.count(t) for t in TEXTS], rounds=10, warmup_rounds=1)
    assert result == expected


def test_windowfit_count_many_cold(benchmark: Any, encoding: str, expected: list[int]) -> None:
    c = wf.Counter(encoding=encoding, cache_entries=CACHE)
    result = benchmark.pedantic(
        lambda: c.count_many(TEXTS), setup=c.clear_cache, rounds=10, warmup_rounds=1
    )
    assert result == expected


def test_windowfit_count_many_warm(benchmark: Any, encoding: str, expected: list[int]) -> None:
    c = wf.Counter(encoding=encoding, cache_entries=CACHE)
    c.count_many(TEXTS)
    result = benchmark.pedantic(lambda: c.count_many(TEXTS), rounds=50, warmup_rounds=1)
    assert result == expected
