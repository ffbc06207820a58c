"""windowfit.history_io: every shape people keep histories in, detected or forced, and errors
that name the file, line and field. Real agent runs from the shared data set when present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _agent_runs import EMPTY_RUN, RUN, extract
from windowfit.history_io import HistoryFormatError, dump_history, load_history
from windowfit.testing import call_ids, request_problems, result_ids

C = wf.Counter(encoding="o200k_base")

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "读取 a.txt 和 b.txt"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"p": "a"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "read", "arguments": '{"p": "b"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "alpha"},
    {"role": "tool", "tool_call_id": "c2", "content": "beta"},
    {"role": "assistant", "content": "a says alpha, b says beta"},
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_openai_list_and_messages_object(tmp_path: Path) -> None:
    a = load_history(write(tmp_path, "a.json", json.dumps(CHAT, indent=2)))
    b = load_history(write(tmp_path, "b.json", json.dumps({"model": "x", "messages": CHAT})))
    assert a.format == b.format == "openai"
    assert a.messages == b.messages == CHAT
    # each message's line is where its object opens in the file
    text = (tmp_path / "a.json").read_text().splitlines()
    assert [text[ln - 1].strip() for ln in a.lines] == ["{"] * len(CHAT)


def test_jsonl_by_name_by_content_and_forced(tmp_path: Path) -> None:
    body = "".join(json.dumps(m, ensure_ascii=False) + "\n\n" for m in CHAT)
    for name, fmt in (("log.jsonl", None), ("log.txt", None), ("log.data", "jsonl")):
        h = load_history(write(tmp_path, name, body), format=fmt)
        assert h.format == "jsonl" and h.messages == CHAT
        assert h.lines == [1 + 2 * k for k in range(len(CHAT))]  # blank lines skipped
    assert load_history("x.jsonl", text=dump_history(CHAT, jsonl=True)).messages == CHAT
    assert json.loads(dump_history(CHAT)) == CHAT


def test_langchain_dumps_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.load import dumpd
    from langchain_core.messages import convert_to_messages, messages_to_dict

    lc = convert_to_messages(CHAT)
    for name, dump in (("d.json", messages_to_dict(lc)), ("e.json", [dumpd(m) for m in lc])):
        h = load_history(write(tmp_path, name, json.dumps(dump)))
        assert h.format == "langchain"
        assert [m["role"] for m in h.messages] == [m["role"] for m in CHAT]
        assert [call_ids(m) for m in h.messages] == [call_ids(m) for m in CHAT]
        assert [result_ids(m) for m in h.messages] == [result_ids(m) for m in CHAT]
        # the same request: LangChain keeps contents and arguments, so the counts agree
        assert C.count_messages(h.messages) == C.count_messages(CHAT)
        assert len(h.lines) == len(CHAT) and all(isinstance(ln, int) for ln in h.lines)


def test_anthropic_request(tmp_path: Path) -> None:
    req = {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "read a"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "reading"},
                    {"type": "tool_use", "id": "tu1", "name": "read", "input": {"p": "a"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu1", "content": "alpha"},
                    {"type": "text", "text": "and now?"},
                ],
            },
        ],
    }
    for name, data in (("req.json", req), ("list.json", req["messages"])):
        h = load_history(write(tmp_path, name, json.dumps(data, indent=1)))
        assert h.format == "anthropic"
        assert request_problems(h.messages) == []
        assert sum(map(len, map(call_ids, h.messages))) == 1
        assert sum(map(len, map(result_ids, h.messages))) == 1
        assert (h.messages[0]["role"] == "system") == (name == "req.json")
        # each message points at the line of the turn it came from (the system prompt: none)
        text = (tmp_path / name).read_text().splitlines()
        assert all(ln is None or text[ln - 1].strip() == "{" for ln in h.lines)
        assert sum(ln is None for ln in h.lines) == (name == "req.json")
        assert h.messages[-1]["role"] == "user"  # the user's own text follows the tool result


def test_mini_swe_agent_run(tmp_path: Path) -> None:
    (path,) = extract(tmp_path, RUN)
    raw = json.loads(path.read_text(encoding="utf-8"))["messages"]
    h = load_history(path)
    assert h.format == "mini-swe-agent"
    assert raw[-1]["role"] == "exit" and len(h.messages) == len(raw) - 1
    for m, r in zip(h.messages, raw):
        assert set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
        assert (m["role"], m.get("content"), call_ids(m)) == (
            r["role"],
            r.get("content"),
            [c["id"] for c in r.get("tool_calls") or []],
        )
    # the final submit call is never answered: exactly what repair is for
    assert request_problems(h.messages) == [
        f"{len(h.messages) - 1}: calls {call_ids(h.messages[-1])} unanswered at the end"
    ]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(lines[ln - 1].strip() == "{" for ln in h.lines)


def test_the_real_empty_run_is_reported(tmp_path: Path) -> None:
    (path,) = extract(tmp_path, EMPTY_RUN)
    with pytest.raises(HistoryFormatError, match=r"\.traj\.json:1: empty file"):
        load_history(path)


# ---------------------------------------------------------------- malformed files


def error(tmp_path: Path, name: str, text: str, **kw: Any) -> HistoryFormatError:
    with pytest.raises(HistoryFormatError) as info:
        load_history(write(tmp_path, name, text), **kw)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, wf.errors.WindowfitError)
    assert str(e).startswith(str(tmp_path / name))
    return e


def test_bad_json_names_line_and_column(tmp_path: Path) -> None:
    e = error(tmp_path, "bad.json", '[\n  {"role": "user", "content": "hi"},\n  {"role": \n]')
    assert e.line == 4 and "bad JSON" in str(e) and ":4:" in str(e)
    e = error(tmp_path, "bad.jsonl", json.dumps(CHAT[0]) + "\n{oops\n")
    assert e.line == 2 and ":2:" in str(e)


def test_wrong_shape(tmp_path: Path) -> None:
    e = error(tmp_path, "n.json", "42")
    assert e.field == "messages"
    e = error(tmp_path, "d.json", json.dumps({"history": CHAT}))
    assert "messages" in str(e)
    e = error(tmp_path, "s.json", json.dumps([CHAT[0], "just a string"]))
    assert e.field == "message 1" and "expected an object" in str(e)


def test_missing_and_bad_fields_name_their_line(tmp_path: Path) -> None:
    msgs = [dict(m) for m in CHAT]
    del msgs[3]["role"]
    e = error(tmp_path, "r.json", json.dumps(msgs, indent=1))
    assert (e.field, e.problem) == ("message 3: role", "missing")
    assert (tmp_path / "r.json").read_text().splitlines()[e.line - 1].strip() == "{"
    # a field only the message reader checks: its error comes back with the file line
    msgs = [dict(m) for m in CHAT]
    msgs[2] = {**msgs[2], "tool_calls": [{"type": "function", "function": {"name": "read"}}]}
    body = "".join(json.dumps(m) + "\n" for m in msgs)
    e = error(tmp_path, "c.jsonl", body)
    assert e.line == 3 and e.field == "message 2" and "tool_calls[0]" in e.problem


def test_other_failures(tmp_path: Path) -> None:
    error(tmp_path, "e.json", "  \n")
    e = error(tmp_path, "f.json", json.dumps(CHAT), format="yaml")
    assert e.field == "format"
    p = tmp_path / "latin1.json"
    p.write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    with pytest.raises(HistoryFormatError, match="UTF-8"):
        load_history(p)
    with pytest.raises(OSError):
        load_history(tmp_path / "missing.json")
