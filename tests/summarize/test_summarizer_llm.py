"""LLMSummarizer against a real chat-completions HTTP server on loopback (tests/_chat_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest
from _chat_server import ChatServer, Hangup, Raw, Reply, Slow, Status
from windowfit.context import ContextManager
from windowfit.summarize import LLMSummarizer, SummaryError

MESSAGES = [
    {"role": "system", "content": "SYSTEM PROMPT must not be sent to the summarizer"},
    {"role": "user", "content": "Remember classId=C-4821 and the file exports/grades_2024.csv."},
    {"role": "assistant", "content": "Noted."},
]
ZH_MESSAGES = [{"role": "user", "content": "请记住：班级编号 C-7305，学号 2023011234。"}]


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture()
def srv(server: ChatServer) -> ChatServer:
    server.clear()
    return server


def _summarizer(srv: ChatServer, **kw: object) -> LLMSummarizer:
    kw.setdefault("timeout", 2.0)
    kw.setdefault("max_retries", 2)
    return LLMSummarizer(model="summ-model", base_url=srv.base_url, api_key="test-key", **kw)


def _summarize(s: LLMSummarizer, msgs=MESSAGES, previous: str = "", target: int = 120) -> str:
    return s(msgs, previous_summary=previous, target_tokens=target, language="auto")


def test_request_is_a_chat_completion_with_the_structured_prompt(srv: ChatServer) -> None:
    srv.script(Reply("## Goal\n- grades (classId=C-4821)"))
    out = _summarize(_summarizer(srv), previous="## Goal\n- earlier goal", target=150)
    assert out == "## Goal\n- grades (classId=C-4821)"
    (req,) = srv.chat_requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"].get("authorization") == "Bearer test-key"
    body = req["body"]
    assert body["model"] == "summ-model"
    assert body["temperature"] == 0.2
    assert body["max_tokens"] >= 150
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "earlier goal" in user["content"]  # incremental: the previous summary is an input
    assert "classId=C-4821" in user["content"]
    assert "SYSTEM PROMPT" not in user["content"]
    assert (
        "## Other key facts and identifiers" in user["content"]
        and "Write in English" in user["content"]
    )


def test_chinese_conversation_gets_the_chinese_prompt(srv: ChatServer) -> None:
    srv.script(Reply("## 任务目标\n- 记住 C-7305"))
    assert _summarize(_summarizer(srv), msgs=ZH_MESSAGES) == "## 任务目标\n- 记住 C-7305"
    user = srv.chat_requests[0]["body"]["messages"][1]["content"]
    assert "请将以下对话历史压缩为结构化摘要" in user and "## 任务目标" in user and "C-7305" in user


def test_retries_server_errors_with_backoff(srv: ChatServer) -> None:
    srv.script(Status(500, retry_after_ms=20), Status(503, retry_after_ms=20), Reply("recovered"))
    assert _summarize(_summarizer(srv, max_retries=2)) == "recovered"
    assert len(srv.chat_requests) == 3
    gaps = [b["time"] - a["time"] for a, b in zip(srv.chat_requests, srv.chat_requests[1:])]
    assert all(g >= 0.015 for g in gaps)  # Retry-After honoured between attempts


def test_rate_limit_is_retried(srv: ChatServer) -> None:
    srv.script(Status(429, "slow down", retry_after_ms=10), Reply("ok after 429"))
    assert _summarize(_summarizer(srv)) == "ok after 429"
    assert len(srv.chat_requests) == 2


def test_exhausted_retries_raise_the_status_error(srv: ChatServer) -> None:
    srv.script(*[Status(502, retry_after_ms=5)] * 3)
    with pytest.raises(openai.InternalServerError):
        _summarize(_summarizer(srv, max_retries=2))
    assert len(srv.chat_requests) == 3


def test_client_errors_are_not_retried(srv: ChatServer) -> None:
    srv.script(Status(400, "bad request"))
    with pytest.raises(openai.BadRequestError):
        _summarize(_summarizer(srv))
    assert len(srv.chat_requests) == 1
    srv.script(Status(401, "no key"))
    with pytest.raises(openai.AuthenticationError):
        _summarize(_summarizer(srv))


def test_slow_responses_time_out(srv: ChatServer) -> None:
    """The server does answer, 60 s later: only the client's own timeout can raise here, on
    both attempts (a retry after the first timeout). No wall-clock bound needed."""
    srv.script(Slow(60.0, "too late"), Slow(60.0, "too late"))
    with pytest.raises(openai.APITimeoutError):
        _summarize(_summarizer(srv, timeout=0.3, max_retries=1))
    assert len(srv.chat_requests) == 2


def test_slow_but_in_time_succeeds(srv: ChatServer) -> None:
    srv.script(Slow(0.3, "late but fine"))
    assert _summarize(_summarizer(srv, timeout=2.0)) == "late but fine"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (Reply(""), "empty"),
        (Reply("   \n"), "empty"),
        (Reply(None), "no text"),
        (Reply("half a summ", finish_reason="length"), "cut off"),
        (Reply(None, refusal="I can't help with that"), "refused"),
        (Reply("<think>only thinking</think>"), "empty"),
    ],
)
def test_unusable_answers_raise_summary_error(srv: ChatServer, action: Reply, message: str) -> None:
    srv.script(action)
    with pytest.raises(SummaryError, match=message):
        _summarize(_summarizer(srv))


@pytest.mark.parametrize("language", [None, "zh"])
def test_sync_and_async_twins_send_the_same_request(srv: ChatServer, language: str | None) -> None:
    """``__call__`` and ``asummarize`` are one operation: same request, same answer, same error."""
    s = _summarizer(srv, language=language)
    previous = "## Goal\n- grade the exports"
    srv.script(Reply("<think>x</think> summary"), Reply("<think>x</think> summary"))
    sync = s(MESSAGES, previous_summary=previous, target_tokens=80, language="en")
    asyn = asyncio.run(
        s.asummarize(MESSAGES, previous_summary=previous, target_tokens=80, language="en")
    )
    assert sync == asyn == "summary"
    first, second = srv.chat_requests
    assert first["body"] == second["body"]
    srv.script(Reply("cut", finish_reason="length"), Reply("cut", finish_reason="length"))
    with pytest.raises(SummaryError, match="cut off"):
        _summarize(s)
    with pytest.raises(SummaryError, match="cut off"):
        asyncio.run(s.asummarize(MESSAGES, previous_summary="", target_tokens=120))


def test_reasoning_blocks_are_stripped(srv: ChatServer) -> None:
    srv.script(Reply("<think>let me think about C-4821</think>\n## Goal\n- the real summary"))
    assert _summarize(_summarizer(srv)) == "## Goal\n- the real summary"


def test_connection_drop_is_an_error(srv: ChatServer) -> None:
    srv.script(Hangup(), Hangup())
    with pytest.raises(openai.APIConnectionError):
        _summarize(_summarizer(srv, max_retries=1))


def test_malformed_json_is_an_error(srv: ChatServer) -> None:
    srv.script(Raw('{"choices": []}'))
    with pytest.raises(SummaryError):
        _summarize(_summarizer(srv))


def test_reasoning_models_get_max_completion_tokens(srv: ChatServer) -> None:
    srv.script(Reply("ok"))
    s = LLMSummarizer(model="o3-mini", base_url=srv.base_url, api_key="k", timeout=2, max_retries=0)
    _summarize(s)
    body = srv.chat_requests[0]["body"]
    assert (
        "max_completion_tokens" in body and "max_tokens" not in body and "temperature" not in body
    )


def test_given_clients_are_used(srv: ChatServer) -> None:
    client = openai.OpenAI(base_url=srv.base_url, api_key="given", max_retries=0)
    srv.script(Reply("from a given client"))
    assert _summarize(LLMSummarizer(client, model="m")) == "from a given client"
    assert srv.chat_requests[0]["headers"]["authorization"] == "Bearer given"

    aclient = openai.AsyncOpenAI(base_url=srv.base_url, api_key="given-async", max_retries=0)
    s = LLMSummarizer(aclient, model="m")
    srv.script(Reply("async client, sync call"), Reply("async client, async call"))
    assert _summarize(s) == "async client, sync call"
    out = asyncio.run(s.asummarize(MESSAGES, previous_summary="", target_tokens=100, language="en"))
    assert out == "async client, async call"


def test_async_summaries_and_retries(srv: ChatServer) -> None:
    s = _summarizer(srv)
    srv.script(Status(500, retry_after_ms=10), Reply("async ok"))

    async def main() -> str:
        return await s.asummarize(MESSAGES, previous_summary="", target_tokens=100, language="en")

    assert asyncio.run(main()) == "async ok"
    # a second event loop gets its own client (connection pools are bound to a loop)
    srv.script(Reply("second loop"))
    assert asyncio.run(main()) == "second loop"
    srv.script(Slow(3.0))
    slow = _summarizer(srv, timeout=0.3, max_retries=0)
    with pytest.raises(openai.APITimeoutError):
        asyncio.run(
            slow.asummarize(MESSAGES, previous_summary="", target_tokens=100, language="en")
        )


def test_configuration_from_environment(srv: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINDOWFIT_SUMMARY_MODEL", "env-model")
    monkeypatch.setenv("WINDOWFIT_SUMMARY_BASE_URL", srv.base_url)
    monkeypatch.setenv("WINDOWFIT_SUMMARY_API_KEY", "env-key")
    monkeypatch.setenv("WINDOWFIT_SUMMARY_REQUEST_TIMEOUT", "1.5")
    monkeypatch.setenv("WINDOWFIT_SUMMARY_MAX_RETRIES", "0")
    s = LLMSummarizer()
    assert (s.model, s.timeout, s.max_retries) == ("env-model", 1.5, 0)
    srv.script(Reply("env ok"))
    assert _summarize(s) == "env ok"
    req = srv.chat_requests[0]
    assert (
        req["body"]["model"] == "env-model" and req["headers"]["authorization"] == "Bearer env-key"
    )
    # arguments win over the environment
    assert LLMSummarizer(model="arg-model", timeout=9).model == "arg-model"
    monkeypatch.setenv("WINDOWFIT_SUMMARY_REQUEST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="WINDOWFIT_SUMMARY"):
        LLMSummarizer()


def test_local_servers_need_no_key(srv: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("WINDOWFIT_SUMMARY_API_KEY", raising=False)
    srv.script(Reply("no key needed"))
    s = LLMSummarizer(model="llama3", base_url=srv.base_url, max_retries=0)
    assert _summarize(s) == "no key needed"


def test_manager_with_llm_summarizer_end_to_end(srv: ChatServer) -> None:
    """A real HTTP summarizer behind the manager: summaries land, an outage falls back, recovery."""
    from windowfit.cli.showcase import simulate_session

    session = simulate_session(60, seed=11)
    summarizer = _summarizer(srv, timeout=2.0, max_retries=0)
    cm = ContextManager(
        model="gpt-4o",
        context_window=6000,
        output_reserve=1000,
        summarizer=summarizer,
        preference="quality",
    )
    healthy = srv.default
    state = None
    made = failed = 0
    made_after_outage = 0
    try:
        for k, (_, history) in enumerate(session.prefixes()):
            # the endpoint is down for a while in the middle of the session
            srv.default = (lambda body: Status(503, "down")) if 40 <= k < 60 else healthy
            p = cm.prepare(history, state)
            assert p.stats["tokens"] <= cm.context_window - cm.output_reserve
            assert cm.counter.count_messages(p.messages) == p.stats["tokens"]
            if p.stats["summary_failed"]:
                failed += 1
                assert 40 <= k < 60
                assert p.state["summary"] == (state or {}).get("summary", "")
                assert "503" not in p.state["summary"] and "down" not in p.state["summary"]
            elif p.stats["summary_triggered"]:
                made += 1
                made_after_outage += k >= 60
                assert p.state["summary"].startswith("## Summary")  # what the server answered
            state = p.state
    finally:
        srv.default = healthy
    assert made >= 3 and made_after_outage >= 1
    assert failed >= 1
    assert state is not None and state["failures"] == 0  # recovered after the outage
    # every request carried the previous summary: incremental
    bodies = [r["body"]["messages"][1]["content"] for r in srv.chat_requests]
    assert any("## Summary" in b for b in bodies[1:])
