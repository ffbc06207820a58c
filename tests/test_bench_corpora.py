"""The field benchmark's corpus of real agent runs: every message's text and every tool call's
arguments, each distinct text once, read from the archive itself; a clear error where the
runs are absent (the benchmark skips the corpus on it)."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import _agent_runs
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches" / "reports"))
from corpora import agent_messages  # noqa: E402


def _run_messages(name: str) -> list[dict[str, object]]:
    archive = _agent_runs.tarball()
    if archive is None:
        pytest.skip(f"real agent runs absent: no shared/data/agent-sessions/{_agent_runs.TARBALL}")
    with tarfile.open(archive) as tar:
        f = tar.extractfile(tar.getmember(name))
        assert f is not None
        messages: list[dict[str, object]] = json.load(f)["messages"]
    return messages


def test_every_message_text_and_call_argument_is_in_the_corpus_once() -> None:
    messages = _run_messages(_agent_runs.RUN)
    texts = agent_messages()
    assert len(texts) == len(set(texts))
    corpus = set(texts)
    contents = [
        m["content"] for m in messages if isinstance(m.get("content"), str) and m["content"]
    ]
    arguments = [
        c["function"]["arguments"]  # type: ignore[index]
        for m in messages
        for c in m.get("tool_calls") or []  # type: ignore[attr-defined]
    ]
    assert arguments, "the run chosen for this test makes tool calls"
    missing = [t[:60] for t in contents + arguments if t not in corpus]
    assert not missing
    # a long tool output is one text, not cut into lines
    longest = max((m["content"] for m in messages if isinstance(m.get("content"), str)), key=len)
    assert "\n" in longest and longest in corpus


def test_absent_runs_raise_naming_where_they_were_looked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_agent_runs, "tarball", lambda: None)
    with pytest.raises(
        FileNotFoundError, match="shared/data/agent-sessions/.*WINDOWFIT_AGENT_SESSIONS"
    ):
        agent_messages()
