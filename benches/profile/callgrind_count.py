"""Instructions of one warm ``count(text)`` call from Python, for callgrind.

Wall-clock on a loaded machine moves by tens of percent between runs; instruction counts do
not. The texts are the dialog corpus of ``report_engine.py`` (tiny multilingual texts), all
in the cache before the timed calls. Run it once with N calls and once with 0: the
difference divided by N is one call (the Python loop included, as in the warm row).

    for n in 0 764400; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benches/profile/callgrind_count.py counter $n 2>&1 | grep Collected
    done

Contenders: ``counter`` (``windowfit.Counter``), ``core`` (``_core.Counter``, no Python
subclass), ``encoding`` (``get_encoding``), ``tiktoken`` (``encode_ordinary`` per text, the
peer of the warm row) and ``loop`` (the same loop around ``str(t)``, the interpreter's share).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import windowfit as wf  # noqa: E402
from corpora import cached_conversations  # noqa: E402
from windowfit import _core  # noqa: E402


def _count_loop(owner: Any, texts: list[str]) -> None:
    # the warm row's loop: the method looked up on the object and called, per text
    [owner.count(t) for t in texts]


def _peer_loop(encode: Any, texts: list[str]) -> None:
    [len(encode(t)) for t in texts]


def main() -> None:
    who, n = sys.argv[1], int(sys.argv[2])
    encoding = sys.argv[3] if len(sys.argv) > 3 else "cl100k_base"
    texts = cached_conversations()
    run = _count_loop
    if who == "counter":
        fn: Any = wf.Counter(encoding=encoding, cache_entries=2_000_000)
    elif who == "core":
        fn = _core.Counter("openai", encoding, cache_entries=2_000_000)
    elif who == "encoding":
        fn = wf.get_encoding(encoding)
    elif who == "tiktoken":
        from _corpus import tiktoken_cl100k, tiktoken_o200k

        ref = tiktoken_cl100k() if encoding == "cl100k_base" else tiktoken_o200k()
        fn = ref.encode_ordinary
        run = _peer_loop
    elif who == "loop":
        fn, run = str, _peer_loop  # str(t) is t itself: the loop alone
    else:
        raise SystemExit(f"unknown contender {who!r}: counter, core, encoding, tiktoken or loop")
    run(fn, texts)  # every text warm (counted once, its Python hash cached)
    full, rest = divmod(n, len(texts))
    for _ in range(full):
        run(fn, texts)
    run(fn, texts[:rest])


if __name__ == "__main__":
    main()
