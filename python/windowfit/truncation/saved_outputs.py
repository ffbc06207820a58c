"""Where ``ToolOutputTruncator`` saves a full tool output: the file's name (from the tool name,
unique or fixed by the content) and an atomic write of text that may hold lone surrogates."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

from windowfit.errors import UnsafeFolderError

#: Longest tool-name part of a saved file's name (the suffix adds ~40 characters).
MAX_NAME_CHARS = 64


def safe_file_stem(tool_name: str) -> str:
    """A file-name part from a tool name: ``[A-Za-z0-9._-]`` only, no leading dots (no
    ``..``, no hidden files), at most ``MAX_NAME_CHARS``; ``"tool"`` when nothing is left."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", tool_name)
    stem = stem.lstrip("._-")[:MAX_NAME_CHARS].rstrip("._-")
    return stem or "tool"


def _unique_name(tool_name: str, suffix: str) -> str:
    # timestamp for humans, uuid4 so two calls in the same microsecond never collide
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{safe_file_stem(tool_name)}-{stamp}-{uuid.uuid4().hex[:12]}{suffix}"


def _content_name(tool_name: str, output: str, suffix: str) -> str:
    """A name fixed by the output: the same output always gets the same file, so a window that
    shows it again (in this process or the next) names the same path and writes nothing."""
    digest = hashlib.sha256(output.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{safe_file_stem(tool_name)}-{digest}{suffix}"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid_utf8(text: str) -> tuple[str, int]:
    """``text`` with each surrogate code point (never valid UTF-8) as U+FFFD, and how many.

    Both take 3 bytes in UTF-8, so byte and character offsets into the saved file stay those
    of the output as the preview measured it.
    """
    return _SURROGATE.subn("\ufffd", text)


def private_root() -> Path:
    """The user's own folder under the system's temporary directory (``<tmp>/windowfit-<uid>``),
    which holds the default output folder. Anyone can create that name first, so it is used
    only once :func:`ensure_private` has checked it."""
    uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
    return Path(tempfile.gettempdir()) / f"windowfit-{uid}"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def ensure_private(root: Path) -> None:
    """Create ``root`` for this user only (mode 0700), or check that the existing one is a real
    folder (not a link), owned by this user, that no one else can write into; a folder of ours
    others could read is made private. Raises :class:`UnsafeFolderError` otherwise."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows: the temp folder is per user
        return
    try:
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
    except OSError as exc:  # ELOOP / ENOTDIR: a link or a file squats the name
        raise UnsafeFolderError(
            f"{root} is not a folder of yours (a link or a file): {exc.strerror or exc}; "
            "remove it or set another output folder"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeFolderError(f"{root} is not a folder; remove it or set another one")
        if info.st_uid != os.getuid():
            raise UnsafeFolderError(
                f"{root} belongs to user {info.st_uid}, not to you (uid {os.getuid()}): "
                "someone created it first; remove it or set another output folder"
            )
        if info.st_mode & 0o022:
            raise UnsafeFolderError(
                f"{root} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): "
                "its files could be anyone's; remove it or set another output folder"
            )
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def ensure_directory(directory: Path) -> None:
    """``directory`` exists; inside :func:`private_root`, only after that is checked."""
    root = private_root()
    if directory == root or root in directory.parents:
        ensure_private(root)
    directory.mkdir(parents=True, exist_ok=True)


def _holds(path: Path, data: bytes) -> bool:
    """Whether ``path`` is a regular file of this user (not a link) holding exactly ``data``:
    a name fixed by content may have been put there by someone else."""
    try:
        # O_NONBLOCK: a FIFO planted at the name must not hang the open
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
            return False
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            return False
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(len(data) + 1) == data
    finally:
        os.close(fd)


def save_output(directory: Path, name: str, text: str, *, reuse: bool) -> Path:
    """Save ``text`` as ``directory/name``; with ``reuse`` (names fixed by content) a file
    already there is kept only when it is ours and holds exactly this text, otherwise it is
    replaced (a link at the name is replaced, never followed)."""
    ensure_directory(directory)
    final = directory / name
    if reuse and _holds(final, text.encode("utf-8")):
        return final  # the same content, saved before: nothing to write
    return _write_atomic(directory, name, text)


def _write_atomic(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``directory/name`` all at once: a temporary file in the same
    directory (created exclusively), fsynced, then renamed over the name, so a reader never
    sees a partial file and a link at the name is replaced rather than written through."""
    ensure_directory(directory)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".part")
    try:
        # newline="" keeps "\r\n" and "\n" as they were: offsets into the file stay exact
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        final = directory / name
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return final
