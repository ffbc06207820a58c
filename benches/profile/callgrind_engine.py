"""Instructions (and, with ``--cache-sim=yes``, cache misses) of the counting engine's paths,
for callgrind A/B comparisons between two builds.

Run each workload twice, with N and with 0 repetitions: the difference divided by N is one
repetition. Every pass counts new texts (a pass-numbered line in front of each), so no
whole-text cache answers; from the second pass on every word has been seen.

    for n in 0 3; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benches/profile/callgrind_engine.py pieces o200k_base $n 2>&1 | grep Collected
    done

Workloads:
  * ``pieces ENC N``: the source code corpus of ``report_field.py``, one text per call, with the
    text cache off: N steady passes (after one untimed pass): the piece tables' work;
  * ``default ENC N`` / ``off ENC N``: the distinct English dialog texts, N passes of never-seen texts,
    through the default ``Counter`` / one with ``cache_entries=0``: what the default path
    adds to a text counted once;
  * ``first ENC N [CORPUS]``: a fresh process's first pass over a corpus (multilingual dialog
    unless named), the default ``Counter``; N is 0 (the tokenizer loaded on one word) or 1;
  * ``module ENC N`` / ``method ENC N``: N warm passes of the dialog texts through
    ``wf.count(t)`` / ``Counter(model="gpt-4o").count(t)`` (ENC ignored).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import windowfit as wf  # noqa: E402


def _corpus(name: str) -> list[str]:
    """A corpus of ``report_field.py``, kept as JSON beside the temporary files: building it
    (YAML parsing) would only add noise to the difference."""
    path = Path(tempfile.gettempdir()) / f"windowfit-callgrind-{name.replace(' ', '-')}.json"
    if path.exists():
        texts: list[str] = json.loads(path.read_text(encoding="utf-8"))
        return texts
    from report_field import CORPORA

    texts = CORPORA[name]()
    path.write_text(json.dumps(texts), encoding="utf-8")
    return texts


def _pass(texts: list[str], k: int) -> list[str]:
    return [f"# pass {k}\n{t}" for t in texts]


def main() -> None:
    what, encoding, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "pieces":
        texts = _corpus("source code")
        counter = wf.Counter(encoding=encoding, cache_entries=0)
        versions = [_pass(texts, k) for k in range(n + 1)]
        [counter.count(t) for t in versions[0]]  # words seen
        for v in versions[1:]:
            [counter.count(t) for t in v]
    elif what in ("default", "off"):
        # each text once per pass: the corpus repeats some conversations, which a cache
        # would answer after their first count
        texts = list(dict.fromkeys(_corpus("English dialog")))
        counter = wf.Counter(encoding=encoding, cache_entries=0 if what == "off" else None)
        versions = [_pass(texts, k) for k in range(n + 1)]
        [counter.count(t) for t in versions[0]]
        for v in versions[1:]:
            [counter.count(t) for t in v]
    elif what == "first":
        texts = _corpus(sys.argv[4] if len(sys.argv) > 4 else "multilingual dialog")
        counter = wf.Counter(encoding=encoding)
        counter.count("a")  # the vocabulary loaded, no piece of the corpus seen
        if n:
            [counter.count(t) for t in texts]
    elif what in ("module", "method"):
        texts = _corpus("English dialog")
        fn = wf.count if what == "module" else wf.Counter(model="gpt-4o").count
        for _ in range(3):  # seen, kept, found
            [fn(t) for t in texts]
        for _ in range(n):
            [fn(t) for t in texts]
    else:
        raise SystemExit(f"unknown workload {what!r}")


if __name__ == "__main__":
    main()
