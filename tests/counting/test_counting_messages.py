"""Message counting: ``count_message`` / ``count_messages`` / ``count_each_message`` /
``count_tools`` against an independent Python implementation.

The reference is OpenAI's cookbook ``num_tokens_from_messages`` (3 tokens per message, the
tokens of every value, +1 per name, +3 reply priming) computed with tiktoken, extended exactly
as src/count.rs documents: tool calls cost ``tokens_per_tool_call`` (3) + name + arguments, a
``tool_call_id`` its tokens, content parts are counted one by one (text / refusal / thinking
as text, images by OpenAI's tile formula or 765 when the size is unknown, audio and files
1000), Anthropic ``tool_use`` blocks as tool calls with their ``input`` as compact JSON,
``tool_result`` blocks as their id plus their content, and unknown parts by every string in them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import windowfit as wf
from _corpus import corpus, qwen_reference, tiktoken_cl100k, tiktoken_o200k
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit.counting import render_tools

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- the reference


def cookbook_num_tokens_from_messages(messages: list[dict[str, str]], encoding: Any) -> int:
    """OpenAI cookbook "How to count tokens with tiktoken", for gpt-4o / gpt-4 family models."""
    tokens_per_message = 3
    tokens_per_name = 1
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            num_tokens += len(encoding.encode(value))
            if key == "name":
                num_tokens += tokens_per_name
    num_tokens += 3  # every reply is primed with <|start|>assistant<|message|>
    return num_tokens


def image_tokens(detail: str, width: int | None, height: int | None) -> int:
    """OpenAI's vision pricing: low = 85; else fit in 2048x2048, shortest side to 768,
    170 per 512px tile + 85. Unknown size: a 1024x1024 high-detail image (765)."""
    if detail == "low":
        return 85
    if width is None or height is None:
        return 765
    if width == 0 or height == 0:
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


class Reference:
    def __init__(
        self,
        count: Callable[[str], int],
        per_message: int = 3,
        per_name: int = 1,
        per_call: int = 3,
        priming: int = 3,
    ):
        self.count, self.per_message, self.per_name, self.per_call, self.priming = (
            count,
            per_message,
            per_name,
            per_call,
            priming,
        )

    def strings(self, obj: Any) -> int:
        if isinstance(obj, str):
            return self.count(obj)
        if isinstance(obj, Mapping):
            return sum(self.strings(v) for k, v in obj.items() if k != "type")
        if isinstance(obj, list):
            return sum(self.strings(v) for v in obj)
        return 0

    def part(self, p: Any) -> int:
        if isinstance(p, str):
            return self.count(p)
        kind = p["type"]
        if kind in ("text", "input_text", "output_text"):
            return self.count(p["text"])
        if kind in ("refusal", "thinking"):
            return self.count(p.get(kind) or "")
        if kind in ("image_url", "image", "input_image"):
            inner = p.get("image_url") if isinstance(p.get("image_url"), dict) else p
            detail = inner.get("detail") or p.get("detail") or "auto"
            width = inner.get("width", p.get("width"))
            height = inner.get("height", p.get("height"))
            return image_tokens(detail, width, height)
        if kind in ("input_audio", "audio", "file", "input_file", "document"):
            return 1000
        if kind == "tool_use":
            args = p.get("input")
            args = (
                "{}"
                if args is None
                else args
                if isinstance(args, str)
                else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
            )
            return self.per_call + self.count(p["name"]) + self.count(args)
        if kind == "tool_result":
            n = self.count(p["tool_use_id"])
            c = p.get("content")
            if isinstance(c, str):
                n += self.count(c)
            elif isinstance(c, list):
                n += sum(self.part(x) for x in c)
            return n
        return self.strings(p)

    def message(self, m: Mapping[str, Any]) -> int:
        n = self.per_message + self.count(m["role"])
        if m.get("name") is not None:
            n += self.count(m["name"]) + self.per_name
        c = m.get("content")
        if isinstance(c, str):
            n += self.count(c)
        elif isinstance(c, list):
            n += sum(self.part(p) for p in c)
        for call in m.get("tool_calls") or []:
            fn = call["function"]
            n += self.per_call + self.count(fn["name"]) + self.count(fn.get("arguments") or "")
        if m.get("tool_call_id") is not None:
            n += self.count(m["tool_call_id"])
        return n

    def messages(self, ms: list[Mapping[str, Any]]) -> int:
        return sum(self.message(m) for m in ms) + self.priming if ms else 0


def tiktoken_counter(ref: Any) -> Callable[[str], int]:
    return lambda t: len(ref.encode_ordinary(t))


# counter factory, reference count function
SETUPS: dict[str, tuple[Callable[[], wf.Counter], Callable[[], Callable[[str], int]]]] = {
    "gpt-4o": (lambda: wf.Counter(model="gpt-4o"), lambda: tiktoken_counter(tiktoken_o200k())),
    "gpt-4": (lambda: wf.Counter(model="gpt-4"), lambda: tiktoken_counter(tiktoken_cl100k())),
    "cl100k_base": (
        lambda: wf.Counter(encoding="cl100k_base"),
        lambda: tiktoken_counter(tiktoken_cl100k()),
    ),
    "qwen-max": (
        lambda: wf.Counter(model="qwen-max"),
        lambda: lambda t: len(qwen_reference("qwen-max").encode(t, allowed_special=set())),
    ),
}


@pytest.fixture(scope="module", params=list(SETUPS))
def setup(request: pytest.FixtureRequest) -> tuple[wf.Counter, Reference]:
    make, count = SETUPS[request.param]
    c = make()
    return c, Reference(
        count(), c.tokens_per_message, c.tokens_per_name, c.tokens_per_tool_call, c.reply_priming
    )


# --------------------------------------------------------------------------- the cookbook


COOKBOOK_EXAMPLE = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]


# OpenAI cookbook, "How to count tokens with tiktoken" (examples/How_to_count_tokens_with_tiktoken
# .ipynb), section 6: `usage.prompt_tokens` the OpenAI API billed for COOKBOOK_EXAMPLE.
PUBLISHED_PROMPT_TOKENS = {"gpt-4": 129, "gpt-4o": 124, "gpt-4o-mini": 124}


@pytest.mark.parametrize(
    "model,ref",
    [("gpt-4o", tiktoken_o200k), ("gpt-4", tiktoken_cl100k), ("gpt-4o-mini", tiktoken_o200k)],
)
def test_cookbook_example(model: str, ref: Callable[[], Any]) -> None:
    c = wf.Counter(model=model)
    expected = cookbook_num_tokens_from_messages(COOKBOOK_EXAMPLE, ref())
    assert c.count_messages(COOKBOOK_EXAMPLE) == expected == PUBLISHED_PROMPT_TOKENS[model]


# The same notebook, section 7: one tool schema and two messages, and the prompt tokens the
# OpenAI API billed for them (chat completions, `tools=TOOLS_EXAMPLE`).
TOOLS_EXAMPLE = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
TOOLS_EXAMPLE_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]
PUBLISHED_TOOLS_PROMPT_TOKENS = {
    "gpt-4": 105,
    "gpt-3.5-turbo": 105,
    "gpt-4o": 101,
    "gpt-4o-mini": 101,
}


@pytest.mark.parametrize("model", list(PUBLISHED_TOOLS_PROMPT_TOKENS))
def test_count_tools_against_openais_published_usage(model: str) -> None:
    """``count_messages + count_tools`` against what OpenAI billed. The rendering OpenAI uses
    for tool schemas is not published, only this figure, and windowfit's TypeScript-style
    rendering is one token off it: +1 with o200k_base (102 vs 101), -1 with cl100k_base (104
    vs 105). The README states that bound; this test holds it to it."""
    c = wf.Counter(model=model)
    ours = c.count_messages(TOOLS_EXAMPLE_MESSAGES) + c.count_tools(TOOLS_EXAMPLE)
    assert abs(ours - PUBLISHED_TOOLS_PROMPT_TOKENS[model]) <= 1, ours


def test_cookbook_on_corpus_dialogs() -> None:
    """Conversations built from the corpus (every category), counted by the cookbook."""
    c = wf.Counter(model="gpt-4o")
    ref = tiktoken_o200k()
    samples = corpus()
    for start in range(0, 3000, 50):
        chunk = samples[start : start + 50]
        msgs: list[dict[str, str]] = []
        for i, s in enumerate(chunk):
            m = {
                "role": ("system", "user", "assistant")[i % 3] if i else "system",
                "content": s.text,
            }
            if i % 7 == 3:
                m["name"] = f"agent_{i}"
            msgs.append(m)
        assert c.count_messages(msgs) == cookbook_num_tokens_from_messages(msgs, ref)
        assert c.count_each_message(msgs) == [
            cookbook_num_tokens_from_messages([m], ref) - 3 for m in msgs
        ]


def test_empty_history_is_zero() -> None:
    c = wf.Counter(model="gpt-4o")
    assert c.count_messages([]) == 0
    assert c.count_each_message([]) == []


def test_image_formula_documented_examples() -> None:
    c = wf.Counter(model="gpt-4o")

    def img(**kw: Any) -> dict[str, Any]:
        return {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png", **kw}}],
        }

    base = c.count_message({"role": "user", "content": []})
    assert c.count_message(img(detail="high", width=1024, height=1024)) - base == 765
    assert c.count_message(img(detail="high", width=2048, height=4096)) - base == 1105
    assert c.count_message(img(detail="low", width=4096, height=8192)) - base == 85
    assert c.count_message(img()) - base == 765  # unknown size
    for w, h in [(1, 1), (512, 512), (513, 512), (768, 768), (3000, 1000), (100, 9000), (0, 50)]:
        for detail in ("high", "auto", "low"):
            assert c.count_message(img(detail=detail, width=w, height=h)) - base == image_tokens(
                detail, w, h
            ), (w, h, detail)


# --------------------------------------------------------------------------- generated messages

text = st.text(st.characters(codec="utf-8"), max_size=60) | st.sampled_from(
    [s.text for s in corpus()[::50] if len(s.text) < 2000]
)
ident = st.text("abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=16)

image_part = st.builds(
    lambda detail, size, nested: (
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", **detail, **size}}
        if nested
        else {"type": "image", "source": {"type": "base64", "data": "AAAA"}, **detail, **size}
    ),
    st.sampled_from([{}, {"detail": "low"}, {"detail": "high"}, {"detail": "auto"}]),
    st.one_of(
        st.just({}),
        st.builds(
            lambda w, h: {"width": w, "height": h}, st.integers(0, 10000), st.integers(0, 10000)
        ),
    ),
    st.booleans(),
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ident, inner, max_size=3),
    max_leaves=8,
)
leaf_part = st.one_of(
    text,
    st.builds(
        lambda t, k: {"type": k, "text": t},
        text,
        st.sampled_from(["text", "input_text", "output_text"]),
    ),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, text),
    st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "sig"}, text),
    image_part,
    st.sampled_from(
        [
            {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "f"}},
        ]
    ),
    st.builds(
        lambda v: {"type": "mystery_part", "payload": v}, json_value
    ),  # unknown: every string counts
    st.builds(
        lambda i, n, v: {"type": "tool_use", "id": i, "name": n, "input": v},
        ident,
        ident,
        st.dictionaries(ident, json_value, max_size=3) | text,
    ),
)
part = leaf_part | st.builds(
    lambda i, c: {"type": "tool_result", "tool_use_id": i, "content": c},
    ident,
    st.none() | text | st.lists(leaf_part, max_size=3),
)
tool_call = st.builds(
    lambda i, n, a: {"id": i, "type": "function", "function": {"name": n, "arguments": a}},
    ident,
    ident,
    st.builds(
        lambda d: json.dumps(d, ensure_ascii=False), st.dictionaries(ident, json_value, max_size=3)
    )
    | text,
)


@st.composite
def message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]))
    m: dict[str, Any] = {
        "role": role,
        "content": draw(st.none() | text | st.lists(part, max_size=4)),
    }
    if draw(st.booleans()):
        m["name"] = draw(ident | st.none())
    if role == "assistant" and draw(st.booleans()):
        m["tool_calls"] = draw(st.lists(tool_call, min_size=1, max_size=3))
    if role == "tool" or (role != "tool" and draw(st.integers(0, 9)) == 0):
        m["tool_call_id"] = draw(ident)
    return m


@PROPERTY
@given(ms=st.lists(message(), max_size=8))
def test_property_messages_equal_reference(
    setup: tuple[wf.Counter, Reference], ms: list[dict[str, Any]]
) -> None:
    c, ref = setup
    each = [ref.message(m) for m in ms]
    assert [c.count_message(m) for m in ms] == each
    assert c.count_each_message(ms) == each
    assert c.count_messages(ms) == ref.messages(ms)


@PROPERTY
@given(ms=st.lists(message(), min_size=1, max_size=8))
def test_property_additive(setup: tuple[wf.Counter, Reference], ms: list[dict[str, Any]]) -> None:
    c, _ = setup
    total = c.count_messages(ms)
    assert total == sum(c.count_message(m) for m in ms) + c.reply_priming
    assert total == sum(c.count_each_message(ms)) + c.reply_priming
    # any split of the history adds up the same way
    k = len(ms) // 2
    assert total == c.count_messages(ms[:k]) + c.count_messages(ms[k:]) - (
        c.reply_priming if k else 0
    )


@PROPERTY
@given(ms=st.lists(message(), max_size=6))
def test_property_message_cache_never_changes_a_result(ms: list[dict[str, Any]]) -> None:
    cold = wf.Counter(model="gpt-4o", cache_entries=0)
    warm = wf.Counter(model="gpt-4o")
    expected = cold.count_each_message(ms)
    assert warm.count_each_message(ms) == expected
    assert warm.count_each_message(ms) == expected  # now cached
    assert [warm.count_message(m) for m in ms] == expected


def test_heuristic_messages_are_additive_too() -> None:
    h = wf.Counter.heuristic()
    ms = [
        {"role": "system", "content": "你是一个有帮助的助手。"},
        {"role": "user", "content": "Count me, please.", "name": "bob"},
    ]
    ref = Reference(h.count)
    assert h.count_messages(ms) == ref.messages(ms)


def test_registered_model_overheads(monkeypatch: pytest.MonkeyPatch) -> None:
    info = wf.ModelInfo(
        "wf-test-overheads",
        "test",
        "o200k_base",
        10_000,
        1_000,
        tokens_per_message=4,
        tokens_per_name=2,
        reply_priming=5,
    )
    wf.register_model(info)
    c = wf.Counter(model="wf-test-overheads")
    ref = Reference(tiktoken_counter(tiktoken_o200k()), 4, 2, 3, 5)
    ms = [
        {"role": "user", "content": "hi", "name": "ann"},
        {"role": "assistant", "content": "hello there"},
    ]
    assert (c.tokens_per_message, c.tokens_per_name, c.reply_priming) == (4, 2, 5)
    assert c.count_messages(ms) == ref.messages(ms)
    # same backend, different overheads: cached message counts must not leak between formats
    assert wf.Counter(model="gpt-4o").count_messages(ms) == Reference(
        tiktoken_counter(tiktoken_o200k())
    ).messages(ms)


def test_tool_message_and_calls_sanity() -> None:
    c = wf.Counter(model="gpt-4o")
    enc = tiktoken_o200k()
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"北京"}'},
    }
    m = {"role": "assistant", "content": None, "tool_calls": [call]}
    n = lambda t: len(enc.encode_ordinary(t))
    assert c.count_message(m) == 3 + n("assistant") + 3 + n("get_weather") + n('{"city":"北京"}')
    r = {"role": "tool", "tool_call_id": "call_1", "content": "晴, 25°C"}
    assert c.count_message(r) == 3 + n("tool") + n("call_1") + n("晴, 25°C")


# --------------------------------------------------------------------------- malformed


MALFORMED: list[tuple[Any, type[Exception], str]] = [
    (5, wf.MessageTypeError, r"expected a dict"),
    ("user: hi", wf.MessageTypeError, r"expected a dict"),
    ({"content": "x"}, wf.InvalidMessageError, r"role: missing"),
    ({"role": 5, "content": "x"}, wf.MessageTypeError, r"role: expected str"),
    ({"role": "robot", "content": "x"}, wf.InvalidMessageError, r"role: unknown role"),
    ({"role": "user", "content": 5}, wf.MessageTypeError, r"content: expected"),
    ({"role": "user", "content": {"text": "x"}}, wf.MessageTypeError, r"content: expected"),
    ({"role": "user", "content": [5]}, wf.MessageTypeError, r"content\[0\]"),
    (
        {"role": "user", "content": ["ok", {"text": "x"}]},
        wf.InvalidMessageError,
        r"content\[1\]\.type: missing",
    ),
    ({"role": "user", "content": [{"type": 3}]}, wf.MessageTypeError, r"content\[0\]\.type"),
    (
        {"role": "user", "content": [{"type": "text"}]},
        wf.InvalidMessageError,
        r"content\[0\]\.text: missing",
    ),
    (
        {"role": "user", "content": [{"type": "text", "text": b"x"}]},
        wf.MessageTypeError,
        r"content\[0\]\.text: expected str",
    ),
    ({"role": "user", "name": 5, "content": "x"}, wf.MessageTypeError, r"name: expected str"),
    (
        {"role": "assistant", "tool_calls": {"id": "a"}},
        wf.MessageTypeError,
        r"tool_calls: expected list",
    ),
    (
        {"role": "assistant", "tool_calls": ["call"]},
        wf.MessageTypeError,
        r"tool_calls\[0\]: expected dict",
    ),
    (
        {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
        wf.InvalidMessageError,
        r"tool_calls\[0\]\.id: missing",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a"}]},
        wf.InvalidMessageError,
        r"tool_calls\[0\]\.function: missing",
    ),
    (
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {}}]},
        wf.InvalidMessageError,
        r"tool_calls\[0\]\.function\.name: missing",
    ),
    (
        {
            "role": "assistant",
            "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {"x": 1}}}],
        },
        wf.MessageTypeError,
        r"tool_calls\[0\]\.function\.arguments",
    ),
    ({"role": "tool", "content": "x"}, wf.InvalidMessageError, r"tool_call_id: missing"),
    (
        {"role": "tool", "content": "x", "tool_call_id": 7},
        wf.MessageTypeError,
        r"tool_call_id: expected str",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "u", "detail": "huge"}}],
        },
        wf.InvalidMessageError,
        r"content\[0\]\.detail",
    ),
    (
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "u", "width": -5, "height": 3}}],
        },
        wf.InvalidMessageError,
        r"content\[0\]\.width",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
        wf.InvalidMessageError,
        r"content\[0\]\.tool_use_id: missing",
    ),
    (
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]},
        wf.InvalidMessageError,
        r"content\[0\]\.name: missing",
    ),
    (
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]},
        wf.MessageTypeError,
        r"content\[0\]\.content",
    ),
]


@pytest.mark.parametrize("bad,exc,pattern", MALFORMED, ids=[f"{i}" for i in range(len(MALFORMED))])
def test_malformed_message_names_index_and_field(
    bad: Any, exc: type[Exception], pattern: str
) -> None:
    c = wf.Counter(model="gpt-4o")
    ok = {"role": "user", "content": "fine"}
    for call, index in (
        (lambda: c.count_messages([ok, ok, bad]), 2),
        (lambda: c.count_each_message([bad]), 0),
        (lambda: c.count_message(bad), 0),
    ):
        with pytest.raises(exc) as info:
            call()
        msg = str(info.value)
        assert f"message {index}" in msg, msg
        assert re.search(pattern, msg), msg
    assert issubclass(wf.MessageTypeError, TypeError) and issubclass(
        wf.InvalidMessageError, ValueError
    )


@pytest.mark.parametrize("bad", ["a string", {"role": "user", "content": "x"}, 5, None])
def test_messages_must_be_a_sequence(bad: Any) -> None:
    c = wf.Counter(model="gpt-4o")
    with pytest.raises(TypeError):
        c.count_messages(bad)
    with pytest.raises(TypeError):
        c.count_each_message(bad)


def test_messages_may_be_any_iterable_and_surrogates_are_fine() -> None:
    c = wf.Counter(model="gpt-4o")
    ms = [{"role": "user", "content": "hi \ud800 there"}, {"role": "assistant", "content": "ok"}]
    assert c.count_messages(iter(ms)) == c.count_messages(tuple(ms)) == c.count_messages(ms) > 0


# --------------------------------------------------------------------------- tools

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. 北京"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": ["integer", "null"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "now", "description": "The time"}},
    {
        "name": "search",
        "description": "Anthropic-style tool",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
]


def test_count_tools() -> None:
    c = wf.Counter(model="gpt-4o")
    assert c.count_tools(None) == 0 and c.count_tools([]) == 0
    rendered = render_tools(TOOLS)
    assert c.count_tools(TOOLS) == len(tiktoken_o200k().encode_ordinary(rendered))
    assert (
        "type get_weather = (_: {" in rendered
        and "city: string," in rendered
        and 'unit?: "celsius" | "fahrenheit",' in rendered
    )
    assert "type now = () => any;" in rendered and "type search = (_: {" in rendered
    assert c.count_tools(TOOLS[:1]) < c.count_tools(TOOLS[:2]) < c.count_tools(TOOLS)


@pytest.mark.parametrize(
    "bad,exc",
    [
        ([5], TypeError),
        ([{"function": {"description": "no name"}}], ValueError),
        ([{"type": "function"}], ValueError),
    ],
)
def test_bad_tools_name_the_index(bad: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc, match=r"tools\[0\]"):
        wf.Counter(model="gpt-4o").count_tools(bad)
