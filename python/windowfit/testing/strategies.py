"""Hypothesis strategies for chat histories and token budgets.

Histories are lists of OpenAI chat dicts; with ``anthropic=True`` call messages may carry
Anthropic ``tool_use`` blocks and result messages ``tool_result`` blocks. The knobs choose what
real agent histories contain: languages, parallel tool calls, unanswered calls, orphan results,
huge tool outputs, system messages in the middle.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from windowfit.errors import InvalidArgumentError
from windowfit.messages import SYSTEM_ROLES
from windowfit.testing.invariants import pins_tokens

__all__ = [
    "LANGUAGES",
    "budgets",
    "histories",
    "huge_texts",
    "texts",
    "valid_histories",
]

Msg = dict[str, Any]

#: Sample texts by language (or script family); ``histories(languages=...)`` picks among them.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "en": (
        "The quick brown fox jumps over the lazy dog.",
        "   leading and trailing whitespace \t\n",
        "<|endoftext|> is a special token written as plain text",
    ),
    "zh": ("数据分析显示，上下文窗口需要精确计数。", "请记住：数据库主机是 db-prod-03，只能读。"),
    "ru": ("Ошибка: файл не найден (errno 2)",),
    "emoji": ("🙂 emoji 👍🏽 and ZWJ 👩‍💻 sequences",),
    "code": (
        "def f(x):\n    return {'a': [1, 2, 3], \"b\": x ** 2}\n",
        "1234567890 3.14159 -42 0xdeadbeef",
    ),
}
_ALL = tuple(LANGUAGES)

# The characters of arbitrary text: ASCII, whitespace and control characters, Latin, CJK,
# Cyrillic, Arabic, combining marks, zero-width and joiner characters, astral emoji with
# modifiers, private use. Drawn as lists of characters, never through ``st.text`` or
# ``st.characters``: those build Hypothesis's unicode tables on a first run (seconds, before
# its cache exists), long enough to fail the "input generation is slow" health check in the
# user's own test.
_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n\r\x0b\x0c\x00\x1b.,;:!?'\"`()[]{}<>|/\\-_=+*&^%$#@~"
    "éèçñßøÅÆœ€£¥°±×÷"
    "数据上下文窗口计数。，、「」"
    "Ошибкафйл"
    "مرحبا"
    "\u0301\u0308\u200b\u200c\u200d\u00a0\u2028\u3000\ufeff\ue000"
    "🙂👍🏽👩💻🚀𝔘"
)
_CHARS = st.sampled_from(_ALPHABET)


def _free_text(min_size: int = 0, max_size: int = 24) -> st.SearchStrategy[str]:
    """Arbitrary short text over :data:`_ALPHABET`."""
    return st.lists(_CHARS, min_size=min_size, max_size=max_size).map("".join)


def _samples(languages: Sequence[str]) -> list[str]:
    unknown = [lang for lang in languages if lang not in LANGUAGES]
    if unknown or not languages:
        raise InvalidArgumentError(
            f"languages: choose from {sorted(LANGUAGES)}, got {list(languages)}"
        )
    return [s for lang in languages for s in LANGUAGES[lang]]


def texts(languages: Sequence[str] = _ALL, *, arbitrary: bool = True) -> st.SearchStrategy[str]:
    """Plain text: empty, short arbitrary text (a wide alphabet of scripts, whitespace and
    emoji; no lone surrogates), a sample, or a sample repeated a few times."""
    samples = _samples(languages)
    options = [
        st.just(""),
        st.sampled_from(samples),
        st.builds(lambda s, k: s * k, st.sampled_from(samples), st.integers(2, 12)),
    ]
    if arbitrary:
        options.insert(1, _free_text())
    return st.one_of(*options)


def huge_texts(languages: Sequence[str] = _ALL) -> st.SearchStrategy[str]:
    """A huge single text (tens of KB) built by repetition, so generating it is cheap."""
    return st.builds(
        lambda s, k, i: f"[{i}] " + s * k,
        st.sampled_from(_samples(languages)),
        st.integers(300, 1500),
        st.integers(0, 10**6),
    )


def _text_parts(t: st.SearchStrategy[str]) -> st.SearchStrategy[Msg]:
    return st.builds(lambda x: {"type": "text", "text": x}, t)


_image_parts = st.one_of(
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
_names = st.one_of(st.none(), st.none(), st.none(), st.sampled_from(["alice", "bob_2", "tool-bot"]))
_tool_names = st.sampled_from(["search", "read_file", "run_python", "get_weather"])


def _arguments(t: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    # json.dumps(..., ensure_ascii=False) with default separators: LangChain re-serializes
    # arguments this way, so a round trip through it keeps the token counts identical.
    return st.builds(
        lambda q, n, extra: json.dumps({"query": q, "limit": n, **extra}, ensure_ascii=False),
        t,
        st.integers(0, 1000),
        st.dictionaries(st.sampled_from(["lang", "path", "page"]), _free_text(0, 8), max_size=2),
    )


def _with_name(m: Msg, name: str | None) -> Msg:
    if name is not None:
        m["name"] = name
    return m


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_events: int = 12,
    languages: Sequence[str] = _ALL,
    tools: bool = True,
    parallel: int = 4,
    anthropic: bool = True,
    unanswered: bool = True,
    orphans: bool = True,
    huge: bool = True,
    system_mid: bool = True,
    damage: bool | None = None,
) -> list[Msg]:
    """Any history: system/developer messages (anywhere with ``system_mid``, else only first),
    dialog turns, tool calls (1..``parallel`` per message, OpenAI and with ``anthropic`` also
    Anthropic blocks) with their results; ``unanswered`` calls, ``orphans`` (results with unknown
    ids, duplicated results, something slipped between a call and its results, empty
    messages) and ``huge`` outputs on demand. ``damage=False`` turns off unanswered calls and
    orphans at once."""
    if damage is not None:
        unanswered = orphans = damage
    t = texts(languages)
    huge_t = huge_texts(languages)
    contents = st.one_of(
        t,
        t,
        st.none(),
        st.lists(st.one_of(_text_parts(t), _text_parts(t), _image_parts), max_size=3),
    )
    out: list[Msg] = []
    serial = iter(range(10**9))

    def new_id(prefix: str = "call") -> str:
        return f"{prefix}_{next(serial)}"

    if not system_mid and draw(st.booleans()):
        out.append({"role": "system", "content": draw(t)})
    kinds = ["user", "user", "user", "assistant", "assistant"]
    if system_mid:
        kinds += ["system", "developer"]
    if tools:
        kinds += ["tools", "tools"] + (["anthropic_tools"] if anthropic else [])
    if orphans:
        kinds += ["orphan", "empty"]
    if huge:
        kinds += ["huge"]
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=max_events)):
        if kind in SYSTEM_ROLES:
            out.append(
                {"role": kind, "content": draw(st.one_of(t, st.lists(_text_parts(t), max_size=2)))}
            )
        elif kind in ("user", "assistant"):
            out.append(_with_name({"role": kind, "content": draw(contents)}, draw(_names)))
        elif kind == "empty":
            role = draw(st.sampled_from(["assistant", "user"]))
            empty: Msg = {"role": role, "content": draw(st.sampled_from(["", None, []]))}
            if role == "assistant" and draw(st.integers(0, 3)) == 0:
                # an empty call list (which providers reject) beside some text
                empty = {"role": role, "content": draw(t), "tool_calls": []}
            out.append(empty)
        elif kind == "huge":
            roles = ["user", "assistant"] + (["system"] if system_mid else [])
            out.append({"role": draw(st.sampled_from(roles)), "content": draw(huge_t)})
        elif kind == "orphan":
            ghost = new_id("ghost")
            if anthropic and draw(st.booleans()):
                block = {"type": "tool_result", "tool_use_id": ghost, "content": draw(t)}
                blocks: list[Any] = [block]
                if draw(st.booleans()):
                    # the user's new words after the orphan result: they must be kept
                    blocks.append({"type": "text", "text": draw(t)})
                out.append({"role": "user", "content": blocks})
            else:
                out.append({"role": "tool", "tool_call_id": ghost, "content": draw(t)})
        else:
            out.extend(
                draw(
                    _tool_groups(
                        new_id,
                        t,
                        huge_t if huge else None,
                        anthropic=kind == "anthropic_tools",
                        parallel=parallel,
                        unanswered=unanswered,
                        orphans=orphans,
                        system_mid=system_mid,
                    )
                )
            )
    return out


@st.composite
def _tool_groups(
    draw: st.DrawFn,
    new_id: Callable[[], str],
    t: st.SearchStrategy[str],
    huge_t: st.SearchStrategy[str] | None,
    *,
    anthropic: bool,
    parallel: int,
    unanswered: bool,
    orphans: bool,
    system_mid: bool,
) -> list[Msg]:
    """One assistant message making 1..parallel calls, then its results."""
    ids = [new_id() for _ in range(draw(st.integers(1, max(1, parallel))))]
    if anthropic:
        text = draw(st.one_of(st.just(""), t))
        blocks: list[Any] = [{"type": "text", "text": text}] if text else []
        blocks += [
            {"type": "tool_use", "id": i, "name": draw(_tool_names), "input": {"query": draw(t)}}
            for i in ids
        ]
        call: Msg = {"role": "assistant", "content": blocks}
    else:
        call = {
            "role": "assistant",
            "content": draw(st.one_of(st.none(), st.just(""), t)),
            "tool_calls": [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": draw(_tool_names), "arguments": draw(_arguments(t))},
                }
                for i in ids
            ],
        }
    answered = [i for i in ids if not unanswered or draw(st.integers(0, 5)) > 0]
    if unanswered or orphans:
        answered = draw(st.permutations(answered))

    def output() -> str:
        return draw(huge_t) if huge_t is not None and draw(st.integers(0, 15)) == 0 else draw(t)

    results: list[Msg]
    if anthropic and answered and draw(st.booleans()):
        # Anthropic's own shape: one user message carrying every tool_result block
        blocks = [{"type": "tool_result", "tool_use_id": i, "content": output()} for i in answered]
        results = [{"role": "user", "content": blocks}]
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
    if orphans and results and draw(st.integers(0, 5)) == 0:
        # the same result twice (a retried tool), at some later position
        dup = copy.deepcopy(draw(st.sampled_from(results)))
        results.insert(draw(st.integers(1, len(results))), dup)
    if orphans and results and draw(st.integers(0, 5)) == 0:
        # something slipped in between the call and (some of) its results
        intruders = [
            {"role": "user", "content": "interrupting"},
            {"role": "assistant", "content": "thinking out loud"},
        ]
        if system_mid:
            intruders.append({"role": "system", "content": "mid-call instructions"})
        intruder = draw(st.sampled_from(intruders))
        results.insert(draw(st.integers(0, len(results))), dict(intruder))
    return [call, *results]


@st.composite
def valid_histories(
    draw: st.DrawFn, *, max_rounds: int = 8, languages: Sequence[str] = _ALL
) -> list[Msg]:
    """Requests every provider accepts: OpenAI format, an optional system message at index 0
    only, every call answered right after it, arguments serialized like ``json.dumps``. May open
    with assistant messages and end with assistant/tool messages after the latest user turn."""
    t = texts(languages)
    nonempty = st.one_of(_free_text(1), st.sampled_from(_samples(languages)))
    out: list[Msg] = []
    serial = iter(range(10**9))
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(t)})
    plain = st.one_of(t, st.lists(_text_parts(t), min_size=1, max_size=2))
    if draw(st.integers(0, 4)) == 0:
        out.append({"role": "assistant", "content": draw(nonempty)})  # before any user turn
    for _ in range(draw(st.integers(0, max_rounds))):
        out.append(_with_name({"role": "user", "content": draw(plain)}, draw(_names)))
        for step in draw(st.lists(st.sampled_from(["text", "tools", "tools"]), max_size=3)):
            if step == "text":
                out.append({"role": "assistant", "content": draw(plain)})
                continue
            ids = [f"call_{next(serial)}" for _ in range(draw(st.integers(1, 3)))]
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": draw(_tool_names), "arguments": draw(_arguments(t))},
                }
                for i in ids
            ]
            out.append({"role": "assistant", "content": draw(t), "tool_calls": calls})
            out.extend({"role": "tool", "tool_call_id": i, "content": draw(t)} for i in ids)
    return out


_PIN_OPTIONS = ("keep_system", "keep_last_user", "pinned", "unanswered")


def budgets(
    messages: Sequence[Msg], counter: Any, *, feasible: bool = False, **options: Any
) -> st.SearchStrategy[int]:
    """Budgets for ``messages``: anywhere from 0 to past the total, dense around the edges that
    matter — just below and above what the pins alone cost, and around the whole history.
    ``feasible=True`` draws only budgets the pins fit in (no ``BudgetError``). ``options`` are
    ``fit``'s (those that do not move the pins are ignored)."""
    total = counter.count_messages(list(messages)) if messages else 0
    pins = {k: v for k, v in options.items() if k in _PIN_OPTIONS}
    try:
        floor = pins_tokens(messages, counter, **pins)
    except ValueError:  # a pin names a message that cannot be sent
        floor = 0
    between = st.integers(floor, max(floor, total))
    if feasible:
        return st.one_of(
            st.integers(floor, floor + 2), st.integers(max(floor, total - 3), total + 3), between
        )
    return st.one_of(
        st.integers(0, total + 50),
        st.integers(max(0, floor - 1), floor + 2),
        st.integers(max(0, total - 3), total + 3),
        between,
        between,
    )
