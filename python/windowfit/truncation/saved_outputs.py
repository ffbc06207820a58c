"""Where ``ToolOutputTruncator`` saves a full tool output: the file's name (from the tool name,
unique or fixed by the content) and an atomic write of text that may hold lone surrogates."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

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


def _write_atomic(directory: Path, name: str, text: str) -> Path:
    """Write ``text`` to ``directory/name`` all at once: a temporary file in the same
    directory, fsynced, then renamed, so a reader never sees a partial file."""
    directory.mkdir(parents=True, exist_ok=True)
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
