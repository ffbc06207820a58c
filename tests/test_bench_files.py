"""The field benchmark on a reviewer's own texts (``report_field.py --files FOLDER``): which
files of the folder become the corpus, and which corpora a run then times."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches" / "reports"))
import report_field  # noqa: E402
from corpora import files  # noqa: E402


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_every_utf8_file_the_glob_matches_once_in_path_order(tmp_path: Path) -> None:
    _write(tmp_path, "b.rs", b"fn b() {}\n")
    _write(tmp_path, "a/z.rs", "// 中文注释\nfn z() {}\n".encode())
    _write(tmp_path, "a/y.py", b"def y(): pass\n")
    _write(tmp_path, "c.rs", b"\xff\xfe not UTF-8")
    _write(tmp_path, "d.rs", b"fn b() {}\n")  # the same text as b.rs
    _write(tmp_path, "e.rs", b"")
    assert files(tmp_path, "*.rs") == ["// 中文注释\nfn z() {}\n", "fn b() {}\n"]
    assert files(tmp_path) == ["def y(): pass\n", "// 中文注释\nfn z() {}\n", "fn b() {}\n"]


def test_files_stop_once_the_limit_is_read(tmp_path: Path) -> None:
    for k in range(5):
        _write(tmp_path, f"{k}.txt", f"{k}".encode() * 100)
    # whole files: the one that passes the limit is kept, none after it
    assert [t[0] for t in files(tmp_path, limit=250)] == ["0", "1", "2"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_a_link_is_not_followed(tmp_path: Path) -> None:
    outside = _write(tmp_path / "outside", "secret.txt", b"not in the folder")
    folder = tmp_path / "folder"
    _write(folder, "kept.txt", b"in the folder")
    (folder / "link.txt").symlink_to(outside)
    assert files(folder) == ["in the folder"]


def test_an_absent_folder_or_one_without_text_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no folder"):
        files(tmp_path / "absent")
    _write(tmp_path, "x.bin", b"\xff")
    with pytest.raises(FileNotFoundError, match=r"no UTF-8 text under .* matches '\*.rs'"):
        files(tmp_path, "*.rs")


def _args(*argv: str) -> argparse.Namespace:
    args = argparse.Namespace(corpora=None, files=[], glob="*", files_limit=1000)
    for key, value in zip(argv[::2], argv[1::2], strict=True):
        setattr(args, key, value)
    return args


def test_the_defaults_run_unless_files_are_given(tmp_path: Path) -> None:
    _write(tmp_path / "proj", "m.rs", b"fn m() {}\n")
    assert list(report_field.chosen_corpora(_args())) == list(report_field.DEFAULT_CORPORA)
    chosen = report_field.chosen_corpora(_args("files", [tmp_path / "proj"], "glob", "*.rs"))
    assert list(chosen) == ["proj (*.rs)"]
    assert chosen["proj (*.rs)"]() == ["fn m() {}\n"]
    both = report_field.chosen_corpora(
        _args("files", [tmp_path / "proj"], "corpora", ["source code"])
    )
    assert list(both) == ["source code", "proj"]


def test_two_folders_of_one_name_are_two_corpora(tmp_path: Path) -> None:
    _write(tmp_path / "a" / "src", "x.rs", b"fn a() {}\n")
    _write(tmp_path / "b" / "src", "x.rs", b"fn b() {}\n")
    chosen = report_field.chosen_corpora(
        _args("files", [tmp_path / "a" / "src", tmp_path / "b" / "src"])
    )
    assert list(chosen) == ["src", str(tmp_path / "b" / "src")]
    assert [make() for make in chosen.values()] == [["fn a() {}\n"], ["fn b() {}\n"]]
