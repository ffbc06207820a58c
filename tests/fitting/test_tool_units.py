"""The core's tool-unit analysis as Python sees it (``messages.tool_units``,
``history_problems``), checked against the independent validator and reference analysis of
``tests/_histories.py`` on OpenAI and Anthropic shapes."""

from __future__ import annotations

from typing import Any

import pytest
from _histories import SETTINGS, analyze, call_ids, histories, request_problems, result_ids
from hypothesis import given
from windowfit.errors import InvalidMessageError
from windowfit.messages import history_problems, tool_units

Msg = dict[str, Any]


@SETTINGS
@given(histories(huge=False))
def test_problems_agree_with_the_independent_validator(h: list[Msg]) -> None:
    # Both sides name different things, but a history's pairing is valid for one exactly when
    # it is for the other (an empty ``tool_calls`` list is a request problem, not a pairing one:
    # fit and repair leave it out of what they return).
    pairing = [p for p in request_problems(h) if not p.endswith("empty tool_calls list")]
    assert (history_problems(h) == []) == (pairing == []), (history_problems(h), pairing)


@SETTINGS
@given(histories(huge=False))
def test_problems_are_the_reference_verdicts(h: list[Msg]) -> None:
    ref = analyze(h, "drop")
    # a message holding an orphan result beside its own text is a problem (the orphan block)
    # that the reference keeps the message for: its verdict is about the message
    got = [
        (i, kind)
        for i, kind, _ in _problems(h)
        if not (kind == "orphan" and ref.verdict[i] != "orphan" and _own_text(h[i]))
    ]
    # the reference drops the results of an unanswered call too; the problem is the call
    want = [
        (i, "orphan" if v == "orphan" else "unanswered")
        for i, v in enumerate(ref.verdict)
        if v == "orphan" or (v == "unanswered" and call_ids(h[i]))
    ]
    assert got == want
    for i, kind, ids in _problems(h):
        if kind == "orphan":
            assert ids == result_ids(h[i])
        else:
            assert ids and set(ids) <= set(call_ids(h[i]))


@SETTINGS
@given(histories(huge=False))
def test_units_cover_the_history_and_never_split_a_reference_unit(h: list[Msg]) -> None:
    spans = tool_units(h)
    ends = [0] + [e for _, e, _ in spans]
    assert [s for s, _, _ in spans] == ends[:-1], "contiguous, in order"
    assert ends[-1] == len(h), "covering every message"
    span_of = {k: n for n, (s, e, _) in enumerate(spans) for k in range(s, e)}
    for members in analyze(h, "strip").units:
        assert len({span_of[k] for k in members}) == 1, (members, spans)
    for s, e, kind in spans:
        if kind == "tool_round":
            assert call_ids(h[s]) and not result_ids(h[s])
            assert all(result_ids(m) and not call_ids(m) for m in h[s + 1 : e])
        else:
            assert e == s + 1
            assert bool(result_ids(h[s])) == (kind == "orphan")


def _problems(h: list[Msg]) -> list[tuple[int, str, list[str]]]:
    from windowfit import _core

    return list(_core.tool_units(h).problems)


def test_anthropic_blocks_pair_like_openai_messages() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "ls", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}
    h = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
        {"role": "user", "content": [answer]},  # the id was answered already
    ]
    assert tool_units(h) == [(0, 1, "message"), (1, 4, "tool_round")]
    assert history_problems(h) == ["message 3: tool result 't1' answers no pending call"]
    assert history_problems(h[:2]) == ["message 1: tool call 't1' is not answered"]


def test_a_malformed_message_is_named_by_index_and_field() -> None:
    with pytest.raises(InvalidMessageError, match="message 1.*role"):
        tool_units([{"role": "user", "content": "x"}, {"content": "no role"}])
    with pytest.raises(TypeError):
        tool_units({"role": "user", "content": "x"})  # type: ignore[arg-type]


def _own_text(message: Msg) -> bool:
    """Whether a block-content message holds something besides tool results."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") != "tool_result" for p in content
    )
