"""An agent service on windowfit: one SQLite session per conversation, an agent and a router
reading it with their own budgets, tool outputs saved to files, a running summary made after
each reply, usage by model and day.

    python examples/agent_service.py                 # offline: a fake LLM and a fake tool
    python examples/agent_service.py --live          # an OpenAI-compatible endpoint, e.g.
        OPENAI_BASE_URL=https://dashscope.aliyuncs.com/compatible-mode/v1 OPENAI_API_KEY=...

The pieces, in the order a request meets them:

1. ``wf.Session(store, conversation_id)``: the full, append-only history and each reader's state,
   shared by every worker process that opens the same database.
2. The router (a small model, an 8,000-token window) reads the conversation as text:
   ``wf.render_history`` keeps the user's latest request (pinned, as ``fit`` pins it) and the
   newest turns within its budget, behind the router's own running summary.
3. The agent (``ContextManager(consumer="agent")``): ``session.prepare(agent)`` returns the
   prompt to send (system, summary, recent turns, oversized tool outputs cut) and saves the
   agent's state in the session.
4. A tool's output goes through ``ObservationTruncator``: the full output is saved to a file and
   the history carries a preview that names it.
5. The reply is appended; ``session.after_reply(agent)`` then makes the next summary in a
   background thread, so no request waits for a summary.
6. ``UsageTracker.record`` stores each call's usage in the same database; ``by_model`` and
   ``by_day`` report it.
7. At shutdown ``wf.wait_for_summaries()`` lets a summary in flight be saved before the store
   closes.

windowfit logs through the ``logging`` module under the ``windowfit`` logger and never
prints: route it with your handlers, or silence it with
``logging.getLogger("windowfit").setLevel(logging.ERROR)`` (see ``configure_logging``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import windowfit as wf

AGENT_MODEL = "qwen-max"
# the agent's share of qwen-max's 32k window in this service (the rest: other context the
# caller adds), small enough that a few requests with big tool outputs need a summary
AGENT_WINDOW = 8_000
ROUTER_MODEL = "qwen-turbo"
ROUTER_WINDOW = 8_000
SYSTEM = (
    "You are an operations agent for a web shop. Use the search_logs tool to look at the "
    "service logs before answering; answer in the user's language."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_logs",
            "description": "Search the service logs",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "words to find"}},
                "required": ["query"],
            },
        },
    }
]
QUESTIONS = [
    "订单服务今天早上为什么变慢了？",
    "Which worker handled the most failed jobs?",
    "支付回调有没有超时？",
    "Summarize what we found so far, in English.",
    "检查一下库存同步任务是否正常。",
    "Were there any errors after 10:30?",
    "哪个 worker 最忙？",
    "Anything unusual in the payment worker?",
]


def configure_logging(verbose: bool) -> None:
    """The library's records go to this process's handler; its INFO lines (what each fit
    left out, summaries made) only with --verbose. Libraries never configure logging
    themselves: this is the application's choice."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("windowfit").setLevel(logging.INFO if verbose else logging.WARNING)


# ------------------------------------------------------------------------------ the LLM side


@dataclass
class Reply:
    message: dict[str, Any]  # the assistant message, OpenAI format
    model: str
    prompt_tokens: int
    completion_tokens: int


class FakeLLM:
    """Offline stand-in for a chat-completions endpoint: asks for the tool once per user
    request, then answers from the tool's output. Usage is counted as a provider would."""

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, model: str, messages: list[Any], tools: Any = None) -> Reply:
        self.calls += 1
        counter = wf.Counter(model=model)
        last = messages[-1]
        if last["role"] == "user" and tools:
            query = str(last["content"])[:40]
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{self.calls}",
                        "type": "function",
                        "function": {
                            "name": "search_logs",
                            "arguments": json.dumps({"query": query}, ensure_ascii=False),
                        },
                    }
                ],
            }
        elif last["role"] == "user":  # the router: no tools, one word back
            message = {"role": "assistant", "content": "agent"}
        else:
            seen = str(last.get("content") or "").splitlines()
            message = {
                "role": "assistant",
                "content": f"From the logs ({len(seen)} lines shown): {seen[0][:80] if seen else '-'}",
            }
        prompt = counter.count_messages(messages) + counter.count_tools(tools)
        return Reply(message, model, prompt, counter.count_message(message))


class LiveLLM:
    """Any OpenAI-compatible endpoint through the official SDK (OPENAI_BASE_URL and
    OPENAI_API_KEY; DashScope's compatible mode for Qwen)."""

    def __init__(self) -> None:
        from openai import OpenAI

        self.client = OpenAI()

    def chat(self, model: str, messages: list[Any], tools: Any = None) -> Reply:
        kwargs = {"tools": tools} if tools else {}
        response = self.client.chat.completions.create(model=model, messages=messages, **kwargs)
        usage = response.usage
        return Reply(
            # the SDK's ChatCompletionMessage: windowfit and the session store take it as is
            response.choices[0].message.model_dump(mode="json", exclude_none=True),
            response.model,
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
        )


def search_logs(query: str, turn: int) -> str:
    """A fake tool with a big output: thousands of log lines."""
    return "".join(
        f"2026-01-0{1 + turn % 9}T10:{i // 60 % 60:02d}:{i % 60:02d}Z worker-{i % 7} "
        f"{'ERROR' if i % 97 == 0 else 'INFO'} job {i} ({query[:20]}) took {i * 37 % 900} ms\n"
        for i in range(4000)
    )


# ------------------------------------------------------------------------------ the service


class AgentService:
    """One process's view of the service: the store, the two readers, the tool and usage."""

    def __init__(self, db: Path, tool_dir: Path, llm: Any) -> None:
        self.store = wf.SQLiteStore(db)
        self.llm = llm
        self.usage = wf.UsageTracker(self.store)
        self.agent = wf.ContextManager(
            model=AGENT_MODEL, context_window=AGENT_WINDOW, consumer="agent"
        )
        self.router = wf.ContextManager(
            model=ROUTER_MODEL, context_window=ROUTER_WINDOW, consumer="router"
        )
        self.tool_outputs = wf.ObservationTruncator(max_tokens=1_500, output_dir=tool_dir)

    def handle(self, conversation_id: str, text: str) -> str:
        session = wf.Session(self.store, conversation_id)
        # summaries after the reply, made in the background (registering again replaces it)
        session.after_reply(self.agent)
        if not session.exists():
            session.append({"role": "system", "content": SYSTEM})
        session.append({"role": "user", "content": text})
        route = self.route(session)
        if route != "agent":
            return f"(routed to {route})"
        while True:
            prepared = session.prepare(self.agent, tools=TOOLS)
            reply = self.llm.chat(AGENT_MODEL, prepared.messages, TOOLS)
            self.usage.record(
                reply.model,
                reply.prompt_tokens,
                reply.completion_tokens,
                session_id=conversation_id,
                estimated_prompt_tokens=prepared.tokens,
            )
            calls = reply.message.get("tool_calls") or []
            session.append(reply.message)  # a final reply starts the background summary
            if not calls:
                return str(reply.message.get("content") or "")
            for call in calls:
                args = json.loads(call["function"]["arguments"] or "{}")
                output = search_logs(args.get("query", ""), len(session.messages))
                cut = self.tool_outputs.truncate("search_logs", output)
                session.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": cut["preview"]}
                )

    def route(self, session: wf.Session) -> str:
        """The router's call: the conversation as text within its budget, behind its summary."""
        summary = (session.consumer_state("router") or {}).get("summary") or (
            session.consumer_state("agent") or {}
        ).get("summary")
        budget = self.router.context_window - self.router.output_reserve - 200
        view = wf.render_history(session.messages, budget, model=ROUTER_MODEL, summary=summary)
        prompt = [
            {"role": "system", "content": "Answer 'agent' or 'human'."},
            {"role": "user", "content": view},
        ]
        reply = self.llm.chat(ROUTER_MODEL, prompt)
        self.usage.record(
            reply.model, reply.prompt_tokens, reply.completion_tokens, session_id=session.id
        )
        return "human" if "human" in str(reply.message.get("content")) else "agent"

    def report(self, conversation_id: str) -> dict[str, Any]:
        session = wf.Session(self.store, conversation_id)
        agent_state = session.consumer_state("agent") or {}
        return {
            "messages": len(session.messages),
            "summary": (agent_state.get("summary") or "")[:300],
            "summarized_messages": agent_state.get("summarized_messages", 0),
            "usage_by_model": self.usage.by_model(),
            "usage_by_day": self.usage.by_day(),
        }

    def close(self) -> None:
        # a summary still being made is saved before the store closes
        if not wf.wait_for_summaries(timeout=60):
            logging.getLogger(__name__).warning("a background summary did not finish in 60 s")
        self.store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", action="store_true", help="call a real endpoint (openai SDK)")
    parser.add_argument("--db", help="SQLite file (default: a temporary one)")
    parser.add_argument("--turns", type=int, default=len(QUESTIONS), help="user requests")
    parser.add_argument("--verbose", action="store_true", help="show windowfit's INFO logs")
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(args.db) if args.db else Path(tmp) / "sessions.db"
        service = AgentService(db, Path(tmp) / "tool-output", LiveLLM() if args.live else FakeLLM())
        try:
            for i in range(args.turns):
                question = QUESTIONS[i % len(QUESTIONS)]
                answer = service.handle("conversation-1", question)
                print(f"USER: {question}\nAGENT: {answer[:120]}\n")
            wf.wait_for_summaries(timeout=60)
            report = service.report("conversation-1")
        finally:
            service.close()
    print(f"history: {report['messages']} messages; summary of {report['summarized_messages']}")
    print(f"summary: {report['summary'] or '(none yet)'}")
    for model, totals in report["usage_by_model"].items():
        print(
            f"usage {model}: {totals['calls']} calls, {totals['prompt_tokens']:,} prompt + "
            f"{totals['completion_tokens']:,} completion tokens, ${totals['cost']:.4f}"
        )
    for day, totals in report["usage_by_day"].items():
        print(f"usage on {day}: {totals['total_tokens']:,} tokens, ${totals['cost']:.4f}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    sys.exit(main())
