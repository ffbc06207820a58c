"""Hostile message shapes and arguments against the core's readers and the fitting layer.

Each case once crashed the interpreter, lost a user's words, kept what providers reject or
raised an exception outside ``WindowfitError``: content nested thousands of levels deep or
containing itself, an orphan ``tool_result`` beside new text, ``"tool_calls": []``, an
Anthropic round of oversized results, and arguments outside their documented types.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import windowfit as wf
from _corpus import tiktoken_o200k
from windowfit.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    InvalidMessageError,
    MessageTypeError,
)
from windowfit.messages import history_problems
from windowfit.testing.invariants import check_window, request_problems

COUNTER = wf.Counter(model="gpt-4o")


def nested_results(depth: int) -> list[dict[str, Any]]:
    """A user message whose tool_result content holds a tool_result, ``depth`` times."""
    inner: Any = "x"
    for _ in range(depth):
        inner = [{"type": "tool_result", "tool_use_id": "t", "content": inner}]
    return [{"role": "user", "content": inner}]


def containing_itself() -> list[dict[str, Any]]:
    parts: list[Any] = [{"type": "text", "text": "a"}]
    parts.append({"type": "tool_result", "tool_use_id": "t", "content": parts})
    return [{"role": "user", "content": parts}]


def deep_input(depth: int) -> list[dict[str, Any]]:
    value: Any = 1
    for _ in range(depth):
        value = {"k": value}
    call = {"type": "tool_use", "id": "c", "name": "f", "input": value}
    return [{"role": "assistant", "content": [call]}]


ENTRY_POINTS: dict[str, Callable[[list[Any]], Any]] = {
    "count_messages": COUNTER.count_messages,
    "count_each_message": COUNTER.count_each_message,
    "count_message": lambda h: COUNTER.count_message(h[0]),
    "fit": lambda h: wf.fit(h, 1000, counter=COUNTER),
    "repair": lambda h: wf.repair(h, counter=COUNTER),
    "render_history": lambda h: wf.render_history(h, 1000, counter=COUNTER),
    "history_problems": history_problems,
}

HOSTILE = {
    "nested 20,000 deep": lambda: nested_results(20_000),
    "containing itself": containing_itself,
    "tool_use.input 20,000 deep": lambda: deep_input(20_000),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("shape", HOSTILE)
def test_deep_or_cyclic_content_is_an_error_naming_message_and_field(
    entry: str, shape: str
) -> None:
    """Before: SIGSEGV (the reader recursed without a limit)."""
    with pytest.raises(InvalidMessageError, match=r"message 0: content\[\d\].*nested more than 64"):
        ENTRY_POINTS[entry](HOSTILE[shape]())


def test_deep_content_in_a_thread_with_a_small_stack() -> None:
    """Before: SIGSEGV at 15,000 levels in a thread (its stack is smaller than the main one)."""
    outcomes: list[str] = []

    def run() -> None:
        for shape in HOSTILE.values():
            for entry in ENTRY_POINTS.values():
                try:
                    entry(shape())
                    outcomes.append("no error")
                except InvalidMessageError:
                    outcomes.append("InvalidMessageError")

    old = threading.stack_size(256 * 1024)
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old)
    assert outcomes == ["InvalidMessageError"] * (len(HOSTILE) * len(ENTRY_POINTS))


def test_nesting_within_the_limit_is_read_and_counted() -> None:
    h = nested_results(60)
    assert COUNTER.count_messages(h) == COUNTER.count_messages(
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]
    ) + 59 * COUNTER.count("t")


# ----------------------------------------------------------------------------- orphan + text

ORPHAN_AND_TEXT = [
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "old output " * 50},
            {"type": "text", "text": "Thanks. Now please rename the module."},
        ],
    },
]
THE_WORDS = [
    {"role": "system", "content": "You are terse."},
    {
        "role": "user",
        "content": [{"type": "text", "text": "Thanks. Now please rename the module."}],
    },
]


@pytest.mark.parametrize("how", ["fit", "repair"])
def test_an_orphan_result_goes_and_the_users_text_stays(how: str) -> None:
    """Before: the whole message was dropped, even with an unlimited budget."""
    if how == "fit":
        r = wf.fit(ORPHAN_AND_TEXT, float("inf"), counter=COUNTER)
    else:
        r = wf.repair(ORPHAN_AND_TEXT, counter=COUNTER)
    assert r.messages == THE_WORDS
    assert r.kept == [0, 1] and r.dropped == []
    assert r.stats["results_stripped"] == 1 and r.stats["orphans_removed"] == 0
    assert r.tokens == COUNTER.count_messages(THE_WORDS)
    assert request_problems(r.messages) == []
    assert ORPHAN_AND_TEXT[1]["content"][0]["type"] == "tool_result"  # the caller's is untouched


def test_the_kept_text_is_the_latest_user_turn_and_pinned() -> None:
    words = COUNTER.count_messages(THE_WORDS)
    r = wf.fit(ORPHAN_AND_TEXT, words, counter=COUNTER)
    assert r.messages == THE_WORDS
    check_window(ORPHAN_AND_TEXT, r, words, COUNTER)
    with pytest.raises(wf.BudgetError):
        wf.fit(ORPHAN_AND_TEXT, words - 1, counter=COUNTER)


def test_text_beside_a_result_that_breaks_a_run_is_kept_and_the_round_stays_valid() -> None:
    h = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "ls", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "zz", "content": "stale"},
                {"type": "text", "text": "stop, use the other folder"},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "files"},
    ]
    r = wf.repair(h, counter=COUNTER)
    assert r.kept == [0, 2]
    assert r.messages[1]["content"] == [{"type": "text", "text": "stop, use the other folder"}]
    assert request_problems(r.messages) == []


# ----------------------------------------------------------------------------- tool_calls: []


def test_an_empty_tool_calls_list_is_left_out_and_reported() -> None:
    """Before: kept as is by fit and repair (providers reject it) and missed by request_problems."""
    h = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "tool_calls": []},
    ]
    assert request_problems(h) == ["1: empty tool_calls list"]
    for r in (wf.fit(h, 1000, counter=COUNTER), wf.repair(h, counter=COUNTER)):
        assert r.messages == [h[0], {"role": "assistant", "content": "hello"}]
        assert r.messages[0] is h[0]
        assert r.tokens == COUNTER.count_messages(h)
        assert request_problems(r.messages) == []
    assert h[1]["tool_calls"] == []  # the caller's message is untouched


# ----------------------------------------------------------------------------- Anthropic oversize

BIG = "\n".join(f"line {i}: " + "lorem ipsum dolor " * 8 for i in range(400))


def _anthropic_round(first: Any, second: Any) -> list[dict[str, Any]]:
    uses = [{"type": "tool_use", "id": i, "name": "read", "input": {}} for i in ("a", "b")]
    return [
        {"role": "system", "content": "You read files."},
        {"role": "user", "content": "read both files"},
        {"role": "assistant", "content": uses},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": first},
                {"type": "tool_result", "tool_use_id": "b", "content": second},
            ],
        },
    ]


def test_an_oversized_anthropic_round_is_truncated_not_dropped() -> None:
    """Before: round_dropped=2, the agent lost both results and called the tools again."""
    ms = _anthropic_round(BIG, [{"type": "text", "text": BIG}])
    r = wf.fit(ms, 1500, counter=COUNTER)
    assert r.kept == [0, 1, 2, 3]
    assert r.stats["results_truncated"] == 2 and r.stats["round_dropped"] == 0
    assert r.tokens == COUNTER.count_messages(r.messages) <= 1500
    first, second = r.messages[3]["content"]
    assert first["tool_use_id"] == "a" and second["tool_use_id"] == "b"
    cut = first["content"]
    assert cut != BIG and cut.startswith(BIG[:40]) and cut.endswith(BIG[-40:])
    assert second["content"][0]["text"].startswith(BIG[:40])
    assert ms[3]["content"][0]["content"] == BIG  # the caller's blocks are untouched
    check_window(ms, r, 1500, COUNTER)


def test_a_small_anthropic_result_beside_a_big_one_stays_whole() -> None:
    ms = _anthropic_round(BIG, "short")
    r = wf.fit(ms, 1500, counter=COUNTER)
    assert r.stats["results_truncated"] == 1
    assert r.messages[3]["content"][1] == ms[3]["content"][1]


# ----------------------------------------------------------------------------- arguments

ENC = wf.get_encoding("cl100k_base")


@pytest.mark.parametrize("counter", [COUNTER, ENC], ids=["Counter", "Encoding"])
def test_count_until_takes_integral_floats_and_huge_limits(counter: Any) -> None:
    """Before: 2000.0 was a TypeError, 2**64 an OverflowError."""
    text = "hello world, " * 50
    want = len(ENC.encode(text))
    assert counter.count_until(text, 2000.0) == want
    assert counter.count_until(text, 2**64) == want
    assert counter.count_until(text, 3.0) is None
    with pytest.raises(ArgumentTypeError, match="limit"):
        counter.count_until(text, 2.5)
    with pytest.raises(InvalidArgumentError, match="limit"):
        counter.count_until(text, -1)


@pytest.mark.parametrize("decode", ["decode", "decode_bytes"])
@pytest.mark.parametrize("counter", [COUNTER, ENC], ids=["Counter", "Encoding"])
def test_decode_names_the_bad_token_id(counter: Any, decode: str) -> None:
    """Before: decode([-1]) was an OverflowError."""
    f = getattr(counter, decode)
    ids = counter.encode("hello world")
    assert f(ids) in ("hello world", b"hello world")
    assert f(tuple(ids)) in ("hello world", b"hello world")
    with pytest.raises(InvalidArgumentError, match=r"ids\[1\] = -1"):
        f([ids[0], -1])
    with pytest.raises(InvalidArgumentError, match=r"ids\[0\] = 18446744073709551616"):
        f([2**64])
    with pytest.raises(ArgumentTypeError, match=r"ids\[0\] must be an int, not str"):
        f(["a"])
    with pytest.raises(ArgumentTypeError, match="not str"):
        f("abc")


def test_a_set_inside_tool_use_input_names_message_and_field() -> None:
    """Before: a bare TypeError from json.dumps, without the message index."""
    call = {"type": "tool_use", "id": "c", "name": "f", "input": {"tags": {"a", "b"}}}
    h = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]}]
    with pytest.raises(MessageTypeError, match=r"message 1: content\[0\]\.input: .*set"):
        COUNTER.count_messages(h)
    with pytest.raises(MessageTypeError, match="message 1"):
        wf.fit(h, 1000, counter=COUNTER)


def _tool(parameters: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


@pytest.mark.parametrize(
    ("parameters", "error", "field"),
    [
        (
            {"type": "object", "properties": ["a", "b"]},
            ArgumentTypeError,
            r"parameters\.properties",
        ),
        (
            {"type": "object", "properties": {"x": {"type": "object", "properties": 5}}},
            ArgumentTypeError,
            r"parameters\.properties\.x\.properties",
        ),
        (
            {"type": "object", "properties": {"x": {}}, "required": 5},
            ArgumentTypeError,
            r"parameters\.required",
        ),
    ],
)
def test_count_tools_names_the_malformed_schema_field(
    parameters: Any, error: type[Exception], field: str
) -> None:
    """Before: an AttributeError from deep inside the rendering."""
    with pytest.raises(error, match=rf"tools\[0\]\.function\.{field}"):
        COUNTER.count_tools(_tool(parameters))


def test_count_tools_refuses_a_schema_containing_itself() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["self"] = schema
    with pytest.raises(InvalidArgumentError, match="nested more than 64"):
        COUNTER.count_tools(_tool(schema))


def test_count_tools_of_a_sound_schema_is_unchanged() -> None:
    params = {
        "type": "object",
        "properties": {"q": {"type": "string", "description": "query"}, "n": {"type": "integer"}},
        "required": ["q"],
    }
    text = wf.counting.render_tools(_tool(params))
    assert "q: string," in text and "n?: number," in text
    assert COUNTER.count_tools(_tool(params)) == len(tiktoken_o200k().encode(text))


# ----------------------------------------------------------------------------- no break points


@pytest.mark.parametrize("unit", ["z", "ACGTTGCAAGTC", "AAAA"])
@pytest.mark.parametrize("direction", ["head", "tail", "head_tail"])
def test_a_cut_of_text_without_break_points_is_exact(unit: str, direction: str) -> None:
    """One pre-tokenizer piece of 1.5 MB: the head cut reads only what it keeps (see the core's
    ``a_head_cut_inside_one_huge_piece_reads_only_what_it_keeps``); every cut stays exact."""
    text = unit * ((3 << 19) // len(unit))
    r = wf.truncate(text, 2000, counter=COUNTER, direction=direction)
    assert r.tokens == len(tiktoken_o200k().encode(r.text)) <= 2000
    assert COUNTER.count_until(text, 2000) is None
