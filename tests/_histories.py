"""Chat histories for the fitting tests: hypothesis strategies, an independent request
validator and a slow, obvious reference of the fitting rules.

Nothing here imports windowfit's fitting code: the validator checks OpenAI's pairing rule on
the output alone, and the reference (``analyze`` / ``reference_fit``) re-derives the spec of
ARCHITECTURE.md "Window invariants" from scratch, message by message, re-summing everything.
The only windowfit API used is the counter (``count_message`` / ``count_messages``).

Histories are lists of OpenAI chat dicts; call messages may also carry Anthropic
``tool_use`` blocks and result messages Anthropic ``tool_result`` blocks.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter as Multiset
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# How many examples each property test runs (raise it for a soak: FIT_EXAMPLES=2000).
EXAMPLES = int(os.environ.get("FIT_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

Msg = dict[str, Any]

# ----------------------------------------------------------------------------- strategies

SAMPLES = [
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}\n",
    "数据分析显示，上下文窗口需要精确计数。",
    "Ошибка: файл не найден (errno 2)",
    "🙂 emoji 👍🏽 and ZWJ 👩‍💻 sequences",
    "   leading and trailing whitespace \t\n",
    "<|endoftext|> is a special token written as plain text",
    "1234567890 3.14159 -42 0xdeadbeef",
]

#: Plain text: empty, short arbitrary unicode (no lone surrogates) or a realistic sample.
texts = st.one_of(
    st.just(""),
    st.text(max_size=24),
    st.sampled_from(SAMPLES),
    st.builds(lambda s, k: s * k, st.sampled_from(SAMPLES), st.integers(2, 12)),
)
nonempty_texts = st.one_of(st.text(min_size=1, max_size=24), st.sampled_from(SAMPLES))

#: A huge single text (tens of KB), built by repetition so generating it is cheap.
huge_texts = st.builds(
    lambda s, k, i: f"[{i}] " + s * k,
    st.sampled_from(SAMPLES),
    st.integers(300, 1500),
    st.integers(0, 10**6),
)

text_parts = st.builds(lambda t: {"type": "text", "text": t}, texts)
image_parts = st.one_of(
    st.builds(
        lambda d: {
            "type": "image_url",
            "image_url": {"url": "https://example.com/cat.png", "detail": d},
        },
        st.sampled_from(["low", "high", "auto"]),
    ),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
    st.builds(
        lambda w, h: {
            "type": "image_url",
            "image_url": {
                "url": "https://example.com/big.png",
                "detail": "high",
                "width": w,
                "height": h,
            },
        },
        st.integers(1, 4096),
        st.integers(1, 4096),
    ),
)
#: Content as OpenAI allows it: a string, None, or a list of parts (text and images).
contents = st.one_of(
    texts,
    texts,
    st.none(),
    st.lists(st.one_of(text_parts, text_parts, image_parts), max_size=3),
)
names = st.one_of(st.none(), st.none(), st.none(), st.sampled_from(["alice", "bob_2", "tool-bot"]))

arguments = st.builds(
    # json.dumps(..., ensure_ascii=False) with default separators: LangChain re-serializes
    # arguments this way, so the parity round trip keeps the token counts identical.
    lambda q, n, extra: json.dumps({"query": q, "limit": n, **extra}, ensure_ascii=False),
    texts,
    st.integers(0, 1000),
    st.dictionaries(st.sampled_from(["lang", "path", "page"]), st.text(max_size=8), max_size=2),
)
tool_names = st.sampled_from(["search", "read_file", "run_python", "get_weather"])


def _with_name(m: Msg, name: str | None) -> Msg:
    if name is not None:
        m["name"] = name
    return m


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_events: int = 12,
    damage: bool = True,
    anthropic: bool = True,
    huge: bool = True,
) -> list[Msg]:
    """Any history: system/developer messages anywhere, dialog turns, parallel tool calls
    (OpenAI and Anthropic style) with their results, and — with ``damage`` — unanswered
    calls, orphan results with unknown ids, results separated from their call by another
    message, duplicate results, shuffled result order and huge single messages."""
    out: list[Msg] = []
    serial = iter(range(10**9))

    def new_id(prefix: str = "call") -> str:
        return f"{prefix}_{next(serial)}"

    kinds = [
        "system",
        "developer",
        "user",
        "user",
        "user",
        "assistant",
        "assistant",
        "tools",
        "tools",
    ]
    if anthropic:
        kinds += ["anthropic_tools"]
    if damage:
        kinds += ["orphan", "empty"]
    if huge:
        kinds += ["huge"]
    events = draw(st.lists(st.sampled_from(kinds), max_size=max_events))
    for kind in events:
        if kind in ("system", "developer"):
            out.append(
                {"role": kind, "content": draw(st.one_of(texts, st.lists(text_parts, max_size=2)))}
            )
        elif kind == "user":
            out.append(_with_name({"role": "user", "content": draw(contents)}, draw(names)))
        elif kind == "assistant":
            out.append(_with_name({"role": "assistant", "content": draw(contents)}, draw(names)))
        elif kind == "empty":
            out.append(
                {
                    "role": draw(st.sampled_from(["assistant", "user"])),
                    "content": draw(st.sampled_from(["", None, []])),
                }
            )
        elif kind == "huge":
            role = draw(st.sampled_from(["user", "assistant", "system"]))
            out.append({"role": role, "content": draw(huge_texts)})
        elif kind == "orphan":
            ghost = new_id("ghost")
            if anthropic and draw(st.booleans()):
                out.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": ghost, "content": draw(texts)}
                        ],
                    }
                )
            else:
                out.append({"role": "tool", "tool_call_id": ghost, "content": draw(texts)})
        else:
            out.extend(
                draw(
                    tool_groups(
                        new_id, anthropic=kind == "anthropic_tools", damage=damage, huge=huge
                    )
                )
            )
    return out


@st.composite
def tool_groups(
    draw: st.DrawFn, new_id: Any, *, anthropic: bool, damage: bool, huge: bool
) -> list[Msg]:
    """One assistant message making 1-4 parallel calls, then its results."""
    k = draw(st.integers(1, 4))
    ids = [new_id() for _ in range(k)]
    text = (
        draw(st.one_of(st.none(), st.just(""), texts))
        if not anthropic
        else draw(st.one_of(st.just(""), texts))
    )
    if anthropic:
        blocks: list[Any] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": i, "name": draw(tool_names), "input": {"query": draw(texts)}}
            for i in ids
        ]
        call: Msg = {"role": "assistant", "content": blocks}
    else:
        call = {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": draw(tool_names), "arguments": draw(arguments)},
                }
                for i in ids
            ],
        }
    answered = [i for i in ids if not damage or draw(st.integers(0, 5)) > 0]
    if damage:
        answered = draw(st.permutations(answered))

    def output() -> str:
        return draw(huge_texts) if huge and draw(st.integers(0, 15)) == 0 else draw(texts)

    results: list[Msg]
    if anthropic and draw(st.booleans()) and answered:
        # Anthropic's own shape: one user message carrying every tool_result block.
        results = [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": output()} for i in answered
                ],
            }
        ]
    elif anthropic:
        results = [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": i, "content": output()}],
            }
            for i in answered
        ]
    else:
        results = [{"role": "tool", "tool_call_id": i, "content": output()} for i in answered]
    if damage and results and draw(st.integers(0, 5)) == 0:
        # the same result twice (a retried tool), at some later position
        results.insert(
            draw(st.integers(1, len(results))), copy.deepcopy(draw(st.sampled_from(results)))
        )
    if damage and results and draw(st.integers(0, 5)) == 0:
        # something slipped in between the call and (some of) its results
        intruder = draw(
            st.sampled_from(
                [
                    {"role": "user", "content": "interrupting"},
                    {"role": "system", "content": "mid-call instructions"},
                    {"role": "assistant", "content": "thinking out loud"},
                ]
            )
        )
        results.insert(draw(st.integers(0, len(results))), dict(intruder))
    return [call, *results]


@st.composite
def valid_histories(draw: st.DrawFn, *, max_rounds: int = 8) -> list[Msg]:
    """Requests any provider accepts, in the subset LangChain round-trips exactly: OpenAI
    format, an optional system message at index 0 only, every call answered right after it,
    arguments serialized like ``json.dumps``. May open with assistant messages, may end with
    assistant/tool messages after the latest user turn."""
    out: list[Msg] = []
    serial = iter(range(10**9))
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(texts)})
    plain = st.one_of(texts, st.lists(text_parts, min_size=1, max_size=2))
    if draw(st.integers(0, 4)) == 0:
        out.append({"role": "assistant", "content": draw(nonempty_texts)})  # before any user turn
    for _ in range(draw(st.integers(0, max_rounds))):
        out.append(_with_name({"role": "user", "content": draw(plain)}, draw(names)))
        for step in draw(st.lists(st.sampled_from(["text", "tools", "tools"]), max_size=3)):
            if step == "text":
                out.append({"role": "assistant", "content": draw(plain)})
                continue
            ids = [f"call_{next(serial)}" for _ in range(draw(st.integers(1, 3)))]
            out.append(
                {
                    "role": "assistant",
                    "content": draw(texts),
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {"name": draw(tool_names), "arguments": draw(arguments)},
                        }
                        for i in ids
                    ],
                }
            )
            for i in ids:
                out.append({"role": "tool", "tool_call_id": i, "content": draw(texts)})
    return out


# ----------------------------------------------------------------------------- message facts


def content_list(m: Msg) -> list[Any]:
    c = m.get("content")
    return c if isinstance(c, list) else []


def call_ids(m: Msg) -> list[str]:
    """Ids of the calls a message makes: OpenAI ``tool_calls`` and Anthropic ``tool_use`` blocks."""
    ids = [c["id"] for c in (m.get("tool_calls") or [])]
    ids += [p["id"] for p in content_list(m) if isinstance(p, dict) and p.get("type") == "tool_use"]
    return ids


def result_ids(m: Msg) -> list[str]:
    """Ids a message answers: ``tool_call_id`` and Anthropic ``tool_result`` blocks."""
    ids = [m["tool_call_id"]] if m.get("tool_call_id") is not None else []
    ids += [
        p["tool_use_id"]
        for p in content_list(m)
        if isinstance(p, dict) and p.get("type") == "tool_result"
    ]
    return ids


def has_content(m: Msg) -> bool:
    """The message says something besides tool calls (for the part types generated here)."""
    c = m.get("content")
    if isinstance(c, str):
        return c != ""
    for p in content_list(m):
        if isinstance(p, str) and p:
            return True
        if isinstance(p, dict):
            t = p.get("type")
            if t == "text" and p.get("text"):
                return True
            if t == "image_url":
                return True
            if t == "tool_result" and p.get("content"):
                return True
    return False


def is_system(m: Msg) -> bool:
    return m.get("role") in ("system", "developer")


def is_user_turn(m: Msg) -> bool:
    return m.get("role") == "user" and not result_ids(m)


def strip_calls(m: Msg, ids: list[str]) -> Msg:
    """``m`` without the call entries in ``ids``: what a stripped message must look like."""
    out = dict(m)
    if m.get("tool_calls"):
        keep = [c for c in m["tool_calls"] if c["id"] not in ids]
        if keep:
            out["tool_calls"] = keep
        else:
            del out["tool_calls"]
    if isinstance(m.get("content"), list):
        out["content"] = [
            p
            for p in m["content"]
            if not (isinstance(p, dict) and p.get("type") == "tool_use" and p.get("id") in ids)
        ]
    return out


# ----------------------------------------------------------------------------- the validator


def request_problems(msgs: list[Msg]) -> list[str]:
    """Independent check of OpenAI's rule, extended to Anthropic blocks: each result message
    answers calls of the nearest preceding call message, with only result messages in between,
    each call id exactly once; each call message has all its calls answered before the next
    non-result message. Returns the problems found (empty: a valid request)."""
    problems: list[str] = []
    open_ids: set[str] | None = None  # the calls still waiting, while inside a result run
    owner = -1
    for k, m in enumerate(msgs):
        rs, cs = result_ids(m), call_ids(m)
        if rs:
            if cs:
                problems.append(f"{k}: both calls and answers")
            if open_ids is None:
                problems.append(f"{k}: result {rs} does not follow a tool call message")
                continue
            for r in rs:
                if r not in open_ids:
                    problems.append(f"{k}: result {r!r} answers no open call of message {owner}")
                open_ids.discard(r)
            continue
        if open_ids:
            problems.append(f"{owner}: calls {sorted(open_ids)} unanswered before message {k}")
        open_ids = None
        if cs:
            if len(set(cs)) != len(cs):
                problems.append(f"{k}: duplicate call ids {cs}")
            if "tool_calls" in m and not m["tool_calls"]:
                problems.append(f"{k}: empty tool_calls list")
            open_ids, owner = set(cs), k
    if open_ids:
        problems.append(f"{owner}: calls {sorted(open_ids)} unanswered at the end")
    return problems


# ----------------------------------------------------------------------------- the reference


@dataclass
class Analysis:
    """The pairing of a history as the spec defines it."""

    verdict: list[str]  # "ok" | "orphan" | "unanswered"
    units: list[list[int]]  # message indices of each unit, head first; units in order
    unit_of: list[int | None]
    strips: dict[int, list[str]] = field(default_factory=dict)  # head -> unanswered ids removed

    def valid(self, i: int) -> bool:
        return self.verdict[i] == "ok"


def analyze(msgs: list[Msg], unanswered: str = "drop") -> Analysis:
    n = len(msgs)
    calls = [call_ids(m) for m in msgs]
    answers = [result_ids(m) for m in msgs]
    a = Analysis(["ok"] * n, [], [None] * n)

    def add_unit(members: list[int]) -> None:
        for k in members:
            a.unit_of[k] = len(a.units)
        a.units.append(members)

    i = 0
    while i < n:
        if answers[i]:  # a result with no call message right before it
            a.verdict[i] = "orphan"
            i += 1
            continue
        if not calls[i]:
            add_unit([i])
            i += 1
            continue
        end = i + 1
        while end < n and answers[end] and not calls[end]:
            end += 1
        once = {
            c for c, k in Multiset(calls[i]).items() if k == 1
        }  # a duplicated id is unanswerable
        answered: set[str] = set()
        members = [i]
        for j in range(i + 1, end):
            ids = answers[j]
            if len(set(ids)) == len(ids) and all(x in once and x not in answered for x in ids):
                answered.update(ids)
                members.append(j)
            else:
                a.verdict[j] = "orphan"
        still_open = [c for c in dict.fromkeys(calls[i]) if c not in answered]
        if not still_open:
            add_unit(members)
        elif unanswered == "strip" and (answered or has_content(msgs[i])):
            a.strips[i] = still_open
            add_unit(members)
        else:
            for k in members:
                a.verdict[k] = "unanswered"
        i = end
    return a


def sent_message(msgs: list[Msg], a: Analysis, i: int) -> Msg:
    return strip_calls(msgs[i], a.strips[i]) if i in a.strips else msgs[i]


def priming(counter: Any) -> int:
    """Tokens a request costs besides its messages, measured through the public API."""
    probe = {"role": "user", "content": "probe"}
    return counter.count_messages([probe]) - counter.count_message(probe)


class PinError(Exception):
    """An explicit pin names a message that cannot be sent: fit must raise ValueError."""


@dataclass
class Expected:
    """What fit must return for one case, derived from the spec alone."""

    analysis: Analysis
    cost: list[int]  # per message, as sent (stripped heads recounted)
    pinned_units: set[int]
    pins_tokens: int
    priming: int
    latest_user: int | None  # message index of the latest user turn
    budget_error: bool
    kept: list[int] | None = None
    stop_reason: str | None = None

    def pinned_msg(self, i: int) -> bool:
        u = self.analysis.unit_of[i]
        return u is not None and u in self.pinned_units

    def unit_cost(self, u: int) -> int:
        return sum(self.cost[i] for i in self.analysis.units[u])


def expect(
    msgs: list[Msg],
    budget: int,
    counter: Any,
    *,
    keep_system: bool = True,
    keep_last_user: bool = True,
    start_on: str | None = "user",
    pinned: tuple[int, ...] | list[int] = (),
    unanswered: str = "drop",
) -> Expected:
    """The slow, obvious fit: pins, then growth steps (units newest first down to the latest
    user turn, then whole rounds) each re-summed from scratch. Raises ``PinError``."""
    n = len(msgs)
    a = analyze(msgs, unanswered)
    cost = [counter.count_message(sent_message(msgs, a, i)) if a.valid(i) else 0 for i in range(n)]
    nu = len(a.units)
    head_user = [is_user_turn(msgs[a.units[u][0]]) for u in range(nu)]
    pins: set[int] = set()
    for p in pinned:
        q = p + n if p < 0 else p
        if not a.valid(q):
            raise PinError(q)
        pins.add(a.unit_of[q])  # type: ignore[arg-type]
    if keep_system:
        pins |= {a.unit_of[i] for i in range(n) if is_system(msgs[i]) and a.valid(i)}  # type: ignore[misc]
    user_units = [u for u in range(nu) if head_user[u]]
    last_u = user_units[-1] if user_units else None
    if keep_last_user and last_u is not None:
        pins.add(last_u)
    P = priming(counter)
    total = lambda us: sum(cost[i] for u in us for i in a.units[u])
    pins_tokens = total(pins)
    # An empty window is never sent, so it primes nothing: without pins there is no error.
    e = Expected(
        a,
        cost,
        pins,
        pins_tokens,
        P,
        a.units[last_u][0] if last_u is not None else None,
        bool(pins) and pins_tokens + P > budget,
    )
    if e.budget_error:
        return e
    floor = last_u if (start_on is not None and last_u is not None) else 0
    steps = [[u] for u in range(nu - 1, floor - 1, -1) if u not in pins]
    end = floor
    for k in range(floor - 1, -1, -1):
        if head_user[k]:
            steps.append([u for u in range(k, end) if u not in pins])
            end = k
    chosen = set(pins)
    stop = None
    for s in steps:
        if total(chosen | set(s)) + P <= budget:
            chosen |= set(s)
        else:
            stop = "budget"
            break
    if stop is None:
        stop = "start_on_user" if len(chosen) < nu else "all_fit"
    e.kept = sorted(i for u in chosen for i in a.units[u])
    e.stop_reason = stop
    return e
