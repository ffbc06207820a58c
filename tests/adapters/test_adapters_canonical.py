"""Hypothesis strategies for canonical chat histories (shared by the adapter tests)."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)
nonempty_text = text.filter(bool)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)


@st.composite
def image_part(draw: Any, with_detail: bool = True) -> dict[str, Any]:
    if draw(st.booleans()):
        raw = draw(st.binary(min_size=1, max_size=12))
        url = "data:image/png;base64," + base64.b64encode(raw).decode()
    else:
        url = "https://example.com/" + draw(ident) + ".png"
    image: dict[str, Any] = {"url": url}
    if with_detail and draw(st.booleans()):
        image["detail"] = draw(st.sampled_from(["low", "high"]))
    return {"type": "image_url", "image_url": image}


def content(with_detail: bool = True) -> st.SearchStrategy[Any]:
    part = st.one_of(text.map(lambda t: {"type": "text", "text": t}), image_part(with_detail))
    return st.one_of(text, st.lists(part, max_size=3))


arguments = st.dictionaries(
    ident, st.one_of(st.integers(-1000, 1000), text, st.booleans(), st.none()), max_size=3
).map(lambda d: json.dumps(d, ensure_ascii=False))


@st.composite
def histories(draw: Any, with_detail: bool = True, system: bool = True) -> list[dict[str, Any]]:
    """Valid canonical histories: an optional system prompt, then rounds of a user message and
    assistant steps (text, or tool calls answered in order by tool messages)."""
    out: list[dict[str, Any]] = []
    if system and draw(st.booleans()):
        out.append({"role": "system", "content": draw(text)})
    counter = 0
    for _ in range(draw(st.integers(1, 5))):
        out.append({"role": "user", "content": draw(content(with_detail))})
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                calls = []
                for _ in range(draw(st.integers(1, 3))):
                    counter += 1
                    calls.append(
                        {
                            "id": f"call_{counter}",
                            "type": "function",
                            "function": {"name": draw(ident), "arguments": draw(arguments)},
                        }
                    )
                out.append(
                    {
                        "role": "assistant",
                        "content": draw(st.one_of(st.none(), nonempty_text)),
                        "tool_calls": calls,
                    }
                )
                for call in calls:
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": call["id"],
                            "content": draw(content(with_detail)),
                        }
                    )
            else:
                out.append({"role": "assistant", "content": draw(text)})
                break
    return out


# --------------------------------------------------------------------------- tests

import pytest
from hypothesis import given
from windowfit.adapters import Converted, content_text, history_problems, is_valid_history


@given(histories())
def test_generated_histories_are_valid(h: list[dict[str, Any]]) -> None:
    assert history_problems(h) == []


def test_history_problems_names_each_break() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert is_valid_history([{"role": "user", "content": "x"}])
    orphan = [
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "c9", "content": "r"},
    ]
    assert "answers no pending call" in history_problems(orphan)[0]
    unanswered = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "x"},
    ]
    assert "not answered" in history_problems(unanswered)[0]
    late = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "x"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    assert len(history_problems(late)) == 2


def test_content_text() -> None:
    assert content_text(None) == ""
    assert content_text("a") == "a"
    assert content_text([{"type": "text", "text": "a"}, {"type": "image_url"}, "b"]) == "a\nb"


def test_select_keeps_identity_and_rebuilds_partial_items() -> None:
    items = [{"parts": ["a", "b", "meta"]}, {"parts": ["c"]}]
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    rebuilt: list[frozenset[int]] = []

    def rebuild(item: dict[str, Any], dropped: frozenset[int]) -> dict[str, Any]:
        rebuilt.append(dropped)
        return {"parts": [p for j, p in enumerate(item["parts"]) if j not in dropped]}

    conv = Converted(items, msgs, [((0, 0),), ((0, 1),), ((1, None),)], rebuild=rebuild)
    out = conv.select([0, 1, 2])
    assert out[0] is items[0] and out[1] is items[1]
    out = conv.select([1, 2])
    # part 2 ("meta") is referenced by no message: it stays with its item
    assert out == [{"parts": ["b", "meta"]}, {"parts": ["c"]}] and out[1] is items[1]
    assert rebuilt == [frozenset({0})]
    assert conv.select([]) == []


def test_reassemble_maps_inputs_back_and_converts_new_messages() -> None:
    items = ["A", "B", "C"]
    msgs = [{"role": "user", "content": x} for x in items]
    conv = Converted(items, msgs, [((i, None),) for i in range(3)])
    summary = {"role": "system", "content": "summary"}
    edited = {"role": "user", "content": "C'"}
    out = conv.reassemble([summary, msgs[1], edited], lambda ds: [d["content"] for d in ds])
    assert out == ["summary", "B", "C'"]


def test_converted_checks_lengths() -> None:
    with pytest.raises(ValueError):
        Converted([1], [{"role": "user"}], [])
