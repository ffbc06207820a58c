"""`windowfit session list` and the summaries `windowfit session show` prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import windowfit as wf
from windowfit import SQLiteStore
from windowfit.cli import main


def _store(db: Path) -> None:
    with SQLiteStore(db) as store:
        a = wf.Session(store, "user-1")
        a.extend([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}])
        a.save_state(
            {
                "summary": "The user greeted the assistant and asked about trains.",
                "summary_tokens": 11,
                "summarized_messages": 2,
                "consumers": {"router": {"summary": "Greeting.", "summary_tokens": 2}},
            }
        )
        wf.Session(store, "user-2").extend([{"role": "user", "content": "anyone there?"}])


def test_list_shows_every_session_with_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    _store(db)
    assert main(["session", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "user-1" in out and "user-2" in out and "asked about trains" in out
    assert main(["session", "list", "--db", str(db), "--json"]) == 0
    doc = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert doc["user-1"]["length"] == 2 and doc["user-2"]["summaries"] == {}
    assert doc["user-1"]["summaries"] == {
        "default": "The user greeted the assistant and asked about trains.",
        "router": "Greeting.",
    }
    assert main(["session", "list", "--db", str(db), "--limit", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1


def test_show_prints_each_consumers_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    _store(db)
    assert main(["session", "show", "user-1", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "The user greeted the assistant and asked about trains." in out
    assert "summary (router)" in out and "Greeting." in out
    assert "2 messages, 11 tokens" in out
