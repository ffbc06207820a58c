"""The two message readers of the bindings agree, and ``clear_cache`` clears the reader memo.

The bindings read a message dict two ways: a light reader over borrowed pointers (the warm
path of every fit and count; it gives up on anything unusual) and the full, validating
reader. Both must produce the same cache key, or a warm count would differ from a cold one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit import _core

COUNTER = wf.Counter(encoding="cl100k_base")

# Short texts and texts long enough for the identity memo (256+ bytes), with lone surrogates.
_text = st.one_of(
    st.text(max_size=40),
    st.text(min_size=260, max_size=400),
    st.builds(lambda s: s * 300, st.sampled_from(["a", "é", "日", "\ud800"])),
)
_ids = st.text(alphabet="abcXYZ_0123\ud800", min_size=1, max_size=6)
_part = st.one_of(
    _text,
    st.builds(lambda t, k: {"type": k, "text": t}, _text, st.sampled_from(["text", "input_text"])),
    st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, st.just("https://x/y.png")),
)
_call = st.builds(
    lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}},
    _ids,
    st.text(min_size=1, max_size=8),
    _text,
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]))
    m: dict[str, Any] = {"role": role}
    content = draw(st.one_of(st.none(), _text, st.lists(_part, max_size=3)))
    if content is not None or draw(st.booleans()):
        m["content"] = content
    if draw(st.booleans()):
        m["name"] = draw(st.text(min_size=1, max_size=8))
    if role == "assistant" and draw(st.booleans()):
        m["tool_calls"] = draw(st.lists(_call, min_size=1, max_size=3))
    if role == "tool" or (role == "user" and draw(st.booleans())):
        m["tool_call_id"] = draw(_ids)
    if draw(st.booleans()):
        m["extra"] = draw(_text)  # fields windowfit does not count
    if draw(st.booleans()):  # keys that are not interned strings, as json.loads makes them
        try:
            m = json.loads(json.dumps(m))
        except (UnicodeEncodeError, ValueError):
            pass
    return m


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_light_and_full_readers_give_the_same_key(message: dict[str, Any]) -> None:
    light, full = _core._message_keys(COUNTER, message)
    assert light is None or light == full, message
    # Twice: the second read of a long string goes through the identity memo.
    again, full_again = _core._message_keys(COUNTER, message)
    assert (again, full_again) == (light, full)


def test_the_light_reader_handles_plain_openai_messages() -> None:
    """Not vacuous: the common shapes take the light path (and agree, per the test above)."""
    plain = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "x" * 1000, "name": "ann"},
        {"role": "assistant", "content": None, "tool_calls": [_call_of("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]},
    ]
    for m in plain:
        light, full = _core._message_keys(COUNTER, m)
        assert light == full, m
    # Anthropic blocks are left to the full reader.
    blocks = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}],
    }
    assert _core._message_keys(COUNTER, blocks)[0] is None


def _call_of(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def test_clear_cache_clears_the_reader_memo() -> None:
    history = [{"role": "user", "content": f"{i} " + "long text " * 60} for i in range(20)]
    counter = wf.Counter(encoding="cl100k_base", cache_entries=1000)
    counter.count_messages(history)
    strings, held = _core._memo_stats()
    assert strings >= 20 and held >= sum(len(m["content"]) for m in history)
    counter.clear_cache()
    assert _core._memo_stats() == (0, 0)
    # Counting again after the clear still gives the same, exact result.
    assert counter.count_messages(history) == wf.Counter(
        encoding="cl100k_base", cache_entries=0
    ).count_messages(history)


_BAD_IDS = [
    ({"role": "tool", "tool_call_id": 5, "content": "x"}, wf.MessageTypeError, "tool_call_id"),
    (
        {"role": "assistant", "tool_calls": [{**_call_of("c"), "id": 7}]},
        wf.MessageTypeError,
        "tool_calls[0].id",
    ),
    ({"role": "tool", "content": "x"}, wf.InvalidMessageError, "tool_call_id"),
]


def test_counting_checks_ids_it_does_not_read() -> None:
    """Counting skips copying the pairing ids out of warm messages, not checking them: a bad
    id is the same error whether the rest of the history is cached or not, and whether a
    count or a fit reads it."""
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for bad, kind, field in _BAD_IDS:
        counter = wf.Counter(encoding="cl100k_base")
        for _ in range(2):  # cold, then with the good messages cached
            for call in (counter.count_messages, counter.count_each_message):
                with pytest.raises(kind, match=rf"message 2: {re.escape(field)}"):
                    call([*good, bad])
            with pytest.raises(kind, match=rf"message 2: {re.escape(field)}"):
                wf.fit([*good, bad], 1_000, counter=counter)
            counter.count_messages(good)


def test_counts_without_ids_equal_the_counts_a_fit_reads() -> None:
    """The warm count (no ids read) and the fit's read (ids read) give the same tokens."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "list files"}]
    for i in range(30):
        history.append({"role": "assistant", "content": None, "tool_calls": [_call_of(f"c{i}")]})
        history.append({"role": "tool", "tool_call_id": f"c{i}", "content": "a.txt\n" * (i + 1)})
    counter = wf.Counter(encoding="cl100k_base")
    cold = wf.Counter(encoding="cl100k_base", cache_entries=0).count_each_message(history)
    fitted = wf.fit(history, 10**9, counter=counter)  # reads ids, fills the cache
    assert fitted.kept == list(range(len(history)))
    assert counter.count_each_message(history) == cold
    assert counter.count_messages(history) == sum(cold) + counter.reply_priming == fitted.tokens
