"""Anthropic integration, offline: the real SDK talking to a Messages API stand-in on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import pytest
import windowfit as wf
from _pairing import anthropic_problems
from windowfit.integrations.anthropic import AnthropicWindow, count_tokens
from windowfit.store import MemoryStore
from windowfit.usage import UsageTracker

MODEL = "claude-haiku-4-5"
CHARS_PER_TOKEN = 2.0  # the stand-in's "true" tokenizer: denser than windowfit's estimate (~2.7)


def true_tokens(body: dict[str, Any]) -> int:
    payload = json.dumps(
        [body.get("system"), body["messages"], body.get("tools")], ensure_ascii=False
    )
    return int(len(payload) / CHARS_PER_TOKEN)


class MessagesAPI(BaseHTTPRequestHandler):
    """POST /v1/messages: records the request, answers with a tool call or text, and bills
    ``true_tokens`` of the request, the first ~80% of it read from the prompt cache."""

    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        n = len(self.requests)
        self.requests.append(body)
        total = true_tokens(body)
        read = int(total * 0.8) if n else 0
        write = total - read if n % 5 == 0 else 0
        last = body["messages"][-1]
        answered = isinstance(last["content"], list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        )
        if answered or not body.get("tools"):
            content = [{"type": "text", "text": f"answer {n}"}]
        else:
            content = [
                {"type": "text", "text": "reading"},
                {
                    "type": "tool_use",
                    "id": f"toolu_{n}",
                    "name": "read_file",
                    "input": {"path": f"f{n}"},
                },
            ]
        reply = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if content[-1]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": total - read - write,
                "output_tokens": 12,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": write,
            },
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def api() -> Iterator[str]:
    MessagesAPI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), MessagesAPI)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def file_text(path: str) -> str:
    return " ".join(f"{path}-line{i} value={i * 7}" for i in range(300))


def test_agent_loop_fits_calibrates_and_records_usage(api: str) -> None:
    client = anthropic.Anthropic(base_url=api, api_key="test", max_retries=0)
    counter = wf.Counter(model=MODEL)  # a fresh estimate: calibration starts at 1.0
    tracker = UsageTracker(MemoryStore())
    budget = 12_000
    win = AnthropicWindow(MODEL, counter=counter, tracker=tracker, budget=budget, session_id="s1")
    system = "You read files for the user."
    messages: list[dict[str, Any]] = []
    errors: list[float] = []
    for turn in range(40):
        messages.append({"role": "user", "content": f"read file {turn}"})
        while True:
            kwargs = win.request(messages, system=system, tools=TOOLS, max_tokens=512)
            assert win.last_estimate <= budget
            estimate = win.last_estimate
            response = client.messages.create(**kwargs)
            win.record(response)
            actual = true_tokens(MessagesAPI.requests[-1])
            errors.append(abs(estimate - actual) / actual)
            messages.append(
                {"role": "assistant", "content": response.content}
            )  # SDK blocks, as clients do
            calls = [b for b in response.content if b.type == "tool_use"]
            if not calls:
                break
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": c.id,
                            "content": file_text(c.input["path"]),
                        }
                        for c in calls
                    ],
                }
            )
    sent = MessagesAPI.requests
    for body in sent:
        assert body["messages"][0]["role"] == "user"
        assert anthropic_problems(body["messages"]) == []
    assert len(sent[-1]["messages"]) < len(messages)  # it did have to fit
    # calibration: the estimate learned the stand-in's denser tokenizer
    assert counter.calibration > 1.05
    assert sum(errors[-10:]) / 10 < sum(errors[:3]) / 3
    # usage: every call recorded, cache parts kept apart, prompt = all input tokens
    totals = tracker.totals(session_id="s1")
    assert totals["calls"] == len(sent)
    assert totals["prompt_tokens"] == sum(true_tokens(b) for b in sent)
    assert totals["cached_tokens"] == sum(int(true_tokens(b) * 0.8) for b in sent[1:])
    assert totals["cache_write_tokens"] > 0 and totals["cost"] > 0


def test_create_and_acreate(api: str) -> None:
    win = AnthropicWindow(MODEL, counter=wf.Counter(model=MODEL))
    msgs = [{"role": "user", "content": "hello"}]
    response = win.create(
        anthropic.Anthropic(base_url=api, api_key="t", max_retries=0), msgs, max_tokens=64
    )
    assert response.content[0].text == "answer 0"
    assert win.counter.calibration != 1.0  # calibrated without a tracker too

    async def main() -> Any:
        async with anthropic.AsyncAnthropic(base_url=api, api_key="t", max_retries=0) as client:
            return await win.acreate(
                client, msgs, system=[{"type": "text", "text": "sys"}], max_tokens=64
            )

    assert asyncio.run(main()).content[0].text == "answer 1"
    assert MessagesAPI.requests[1]["system"] == [{"type": "text", "text": "sys"}]


def test_create_and_acreate_are_one_body(api: str) -> None:
    """The twins send the same fitted request and record alike; only the client differs."""
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 400}
        for i in range(30)
    ]
    kwargs: dict[str, Any] = {"system": "Be brief.", "max_tokens": 64}
    sync_win = AnthropicWindow(MODEL, counter=wf.Counter(model=MODEL), budget=1500)
    sync_win.create(
        anthropic.Anthropic(base_url=api, api_key="t", max_retries=0), history, **kwargs
    )

    async def main() -> Any:
        async with anthropic.AsyncAnthropic(base_url=api, api_key="t", max_retries=0) as client:
            return await async_win.acreate(client, history, **kwargs)

    async_win = AnthropicWindow(MODEL, counter=wf.Counter(model=MODEL), budget=1500)
    asyncio.run(main())
    sent_sync, sent_async = MessagesAPI.requests[-2:]
    assert sent_sync == sent_async
    assert len(sent_sync["messages"]) < len(history)  # fitted, not sent whole
    assert sync_win.last_estimate == async_win.last_estimate
    assert sync_win.counter.calibration == async_win.counter.calibration != 1.0


def _long_history() -> list[Any]:
    """40 question/answer turns of file text and a last question: past a 6,000-token window."""
    messages: list[Any] = []
    for i in range(40):
        messages += [
            {"role": "user", "content": f"question {i}: " + file_text(str(i))[:600]},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]},
        ]
    messages.append({"role": "user", "content": "last question"})
    return messages


def _recalled(message: dict) -> bool:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return "[Recalled from earlier" in text or "【回忆" in text


def test_prepare_with_summaries_puts_the_summary_in_system() -> None:
    win = AnthropicWindow(MODEL, summarize=True, context_window=6000, output_reserve=500)
    messages = _long_history()
    system, window, state = win.prepare(messages, system="Be brief.")
    assert (
        isinstance(system, str)
        and system.startswith("Be brief.\n\n")
        and state["summary"] in system
    )
    # the caller's own objects, but for the stamped first message of a recalled unit
    assert window[-1] is messages[-1]
    assert all(any(w is m for m in messages) or _recalled(w) for w in window)
    assert window[0]["role"] == "user"
    assert count_tokens(window, system=system, counter=win.counter) <= 6000 - 500
    system2, window2, state2 = asyncio.run(
        win.aprepare(messages, system=[{"type": "text", "text": "Be brief."}], state=state)
    )
    assert (
        system2[0] == {"type": "text", "text": "Be brief."}
        and state2["summary"] in system2[1]["text"]
    )
    with pytest.raises(ValueError):
        AnthropicWindow(MODEL).prepare(messages)


def test_prepare_and_aprepare_are_one_body() -> None:
    """Same history, same state in: the twins give the same system, window and state."""
    messages = _long_history()

    def window() -> AnthropicWindow:
        return AnthropicWindow(MODEL, summarize=True, context_window=6000, output_reserve=500)

    sync_win, async_win = window(), window()
    sync = sync_win.prepare(messages, system="Be brief.")
    asyn = asyncio.run(async_win.aprepare(messages, system="Be brief."))
    assert sync[0] == asyn[0] and sync[1] == asyn[1]
    assert sync[2]["summary"] == asyn[2]["summary"]
    assert sync_win.last_estimate == async_win.last_estimate
    timings = {k for k in sync_win.last_stats if k.endswith("_ms")}
    assert {k: v for k, v in sync_win.last_stats.items() if k not in timings} == {
        k: v for k, v in async_win.last_stats.items() if k not in timings
    }
    with pytest.raises(ValueError, match="^prepare and aprepare need a manager"):
        AnthropicWindow(MODEL).prepare(messages)
    with pytest.raises(ValueError, match="^prepare and aprepare need a manager"):
        asyncio.run(AnthropicWindow(MODEL).aprepare(messages))
