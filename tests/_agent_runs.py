"""Real agent runs (mini-swe-agent ``.traj.json`` files) from the shared data set next to the
repository, found as the context eval and the field benchmark find them
(``eval_context.find_agent_data``: the archive or its folder named by ``WINDOWFIT_EVAL_DATA``,
else ``shared/data/agent-sessions/`` in a parent directory). Tests that use them skip with a
clear message when absent; the files are extracted to a temporary directory, never into the
repository."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches" / "eval"))
from eval_context import ARCHIVE, find_agent_data  # noqa: E402

#: why a test of the runs skips
ABSENT = (
    f"real agent runs absent: no shared/data/agent-sessions/{ARCHIVE} beside the repository "
    "and none named by WINDOWFIT_EVAL_DATA"
)
#: a mid-sized run (77 messages, about 18k tokens) and the run file recorded empty
RUN = "output_deepseek_chat_test_1-100_django__django-13658_django__django-13658.traj.json"
EMPTY_RUN = "output_deepseek_chat_test_1-100_django__django-13220_django__django-13220.traj.json"


def extract(dest: Path, *names: str) -> list[Path]:
    """Extract the named run files into ``dest``; skips the test when the data is absent."""
    tb = find_agent_data()
    if tb is None:
        pytest.skip(ABSENT)
    with tarfile.open(tb) as tar:
        for name in names:
            tar.extract(tar.getmember(name), dest, filter="data")
    return [dest / n for n in names]
