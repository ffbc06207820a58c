"""``wf.render_history``: a budgeted plain-text history for a router or classifier.

The budget is checked with tiktoken's own count of the returned text; the window is checked
against ``wf.fit`` (whole tool rounds, newest first).
"""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf
from _corpus import tiktoken_o200k
from _histories import SETTINGS, valid_histories
from hypothesis import given
from hypothesis import strategies as st

ENC = tiktoken_o200k()
COUNTER = wf.Counter(encoding="o200k_base")


def _round(k: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {k}: what is the weather in city {k}?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{k}",
                    "type": "function",
                    "function": {"name": "weather", "arguments": f'{{"city": "c{k}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{k}", "content": "sunny " * 300},
        {"role": "assistant", "content": f"It is sunny in city {k}."},
    ]


HISTORY = [{"role": "system", "content": "You are a helpful agent."}] + [
    m for k in range(30) for m in _round(k)
]


def test_router_budget_keeps_the_newest_rounds_as_labelled_lines() -> None:
    text = wf.render_history(
        HISTORY, 300, counter=COUNTER, summary="The user asked about 20 cities."
    )
    assert len(ENC.encode_ordinary(text)) <= 300
    assert text.startswith("[Earlier conversation summary]:\nThe user asked about 20 cities.\n")
    assert "You are a helpful agent" not in text  # the router has its own system prompt
    assert "USER: question 29:" in text and "ASSISTANT: It is sunny in city 29." in text
    assert "question 0:" not in text
    assert '[calls weather({"city": "c29"})]' in text
    tool_line = next(line for line in text.splitlines() if line.startswith("TOOL: "))
    assert len(tool_line) <= len("TOOL: ") + 200 + 1  # cut to tool_chars, with an ellipsis
    # the window starts on a user turn, like fit's
    lines = [line for line in text.splitlines()[2:] if line]
    assert lines[0].startswith("USER: ")


def test_more_budget_never_shows_less() -> None:
    shown = [
        wf.render_history(HISTORY, b, counter=COUNTER).count("USER: ")
        for b in (0, 50, 200, 800, 5000)
    ]
    assert shown == sorted(shown)
    assert shown[0] == 0 and shown[-1] > 0


def test_caps_bound_the_rendered_turns() -> None:
    text = wf.render_history(HISTORY, 10**6, counter=COUNTER, max_turns=3)
    assert text.count("USER: ") == 3
    assert "question 27:" in text and "question 26:" not in text


def test_a_summary_larger_than_the_budget_is_cut_to_it() -> None:
    text = wf.render_history(HISTORY, 20, counter=COUNTER, summary="long summary " * 200)
    assert 0 < len(ENC.encode_ordinary(text)) <= 20


@SETTINGS
@given(
    valid_histories(),
    st.integers(0, 400),
    st.integers(0, 400),
    st.one_of(st.none(), st.text(max_size=60)),
)
def test_rendering_fits_the_budget_and_grows_backwards(
    msgs: list[dict[str, Any]], b1: int, b2: int, summary: str | None
) -> None:
    text = wf.render_history(msgs, b1, counter=COUNTER, summary=summary)
    assert len(ENC.encode_ordinary(text)) <= b1
    # without the pinned user turn the window is a recent suffix: a smaller budget shows the
    # end of a larger one's text
    small, large = (
        wf.render_history(msgs, b, counter=COUNTER, keep_last_user=False) for b in sorted((b1, b2))
    )
    assert large.endswith(small)


@pytest.mark.parametrize(
    ("kw", "exc"),
    [
        ({"tool_chars": "x"}, TypeError),
        ({"summary": 3}, TypeError),
        ({"max_turns": -1}, ValueError),
    ],
)
def test_bad_arguments_are_named(kw: dict[str, Any], exc: type) -> None:
    with pytest.raises(exc) as info:
        wf.render_history(HISTORY, 100, counter=COUNTER, **kw)
    assert isinstance(info.value, wf.WindowfitError)
    assert next(iter(kw)) in str(info.value)
