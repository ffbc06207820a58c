"""The command line through its entry point, on real files (malformed ones included): count
against tiktoken, fit against the window invariants, bench with its plot, models against the
registry, demo on a user's history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _agent_runs import RUN, extract
from _corpus import tiktoken_cl100k, tiktoken_o200k
from windowfit.cli import main
from windowfit.cli.showcase import simulate_session
from windowfit.replay import SERIES, call_points
from windowfit.testing import FIT_PROMISES, check_window

pytest.importorskip("tiktoken")

WINDOWFIT = Path(sys.executable).parent / "windowfit"
SESSION = simulate_session(24).messages


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def history_file(
    tmp_path: Path, msgs: list[dict[str, Any]] = SESSION, name: str = "h.json"
) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(msgs, ensure_ascii=False, indent=1), encoding="utf-8")
    return p


# ---------------------------------------------------------------- count


def test_count_matches_tiktoken_with_a_total(tmp_path: Path, capsys: Any) -> None:
    texts = {"a.md": "Hello, world! 你好，世界！\n" * 40, "b.py": "def f(x):\n    return x\n" * 9}
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    files = [str(tmp_path / n) for n in texts]
    code, out, _ = run(capsys, "count", *files, "-m", "gpt-4o", "-m", "gpt-4", "--json")
    assert code == 0
    data = json.loads(out)
    ref = {"gpt-4o": tiktoken_o200k(), "gpt-4": tiktoken_cl100k()}  # tiktoken itself, offline
    for row, text in zip(data["files"], texts.values()):
        for model, enc in ref.items():
            assert row["tokens"][model] == len(enc.encode_ordinary(text))
    for model in ref:
        assert data["total"][model] == sum(r["tokens"][model] for r in data["files"])
    assert all(m["exact"] for m in data["models"])
    code, out, _ = run(capsys, "count", *files, "-m", "gpt-4o", "-m", "claude-sonnet-4")
    assert code == 0 and "total" in out and "claude-sonnet-4 (estimate)" in out and "~" in out


def test_count_messages_and_stdin_through_the_installed_script(tmp_path: Path) -> None:
    h = history_file(tmp_path)
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.run(
        [str(WINDOWFIT), "count", "--messages", str(h), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout)["files"][0]
    assert row["tokens"]["gpt-4o"] == wf.Counter(model="gpt-4o").count_messages(SESSION)
    assert row["messages"] == len(SESSION)
    p = subprocess.run(
        [str(WINDOWFIT), "count", "-", "--json"],
        input="上下文窗口 context window",
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    expected = len(tiktoken_o200k().encode_ordinary("上下文窗口 context window"))
    assert json.loads(p.stdout)["files"][0]["tokens"]["gpt-4o"] == expected


def test_count_errors(tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(capsys, "count", str(tmp_path / "missing.txt"))
    assert code == 1 and "missing.txt" in err
    (tmp_path / "t.txt").write_text("hi")
    code, _, err = run(capsys, "count", str(tmp_path / "t.txt"), "-m", "no-such-model")
    assert code == 2 and "no-such-model" in err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"role": "user", "content": "hi"},\n {"content": "no role"}]')
    code, _, err = run(capsys, "count", "--messages", str(bad))
    assert code == 2 and f"{bad}:2: message 1: role: missing" in err


# ---------------------------------------------------------------- fit


def test_fit_writes_the_window_and_says_why(tmp_path: Path, capsys: Any) -> None:
    h = history_file(
        tmp_path, SESSION + [{"role": "tool", "tool_call_id": "ghost", "content": "?"}]
    )
    msgs = json.loads(h.read_text())
    c = wf.Counter(model="gpt-4o")
    for out_name in ("w.json", "w.jsonl"):
        out_path = tmp_path / out_name
        code, _, err = run(capsys, "fit", str(h), "--budget", "3000", "-o", str(out_path))
        assert code == 0, err
        text = out_path.read_text(encoding="utf-8")
        window = (
            [json.loads(x) for x in text.splitlines()]
            if out_name.endswith("l")
            else json.loads(text)
        )
        check_window(msgs, window, 3000, c, **FIT_PROMISES)
        assert "orphan tool result" in err and "outside the window" in err
    code, out, _ = run(capsys, "fit", str(h), "--budget", "3000", "--json")
    report = json.loads(out)
    check_window(msgs, report["messages"], 3000, c, **FIT_PROMISES)
    assert report["tokens"] == c.count_messages(report["messages"]) <= 3000
    assert sorted(report["kept"] + [d["index"] for d in report["dropped"]]) == list(
        range(len(msgs))
    )
    whys = {d["index"]: d["why"] for d in report["dropped"]}
    assert whys[len(msgs) - 1].startswith("orphan")
    assert all(w == "outside the window (budget)" for i, w in whys.items() if i < len(msgs) - 1)
    # stdout carries the history when no -o is given
    code, out, _ = run(capsys, "fit", str(h), "--budget", "100000")
    assert code == 0 and json.loads(out) == msgs[:-1]


def test_fit_errors(tmp_path: Path, capsys: Any) -> None:
    h = history_file(tmp_path)
    code, _, err = run(capsys, "fit", str(h), "--budget", "10")
    assert code == 2 and "pinned messages alone exceed" in err and str(h) in err
    bad = tmp_path / "bad.json"
    bad.write_text('[\n{"role": "user",\n "content": "hi"\n')
    code, _, err = run(capsys, "fit", str(bad), "--budget", "100")
    assert code == 2 and f"{bad}:4: bad JSON" in err
    shape = tmp_path / "shape.json"
    shape.write_text('{"not_messages": []}')
    code, _, err = run(capsys, "fit", str(shape), "--budget", "100")
    assert code == 2 and "messages" in err
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"role": "user", "content": "hi"}\n{"role": "assistant", "tool_calls": [{"id": 1}]}\n'
    )
    code, _, err = run(capsys, "fit", str(log), "--budget", "100")
    assert code == 2 and f"{log}:2: message 1: tool_calls[0]" in err


# ---------------------------------------------------------------- bench and its plot


def test_bench_json_and_plot(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg
    from windowfit.cli.bench import PLOT_DPI, PLOT_SIZE

    a = history_file(tmp_path, SESSION, "a.json")
    b = tmp_path / "b.jsonl"
    b.write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in SESSION[:40]))
    png = tmp_path / "tokens.png"
    code, out, err = run(
        capsys, "bench", str(a), str(b), "--context-window", "4000", "--plot", str(png), "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert [h["totals"]["name"] for h in data["histories"]] == ["a.json", "b.jsonl"]
    overall = data["overall"]
    assert overall["sent_tokens"] == sum(h["totals"]["sent_tokens"] for h in data["histories"])
    # the plot: a real PNG of the promised size, its series beside it
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(png)
    width, height = PLOT_SIZE
    assert pixels.shape[:2] == (round(2 * height * PLOT_DPI), round(width * PLOT_DPI))
    assert pixels.std() > 0.05  # lines were drawn, not a blank canvas
    side = json.loads(png.with_suffix(".series.json").read_text())
    assert side == {k: v for k, v in data["plot"].items() if k != "series_file"}
    for hist, msgs in zip(side["histories"], (SESSION, SESSION[:40])):
        assert set(hist["series"]) == set(SERIES)
        assert all(len(v) == len(call_points(msgs)) for v in hist["series"].values())
    first = data["histories"][0]["turns"]
    assert side["histories"][0]["series"]["whole_history"] == [t["whole"] for t in first]
    assert side["histories"][0]["series"]["cached_prefix"] == [t["prefix"] for t in first]
    # the fit baseline is drawn, and every panel shares one scale
    assert side["histories"][0]["series"]["fit"] == [t["fit_sent"] for t in first]
    assert side["scale"] in ("linear", "symlog")


def test_bench_table_on_a_real_run(tmp_path: Path, capsys: Any) -> None:
    (path,) = extract(tmp_path, RUN)
    code, out, err = run(
        capsys, "bench", str(path), "--model", "deepseek-chat", "--context-window", "16000"
    )
    assert code == 0, err
    assert "prefix" in out and "trim_messag" in out and RUN[:10] in out and "$" in out


def test_bench_errors(tmp_path: Path, capsys: Any) -> None:
    code, _, err = run(capsys, "bench")
    assert code == 2 and "HISTORY" in err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    code, _, err = run(capsys, "bench", str(empty))
    assert code == 2 and "no messages" in err


# ---------------------------------------------------------------- models and demo


def test_models_is_the_registry(capsys: Any) -> None:
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == [m.name for m in wf.list_models()]
    for r in rows:
        m = wf.get_model(r["name"])
        assert (r["context_window"], r["input_price"], r["is_exact"]) == (
            m.context_window,
            m.input_price,
            m.is_exact,
        )
    code, out, _ = run(capsys, "models", "--provider", "anthropic")
    assert code == 0 and "estimate" in out and "exact" not in out.replace("estimate", "")


def test_demo_on_a_users_history(tmp_path: Path, capsys: Any) -> None:
    h = history_file(tmp_path)
    code, out, err = run(capsys, "demo", "--history", str(h))
    assert code == 0, err
    assert f"Your history: {h} ({len(SESSION)} messages)" in out
    assert "Your history, replayed call by call" in out and "demo finished" in out
    # section 1 counts the given history, not the bundled sample
    section1 = out.split("1. Counting your history")[1].split("2. Fitting")[0]
    assert f"{wf.Counter(model='gpt-4o').count_messages(SESSION):,}" in section1
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    code, _, err = run(capsys, "demo", "--history", str(bad))
    assert code == 2 and str(bad) in err
