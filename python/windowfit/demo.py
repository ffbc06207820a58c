"""``windowfit demo``: count, fit, truncate, then manage a long simulated agent session.

Fully offline and deterministic. Output goes through ``rich`` when it is installed, plain
text otherwise. :func:`simulate_session` (the multilingual agent session with tool calls, big
tool outputs and planted facts) is also what the test-suite runs the manager against.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from windowfit.cli._output import Out as _Out

__all__ = [
    "PLANTED_FACTS",
    "SimulatedSession",
    "run_demo",
    "session_from_history",
    "simulate_session",
]

# ---------------------------------------------------------------------------------------------
# The simulated agent session
# ---------------------------------------------------------------------------------------------

#: (turn, language, user message, identifier that must survive) — planted early, never repeated.
PLANTED_FACTS: tuple[tuple[int, str, str, str], ...] = (
    (
        1,
        "en",
        "Remember: all grade queries use classId=C-4821, never the old class.",
        "classId=C-4821",
    ),
    (
        3,
        "en",
        "Important: deploy only to https://staging.example.com/api/v2 until sign-off.",
        "https://staging.example.com/api/v2",
    ),
    (5, "en", "For the record, the approved migration budget is $12,500.", "$12,500"),
    (
        7,
        "en",
        "Note that the production config is config/settings.prod.yaml; keep it read-only.",
        "config/settings.prod.yaml",
    ),
    (
        9,
        "en",
        "Remember the tracking ticket ORD-2024-0042 for every commit message.",
        "ORD-2024-0042",
    ),
    (11, "en", "Keep in mind the release deadline is 2024-09-30.", "2024-09-30"),
    (13, "zh", "请记住：我的学号是 2023011234，提交作业时要用。", "2023011234"),
    (15, "zh", "注意：数据库主机是 db-prod-03.internal:5432，只能读。", "db-prod-03.internal:5432"),
    (17, "zh", "务必把报告发给负责人邮箱 lihua@example.com。", "lihua@example.com"),
    (19, "zh", "请记住班级编号：C-7305，不要和别的班搞混。", "C-7305"),
)

_MODULES = ("billing", "grades", "auth", "reports", "scheduler", "export", "search", "notify")
_FUNCS = (
    "compute_total",
    "load_scores",
    "refresh_token",
    "render_pdf",
    "next_run",
    "to_csv",
    "rank_results",
    "send_digest",
    "parse_row",
    "merge_terms",
)
_SERVICES = ("api-gateway", "grade-worker", "pdf-renderer", "cron", "search-indexer")

_EN_ASKS = (
    "Please run the tests for the {mod} module and tell me what fails.",
    "Can you check why {func} in src/{mod}/core.py returns the wrong value for empty input?",
    "Look at the {svc} logs from the last hour and find the errors.",
    "Refactor {func} so it no longer reads the whole file into memory.",
    "How many rows does the {mod} table have now? Compare with last week.",
    "Add a regression test for the bug we fixed in {func}.",
    "Summarize what changed in src/{mod}/ since the last release.",
    "Is the {svc} service healthy? Check its metrics and restart count.",
)
_ZH_ASKS = (
    "帮我跑一下 {mod} 模块的测试，看看哪里失败了。",
    "请检查 src/{mod}/core.py 里的 {func} 为什么在空输入时返回错误的结果。",
    "看一下 {svc} 最近一小时的日志，找出报错。",
    "把 {func} 重构一下，不要一次把整个文件读进内存。",
    "{mod} 表现在有多少行？和上周比一下。",
    "给我们修过的 {func} 的问题补一个回归测试。",
    "总结一下自上次发布以来 src/{mod}/ 有哪些改动。",
    "{svc} 服务健康吗？看看指标和重启次数。",
)
_EN_ANSWERS = (
    "Done: {n} tests passed and {f} failed in {mod}; the failure is an off-by-one in {func}.",
    "I fixed {func}: it now returns 0 for empty input, and the tests pass.",
    "The {svc} logs show {f} timeouts against the database; everything else looks normal.",
    "{func} now streams the file line by line; memory stays under 40 MB.",
    "The {mod} table has {n} rows, {f} more than last week.",
    "Added test_{func}_regression; it fails on the old code and passes now.",
)
_ZH_ANSWERS = (
    "完成：{mod} 模块 {n} 个测试通过，{f} 个失败；失败原因是 {func} 里的边界错误。",
    "我已修复 {func}：空输入现在返回 0，测试全部通过。",
    "{svc} 的日志里有 {f} 次数据库超时，其余正常。",
    "{func} 现在逐行读取文件，内存保持在 40 MB 以下。",
    "{mod} 表现有 {n} 行，比上周多 {f} 行。",
    "已添加 test_{func}_regression：旧代码失败，新代码通过。",
)


@dataclass
class SimulatedSession:
    """A generated agent session: ``messages`` (the full history) and the LLM-call points."""

    messages: list[dict[str, Any]]
    #: indices ``k``: the agent calls the LLM with ``messages[:k]`` (after a user message or
    #: after tool results), in order
    calls: list[int]
    #: turn index of each call point
    call_turns: list[int]
    #: identifiers planted early in the session, expected to survive in the prompt
    facts: list[str] = field(default_factory=list)
    turns: int = 0

    def prefixes(self) -> Iterator[tuple[int, list[dict[str, Any]]]]:
        """``(turn, history)`` at every LLM call, the history growing append-only."""
        for turn, k in zip(self.call_turns, self.calls):
            yield turn, self.messages[:k]


def _tool_output(
    rng: random.Random, name: str, args: dict[str, Any], mod: str, big: bool, zh: bool
) -> str:
    if name == "run_tests":
        n = rng.randint(20, 90)
        f = rng.randint(0, 3)
        lines = [
            f"tests/test_{mod}.py::test_case_{i} PASSED" for i in range(n if big else min(n, 12))
        ]
        if f:
            lines.append(f"tests/test_{mod}.py::test_edge FAILED")
            lines.append("Traceback (most recent call last):")
            lines.append(f'  File "src/{mod}/core.py", line {rng.randint(10, 400)}, in compute')
            lines.append("AssertionError: expected 0, got -1")
        lines.append(f"==== {n} passed, {f} failed in {rng.uniform(0.5, 9):.2f}s ====")
        return "\n".join(lines)
    if name == "fetch_logs":
        count = rng.randint(300, 900) if big else rng.randint(8, 25)
        svc = args.get("service", "api")
        out = []
        for _ in range(count):
            level = "ERROR" if rng.random() < 0.03 else "INFO"
            msg = (
                "db timeout after 5000ms"
                if level == "ERROR"
                else f"handled request id={rng.randint(10**5, 10**6)} in {rng.randint(3, 90)}ms"
            )
            out.append(
                f"2024-06-{rng.randint(10, 28)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z {svc} {level} {msg}"
            )
        return "\n".join(out)
    if name == "read_file":
        count = rng.randint(250, 700) if big else rng.randint(15, 40)
        func = rng.choice(_FUNCS)
        body = [f"def {func}(rows):", '    """Compute the thing."""']
        body += [
            f"    value_{i} = rows[{i}] * {rng.randint(1, 9)}  # step {i}" for i in range(count)
        ]
        body.append("    return value_0")
        return "\n".join(body)
    if name == "query_db":
        count = rng.randint(200, 500) if big else rng.randint(3, 12)
        rows = ["id,name,score,updated_at"]
        names = (
            ("王芳", "李雷", "张伟", "Alice", "Bob", "Chen")
            if zh
            else ("Alice", "Bob", "Chen", "Dana", "Eve")
        )
        rows += [
            f"{i},{rng.choice(names)},{rng.randint(40, 100)},2024-06-{rng.randint(10, 28)}"
            for i in range(count)
        ]
        return "\n".join(rows)
    return "ok"


def simulate_session(turns: int = 300, *, seed: int = 7, big_every: int = 9) -> SimulatedSession:
    """A deterministic multilingual agent session of ``turns`` user turns.

    English and Chinese in alternating blocks of 20 turns; most turns call one to three tools
    (tests, logs, files, SQL), every ``big_every``-th turn produces a big tool output (a few
    thousand tokens); :data:`PLANTED_FACTS` are stated once, early, and never repeated.
    """
    rng = random.Random(seed)
    planted = {t: (lang, text, fact) for t, lang, text, fact in PLANTED_FACTS if t < turns}
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": (
                "You are a careful software engineering agent for a school analytics team. Use "
                "the tools to inspect code, run tests, read logs and query the database. Answer "
                "in the user's language. 你是一名严谨的软件工程助手。"
            ),
        }
    ]
    calls: list[int] = []
    call_turns: list[int] = []
    call_id = 0
    for turn in range(turns):
        zh = (turn // 20) % 2 == 1
        mod, func, svc = rng.choice(_MODULES), rng.choice(_FUNCS), rng.choice(_SERVICES)
        if turn in planted:
            lang, text, _ = planted[turn]
            zh = lang == "zh"
            ask = text
        else:
            ask = rng.choice(_ZH_ASKS if zh else _EN_ASKS).format(mod=mod, func=func, svc=svc)
        if turn == 0:
            ask = (
                "We are preparing the grades service for the autumn release. Help me find and fix "
                "the failing tests, keep the logs clean, and report progress as we go."
            )
        messages.append({"role": "user", "content": ask})
        calls.append(len(messages))
        call_turns.append(turn)
        if turn in planted:
            ack = "好的，我记下了。" if zh else "Noted, I will keep that in mind."
            messages.append({"role": "assistant", "content": ack})
            continue
        rounds = rng.choice((0, 1, 1, 2, 2, 3))
        big = turn % big_every == big_every - 1
        for r in range(rounds):
            n_calls = 2 if rng.random() < 0.25 else 1
            tool_calls = []
            outputs = []
            for _ in range(n_calls):
                name = rng.choice(("run_tests", "fetch_logs", "read_file", "query_db"))
                args: dict[str, Any] = {
                    "run_tests": {"module": mod},
                    "fetch_logs": {"service": svc, "since": "1h"},
                    "read_file": {"path": f"src/{mod}/core.py"},
                    "query_db": {"sql": f"SELECT * FROM {mod} LIMIT 500"},
                }[name]
                call_id += 1
                cid = f"call_{call_id:05d}"
                tool_calls.append(
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": name,
                            "arguments": json.dumps(args, ensure_ascii=False),
                        },
                    }
                )
                outputs.append(
                    {
                        "role": "tool",
                        "tool_call_id": cid,
                        "content": _tool_output(rng, name, args, mod, big and r == 0, zh),
                    }
                )
            thought = None if rng.random() < 0.5 else ("我先看一下。" if zh else "Let me check.")
            messages.append({"role": "assistant", "content": thought, "tool_calls": tool_calls})
            messages.extend(outputs)
            calls.append(len(messages))
            call_turns.append(turn)
        answer = rng.choice(_ZH_ANSWERS if zh else _EN_ANSWERS).format(
            mod=mod, func=func, svc=svc, n=rng.randint(20, 5000), f=rng.randint(1, 9)
        )
        messages.append({"role": "assistant", "content": answer})
    return SimulatedSession(
        messages=messages,
        calls=calls,
        call_turns=call_turns,
        facts=[fact for t, (_, _, fact) in sorted(planted.items())],
        turns=turns,
    )


def session_from_history(messages: Sequence[dict[str, Any]]) -> SimulatedSession:
    """A recorded history as a session to replay: the model was called before each of its
    assistant messages (and at the end, unless the history ends on the model's answer)."""
    from windowfit.replay import call_points

    msgs = list(messages)
    calls = call_points(msgs)
    # an agent run may be one user turn and hundreds of calls: each call counts as a turn
    return SimulatedSession(
        messages=msgs, calls=calls, call_turns=list(range(len(calls))), turns=len(calls)
    )


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


def _counting_table() -> tuple[list[str], list[list[Any]]] | None:
    """HOOK (lead): the counting comparison of the bundled multilingual sample.

    Returns ``(columns, rows)``. Replace the body with the core's own comparison if wanted;
    this default counts the sample with every tokenizer available offline.
    """
    import windowfit as wf

    text = _sample_text()
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
            tokens = counter.count(text)
            cold = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            counter.count(text)
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
    shared = store.session("demo")
    agent = wf.ContextManager(model="gpt-4o", context_window=32_000, output_reserve=2_000)
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
    out.line("The router's 300-token view as text (wf.render_history):")
    labelled = [ln for ln in text.splitlines() if ln.startswith(("USER:", "ASSISTANT:", "TOOL:"))]
    for line in labelled[-4:]:
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

    out.heading("1. Counting a multilingual sample")
    table = _counting_table()
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
