"""The tool-output folder is written safely: a name fixed by content is trusted only when it
holds our own file with exactly that content, and the default private folder
(``<tmp>/windowfit-<uid>``) is used only when it is a real folder of this user that no one
else can write into."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
import windowfit as wf
from windowfit.context.defaults import default_tool_output_dir
from windowfit.errors import UnsafeFolderError, WindowfitError
from windowfit.truncation import ObservationTruncator
from windowfit.truncation import saved_outputs as observation_files

CL100K = wf.Counter(encoding="cl100k_base")
LOG = "".join(f"line {i}: step {i} finished\n" for i in range(200))
POSIX = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")


def content_named(out_dir: Path) -> ObservationTruncator:
    # a cache makes the names content-fixed (the context manager's mode)
    return ObservationTruncator(max_lines=5, output_dir=out_dir, counter=CL100K, cache_size=4)


def expected_path(out_dir: Path) -> Path:
    """Where a content-named save of LOG by tool "t" lands (learned from a scratch folder)."""
    scratch = Path(tempfile.mkdtemp())
    name = Path(content_named(scratch).truncate("t", LOG)["full_output_path"]).name
    return out_dir / name


def test_a_link_at_the_content_name_is_replaced_not_reported(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    theirs = tmp_path / "someone-elses.txt"
    theirs.write_text("someone else's text")
    target = expected_path(out_dir)
    target.symlink_to(theirs)
    r = content_named(out_dir).truncate("t", LOG)
    path = Path(r["full_output_path"])
    assert path == target and not path.is_symlink()
    assert path.read_text() == LOG  # the model is pointed at the real output
    assert theirs.read_text() == "someone else's text"  # never written through


def test_a_file_with_other_content_at_the_name_is_replaced(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = expected_path(out_dir)
    target.write_text(LOG[:-1] + "X")  # same size, other content
    r = content_named(out_dir).truncate("t", LOG)
    assert Path(r["full_output_path"]).read_text() == LOG


def test_our_own_saved_file_is_reused_without_writing(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    first = content_named(out_dir).truncate("t", LOG)["full_output_path"]
    before = os.stat(first).st_mtime_ns, os.stat(first).st_ino
    again = content_named(out_dir).truncate("t", LOG)["full_output_path"]
    assert again == first and (os.stat(again).st_mtime_ns, os.stat(again).st_ino) == before


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temporary directory, moved into this test's folder."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    return shared


def save_default(ot_dir: Path) -> dict[str, object]:
    return ObservationTruncator(max_lines=5, output_dir=ot_dir, counter=CL100K).truncate("t", LOG)


@POSIX
def test_default_folder_is_created_private(tmp_root: Path) -> None:
    out_dir = default_tool_output_dir()
    assert out_dir.parent == tmp_root / f"windowfit-{os.getuid()}"
    r = save_default(out_dir)
    assert Path(str(r["full_output_path"])).read_text() == LOG
    assert stat.S_IMODE(os.lstat(out_dir.parent).st_mode) == 0o700


@POSIX
def test_a_link_squatting_the_default_folder_is_refused(tmp_root: Path) -> None:
    theirs = tmp_root / "theirs"
    theirs.mkdir()
    (tmp_root / f"windowfit-{os.getuid()}").symlink_to(theirs)
    r = save_default(default_tool_output_dir())
    assert r["full_output_path"] is None and "UnsafeFolderError" in str(r["stats"]["save_error"])
    assert list(theirs.iterdir()) == []  # nothing written into their folder
    assert r["truncated"] and "could not be saved" in str(r["preview"])


@POSIX
def test_a_default_folder_others_can_write_is_refused(tmp_root: Path) -> None:
    root = tmp_root / f"windowfit-{os.getuid()}"
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(UnsafeFolderError, match="writable by others") as info:
        observation_files.ensure_private(root)
    assert isinstance(info.value, PermissionError) and isinstance(info.value, WindowfitError)
    assert save_default(default_tool_output_dir())["full_output_path"] is None


@POSIX
def test_our_own_readable_default_folder_is_made_private(tmp_root: Path) -> None:
    root = tmp_root / f"windowfit-{os.getuid()}"
    root.mkdir()
    root.chmod(0o755)  # as earlier versions created it
    assert save_default(default_tool_output_dir())["full_output_path"]
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700


@POSIX
def test_a_default_folder_of_another_user_is_refused(
    tmp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone else created the name first. As root the folder really is given to another
    user; otherwise this process is made to see itself as another uid."""
    uid = os.getuid()
    if uid == 0:
        root = tmp_root / "windowfit-0"
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
    else:
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
        root = tmp_root / f"windowfit-{uid + 1}"
        root.mkdir(mode=0o700)
    with pytest.raises(UnsafeFolderError, match="belongs to user"):
        observation_files.ensure_private(root)
    r = save_default(default_tool_output_dir())
    assert r["full_output_path"] is None and "belongs to user" in str(r["stats"]["save_error"])


def test_user_folders_elsewhere_are_left_as_they_are(tmp_path: Path) -> None:
    out_dir = tmp_path / "shared-out"
    out_dir.mkdir()
    out_dir.chmod(0o775)
    assert save_default(out_dir)["full_output_path"]
    assert stat.S_IMODE(os.lstat(out_dir).st_mode) == 0o775
