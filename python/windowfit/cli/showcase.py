"""``windowfit demo``: count, fit, truncate, then manage a long simulated agent session.

Fully offline and deterministic. Output goes through ``rich`` when it is installed, plain
text otherwise. :func:`simulate_session` (the multilingual agent session with tool calls, big
tool outputs and planted facts) is also what the test-suite runs the manager against.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from importlib import resources
from typing import Any

from windowfit.cli._output import Out as _Out
from windowfit.cli.simulated_session import (  # the session's names: re-exported
    PLANTED_FACTS,
    SimulatedSession,
    session_from_history,
    simulate_session,
)

__all__ = [
    "PLANTED_FACTS",
    "SimulatedSession",
    "run_demo",
    "session_from_history",
    "simulate_session",
]

# ---------------------------------------------------------------------------------------------
# Output: the command line's (rich when available, plain text otherwise)
# ---------------------------------------------------------------------------------------------


def _sample_text() -> str:
    try:
        return (
            resources.files("windowfit").joinpath("data/sample_multilingual.txt").read_text("utf-8")
        )
    except (FileNotFoundError, ModuleNotFoundError, OSError):  # pragma: no cover - broken install
        return "Hello, world! 你好，世界！こんにちは世界。 def f(x): return x * 2  🚀"


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------


def _counting_table(
    history: Sequence[dict[str, Any]] | None = None,
) -> tuple[list[str], list[list[Any]]] | None:
    """The counting comparison of the bundled multilingual sample, or of ``history`` (its
    messages counted as a prompt): ``(columns, rows)``, every tokenizer available offline."""
    import windowfit as wf

    text = _sample_text()

    def count(counter: Any) -> int:
        if history is None:
            return int(counter.count(text))
        return int(counter.count_messages(list(history)))

    rows: list[list[Any]] = []
    candidates: list[tuple[str, Any]] = [
        ("gpt-4o (o200k_base)", lambda: wf.Counter(model="gpt-4o")),
        ("gpt-4 (cl100k_base)", lambda: wf.Counter(model="gpt-4")),
        ("qwen-max", lambda: wf.Counter(model="qwen-max")),
        ("deepseek-chat", lambda: wf.Counter(model="deepseek-chat")),
        ("claude-sonnet-4 (estimate)", lambda: wf.Counter(model="claude-sonnet-4")),
    ]
    for label, make in candidates:
        try:
            counter = make()
            t0 = time.perf_counter()
            tokens = count(counter)
            cold = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            count(counter)
            warm = (time.perf_counter() - t0) * 1000
        except Exception as exc:  # noqa: BLE001 - an optional tokenizer may be missing
            rows.append([label, "-", "-", f"unavailable ({type(exc).__name__})", "-"])
            continue
        rows.append(
            [
                label,
                f"{tokens:,}",
                "exact" if counter.is_exact else "estimate",
                f"{cold:.2f} ms",
                f"{warm * 1000:.0f} µs",
            ]
        )
    columns = ["tokenizer", "tokens", "kind", "first count", "cached"]
    return columns, rows


def _fit_section(out: _Out, session: SimulatedSession, whole: bool = False) -> None:
    import windowfit as wf

    counter = wf.Counter(model="gpt-4o")
    # the sample: the history as the agent sees it when a new user request arrives (about
    # turn 50); a user's own history: all of it
    asks = [k for k in session.calls[:121] if session.messages[k - 1]["role"] == "user"]
    history = session.messages if whole or not asks else session.messages[: max(asks)]
    total = counter.count_messages(history)
    out.line(
        f"A history of {len(history)} messages, {total:,} tokens, fitted to a few budgets "
        "(system + latest user pinned, tool calls never split):"
    )
    rows = []
    for budget in (2_000, 8_000, 32_000, 128_000):
        t0 = time.perf_counter()
        r = wf.fit(history, budget, counter=counter)
        ms = (time.perf_counter() - t0) * 1000
        rows.append(
            [
                f"{budget:,}",
                len(r.kept),
                len(r.dropped),
                f"{r.tokens:,}",
                r.stats.get("stop_reason", ""),
                f"{ms:.2f} ms",
            ]
        )
    out.table(["budget", "kept", "dropped", "tokens", "stop", "time"], rows)


def _truncate_section(out: _Out, session: SimulatedSession) -> None:
    import windowfit as wf

    counter = wf.Counter(model="gpt-4o")
    texts = [m["content"] for m in session.messages if isinstance(m.get("content"), str)]
    tool_texts = [m["content"] for m in session.messages if m.get("role") == "tool"]
    candidates = [t for t in tool_texts if isinstance(t, str)] or texts
    if not candidates:
        out.line("(no text message to truncate)")
        return
    text = max(candidates, key=len)
    truncate = getattr(wf, "truncate", None)
    if truncate is None:
        out.line("(truncate is not available in this build)")
        return
    out.line(
        f"The biggest {'tool output' if tool_texts else 'message'} of the session: {counter.count(text):,} tokens, "
        f"{len(text.splitlines()):,} lines. Cut to 300 tokens three ways:"
    )
    original = text.splitlines()
    rows = []
    for direction in ("head", "tail", "head_tail"):
        t = truncate(text, 300, direction=direction, counter=counter)
        lines = t.text.splitlines()
        head = 0
        while head < min(len(lines), len(original)) and lines[head] == original[head]:
            head += 1
        tail = 0
        while (
            tail < min(len(lines), len(original)) - head and lines[-1 - tail] == original[-1 - tail]
        ):
            tail += 1
        kept = []
        if head:
            kept.append(f"lines 1-{head}")
        kept.append("⋯")
        if tail:
            kept.append(f"lines {len(original) - tail + 1}-{len(original)}")
        rows.append([direction, f"{t.tokens}", f"{t.omitted_tokens:,}", " + ".join(kept)])
    out.table(["direction", "tokens", "omitted", "what is kept (whole lines)"], rows)
    out.line("The full output stays in the history; only the prompt carries the cut version.")


def _bar(system: int, summary: int, recent: int, limit: int, width: int = 16) -> str:
    scale = width / max(limit, 1)
    s = max(1, round(system * scale)) if system else 0
    m = max(1, round(summary * scale)) if summary else 0
    r = max(0, min(width - s - m, round(recent * scale)))
    return "█" * s + "▓" * m + "░" * r + "·" * max(0, width - s - m - r)


def _run_session(cm: Any, session: SimulatedSession, on_call: Any = None) -> dict[str, Any]:
    """Drive ``cm`` through ``session``; totals for the final report."""
    limit = cm.context_window - cm.output_reserve
    totals: dict[str, Any] = {
        "calls": 0,
        "sent": 0,
        "naive": 0,
        "shared": 0,
        "summaries": 0,
        "truncations": 0,
        "overflow_turn": None,
        "elapsed": 0.0,
        "worst": 0.0,
    }
    state = None
    prepared = None
    for turn, history in session.prefixes():
        t0 = time.perf_counter()
        prepared = cm.prepare(history, state)
        dt = (time.perf_counter() - t0) * 1000
        state = prepared.state
        s = prepared.stats
        totals["calls"] += 1
        totals["elapsed"] += dt
        totals["worst"] = max(totals["worst"], dt)
        totals["sent"] += s["tokens"]
        totals["shared"] += s["prefix_tokens_shared"]
        totals["naive"] += s["tokens_full"]
        if s["tokens_full"] > limit and totals["overflow_turn"] is None:
            totals["overflow_turn"] = turn
        totals["summaries"] += bool(s["summary_triggered"] and not s["summary_failed"])
        totals["truncations"] += s["strategy"] == "truncate"
        if on_call is not None:
            on_call(turn, history, prepared)
    totals["final"] = prepared
    return totals


def _showcase(out: _Out, session: SimulatedSession) -> int:
    import windowfit as wf
    from windowfit.context import ContextManager
    from windowfit.summarize import ExtractiveSummarizer

    def manager(stable: bool) -> ContextManager:
        return ContextManager(
            model="gpt-4o",
            context_window=16_000,
            output_reserve=2_000,
            summarizer=ExtractiveSummarizer(),
            stable_prefix=stable,
            preference="quality",
        )

    cm = manager(True)
    limit = cm.context_window - cm.output_reserve
    tool_results = sum(1 for m in session.messages if m.get("role") == "tool")
    what = (
        f"{session.turns} turns in English and Chinese, {tool_results} tool results (a big one "
        f"every 9th turn), {len(session.facts)} facts planted in the first 20 turns and never "
        "repeated."
        if session.facts
        else f"{len(session.messages)} messages, {session.turns} model calls (one row per 15), "
        f"{tool_results} tool results."
    )
    out.line(
        f"{what} Window: {cm.context_window:,} tokens, {cm.output_reserve:,} kept for the "
        "reply. Extractive summaries, stable prefix."
    )
    out.line(
        "prompt: █ system  ▓ summary  ░ recent messages  · free    cached: share of the tokens "
        "sent that repeat the previous call's prompt prefix"
    )
    rows: list[list[Any]] = []
    # one row per 15 turns: the turn's last prompt, and what happened since the previous row
    acc = {"sent": 0, "shared": 0, "summaries": 0, "cuts": 0}
    pending: dict[str, Any] = {}

    def flush() -> None:
        if not pending:
            return
        s = pending["stats"]
        events = []
        if acc["summaries"]:
            events.append(f"{acc['summaries']} summar{'y' if acc['summaries'] == 1 else 'ies'}")
        if acc["cuts"]:
            events.append(f"{acc['cuts']} cut{'s' if acc['cuts'] > 1 else ''}")
        rows.append(
            [
                pending["turn"],
                pending["msgs"],
                s["messages_sent"],
                _bar(s["tokens_system"], s["tokens_summary"], s["tokens_recent"], limit),
                f"{s['tokens']:,}",
                f"{acc['shared'] / max(acc['sent'], 1):.0%}",
                ", ".join(events),
            ]
        )
        acc.update(sent=0, shared=0, summaries=0, cuts=0)
        pending.clear()

    def on_call(turn: int, history: list, p: Any) -> None:
        s = p.stats
        if pending and turn != pending["turn"] and pending["turn"] % 15 == 14:
            flush()
        acc["sent"] += s["tokens"]
        acc["shared"] += s["prefix_tokens_shared"]
        acc["summaries"] += bool(s["summary_triggered"] and not s["summary_failed"])
        acc["cuts"] += bool(s["compacted"] and not s["summary_triggered"])
        pending.update(turn=turn, msgs=len(history), stats=s)

    totals = _run_session(cm, session, on_call)
    flush()
    out.table(["turn", "history", "sent", "prompt", "tokens", "cached", "events"], rows)
    sliding = _run_session(manager(False), session)
    prepared = totals["final"]
    final_text = "\n".join(json.dumps(m, ensure_ascii=False) for m in prepared.messages)
    kept_facts = [f for f in session.facts if f in final_text]
    price = wf.get_model("gpt-4o")
    # the demo's reference model is priced in the registry; 0 keeps it running if not
    input_price = price.input_price or 0.0
    cached_price = price.cached_input_price or input_price
    sent, shared, naive = totals["sent"], totals["shared"], totals["naive"]

    def cost(sent_tokens: int, shared_tokens: int) -> float:
        return ((sent_tokens - shared_tokens) * input_price + shared_tokens * cached_price) / 1e6

    out.line()
    out.table(
        ["after the session", "value"],
        [
            ["LLM calls", f"{totals['calls']:,}"],
            ["tokens sent", f"{sent:,}"],
            [
                "tokens if the whole history were sent",
                f"{naive:,} ({1 - sent / max(naive, 1):.0%} saved)",
            ],
            [
                "whole history overflows the window from turn",
                str(totals["overflow_turn"]) if totals["overflow_turn"] is not None else "never",
            ],
            ["prefix reused (prompt-cache hits)", f"{shared / max(sent, 1):.0%} of tokens sent"],
            [
                "  same, window sliding every turn",
                f"{sliding['shared'] / max(sliding['sent'], 1):.0%}",
            ],
            [
                "input cost, gpt-4o prices: cached / uncached",
                f"${cost(sent, shared):.2f} / ${cost(sent, 0):.2f}",
            ],
            ["  sliding window, cached", f"${cost(sliding['sent'], sliding['shared']):.2f}"],
            ["  whole history (if it fit)", f"${cost(naive, 0):.2f}"],
            ["summaries made", f"{totals['summaries']}"],
            [
                "prepare() mean / worst",
                f"{totals['elapsed'] / max(totals['calls'], 1):.2f} / {totals['worst']:.0f} ms",
            ],
        ]
        + (
            [["planted facts in the final prompt", f"{len(kept_facts)} of {len(session.facts)}"]]
            if session.facts
            else []
        ),
    )
    missing = [f for f in session.facts if f not in kept_facts]
    if missing:
        out.line(f"missing: {', '.join(missing)}")
    summary_msg = next(
        (
            m
            for m in prepared.messages
            if str(m.get("content") or "").startswith(("[Summary", "【"))
        ),
        None,
    )
    if summary_msg is not None:
        out.line()
        out.line("The running summary in the final prompt (its first lines):")
        for ln in str(summary_msg["content"]).splitlines()[:12]:
            out.line("  " + (ln if len(ln) <= 100 else ln[:99] + "…"))
    return len(kept_facts)


def _consumers_section(out: _Out, session: SimulatedSession) -> None:
    """A router with a small budget and an agent with a large one over one stored session."""
    import windowfit as wf

    store = wf.MemoryStore()
    shared = wf.Session(store, "demo")
    # a window the sample's rounds fit in: at 32k the newest round (one user turn and its
    # tool loop) passes the low-water mark and the agent would fit plainly ("fallback")
    agent = wf.ContextManager(model="gpt-4o", context_window=16_000, output_reserve=2_000)
    router = wf.ContextManager(
        model="gpt-4o", context_window=8_000, output_reserve=500, consumer="router"
    )
    end = session.calls[min(len(session.calls) - 1, 200)]
    rows = []
    for stop in (end // 2, end):
        shared.extend(session.messages[len(shared.messages) : stop])
        for name, cm in (("agent", agent), ("router", router)):
            p = shared.prepare(cm)
            rows.append(
                [
                    f"{stop} msgs",
                    name,
                    f"{p.tokens:,}",
                    p.stats["strategy"],
                    p.state["summarized_until"],
                    p.stats["state_reset"],
                ]
            )
    out.table(["history", "consumer", "tokens", "strategy", "summarized", "reset"], rows)
    summary = (shared.consumer_state("router") or {}).get("summary", "")
    text = wf.render_history(shared.messages, 300, model="gpt-4o", summary=summary[:200])
    out.line("The router's 300-token view as text (wf.render_history; the latest user turn is")
    out.line("pinned, as fit pins it):")
    labelled = [ln for ln in text.splitlines() if ln.startswith(("USER:", "ASSISTANT:", "TOOL:"))]
    tail = labelled[-4:]
    task = next((ln for ln in reversed(labelled) if ln.startswith("USER:")), None)
    shown = ([task, "…"] if task is not None and task not in tail else []) + tail
    for line in shown:
        out.line("  " + line[:100])


def run_demo(history: Sequence[dict[str, Any]] | None = None, *, name: str = "") -> int:
    """Run the showcase on the bundled sample, or on ``history`` (canonical messages read
    from ``name``); returns the process exit code."""
    try:
        import windowfit as wf  # noqa: F401 - fail early with a clear message
    except ImportError as exc:  # pragma: no cover - broken install
        print(f"windowfit is not built: {exc}", file=sys.stderr)
        return 1
    t_start = time.perf_counter()
    out = _Out()
    session = simulate_session(300) if history is None else session_from_history(history)
    if history is not None:
        out.line(f"Your history: {name or 'given'} ({len(session.messages)} messages)")

    out.heading(
        "1. Counting a multilingual sample" if history is None else "1. Counting your history"
    )
    table = _counting_table(history)
    if table is not None:
        columns, rows = table
        out.table(columns, rows)

    out.heading("2. Fitting a long history to a budget")
    _fit_section(out, session, whole=history is not None)

    out.heading("3. Truncating a big tool output")
    _truncate_section(out, session)

    out.heading(
        "4. A long agent session under a small window"
        if history is None
        else "4. Your history, replayed call by call under a small window"
    )
    _showcase(out, session)

    out.heading("5. A router and an agent sharing one session")
    _consumers_section(out, session)
    out.line()
    out.line(f"demo finished in {time.perf_counter() - t_start:.1f} s, offline")
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
