"""The canonical message helpers: one text rule, JSON copies, fingerprints, unit boundaries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from windowfit.adapters.canonical import content_text as adapter_content_text
from windowfit.messages import content_text, copy_json, fingerprint, message_text, tool_units
from windowfit.summarize import message_text as summary_message_text

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def test_one_rule_everywhere() -> None:
    # the adapters and the summarizer read text through the same functions
    assert adapter_content_text is content_text
    assert summary_message_text is message_text


def test_content_text_joins_text_parts_by_newlines() -> None:
    parts = [
        {"type": "text", "text": "alpha"},
        {"type": "image_url", "image_url": {"url": "data:..."}},
        "beta",
        {"type": "refusal", "refusal": "no"},
    ]
    assert content_text(parts) == "alpha\nbeta\nno"
    assert content_text(None) == ""
    assert content_text("plain") == "plain"
    assert content_text({"k": "v"}) == json.dumps({"k": "v"})


def test_message_text_marks_media_and_tool_calls() -> None:
    msg = {
        "role": "assistant",
        "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {}}],
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}},
            {"id": "d", "type": "function", "function": {"name": "g", "arguments": {"x": "é"}}},
        ],
    }
    assert message_text(msg) == 'look\n[image]\nf({"q": 1})\ng({"x": "é"})'
    assert message_text({"role": "user", "content": [{"type": "input_audio"}]}) == "[audio]"


@settings(max_examples=80, deadline=None)
@given(_json)
def test_copy_json_equals_a_json_round_trip_and_shares_nothing(value: Any) -> None:
    copied = copy_json(value)
    assert copied == json.loads(json.dumps(value))

    def containers(v: Any) -> list[int]:
        if isinstance(v, dict):
            return [id(v), *(i for x in v.values() for i in containers(x))]
        if isinstance(v, list):
            return [id(v), *(i for x in v for i in containers(x))]
        return []

    assert not set(containers(copied)) & set(containers(value))


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _json, max_size=5), st.text(max_size=40))
def test_fingerprint_depends_on_content_only(rest: dict[str, Any], text: str) -> None:
    a = {**rest, "content": text}
    b = copy_json(a)
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint({**a, "content": text + "x"}) != fingerprint(a)
    assert len(fingerprint(a)) == 16


def test_tool_units_keep_tool_results_with_their_call() -> None:
    def call(i: str) -> dict[str, Any]:
        return {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}

    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    assert tool_units(msgs) == [(0, 1, "message"), (1, 4, "tool_round"), (4, 5, "message")]
    # a fold bounded at 3 sees the round cut short, never past its stop
    assert tool_units(msgs[:3]) == [(0, 1, "message"), (1, 3, "tool_round")]


_string_messages = st.dictionaries(
    st.sampled_from(["role", "content", "name", "tool_call_id", "x"]),
    st.none() | st.text(max_size=30),
    max_size=5,
)


@settings(max_examples=120, deadline=None)
@given(_string_messages, st.lists(st.tuples(st.sampled_from(["content", "name", "x"]), _json)))
def test_remembered_fingerprints_follow_in_place_changes(
    message: dict[str, Any], edits: list[tuple[str, Any]]
) -> None:
    # the memo answers from the items of an all-string message: a message changed in place
    # (a new text, a new key, a nested value, a bool where a string was) is hashed anew
    from windowfit.messages import _fingerprint

    assert fingerprint(message) == _fingerprint(message)
    for key, value in edits:
        message[key] = value
        assert fingerprint(message) == _fingerprint(message), message
        assert fingerprint(copy_json(message)) == _fingerprint(message)


def test_fingerprints_are_the_same_in_another_process() -> None:
    # the memo is keyed by Python's (per-process salted) hashes; the fingerprint never is
    msgs = [{"role": "user", "content": "héllo"}, {"role": "tool", "content": None, "name": "x"}]
    code = (
        "import json, sys; from windowfit.messages import fingerprint; "
        "print(json.dumps([fingerprint(m) for m in json.loads(sys.argv[1])]))"
    )
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(msgs)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert json.loads(out) == [fingerprint(m) for m in msgs]


def test_the_fingerprint_memo_stays_bounded() -> None:
    from windowfit import messages

    for i in range(3 * messages._MEMO_ENTRIES):
        fingerprint({"role": "user", "content": f"turn {i}"})
    assert len(messages._FINGERPRINTS) <= messages._MEMO_ENTRIES
    big = {"role": "tool", "content": "x" * (messages._MEMO_CHARS + 1)}
    fingerprint(big)
    assert not any(k == tuple(big.items()) for k in messages._FINGERPRINTS)
