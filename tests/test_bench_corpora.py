"""The field benchmark's corpora of real data. The agent runs: exactly the distinct texts a
model is sent (every chat message's content and every tool call's arguments, the runs' closing
``exit`` records left out), in the order the runs first give them, read here from the archive
itself. The MemoryBank dialogs: every distinct message, Chinese first, read here from the
files themselves. A clear error where either is absent (the benchmark skips the corpus on
it)."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest
from _agent_runs import ABSENT

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benches" / "reports"), str(ROOT / "benches" / "eval")]
import eval_context  # noqa: E402
import eval_recall  # noqa: E402
from corpora import agent_messages, memorybank_messages  # noqa: E402

#: the roles a provider is sent; the runs end with an ``exit`` record, which is none of them
SENT = ("system", "user", "assistant", "tool")


def _texts_sent(archive: Path) -> list[str]:
    """Every distinct content and tool call argument of the archive's runs, in name order."""
    seen: dict[str, None] = {}
    with tarfile.open(archive) as tar:
        for member in sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name):
            raw = tar.extractfile(member).read()  # type: ignore[union-attr]
            if not raw.strip():  # the archive holds one empty run file
                continue
            for m in json.loads(raw)["messages"]:
                if m.get("role") not in SENT:
                    continue
                calls = [c["function"]["arguments"] for c in m.get("tool_calls") or []]
                for text in [m.get("content"), *calls]:
                    if text:
                        seen.setdefault(text, None)
    return list(seen)


def test_the_corpus_is_every_text_sent_once() -> None:
    archive = eval_context.find_agent_data()
    if archive is None:
        pytest.skip(ABSENT)
    want = _texts_sent(archive)
    # the archive has tool calls, multi-line outputs and exit records to leave out
    assert len(want) > 10_000 and any("\n" in t for t in want)
    assert agent_messages() == want


def test_absent_runs_raise_naming_where_they_were_looked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eval_context, "find_agent_data", lambda explicit=None: None)
    with pytest.raises(FileNotFoundError, match="shared/data/agent-sessions/.*WINDOWFIT_EVAL_DATA"):
        agent_messages()


def _messages_said(folder: Path) -> list[str]:
    """Every distinct query and response of the dialogs, user by user, day by day."""
    seen: dict[str, None] = {}
    for suffix in ("cn", "en"):
        users = json.loads((folder / f"memory_bank_{suffix}.json").read_text("utf-8"))
        for record in users.values():
            for day in sorted(record["history"]):
                for exchange in record["history"][day]:
                    for text in (exchange["query"], exchange["response"]):
                        if text:
                            seen.setdefault(text, None)
    return list(seen)


def test_the_dialogs_corpus_is_every_message_once() -> None:
    folder = eval_recall.find_memorybank(None)
    if folder is None:
        pytest.skip("the MemoryBank dialogs (shared/data/dialogs-memorybank/) are absent")
    want = _messages_said(folder)
    # Chinese and English, a thousand messages and more each
    assert len(want) > 2_000 and any("\u4e00" <= c <= "\u9fff" for c in want[0])
    assert memorybank_messages() == want


def test_absent_dialogs_raise_naming_where_they_were_looked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(eval_recall, "find_memorybank", lambda explicit: None)
    with pytest.raises(FileNotFoundError, match="shared/data/dialogs-memorybank/"):
        memorybank_messages()
