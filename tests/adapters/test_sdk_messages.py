"""Messages as the OpenAI and Anthropic SDKs hand them over (pydantic objects) are accepted
wherever dicts are, and count exactly as the equivalent hand-written dicts do.

The objects are built offline with the SDKs' own models, from payloads shaped like the
APIs' responses (what ``client.chat.completions.create`` / ``client.messages.create``
return)."""

from __future__ import annotations

from typing import Any

import pytest
import windowfit as wf

openai_types = pytest.importorskip("openai.types.chat")
anthropic_types = pytest.importorskip("anthropic.types")

COUNTER = wf.Counter(model="gpt-4o")


def _completion_message(content: str | None, calls: list[tuple[str, str, str]]) -> Any:
    """``ChatCompletion.choices[0].message`` of a response payload."""
    payload = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if calls else "stop",
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in calls
                    ]
                    or None,
                },
            }
        ],
    }
    return openai_types.ChatCompletion.model_validate(payload).choices[0].message


def _openai_history() -> tuple[list[Any], list[dict[str, Any]]]:
    """A tool round with SDK objects, and the same history as plain OpenAI dicts."""
    call = _completion_message(None, [("call_1", "ls", '{"path": "."}')])
    answer = _completion_message("Two files: a.py and b.py.", [])
    head = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in the folder?"},
    ]
    result = {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"}
    sdk = [*head, call, result, answer]
    plain = [
        *head,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        result,
        {"role": "assistant", "content": "Two files: a.py and b.py."},
    ]
    return sdk, plain


def _anthropic_history() -> tuple[list[Any], list[dict[str, Any]]]:
    response = anthropic_types.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 9},
        }
    )
    question = {"role": "user", "content": "What is in the folder?"}
    # MessageParam is a TypedDict; its content may hold the response's block objects
    result: anthropic_types.MessageParam = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py b.py"}],
    }
    blocks = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
    ]
    sdk = [question, response, result, {"role": "assistant", "content": response.content}]
    plain = [
        question,
        {"role": "assistant", "content": blocks},
        dict(result),
        {"role": "assistant", "content": blocks},
    ]
    return sdk, plain


HISTORIES = {"openai": _openai_history, "anthropic": _anthropic_history}


@pytest.fixture(params=sorted(HISTORIES))
def histories(request: pytest.FixtureRequest) -> tuple[list[Any], list[dict[str, Any]]]:
    return HISTORIES[request.param]()


def test_counts_equal_the_plain_dicts(histories: tuple[list[Any], list[Any]]) -> None:
    sdk, plain = histories
    assert COUNTER.count_each_message(sdk) == COUNTER.count_each_message(plain)
    assert COUNTER.count_messages(sdk) == COUNTER.count_messages(plain)
    assert [COUNTER.count_message(m) for m in sdk] == [COUNTER.count_message(m) for m in plain]


def test_fit_and_repair_keep_the_sdk_objects(histories: tuple[list[Any], list[Any]]) -> None:
    sdk, plain = histories
    for budget in (40, 60, 10_000):
        ours, ref = wf.fit(sdk, budget, counter=COUNTER), wf.fit(plain, budget, counter=COUNTER)
        assert (ours.kept, ours.tokens) == (ref.kept, ref.tokens)
        assert all(m is sdk[i] for m, i in zip(ours.messages, ours.kept))
    broken = sdk[:-2]  # the call's result is missing: repair drops (or strips) the call
    assert wf.repair(broken, counter=COUNTER).kept == wf.repair(plain[:-2], counter=COUNTER).kept
    stripped = wf.repair(broken, unanswered="strip", counter=COUNTER)
    assert stripped.messages == wf.repair(plain[:-2], unanswered="strip", counter=COUNTER).messages


def test_render_history_reads_them(histories: tuple[list[Any], list[Any]]) -> None:
    sdk, plain = histories
    for budget in (30, 200):
        assert wf.render_history(sdk, budget, counter=COUNTER) == wf.render_history(
            plain, budget, counter=COUNTER
        )


def test_the_manager_prepares_them(histories: tuple[list[Any], list[Any]]) -> None:
    sdk, plain = histories
    cm = wf.ContextManager(model="gpt-4o", summarizer=None)
    ours, ref = cm.prepare(sdk), cm.prepare(plain)
    assert ours.tokens == ref.tokens and len(ours.messages) == len(ref.messages)


def test_other_objects_still_name_the_message() -> None:
    with pytest.raises(wf.MessageTypeError, match="message 1"):
        COUNTER.count_messages([{"role": "user", "content": "hi"}, object()])
