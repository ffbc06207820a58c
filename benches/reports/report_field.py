"""windowfit's counting against every fast exact counter, each in its fastest exact mode and
in fresh processes (markdown out, ``--json`` for the raw numbers).

    .venv/bin/python benches/reports/report_field.py                        # full run (release build)
    .venv/bin/python benches/reports/report_field.py --quick                # tiny corpora: checks the script
    .venv/bin/python benches/reports/report_field.py --threads 1 2 4 8 16   # thread scaling of batches
    .venv/bin/python benches/reports/report_field.py --batch-only --threads 1 4 16 \
        --corpora "all source code"                                         # ... on 25 MB batches
    .venv/bin/python benches/reports/report_field.py --json field.json
    .venv/bin/python benches/reports/report_field.py --ids                  # + token ids as lists
    .venv/bin/python benches/reports/report_field.py --files ~/src/project --glob "*.rs"  # your texts

Contenders (the peers need ``requirements-dev.txt``; a missing one is reported, not fatal):
  * windowfit as users get it: ``wf.Counter(encoding=...)``, the default counter and its
    caches; ``count(t)`` per text, ``count_many(ts)`` per batch;
  * gigatoken: ``Tokenizer.from_tiktoken(path)``, ``len(tok.encode(t))``, and batches by
    ``awkward.num(tok.encode_batch(ts), axis=1)``. Its ``encode`` treats special-token text
    (``<|endoftext|>``) as the special token, where windowfit, tiktoken ``encode_ordinary``
    and the other peers here count it as plain text: the corpora hold none, so counts agree;
  * fastokens: ``Tokenizer.from_tiktoken(path, encoding=...)``, ``encode_ordinary`` per text,
    ``encode_batch_flat`` per batch (its batch treats special-token text as special, too).
    Its workers (``FASTOKENS_BPE_THREADS``, all cores by default) share out a long single
    text too, so its "single" cells can use more than one core;
  * splintr-rs: ``Tokenizer.from_pretrained(name)``, ``encode_ordinary``, ``encode_batch_flat``;
  * toktok-rs: per-text ``count`` where the installed version has it, else
    ``batch_count([t], threads=1)``; batches by ``batch_count``;
  * quicktok-v1: ``count``, ``count_batch``; tiktoken ``encode_ordinary`` (the reference).

``--ids`` adds one more mode: token ids as a Python list, one text per call, as tiktoken's
``encode_ordinary`` gives them (windowfit ``get_encoding(name).encode_ordinary``, gigatoken
``encode(t).tolist()``, fastokens ``encode_ordinary(t).ids``, splintr-rs and quicktok-v1
``encode_ordinary``); every id is checked against tiktoken's before timing, and tiktoken is a
peer there.

Corpora (nothing downloaded): English dialog and multilingual dialog (``chatterbot-corpus``
conversations, short texts), source code (the standard library's ``.py`` files, one text per
file) and agent runs (the real agent runs of ``shared/data/agent-sessions/`` or
``WINDOWFIT_EVAL_DATA``: each distinct message content and tool call's arguments sent to the
model, 15 characters to a tool's output of 24 KB; skipped with a message where the runs are
absent) and MemoryBank dialog (the real Chinese and English multi-day dialogs of
``shared/data/dialogs-memorybank/``, each distinct message, 2,258 texts; skipped where
absent); on request (``--corpora``) all source code (25 MB) and long log texts
(four 750 KB slices of ``bench_truncate.py``'s service log). ``--files FOLDER`` times your
own texts instead (or besides, with ``--corpora``): every UTF-8 file under the folder that
``--glob`` matches, one text per file, in path order, up to ``--files-limit`` bytes
(``corpora.files``).

Method, per encoding (cl100k_base, o200k_base) x corpus x contender:
  * exactness first: a fresh process counts the corpus and compares every count with tiktoken
    ``encode_ordinary``; an inexact contender is reported and not timed;
  * then ``--runs`` fresh processes per contender and mode, the contenders taking turns (run
    k of each before run k + 1 of any, so a drift of the machine's speed meets them all).
    Each process loads its tokenizer (counted on one word), then makes five passes over the
    corpus. Every pass is a new text for every text (a short pass-numbered line in front), so
    no whole-text cache answers, but from the second pass on the words are ones the process
    has seen. "first" is pass 1, "steady" the mean pass of passes 3-5, each of the fastest
    process (every contender's best, as ``timeit`` reports); "load + first" (single texts)
    adds the process's load (the library imported, the tokenizer built, one word counted) to
    its first pass: what a fresh process pays to count the corpus once;
  * single: one text per call on one thread; batch: one call for the whole pass, all cores
    (``--threads`` repeats batches with ``RAYON_NUM_THREADS``, ``FASTOKENS_BPE_THREADS`` and
    the peers' own thread arguments at each count); warm: the same texts again and again (windowfit's text cache
    answers), against tiktoken.
Ratios compare windowfit with the fastest exact peer of the same cell (> 1: windowfit faster).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))
sys.path.insert(0, str(HERE))
from _build import require_release  # noqa: E402
from corpora import agent_messages, code, conversations, files, memorybank_messages  # noqa: E402

ENCODINGS = ("cl100k_base", "o200k_base")
PASSES = 5
STEADY = slice(2, 5)  # passes 3-5
PEERS = ("gigatoken", "fastokens", "splintr-rs", "toktok-rs", "quicktok-v1", "tiktoken")

# --------------------------------------------------------------------------- corpora


CORPORA: dict[str, Callable[[], list[str]]] = {
    "English dialog": lambda: conversations(True),
    "multilingual dialog": lambda: conversations(False),
    "source code": code,
    # what an agent counts every turn: the real agent runs' messages and tool calls, every
    # distinct text once (skipped, with a message, where the runs are absent)
    "agent runs": agent_messages,
    # real multi-day dialogs, Chinese and English, every distinct message once (skipped, with
    # a message, where the dialogs are absent)
    "MemoryBank dialog": memorybank_messages,
    # every .py file of the standard library's top two levels (about 25 MB): big enough that
    # every peer spreads a batch over 16 cores (gigatoken encodes a 2 MB batch on one thread)
    "all source code": lambda: code(limit=1 << 40),
    # four texts of 750 KB (a service log): one text between 512 KiB and 1 MiB, which the
    # engine counts in chunks on every core and fastokens spreads over its workers
    "long log texts": lambda: long_logs(4, 750_000),
}
DEFAULT_CORPORA = (
    "English dialog",
    "multilingual dialog",
    "source code",
    "agent runs",
    "MemoryBank dialog",
)


def long_logs(count: int, size: int) -> list[str]:
    """``count`` consecutive slices of ``size`` characters of ``bench_truncate``'s service log."""
    sys.path.insert(0, str(HERE.parent / "suites"))
    from bench_truncate import log_text

    log = log_text(count * size)
    return [log[k * size : (k + 1) * size] for k in range(count)]


def cut(texts: list[str], quick: bool) -> list[str]:
    """``--quick``: the first 40 texts, each at most 4 KB (whole characters)."""
    return [t[:4000] for t in texts[:40]] if quick else texts


def passes(texts: list[str]) -> list[list[str]]:
    """Five new versions of the corpus: each text behind a line naming its pass."""
    return [[f"# pass {k}\n{t}" for t in texts] for k in range(PASSES)]


# --------------------------------------------------------------------------- contenders


def reference(name: str) -> Any:
    from _corpus import tiktoken_cl100k, tiktoken_o200k

    return tiktoken_cl100k() if name == "cl100k_base" else tiktoken_o200k()


def tiktoken_file(name: str, folder: Path) -> Path:
    """The encoding's ranks as a .tiktoken file, for the peers that load one."""
    path = folder / f"{name}.tiktoken"
    if not path.exists():
        ranks = sorted(reference(name)._mergeable_ranks.items(), key=lambda kv: kv[1])
        path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks))
    return path


def _flat_counts(out: tuple[bytes, bytes]) -> list[int]:
    import numpy as np

    return np.diff(np.frombuffer(out[1], np.uint64)).tolist()


def contender(who: str, name: str, folder: Path, threads: int) -> dict[str, Callable[..., Any]]:
    """``single(text) -> count`` and ``batch(texts) -> counts`` of one contender, loaded.
    ``threads`` (0: all cores) goes to the peers that take a thread count."""
    if who == "windowfit":
        import windowfit as wf

        counter = wf.Counter(encoding=name)
        encoding = wf.get_encoding(name)
        return {
            "single": counter.count,
            "batch": counter.count_many,
            "ids": encoding.encode_ordinary,
        }
    if who == "tiktoken":
        ref = reference(name)
        n = threads or os.cpu_count() or 1
        return {
            "single": lambda t: len(ref.encode_ordinary(t)),
            "batch": lambda ts: [len(x) for x in ref.encode_ordinary_batch(ts, num_threads=n)],
            "ids": ref.encode_ordinary,
        }
    if who == "gigatoken":
        import awkward
        import gigatoken

        gt = gigatoken.Tokenizer.from_tiktoken(str(tiktoken_file(name, folder)))
        return {
            "single": lambda t: len(gt.encode(t)),
            "batch": lambda ts: awkward.num(gt.encode_batch(ts), axis=1).tolist(),
            "ids": lambda t: gt.encode(t).tolist(),
        }
    if who == "fastokens":
        import fastokens

        ft = fastokens.Tokenizer.from_tiktoken(str(tiktoken_file(name, folder)), encoding=name)
        return {
            "single": lambda t: len(ft.encode_ordinary(t)),
            "batch": lambda ts: _flat_counts(ft.encode_batch_flat(ts)),
            "ids": lambda t: ft.encode_ordinary(t).ids,
        }
    if who == "splintr-rs":
        import splintr

        sp = splintr.Tokenizer.from_pretrained(name)
        return {
            "single": lambda t: len(sp.encode_ordinary(t)),
            "batch": lambda ts: _flat_counts(sp.encode_batch_flat(ts)),
            "ids": sp.encode_ordinary,
        }
    if who == "toktok-rs":
        import toktok

        per_text = getattr(toktok, "count", None)
        single = (
            (lambda t: per_text(t, name))
            if per_text
            else (lambda t: toktok.batch_count([t], name, threads=1)[0])
        )
        return {"single": single, "batch": lambda ts: toktok.batch_count(ts, name, threads=threads)}
    if who == "quicktok-v1":
        import quicktok

        qt = quicktok.get_encoding(name)
        return {
            "single": qt.count,
            "batch": lambda ts: [int(n) for n in quicktok.count_batch(qt, ts)],
            "ids": qt.encode_ordinary,
        }
    raise SystemExit(f"unknown contender {who!r}")


# --------------------------------------------------------------------------- one process


def worker(mode: str, who: str, name: str, data: str, folder: str, threads: int) -> dict[str, Any]:
    """One fresh process. ``check``: one pass, every count compared. ``single``/``batch``:
    five timed passes of new texts. ``warm``: the same texts, passes 3-5 timed."""
    corpus = json.loads(Path(data).read_text(encoding="utf-8"))
    # load: the library imported, the tokenizer built, one word counted (the vocabulary
    # loaded; no piece of the corpus seen), what a fresh process pays before its first pass
    start = time.perf_counter()
    fns = contender(who, name, Path(folder), threads)
    fns["single"]("a")
    if mode == "ids":  # the call timed, made once too
        fns["ids"]("a")
    load = time.perf_counter() - start
    if mode == "check":
        got = list(fns["batch"](corpus["passes"][0]))
        single = [fns["single"](t) for t in corpus["passes"][1]]
        bad = sum(a != b for a, b in zip(got, corpus["expected"][0]))
        bad += sum(a != b for a, b in zip(single, corpus["expected"][1]))
        check = {"differ": bad, "of": 2 * len(got)}
        if "ids" in fns:
            hashes = [ids_hash(fns["ids"](t)) for t in corpus["passes"][0]]
            check["ids_differ"] = sum(a != b for a, b in zip(hashes, corpus["ids_hash"]))
        return check
    texts = corpus["passes"] if mode != "warm" else [corpus["passes"][0]] * PASSES
    seconds, first_counts = [], None
    for k, ts in enumerate(texts):
        if mode == "ids":
            fn = fns["ids"]
            start = time.perf_counter()
            counts = [fn(t) for t in ts]
            seconds.append(time.perf_counter() - start)
            if k == 0:
                first_counts = [ids_hash(x) for x in counts]
            continue
        if mode == "batch":
            fn = fns["batch"]
            start = time.perf_counter()
            counts = fn(ts)
        else:
            fn = fns["single"]
            start = time.perf_counter()
            counts = [fn(t) for t in ts]
        seconds.append(time.perf_counter() - start)
        if k == 0:
            first_counts = list(counts)
    want = corpus["ids_hash"] if mode == "ids" else corpus["expected"][0]
    exact = first_counts == want
    return {"seconds": seconds, "exact": exact, "load": load}


def ids_hash(ids: Any) -> int:
    """One number for a text's token ids (ints hash alike in every process)."""
    return hash(tuple(ids))


def spawn(args: list[str], threads: int) -> dict[str, Any]:
    env = dict(os.environ)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
        # fastokens spreads batches (and long texts) over its own BPE workers, not rayon's
        env["FASTOKENS_BPE_THREADS"] = str(threads)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args, str(threads)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------- the run


def installed(who: str) -> bool:
    module = {
        "windowfit": "windowfit",
        "splintr-rs": "splintr",
        "toktok-rs": "toktok",
        "quicktok-v1": "quicktok",
    }
    import importlib.util

    return importlib.util.find_spec(module.get(who, who)) is not None


def measure_cell(
    name: str,
    label: str,
    data: Path,
    folder: str,
    who_all: list[str],
    runs: int,
    threads: int,
    modes: list[str],
    checks: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Every contender's exactness, then its timings, for one encoding and corpus. ``checks``
    keeps each contender's exactness check across thread counts (every timed process still
    compares its own first pass with tiktoken)."""
    cell: dict[str, Any] = {"encoding": name, "corpus": label, "threads": threads, "contenders": {}}
    for who in who_all:
        if who not in checks:
            checks[who] = spawn(["check", who, name, str(data), folder], threads)
        check = checks[who]
        cell["contenders"][who] = {"differ": check["differ"], "of": check["of"]}
    exact = [who for who in who_all if not checks[who]["differ"]]  # the inexact: not timed
    for mode in modes:
        timed = [w for w in exact if mode != "warm" or w in ("windowfit", "tiktoken")]
        if mode == "ids":  # those that give ids, and the same ids as tiktoken
            timed = [w for w in timed if checks[w].get("ids_differ") == 0]
        # Run k of every contender before run k + 1 of any: the machine's speed drifts over
        # minutes, and each contender gets a process in each stretch of it.
        procs: dict[str, list[dict[str, Any]]] = {who: [] for who in timed}
        for _ in range(runs):
            for who in timed:
                procs[who].append(spawn([mode, who, name, str(data), folder], threads))
        for who, ps in procs.items():
            entry = cell["contenders"][who]
            if not all(p["exact"] for p in ps):
                entry["differ"] = entry["differ"] or -1  # counts changed between passes
                continue
            entry[mode] = {
                "first": min(p["seconds"][0] for p in ps),
                "steady": min(statistics.mean(p["seconds"][STEADY]) for p in ps),
                "load": min(p["load"] for p in ps),
                "load + first": min(p["load"] + p["seconds"][0] for p in ps),
            }
    return cell


def ratio_rows(cell: dict[str, Any], mb: float, modes: list[str]) -> list[str]:
    """Markdown rows of one cell: MB/s per contender and mode, and windowfit's ratio to the
    fastest exact peer (for warm: to tiktoken)."""
    rows = []
    for mode in modes:
        # a fresh process's load and first pass together, for one text per call
        phases = ("first", "steady", "load + first") if mode == "single" else ("first", "steady")
        for phase in phases:
            speeds = {
                who: mb / e[mode][phase]
                for who, e in cell["contenders"].items()
                if not e["differ"] and mode in e and e[mode].get(phase, 0) > 0
            }
            if not speeds:
                continue
            mine = speeds.get("windowfit")
            peers = {
                w: s
                for w, s in speeds.items()
                if w != "windowfit" and (mode in ("warm", "ids") or w != "tiktoken")
            }
            top = max(peers, key=lambda w: peers[w]) if peers else None
            ratio = f"**{mine / peers[top]:.2f}x**" if mine and top else ""
            others = ", ".join(
                f"{w} {s:,.0f}" for w, s in sorted(speeds.items(), key=lambda kv: -kv[1])
            )
            rows.append(
                f"| {cell['encoding']} | {cell['corpus']} | {mode} | {phase} | {cell['threads'] or 'all'} "
                f"| {mine or 0:,.0f} | {top or ''} {peers[top] if top else 0:,.0f} | {ratio} | {others} |"
            )
    inexact = [
        f"{w} ({e['differ']} of {e['of']} counts differ)"
        for w, e in cell["contenders"].items()
        if e["differ"]
    ]
    if inexact:
        rows.append(
            f"| {cell['encoding']} | {cell['corpus']} | not exact, not timed: {'; '.join(inexact)} |||||||"
        )
    return rows


def chosen_corpora(args: argparse.Namespace) -> dict[str, Callable[[], list[str]]]:
    """The corpora to time, by label: ``--corpora`` (the defaults where neither it nor
    ``--files`` is given), then one per ``--files`` folder."""
    labels = args.corpora
    if labels is None:
        labels = [] if args.files else DEFAULT_CORPORA
    chosen = {label: CORPORA[label] for label in labels}
    suffix = "" if args.glob == "*" else f" ({args.glob})"
    for folder in args.files:
        label = f"{folder.name}{suffix}"
        if label in chosen:  # two folders of one name (a/src, b/src): told apart by their path
            label = f"{folder}{suffix}"
        chosen[label] = lambda f=folder: files(f, args.glob, args.files_limit)
    return chosen


def write_json(path: Path, load: float, cells: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps({"load_start": load, "cells": cells}, indent=1), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per contender and mode")
    ap.add_argument(
        "--quick", action="store_true", help="tiny corpora, one process: checks the script runs"
    )
    ap.add_argument(
        "--threads", type=int, nargs="*", default=[], help="batch thread counts to scale over"
    )
    ap.add_argument("--encodings", nargs="*", default=list(ENCODINGS))
    ap.add_argument(
        "--corpora",
        nargs="*",
        choices=list(CORPORA),
        help=f"default: {', '.join(DEFAULT_CORPORA)} (none with --files)",
    )
    ap.add_argument(
        "--files", type=Path, nargs="*", default=[], help="folders of your own texts, a corpus each"
    )
    ap.add_argument("--glob", default="*", help="which files of --files folders (default: all)")
    ap.add_argument(
        "--files-limit", type=int, default=2_000_000, help="bytes read from each --files folder"
    )
    ap.add_argument("--batch-only", action="store_true", help="time batches only (thread scaling)")
    ap.add_argument(
        "--ids",
        action="store_true",
        help="also time token ids as a Python list, one text per call (tiktoken's encode_ordinary)",
    )
    ap.add_argument("--contenders", nargs="*", default=["windowfit", *PEERS])
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        mode, who, name, data, folder, threads = args.worker
        print(json.dumps(worker(mode, who, name, data, folder, int(threads))))
        return
    # checked here, not in the workers: importing windowfit there would take its import out
    # of the load they time
    require_release()
    runs = 1 if args.quick else args.runs
    who_all = [w for w in args.contenders if installed(w)]
    missing = sorted(set(args.contenders) - set(who_all))
    load = os.getloadavg()[0]
    lines = [
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {load:.2f} at the start"
        + ("; --quick: tiny corpora, timings meaningless" if args.quick else ""),
        "",
        "MB/s (higher is faster). first: pass 1 of a fresh process (best of "
        f"{runs}); steady: mean of passes 3-5 (fastest process; contenders take turns); load + first: "
        "the corpus over the process's load (import, build, one word) and its first pass; ratio: "
        "windowfit / the fastest exact peer of the cell (warm: / tiktoken).",
        "",
        "| encoding | corpus | mode | pass | threads | windowfit | fastest peer | ratio | all |",
        "|---|---|---|---|---:|---:|---|---:|---|",
    ]
    if missing:
        print(f"not installed, not timed: {', '.join(missing)}", file=sys.stderr)
    cells = []
    corpora = chosen_corpora(args)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.encodings:
            ref = reference(name)
            tiktoken_file(name, Path(folder))
            for label, make in corpora.items():
                try:
                    texts = cut(make(), args.quick)
                except FileNotFoundError as exc:
                    print(f"skipped: {label}: {exc}", file=sys.stderr)
                    continue
                versions = passes(texts)
                expected = [[len(x) for x in ref.encode_ordinary_batch(v)] for v in versions]
                ids_hashes = [ids_hash(x) for x in ref.encode_ordinary_batch(versions[0])]
                data = Path(folder) / f"{name}-{label}.json"
                data.write_text(
                    json.dumps({"passes": versions, "expected": expected, "ids_hash": ids_hashes}),
                    encoding="utf-8",
                )
                mb = sum(len(t.encode()) for t in versions[0]) / 1e6
                checks: dict[str, dict[str, Any]] = {}
                for threads in [0, *args.threads]:
                    every = threads == 0 and not args.batch_only
                    modes = ["single", "batch", "warm"] if every else ["batch"]
                    if every and args.ids:
                        modes.append("ids")
                    cell = measure_cell(
                        name, label, data, folder, who_all, runs, threads, modes, checks
                    )
                    cell["mb"] = mb
                    cells.append(cell)
                    lines += ratio_rows(cell, mb, modes)
                    print(f"done: {name} {label} threads={threads or 'all'}", file=sys.stderr)
                    if args.json:  # after every cell: a run cut short keeps what it measured
                        write_json(args.json, load, cells)
    lines += ["", f"load average {os.getloadavg()[0]:.2f} at the end."]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
