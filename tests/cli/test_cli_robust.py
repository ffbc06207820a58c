"""The command line on hostile input: an endless stream is refused at a cap instead of being
read into memory, JSON nested too deeply is a ``file:line`` error (exit 2), and stored text,
ids and model names cannot drive the terminal through ``session show`` or ``usage``."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from windowfit.cli import main
from windowfit.cli import stores as store_cli
from windowfit.session import Session
from windowfit.store import SQLiteStore
from windowfit.usage import UsageTracker


class EndlessZeros(io.RawIOBase):
    """``/dev/zero`` as a stream: refuses an unbounded read() instead of hanging the test."""

    def __init__(self) -> None:
        self.served = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        assert size is not None and size >= 0, "the whole endless input was asked for"
        self.served += size
        return b"\0" * size

    def readinto(self, buffer: Any) -> int:  # pragma: no cover - read() is what is used
        raise AssertionError("unbounded readinto")


def endless_stdin(monkeypatch: pytest.MonkeyPatch) -> EndlessZeros:
    zeros = EndlessZeros()
    monkeypatch.setattr(sys, "stdin", type("In", (), {"buffer": zeros})())
    return zeros


@pytest.mark.parametrize(
    "command",
    [
        ["truncate", "-", "--max-tokens", "10"],
        ["count", "-"],
        ["count", "--messages", "-"],
        ["fit", "-", "--budget", "100"],
    ],
)
def test_endless_input_is_refused_at_the_cap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    zeros = endless_stdin(monkeypatch)
    monkeypatch.setenv("WINDOWFIT_MAX_INPUT_BYTES", str(3 << 20))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "more than 3,145,728 bytes" in err and "--max-input-bytes" in err
    assert zeros.served <= (3 << 20) + 1  # read up to the cap, not on


def test_truncate_cap_flag_and_input_within_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "in.txt"
    f.write_text("word " * 1000)
    assert main(["truncate", str(f), "--max-tokens", "10", "--max-input-bytes", "100"]) == 2
    assert "more than 100 bytes" in capsys.readouterr().err
    assert main(["truncate", str(f), "--max-tokens", "10", "--max-input-bytes", "5000"]) == 0
    assert capsys.readouterr().out.startswith("word word")


@pytest.mark.parametrize("jsonl", [False, True])
def test_deeply_nested_json_is_a_file_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jsonl: bool
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    if jsonl:
        f = tmp_path / "h.jsonl"
        f.write_text('{"role": "user", "content": "hi"}\n' + deep + "\n")
        line = 2
    else:
        f = tmp_path / "h.json"
        f.write_text('[{"role": "user", "content": "hi"},\n' + deep + "]")
        line = 2
    for command in (["count", "--messages", str(f)], ["fit", str(f), "--budget", "100"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"{f}:{line}" in err and "nested too deeply" in err
        assert "Traceback" not in err


ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"


def hostile_store(db: Path) -> None:
    with SQLiteStore(db) as store:
        s = Session(store, "evil" + ESC)
        s.extend(
            [
                {"role": "user", "content": "look" + ESC + "here\u202e"},
                {"role": "assistant", "content": "fine", "name": "x"},
            ]
        )
        tracker = UsageTracker(store)
        tracker.record("gpt-4o" + ESC, 10, 1, timestamp=1_740_787_200)


@pytest.mark.parametrize("rich", [True, False])
def test_session_show_and_usage_escape_control_characters(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    rich: bool,
) -> None:
    if not rich:
        monkeypatch.setattr(store_cli, "_console", lambda out: None)
    db = tmp_path / "evil.db"
    hostile_store(db)
    for command in (
        ["session", "show", "evil" + ESC, "--db", str(db)],
        ["usage", "--db", str(db)],
    ):
        assert main(command) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
        assert "\\x1b" in out
    # --json output stays exact (JSON escapes control characters itself)
    assert main(["session", "show", "evil" + ESC, "--db", str(db), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["messages"][0]["content"] == "look" + ESC + "here\u202e"


def test_a_head_cut_of_an_endless_stream_stops_once_its_head_is_settled(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """A head cut whose marker shows no count reads in chunks and stops reading once what it
    keeps can no longer change: ``/dev/zero`` is cut well before the cap, in bounded memory,
    to what a cut of any longer run of zeros gives."""
    import windowfit as wf

    zeros = endless_stdin(monkeypatch)
    monkeypatch.setenv("WINDOWFIT_MAX_INPUT_BYTES", str(64 << 20))
    assert main(["truncate", "-", "--max-tokens", "2000", "--marker", " […]"]) == 0
    out = capsysbinary.readouterr()
    assert zeros.served <= 16 << 20  # far below the 64 MiB cap
    assert b"stopped reading after" in out.err
    whole = wf.truncate("\0" * (24 << 20), 2000, counter=wf.Counter(model="gpt-4o"), marker=" […]")
    assert out.out.decode() == whole.text and whole.tokens <= 2000


def _inputs_for_streaming() -> dict[str, bytes]:
    """Inputs of several MiB, read in 1 MiB chunks: multibyte characters (2, 3, 4 bytes) that
    the chunk seams split, lines, text without break points, invalid UTF-8 on a seam."""
    import random

    rnd = random.Random(7)
    log = "".join(
        f"2026-01-01 worker-{i % 7} job {i} état {'中' * (i % 5)} 🙂\n" for i in range(200_000)
    )
    dna = "".join(rnd.choice("ACGT") for _ in range(6 << 20))
    han = "上下文窗口需要精确计数" * 300_000
    emoji = "🙂é" * 1_100_000
    bad = bytearray(("word " * 1_200_000).encode())
    bad[(1 << 20) - 1 : (1 << 20) + 1] = b"\xe4\xb8"  # a cut 3-byte char on the first seam
    return {
        "log": log.encode(),
        "dna": dna.encode(),
        "han": han.encode(),
        "emoji": emoji.encode(),
        "bad": bytes(bad),
        "small": ("ü" * 300_000).encode(),  # read to its end: under the settling margin
    }


@pytest.mark.parametrize(
    "options",
    [
        ["--max-tokens", "2000"],
        ["--max-tokens", "500", "--lines"],
        ["--max-lines", "30"],
        ["--max-bytes", "10000", "--max-tokens", "3000"],
    ],
    ids=["tokens", "lines-mode", "max-lines", "bytes"],
)
def test_a_streamed_head_cut_equals_the_cut_of_the_whole_input(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], options: list[str]
) -> None:
    import windowfit as wf

    counter = wf.Counter(encoding="o200k_base")
    stopped_early = 0
    for name, raw in _inputs_for_streaming().items():
        f = tmp_path / f"{name}.txt"
        f.write_bytes(raw)
        args = ["truncate", str(f), "--encoding", "o200k_base", "--marker", "\n[…]\n"]
        assert main([*args, *options]) == 0, name
        out = capsysbinary.readouterr()
        text = raw.decode("utf-8", errors="replace")
        limits = dict(zip(options[::2], options[1::2], strict=False))
        whole = wf.truncate(
            text,
            int(limits["--max-tokens"]) if "--max-tokens" in limits else None,
            counter=counter,
            marker="\n[…]\n",
            max_lines=int(limits["--max-lines"]) if "--max-lines" in limits else None,
            max_bytes=int(limits["--max-bytes"]) if "--max-bytes" in limits else None,
            lines="--lines" in options,
        )
        assert out.out.decode() == whole.text, name
        # only a cut input may stop reading early, never the small one (under the margin)
        stopped = b"stopped reading after" in out.err
        assert not stopped or (whole.truncated and name != "small"), (name, out.err)
        stopped_early += stopped
        assert (b"not valid UTF-8" in out.err) == (name == "bad"), name
    assert stopped_early >= 1  # the streamed path was taken, not only whole reads
