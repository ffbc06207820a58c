"""Real agent runs (mini-swe-agent ``.traj.json`` files) from the shared data set next to the
repository (``shared/data/agent-sessions/`` in a parent directory, or the directory named by
``WINDOWFIT_AGENT_SESSIONS``). Tests that use them skip with a clear message when absent; the
files are extracted to a temporary directory, never into the repository."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

TARBALL = "mini-swe-agent-deepseek-60.tar.gz"
#: a mid-sized run (77 messages, about 18k tokens) and the run file recorded empty
RUN = "output_deepseek_chat_test_1-100_django__django-13658_django__django-13658.traj.json"
EMPTY_RUN = "output_deepseek_chat_test_1-100_django__django-13220_django__django-13220.traj.json"


def tarball() -> Path | None:
    env = os.environ.get("WINDOWFIT_AGENT_SESSIONS")
    dirs = [Path(env)] if env else []
    here = Path(__file__).resolve().parent
    dirs += [p / "shared" / "data" / "agent-sessions" for p in here.parents]
    return next((d / TARBALL for d in dirs if (d / TARBALL).is_file()), None)


def extract(dest: Path, *names: str) -> list[Path]:
    """Extract the named run files into ``dest``; skips the test when the data is absent."""
    tb = tarball()
    if tb is None:
        pytest.skip(f"real agent runs absent: no shared/data/agent-sessions/{TARBALL} found")
    with tarfile.open(tb) as tar:
        for name in names:
            tar.extract(tar.getmember(name), dest, filter="data")
    return [dest / n for n in names]
