"""The invariants every prepared prompt must satisfy (``check_prompt``) and the conversations
the manager tests build (``conversation``), shared by the manager, session and summary tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from windowfit.context import ContextManager, Prepared

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def check_prompt(
    cm: ContextManager,
    history: Sequence[Mapping[str, Any]],
    p: Prepared,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Every invariant of a prepared prompt."""
    c = cm.counter
    tools_tokens = c.count_tools(tools) if tools else 0
    sent = p.messages
    # budget: exact count, within the window minus the reply reserve and the tool schemas
    assert c.count_messages(sent) == p.stats["tokens"] if sent else p.stats["tokens"] == 0
    assert p.stats["tokens"] + tools_tokens <= cm.context_window - cm.output_reserve
    # every system message and the latest user message are sent, as the input objects
    ids = {id(m) for m in sent}
    for m in history:
        if m.get("role") in ("system", "developer"):
            assert id(m) in ids, "a system message is missing"
    users = [m for m in history if m.get("role") == "user"]
    if users:
        assert id(users[-1]) in ids, "the latest user message is missing"
    # no orphans: each tool result follows its call; each call has all its results
    pending: set[str] = set()
    for m in sent:
        if m.get("role") == "tool":
            assert m.get("tool_call_id") in pending, "orphan tool result"
            pending.discard(m["tool_call_id"])
        else:
            assert not pending, "a tool call without all its results"
            pending = {tc["id"] for tc in m.get("tool_calls") or ()}
    assert not pending, "a trailing tool call without results"
    # history messages keep their order; new dicts are only the summary and truncated outputs
    position = {id(m): k for k, m in enumerate(history)}
    last = -1
    by_call = {m.get("tool_call_id"): k for k, m in enumerate(history) if m.get("role") == "tool"}
    # a recalled block (stamped first message, then the unit's own messages) sits out of order
    # just before the latest user message; each unit is a span of evicted history
    recalled = {
        id(history[k]) for u in p.stats.get("recalled", ()) for k in range(u["start"], u["end"])
    }
    for m in sent:
        if id(m) in recalled or str(m.get("content", "")).startswith(
            ("[Recalled from earlier", "【回忆")
        ):
            continue
        if id(m) in position:
            if m.get("role") not in ("system", "developer"):
                assert position[id(m)] > last, "history order broken"
                last = position[id(m)]
        elif m.get("role") == "tool":
            original = history[by_call[m["tool_call_id"]]]
            assert original["content"] != m["content"], "a copied tool message must be a truncation"
            assert position[id(original)] > last
            last = position[id(original)]
        else:
            assert str(m.get("content", "")).startswith(("[Summary", "【")) or (
                m.get("role") == "assistant" and p.stats["has_summary"]
            ), f"unexpected new message {m!r}"
    # the state round-trips through JSON
    assert json.loads(json.dumps(p.state)) == p.state
    st_ = p.state
    assert 0 <= st_["summarized_until"] <= st_["cut"] <= len(history)


def conversation(
    rounds: int, *, words: int = 30, tools_every: int = 3, big: int = 0
) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [dict(SYSTEM)]
    for r in range(rounds):
        msgs.append(
            {
                "role": "user",
                "content": f"Question {r}: " + "word " * words + f"ticket T-{1000 + r}",
            }
        )
        if tools_every and r % tools_every == 0:
            cid = f"call_{r}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "lookup", "arguments": json.dumps({"q": r})},
                        }
                    ],
                }
            )
            msgs.append(
                {"role": "tool", "tool_call_id": cid, "content": "result line\n" * (big or words)}
            )
        msgs.append({"role": "assistant", "content": f"Answer {r}: " + "text " * words})
    return msgs
