"""Counters and encodings cross process boundaries: they pickle by their configuration and
rebuild their native state in the receiving process (a spawn pool, as ``datasets.map``,
``ProcessPoolExecutor`` on macOS and Windows, Ray and Spark use)."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf

TEXTS = ["hello world", "上下文窗口 fits 128K tokens 🙂", "def f(x):\n    return x * 2\n", ""]
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi", "name": "ann"},
]


def _facts(counter: Any) -> tuple[Any, ...]:
    return (
        type(counter).__name__,
        counter.model,
        counter.encoding_name,
        counter.is_exact,
        counter.calibration,
        counter.tokens_per_message,
        counter.reply_priming,
        [counter.count(t) for t in TEXTS],
        counter.count_messages(MESSAGES),
    )


def _counters() -> list[Any]:
    heuristic = wf.Counter.heuristic(cache_entries=64)
    heuristic.set_calibration(1.25)
    return [
        wf.Counter(model="gpt-4o"),
        wf.Counter(model="gpt-4"),
        wf.Counter(encoding="cl100k_base", cache_bytes=1 << 20),
        heuristic,
    ]


@pytest.mark.parametrize("index", range(4))
def test_counter_round_trips(index: int) -> None:
    counter = _counters()[index]
    copy = pickle.loads(pickle.dumps(counter))
    assert copy is not counter and isinstance(copy, wf.Counter)
    assert _facts(copy) == _facts(counter)
    assert copy.cache_info()["capacity"] == counter.cache_info()["capacity"]


def test_file_counter_round_trips(tmp_path: Path) -> None:
    import base64

    # a byte-level vocabulary of the 256 single bytes plus two merges
    ranks = [bytes([b]) for b in range(256)] + [b"he", b"hel"]
    path = tmp_path / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(ranks)))
    counter = wf.Counter.from_tiktoken_file(
        path, pattern=r"\w+|\s+|[^\w\s]+", special_tokens={"<|end|>": 258}
    )
    copy = pickle.loads(pickle.dumps(counter))
    assert _facts(copy) == _facts(counter)
    assert copy.encode("hello") == counter.encode("hello") == [257, 108, 111]


def test_encoding_round_trips() -> None:
    for name in ("cl100k_base", "o200k_base"):
        enc = wf.get_encoding(name)
        copy = pickle.loads(pickle.dumps(enc))
        assert copy.name == name and copy.encode(TEXTS[1]) == enc.encode(TEXTS[1])


def _in_child(job: tuple[Any, str]) -> tuple[Any, ...]:
    thing, text = job
    if isinstance(thing, wf.Encoding):
        return (thing.name, thing.encode(text), thing.count(text))
    return _facts(thing) + (thing.count(text),)


def test_a_spawn_pool_counts_with_pickled_counters() -> None:
    things: list[Any] = [*_counters(), wf.get_encoding("o200k_base")]
    jobs = [(t, TEXTS[1]) for t in things]
    expected = [_in_child(j) for j in jobs]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.map(_in_child, jobs) == expected
    with ProcessPoolExecutor(1, mp_context=ctx) as ex:
        assert list(ex.map(_in_child, jobs[:1])) == expected[:1]
