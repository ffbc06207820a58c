"""The simulated agent session ``windowfit demo`` manages and the test-suite runs the manager
against: multilingual turns with tool calls, big tool outputs and planted facts; and a recorded
history replayed as such a session."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PLANTED_FACTS", "SimulatedSession", "session_from_history", "simulate_session"]


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
