"""Summarizers: fold the messages that fall out of the window into a running summary.

A summarizer is anything callable as::

    summarizer(messages, *, previous_summary: str, target_tokens: int, language: str) -> str

(or returning an awaitable of ``str``). ``messages`` are the newly evicted OpenAI-style chat
dicts, ``previous_summary`` is the summary they must be merged into (``""`` for the first one),
``target_tokens`` the length to aim for and ``language`` ``"zh"`` or ``"en"``. The result
replaces the previous summary, so it must carry forward whatever of it is still relevant.

Two are built in:

- :class:`ExtractiveSummarizer` — offline, deterministic, no LLM. It selects and condenses
  the user's goal and requests, decisions, actions, errors, and every identifier it can see
  (``classId=C-4821``, file names, URLs, numbers, dates...) under a token target.
- :class:`LLMSummarizer` — any OpenAI-compatible chat endpoint through the official ``openai``
  SDK, with a structured prompt (goal, decisions, done, to do, findings, key identifiers) in
  the conversation's language.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import threading
import weakref
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "Summarizer",
    "SummaryError",
    "build_summary_prompt",
    "detect_language",
    "message_text",
    "render_transcript",
]

logger = logging.getLogger(__name__)

Message = Mapping[str, Any]
SummaryResult = str | Awaitable[str]


@runtime_checkable
class Summarizer(Protocol):
    """The summarizer protocol (a plain function with this signature works too)."""

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str,
        target_tokens: int,
        language: str,
    ) -> SummaryResult: ...


class SummaryError(RuntimeError):
    """A summarizer produced no usable summary (empty, cut off, refused, malformed)."""


# ---------------------------------------------------------------------------------------------
# Message text and language
# ---------------------------------------------------------------------------------------------

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z]{2,}")


def message_text(message: Message) -> str:
    """The readable text of one chat message: content parts and tool-call arguments."""
    content = message.get("content")
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, (list, tuple)):
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif part.get("type") in ("image_url", "image", "input_image"):
                    parts.append("[image]")
                elif part.get("type") in ("input_audio", "audio"):
                    parts.append("[audio]")
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {} if isinstance(call, Mapping) else {}
        name = fn.get("name", "")
        args = fn.get("arguments", "")
        parts.append(
            f"{name}({args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)})"
        )
    return "\n".join(p for p in parts if p)


def detect_language(texts: Iterable[str] | str) -> str:
    """``"zh"`` when Chinese characters carry the text, else ``"en"``.

    Compares CJK characters with Latin words, so English identifiers inside Chinese prose
    (``classId=C-4821``) do not flip a Chinese conversation to English, and vice versa.
    """
    if isinstance(texts, str):
        texts = (texts,)
    cjk = latin = 0
    for text in texts:
        if not text:
            continue
        sample = text if len(text) <= 20_000 else text[:20_000]
        cjk += len(_CJK_RE.findall(sample))
        latin += len(_LATIN_WORD_RE.findall(sample))
    return "zh" if cjk > 0 and cjk >= latin else "en"


def _conversation_language(messages: Sequence[Message], previous_summary: str = "") -> str:
    # The user's own words decide; assistant and tool text only when the user wrote nothing.
    user = [message_text(m) for m in messages if m.get("role") == "user"]
    if any(user):
        return detect_language(user)
    return detect_language([previous_summary, *(message_text(m) for m in messages)])


_DIGIT_PUNCT_RE = re.compile(r"[0-9]|[^\w\s]")


def _estimate_tokens(text: str) -> int:
    # Deliberately pessimistic so a summary aimed at a target also fits when the manager
    # counts it exactly: CJK ~1.1 tokens per character, digits and punctuation (dense in
    # identifiers, dates, paths) ~0.6 each, other text ~4 characters per token.
    if not text:
        return 0
    cjk = len(_CJK_RE.findall(text))
    dense = len(_DIGIT_PUNCT_RE.findall(text))
    return math.ceil(cjk * 1.1 + dense * 0.6 + max(0, len(text) - cjk - dense) / 4.0)


def _clip(text: str, max_chars: int) -> str:
    """Whitespace-collapsed ``text`` cut to ``max_chars`` at a word boundary when possible."""
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = cut.rfind(" ")
    if space > max_chars * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:，、") + "…"


# ---------------------------------------------------------------------------------------------
# Extraction patterns
# ---------------------------------------------------------------------------------------------

_FILE_EXT = (
    "py|pyi|rs|js|mjs|cjs|jsx|ts|tsx|go|java|kt|scala|c|cc|cpp|h|hpp|cs|rb|php|swift|m|lua|r|"
    "md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|csv|tsv|xls|xlsx|parquet|sql|db|"
    "sqlite|html|htm|css|scss|vue|svelte|sh|bash|zsh|ps1|bat|ipynb|lock|xml|log|pdf|docx|"
    "pptx|png|jpg|jpeg|gif|svg|webp|proto|tf|gradle|mk|dockerfile|wasm|zip|gz|tar"
)
_KEY_HINT = (
    r"(?:id|ids|key|name|path|file|dir|url|uri|branch|env|region|bucket|table|db|database|"
    r"host|port|user|account|token|version|model|class|code|ticket|order|number|no|tag|"
    r"project|team|email|phone|date|deadline|budget|price|amount|limit|quota|size)"
)
# Each pattern has a kind; the kind says how much an identifier of that shape is worth keeping.
_ID_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(p))
    for kind, p in (
        ("url", r"https?://[^\s<>\"'`)\]}，。；、）】]+[^\s<>\"'`)\]}，。；、）】.,;:!?]"),
        ("email", r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
        # key=value / key: value where the value looks like data (has a digit or a symbol)
        (
            "keyval",
            r"\b[A-Za-z_][\w.-]{0,40}\s?[=:]\s?[\"']?[A-Za-z0-9_][\w./#@+-]*(?:\d|[-_/.#@][\w])[\w./#@+-]*",
        ),
        # key=value where the key itself says it is an identifier (userName=alice)
        ("keyval", r"(?i)\b[A-Za-z_]*" + _KEY_HINT + r"\s?=\s?[\"']?[\w./#@+-]{2,}"),
        # Chinese key + separator + data value: 学号是 2023011234, 班级编号：C-4821
        (
            "keyval",
            r"[\u4e00-\u9fff]{1,6}?\s?(?:[：:=]|是|为)\s?[A-Za-z0-9_][\w./#@+-]*\d[\w./#@+-]*",
        ),
        ("code", r"\b[A-Z][A-Z0-9]{0,11}(?:[-_][A-Z0-9]+)*[-_]\d[\w-]*\b"),  # C-4821, ORD-2024-0042
        ("code", r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),  # UUIDs
        ("code", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),  # commit hashes
        ("path", r"(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+"),
        ("path", r"\b[\w.-]+\.(?:" + _FILE_EXT + r")\b"),
        ("quote", r"`([^`\n]{2,80})`"),
        ("money", r"[$¥€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:[kKmMbB]|万|亿)\b)?"),
        (
            "money",
            r"\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|CNY|RMB|GBP|JPY)\b|\d[\d,]*(?:\.\d+)?\s?(?:元|美元|万元|亿元)",
        ),
        ("measure", r"\b\d+(?:\.\d+)?\s?(?:%|ms|GB|MB|KB|TB|GiB|MiB|QPS|rps)(?![\w])"),
        (
            "date",
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\d{4}年\d{1,2}月(?:\d{1,2}日)?",
        ),
        ("version", r"\bv?\d+\.\d+\.\d+(?:[-+][\w.]+)?\b"),
        ("number", r"(?<![\w.\-])\d{5,}(?![\w.])"),  # student IDs, phone and order numbers
        ("quote", r"[“「『]([^”」』\n]{2,40})[”」』]"),  # quoted names
    )
)
# How much each kind is worth beyond where it was said: explicit facts first.
_KIND_BONUS = {
    "keyval": 1.5,
    "code": 1.0,
    "url": 1.0,
    "email": 1.0,
    "money": 1.0,
    "date": 0.8,
    "quote": 0.8,
    "number": 0.6,
    "version": 0.5,
    "measure": 0.3,
    "path": 0.3,
}
# A path match must really look like one (a letter somewhere), not a fraction like 1/2.
_PATHISH = re.compile(r"[A-Za-z]")
_WORD_RE = re.compile(r"[A-Za-z][\w'-]*[:：]?")
_CJK_TAIL_RE = re.compile(r"[\u4e00-\u9fff]{1,4}[:：]?$")


def _left_context(text: str, start: int) -> str:
    """Up to two words (or a short CJK phrase) right before a bare identifier: what names it
    ("ticket T-1001", "deadline is 2024-06-30", "学号 2023011234"). Empty when the identifier
    is glued to the previous word or only stopwords precede it."""
    snippet = text[max(0, start - 40) : start]
    if not snippet or not (snippet[-1].isspace() or snippet[-1] in ":："):
        return ""
    tokens = snippet.split()
    if not tokens:
        return ""
    last = tokens[-1]
    if _CJK_RE.match(last[-1] if last[-1] not in ":：" or len(last) < 2 else last[-2]):
        tail = _CJK_TAIL_RE.search(last)
        return tail.group() if tail else ""
    words = [t for t in tokens[-2:] if _WORD_RE.fullmatch(t)]
    if len(words) < len(tokens[-2:]):
        words = words[-1:] if _WORD_RE.fullmatch(last) else []
    while words and words[0].lower().strip(":：") in _STOPWORDS:
        words.pop(0)
    return " ".join(words)


_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "at",
        "in",
        "on",
        "to",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "my",
        "our",
        "your",
        "their",
        "his",
        "her",
        "we",
        "you",
        "i",
        "me",
        "us",
        "them",
        "see",
        "use",
        "via",
        "into",
        "onto",
        "than",
        "then",
        "also",
        "please",
    ]
)

_DECISION_RE = re.compile(
    r"(?i)\b(?:decid\w*|decision|chose|chosen|choose|select(?:ed)?|pick(?:ed)?|going with|go with|"
    r"we(?:'ll| will) use|will use|use .{1,30} instead|switch(?:ed)? to|agreed?|confirm(?:ed|s)?|"
    r"approved?|settled on|the plan is|must|should not|shouldn't|don't|do not|never|always|"
    r"prefer(?:red|s)?|keep using|stick with|instead of|requirement)\b"
    r"|决定|选择|选定|选用|采用|改用|确定|确认|同意|批准|计划|方案|必须|不要|不能|务必|优先|偏好|定为|就用|记住|注意"
)
# Words that flag a fact the user wants kept.
_CUE_RE = re.compile(
    r"(?i)\b(?:remember|important|note that|don't forget|do not forget|keep in mind|make sure|"
    r"for the record|key fact)\b|记住|注意|重要|务必|别忘|一定要|牢记|请记下"
)
_ERROR_RE = re.compile(
    r"(?i)\b(?:error|exception|traceback|failed|failure|fatal|denied|refused|timeout|timed out|"
    r"not found|cannot|can't|unable|invalid|crash(?:ed|es)?|panic(?:ked)?|segfault|"
    r"4\d\d (?:bad|unauthorized|forbidden|not)|5\d\d (?:internal|bad gateway|service))\b"
    r"|错误|异常|失败|报错|超时|无法|找不到|拒绝|崩溃|缺少"
)
_GOAL_RE = re.compile(
    r"(?i)\b(?:i want|i need|i'd like|help me|please|goal|task|objective|we need to|can you|"
    r"could you|let's)\b|我想|我要|帮我|请|需要|目标|任务|希望"
)
# Sentence ends: CJK stops anywhere; Latin stops only before whitespace, so file names
# (grades_2024.csv), versions and URLs are never split.
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+|\n+")
_CODE_BLOCK_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)


def _sentences(text: str) -> list[str]:
    out = []
    for piece in _SENTENCE_SPLIT_RE.split(text):
        s = piece.strip() if piece else ""
        # A "sentence" of only punctuation or a tiny fragment carries nothing
        if len(s) >= 4 or _CJK_RE.search(s):
            out.append(s)
    return out


_DIGIT_RE = re.compile(r"\d")
_UPPER_RE = re.compile(r"[A-Z]")
_HEX7_RE = re.compile(r"[0-9a-f]{7}")
_DIGITS5_RE = re.compile(r"\d{5}")


def _applicable(text: str) -> list[tuple[str, re.Pattern[str]]]:
    """The patterns that can possibly match ``text``: cheap substring checks first, because
    running every pattern over every sentence dominates the summarizer's time otherwise."""
    digit = _DIGIT_RE.search(text) is not None
    checks = (
        "://" in text,
        "@" in text,
        "=" in text or ":" in text,
        "=" in text,
        _CJK_RE.search(text) is not None and digit,
        digit and ("-" in text or "_" in text) and _UPPER_RE.search(text) is not None,
        digit and "-" in text,
        _HEX7_RE.search(text) is not None,
        "/" in text,
        "." in text,
        "`" in text,
        any(c in text for c in "$¥€£"),
        digit,
        digit,
        digit and ("-" in text or "年" in text),
        digit and "." in text,
        _DIGITS5_RE.search(text) is not None,
        any(c in text for c in "“「『"),
    )
    return [p for p, ok in zip(_ID_PATTERNS, checks) if ok]


def _identifier_spans(
    text: str, limit: int | None = None, context: bool = False
) -> list[tuple[str, str]]:
    """``(identifier, kind)`` pairs of ``text`` in order of appearance, deduplicated by
    containment. With ``context``, a bare value gets the word or two naming it
    (``ticket T-1001``, ``deadline 2024-06-30``)."""
    found: list[tuple[int, str, str]] = []
    for kind, pattern in _applicable(text):
        for m in pattern.finditer(text):
            grouped = bool(m.groups()) and m.group(1)
            value = (m.group(1) if grouped else m.group()).strip(" \"'`.,;:")
            if len(value) < 2 or len(value) > 160:
                continue
            if kind == "path" and "/" in value and not _PATHISH.search(value):
                continue
            start = m.start(1) if grouped else m.start()
            if context and kind not in ("keyval", "url", "email"):
                words = _left_context(text, start)
                if words:
                    value = f"{words}{'' if words[-1] in ':：' else ' '}{value}"
                    start = max(0, start - len(words) - 1)
            found.append((start, value, kind))
    found.sort(key=lambda x: (x[0], -len(x[1])))
    out: list[tuple[str, str]] = []
    for _, value, kind in found:
        if any(value in kept for kept, _ in out):
            continue
        # a longer span containing earlier shorter ones replaces them
        out = [(kept, k) for kept, k in out if kept not in value]
        out.append((value, kind))
        if limit is not None and len(out) >= limit:
            break
    return out


def _identifiers(text: str, limit: int | None = None) -> list[str]:
    """Identifier-like spans of ``text`` (``classId=C-4821``, paths, URLs, IDs, amounts...)."""
    return [value for value, _ in _identifier_spans(text, limit)]


# ---------------------------------------------------------------------------------------------
# The extractive summarizer
# ---------------------------------------------------------------------------------------------

_SECTIONS = ("goal", "requests", "decisions", "done", "findings", "identifiers")
_LABELS = {
    "en": {
        "goal": "Goal",
        "requests": "User requests",
        "decisions": "Decisions and instructions",
        "done": "Done",
        "findings": "Findings and errors",
        "identifiers": "Key facts and identifiers",
        "earlier": "Earlier",
    },
    "zh": {
        "goal": "任务目标",
        "requests": "用户请求",
        "decisions": "关键决策与要求",
        "done": "已完成工作",
        "findings": "重要发现与错误",
        "identifiers": "关键标识与数据",
        "earlier": "更早的内容",
    },
}
_LABEL_TO_SECTION = {
    label.lower(): section for labels in _LABELS.values() for section, label in labels.items()
}
_ID_SEP = "; "
# Identifier sources: what the user said matters most, what a tool printed least.
_SOURCE_SCORE = {"user": 6.5, "assistant": 5.5, "tool_args": 4.5, "tool": 2.5}


@dataclass
class _Item:
    section: str
    text: str
    score: float
    seq: float
    tokens: int = 0


class ExtractiveSummarizer:
    """Offline, deterministic summarizer: selects what matters, never invents anything.

    Keeps the first request as the goal, user requests, decisions and standing instructions,
    tool actions (grouped per tool with their arguments), errors, and every identifier it
    finds — ``key=value`` pairs, ticket / class / order IDs, file names and paths, URLs,
    e-mails, money, dates, versions, long numbers — preferring what the user said (and flagged:
    "remember", "记住") over what tools printed. Merges with the previous summary (its own
    format, whose identifier list is kept in importance order so importance survives many
    merges; or any other text, which it condenses), and stays under ``target_tokens`` by
    dropping the lowest-value items first.

    ``counter`` (a ``windowfit.Counter``) measures exactly; without one a slightly pessimistic
    estimate is used. ``language`` forces ``"zh"`` or ``"en"`` headings instead of detecting.
    """

    # Called inline by the manager: it is fast and cannot hang, so no timeout thread needed.
    inline = True

    def __init__(
        self,
        *,
        counter: Any = None,
        language: str | None = None,
        max_item_chars: int = 160,
        tool_scan_chars: int = 6000,
        identifier_share: float = 0.5,
    ) -> None:
        if language not in (None, "auto", "zh", "en"):
            raise ValueError(f"language must be 'zh', 'en' or None, not {language!r}")
        if not 0 <= identifier_share <= 1:
            raise ValueError(f"identifier_share must be in [0, 1], got {identifier_share}")
        self.identifier_share = identifier_share
        self.counter = counter
        self.language = None if language == "auto" else language
        self.max_item_chars = max_item_chars
        self.tool_scan_chars = tool_scan_chars

    def with_counter(self, counter: Any) -> ExtractiveSummarizer:
        """A copy that measures with ``counter``."""
        return ExtractiveSummarizer(
            counter=counter,
            language=self.language,
            max_item_chars=self.max_item_chars,
            tool_scan_chars=self.tool_scan_chars,
            identifier_share=self.identifier_share,
        )

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(language={self.language!r})"

    # -- protocol -------------------------------------------------------------------------------

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        lang = self.language or (language if language in ("zh", "en") else None)
        lang = lang or _conversation_language(messages, previous_summary)
        items = self._parse_previous(previous_summary or "")
        items.extend(self._extract(messages, has_goal=any(i.section == "goal" for i in items)))
        return self._compose(items, max(16, int(target_tokens)), lang)

    async def asummarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        return self(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
        )

    # -- extraction -----------------------------------------------------------------------------

    def _tokens(self, text: str) -> int:
        if self.counter is not None:
            return int(self.counter.count(text))
        return _estimate_tokens(text)

    def _parse_previous(self, summary: str) -> list[_Item]:
        """Items of a previous summary; our own headings map back to sections."""
        items: list[_Item] = []
        section = "earlier"
        # Previous items sort before new ones (negative seq) and score a little below new ones
        # of the same kind; identifiers were rendered most important first, so their rank
        # carries their importance into this merge.
        base = {
            "goal": 1000.0,
            "requests": 4.0,
            "decisions": 6.5,
            "done": 2.5,
            "findings": 3.5,
            "earlier": 4.0,
        }
        lines = [ln.strip() for ln in summary.splitlines() if ln.strip()]
        n = len(lines)
        for k, line in enumerate(lines):
            heading = line.lstrip("#").strip().rstrip(":：").strip().lower()
            if line.startswith("#") and heading in _LABEL_TO_SECTION:
                section = _LABEL_TO_SECTION[heading]
                continue
            text = line[2:].strip() if line.startswith(("- ", "* ", "• ")) else line
            if not text:
                continue
            age = (n - k) / max(n, 1) * 0.4  # older lines lose a little
            seq = -(n - k)
            if section == "identifiers":
                idents = [i.strip() for i in text.split(_ID_SEP) if i.strip()]
                for rank, ident in enumerate(idents):
                    items.append(
                        _Item("identifiers", ident, 9.0 - 2.0 * rank / max(len(idents), 1), seq)
                    )
                continue
            sents = _sentences(text) if section == "earlier" else [text]
            for sent in sents or [text]:
                clipped = sent if section != "earlier" else _clip(sent, self.max_item_chars)
                items.append(
                    _Item(section, clipped, base[section] - (0 if section == "goal" else age), seq)
                )
                # identifiers inside a previous sentence outlive the sentence itself
                for ident, kind in _identifier_spans(sent, limit=6, context=True):
                    items.append(
                        _Item("identifiers", ident, 6.5 + _KIND_BONUS.get(kind, 0) - age, seq)
                    )
        return items

    def _extract(self, messages: Sequence[Message], *, has_goal: bool) -> list[_Item]:
        items: list[_Item] = []
        total = max(len(messages), 1)
        id_scores: dict[str, float] = {}
        id_seq: dict[str, float] = {}
        tool_names: dict[str, str] = {}  # tool_call_id -> tool name
        done: dict[str, list[str]] = {}  # tool name -> brief argument lists, in order
        done_seq: dict[str, float] = {}

        def add_ids(text: str, source: str, seq: float, limit: int | None = None) -> None:
            prose = source in ("user", "assistant")
            # sentence by sentence only when a cue ("remember", "记住") marks some of them
            split = prose and _CUE_RE.search(text) is not None
            for sent in _sentences(text) if split else [text]:
                cue = 1.5 if split and _CUE_RE.search(sent) else 0.0
                for ident, kind in _identifier_spans(sent, limit=limit, context=prose):
                    score = _SOURCE_SCORE[source] + _KIND_BONUS.get(kind, 0.0) + cue
                    prev = id_scores.get(ident)
                    # repeated mentions raise the score a little, capped
                    id_scores[ident] = (
                        score if prev is None else min(max(prev, score) + 0.5, score + 2)
                    )
                    id_seq.setdefault(ident, seq)

        for pos, msg in enumerate(messages):
            role = msg.get("role")
            recency = pos / total  # 0 oldest .. 1 newest in this batch
            seq = float(pos)
            if role in ("system", "developer"):
                continue  # system prompts are always sent verbatim; never summarize them
            if role == "user":
                raw = message_text(msg)
                add_ids(raw, "user", seq)
                text = _CODE_BLOCK_RE.sub(" [code] ", raw)
                if not text.strip():
                    continue
                if not has_goal:
                    items.append(_Item("goal", _clip(text, self.max_item_chars * 2), 1000.0, seq))
                    has_goal = True
                else:
                    score = 4.5 + recency + (0.5 if _GOAL_RE.search(text) else 0.0)
                    items.append(_Item("requests", _clip(text, self.max_item_chars), score, seq))
                for sent in _sentences(text):
                    if _CUE_RE.search(sent):
                        # a standing instruction or fact the user asked to keep
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 8.0 + recency, seq)
                        )
                    elif _DECISION_RE.search(sent):
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 6.5 + recency, seq)
                        )
            elif role == "assistant":
                for call in msg.get("tool_calls") or ():
                    fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
                    name = str(fn.get("name") or "tool")
                    if isinstance(call, Mapping) and call.get("id"):
                        tool_names[str(call["id"])] = name
                    brief = self._brief_args(fn.get("arguments"))
                    done.setdefault(name, [])
                    if brief and brief not in done[name]:
                        done[name].append(brief)
                    done_seq.setdefault(name, seq)
                    add_ids(str(fn.get("arguments") or ""), "tool_args", seq, limit=8)
                text = message_text({"content": msg.get("content")})
                if not text.strip():
                    continue
                add_ids(text, "assistant", seq, limit=12)
                prose = _CODE_BLOCK_RE.sub(" ", text)
                for k, sent in enumerate(_sentences(prose)):
                    if _ERROR_RE.search(sent):
                        items.append(
                            _Item("findings", _clip(sent, self.max_item_chars), 5.0 + recency, seq)
                        )
                    elif _DECISION_RE.search(sent):
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 6.0 + recency, seq)
                        )
                    elif k == 0 and len(sent) >= 16:
                        # the opening sentence of a reply usually states its conclusion
                        items.append(
                            _Item("findings", _clip(sent, self.max_item_chars), 2.0 + recency, seq)
                        )
            elif role in ("tool", "function"):
                text = message_text(msg)
                if len(text) > self.tool_scan_chars:
                    # errors and results sit at either end of long outputs (logs, tracebacks)
                    half = self.tool_scan_chars // 2
                    text = text[:half] + "\n" + text[-half:]
                name = tool_names.get(str(msg.get("tool_call_id")), msg.get("name") or "tool")
                errors: list[str] = []
                for m in _ERROR_RE.finditer(text):  # the lines holding the first two errors
                    lo = text.rfind("\n", 0, m.start()) + 1
                    hi = text.find("\n", m.end())
                    line = text[lo : hi if hi >= 0 else len(text)].strip()
                    if line not in errors:
                        errors.append(line)
                    if len(errors) == 2:
                        break
                for line in errors:
                    items.append(
                        _Item(
                            "findings",
                            _clip(f"{name}: {line}", self.max_item_chars),
                            5.0 + recency,
                            seq,
                        )
                    )
                # identifiers of a tool result: its head and tail are what a reader looks at
                add_ids(
                    text if len(text) <= 3000 else text[:2000] + "\n" + text[-1000:],
                    "tool",
                    seq,
                    limit=5,
                )

        for name, briefs in done.items():
            shown = ", ".join(briefs[:4]) + (", …" if len(briefs) > 4 else "")
            count = f" ×{len(briefs)}" if len(briefs) > 1 else ""
            text = f"{name}{count}" + (f" ({shown})" if shown else "")
            items.append(_Item("done", _clip(text, self.max_item_chars), 3.0, done_seq[name]))
        for ident, score in id_scores.items():
            items.append(_Item("identifiers", ident, score, id_seq[ident]))
        return items

    @staticmethod
    def _brief_args(arguments: Any) -> str:
        if arguments is None or arguments == "":
            return ""
        data = arguments
        if isinstance(arguments, str):
            try:
                data = json.loads(arguments)
            except ValueError:
                return _clip(arguments, 60)
        if isinstance(data, Mapping):
            parts = []
            for key, value in list(data.items())[:2]:
                if isinstance(value, (str, int, float, bool)):
                    parts.append(f"{key}={_clip(str(value), 48)}")
            return ", ".join(parts)
        return _clip(json.dumps(data, ensure_ascii=False), 60)

    # -- composition ----------------------------------------------------------------------------

    def _compose(self, items: list[_Item], target: int, lang: str) -> str:
        labels = _LABELS[lang]
        # Deduplicate: identical text in the same section keeps its best score, earliest seq
        unique: dict[tuple[str, str], _Item] = {}
        for item in items:
            key = (item.section, item.text.casefold())
            prev = unique.get(key)
            if prev is None:
                unique[key] = item
            else:
                prev.score = max(prev.score, item.score)
                prev.seq = min(prev.seq, item.seq)
        pool = list(unique.values())
        # Identifiers contained in a longer identifier are the same fact: keep the longer one
        idents = sorted((i for i in pool if i.section == "identifiers"), key=lambda i: -len(i.text))
        kept_ids: list[_Item] = []
        for item in idents:
            holder = next((k for k in kept_ids if item.text in k.text), None)
            if holder is None:
                kept_ids.append(item)
            else:
                holder.score = max(holder.score, item.score)
                holder.seq = min(holder.seq, item.seq)
        # Only one goal: the earliest
        goals = sorted((i for i in pool if i.section == "goal"), key=lambda i: i.seq)
        pool = [i for i in pool if i.section not in ("goal", "identifiers")] + goals[:1] + kept_ids
        for item in pool:
            # a bullet costs its text plus the "- " / separator and newline
            item.tokens = self._tokens(item.text) + 2

        header_cost = {s: self._tokens(f"## {labels[s]}") + 1 for s in (*_SECTIONS, "earlier")}
        # Deterministic order: score desc, then newest first, then text
        ranked = sorted(pool, key=lambda i: (-i.score, -i.seq, i.text))
        chosen: list[_Item] = []
        state = {"used": 0, "ids": 0}
        sections_used: set[str] = set()
        # Identifiers first get at most this share, so a conversation full of IDs still keeps
        # its requests and decisions; a second pass hands any unused room to whatever is left.
        id_quota = int(target * self.identifier_share)

        def take(item: _Item, respect_quota: bool) -> bool:
            if item.section == "identifiers" and any(
                item.text in c.text for c in chosen if c.section != "identifiers"
            ):
                return True  # already visible verbatim in a chosen sentence
            cost = item.tokens + (0 if item.section in sections_used else header_cost[item.section])
            if respect_quota and item.section == "identifiers" and state["ids"] + cost > id_quota:
                return False
            if state["used"] + cost > target:
                if item.section != "goal":
                    return False
                # the goal always stays, shortened to what fits
                room = max(8, target - state["used"] - header_cost["goal"])
                item = _Item("goal", self._fit_text(item.text, room), item.score, item.seq)
                cost = self._tokens(item.text) + 2 + header_cost["goal"]
            chosen.append(item)
            state["used"] += cost
            if item.section == "identifiers":
                state["ids"] += cost
            sections_used.add(item.section)
            if item.section != "identifiers":
                # identifiers now shown inside this sentence no longer need their own entry
                for c in [c for c in chosen if c.section == "identifiers" and c.text in item.text]:
                    chosen.remove(c)
                    state["used"] -= c.tokens
                    state["ids"] -= c.tokens
            return True

        leftover = [item for item in ranked if not take(item, respect_quota=True)]
        for item in leftover:
            take(item, respect_quota=False)
        return self._render(chosen, labels)

    def _fit_text(self, text: str, max_tokens: int) -> str:
        if self._tokens(text) <= max_tokens:
            return text
        lo, hi = 1, len(text)
        while lo < hi:  # longest prefix within budget
            mid = (lo + hi + 1) // 2
            if self._tokens(text[:mid] + "…") <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo].rstrip() + "…"

    @staticmethod
    def _render(chosen: list[_Item], labels: Mapping[str, str]) -> str:
        blocks: list[str] = []
        for section in ("goal", "earlier", *_SECTIONS[1:]):
            members = [i for i in chosen if i.section == section]
            if not members:
                continue
            if section == "identifiers":
                # most important first: the next merge reads importance back from the rank
                members.sort(key=lambda i: (-i.score, i.seq, i.text))
                body = "- " + _ID_SEP.join(i.text for i in members)
            else:
                members.sort(key=lambda i: (i.seq, i.text))
                body = "\n".join(f"- {i.text}" for i in members)
            blocks.append(f"## {labels[section]}\n{body}")
        return "\n".join(blocks)


# ---------------------------------------------------------------------------------------------
# Prompts for LLM summaries (seed 001's structure)
# ---------------------------------------------------------------------------------------------

_SYSTEM_PROMPT = {
    "en": (
        "You maintain the running summary of a long conversation between a user and an AI "
        "assistant that uses tools. You merge the previous summary with newly archived messages "
        "into one updated summary that lets the assistant continue the work without the original "
        "messages. Never invent facts. Output only the summary."
    ),
    "zh": (
        "你负责维护用户与使用工具的 AI 助手之间长对话的滚动摘要。请把已有摘要与新归档的消息合并为一份更新后的"
        "摘要，使助手无需原始消息也能继续工作。不要编造任何信息。只输出摘要本身。"
    ),
}

_USER_PROMPT = {
    "en": """Compress the conversation history below into a structured summary, keeping the key information.

## Previous summary
{previous}

## New messages to merge ({count} messages, about {source_tokens} tokens)
{transcript}

## Summary requirements
1. **Goal**: what is the user trying to accomplish?
2. **Key decisions**: which important decisions were made?
3. **Done**: which tasks are complete? (as a list)
4. **To do**: what is still open?
5. **Findings**: key information, results and problems (including errors).
6. **Key identifiers**: copy verbatim every ID, name, file path, URL, number, date and amount
   that may matter later (for example `classId=C-4821`).

Carry over everything from the previous summary that is still relevant, and never drop an
identifier. {length_rule} Write in English.""",
    "zh": """请将以下对话历史压缩为结构化摘要，保留关键信息：

## 已有摘要
{previous}

## 需要合并的新消息（共 {count} 条，约 {source_tokens} tokens）
{transcript}

## 摘要要求
1. **任务目标**：用户想要完成什么？
2. **关键决策**：做了哪些重要决定？
3. **已完成工作**：完成了哪些任务？（列表形式）
4. **待处理事项**：还有什么未完成？
5. **重要发现**：有哪些关键信息、结果或问题（包括错误）？
6. **关键标识**：原样保留后续可能用到的所有 ID、名称、文件路径、URL、数字、日期和金额（例如 `classId=C-4821`）。

保留已有摘要中仍然相关的全部内容，不要丢弃任何标识。{length_rule}请用简洁的中文输出。""",
}


def _length_rule(target_tokens: int, source_tokens: int, lang: str) -> str:
    # Seed 003's tiers: short material gets a brief gist, long material a layered summary.
    if lang == "zh":
        if source_tokens < 300:
            return f"内容较短，请简要概括，不超过 {max(30, target_tokens // 2)} tokens。"
        if source_tokens < 1500:
            return f"请用约 {target_tokens} tokens 总结关键信息和要点，每部分不超过 3 行。"
        return f"请用约 {target_tokens} tokens 分层总结（主要话题、关键决策、重要细节），每部分不超过 5 行。"
    if source_tokens < 300:
        return f"The material is short: summarize it briefly in at most {max(30, target_tokens // 2)} tokens."
    if source_tokens < 1500:
        return f"Aim for about {target_tokens} tokens, at most 3 lines per section."
    return (
        f"Aim for about {target_tokens} tokens, layered (main topics, key decisions, important "
        f"details), at most 5 lines per section."
    )


def render_transcript(messages: Sequence[Message], *, max_chars_per_message: int = 2000) -> str:
    """The messages as a compact transcript for an LLM summarizer.

    Long contents keep their head and tail (where results and errors usually are).
    """
    lines: list[str] = []
    for msg in messages:
        role = str(msg.get("role", "?"))
        if role in ("system", "developer"):
            continue
        content = message_text({"content": msg.get("content")})
        if len(content) > max_chars_per_message:
            head = int(max_chars_per_message * 0.7)
            tail = max_chars_per_message - head
            omitted = len(content) - head - tail
            content = f"{content[:head]}\n…[{omitted} characters omitted]…\n{content[-tail:]}"
        if role == "tool":
            name = msg.get("name") or msg.get("tool_call_id") or "tool"
            lines.append(f"TOOL RESULT [{name}]: {content}")
            continue
        label = role.upper()
        if content.strip():
            lines.append(f"{label}: {content}")
        for call in msg.get("tool_calls") or ():
            fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            if len(args) > max_chars_per_message:
                args = args[:max_chars_per_message] + "…"
            lines.append(f"{label} → TOOL CALL {fn.get('name', '?')}({args})")
    return "\n".join(lines)


def build_summary_prompt(
    messages: Sequence[Message],
    *,
    previous_summary: str = "",
    target_tokens: int = 400,
    language: str = "en",
    max_chars_per_message: int = 2000,
) -> list[dict[str, str]]:
    """The chat messages asking an LLM to merge ``messages`` into ``previous_summary``."""
    lang = language if language in _USER_PROMPT else "en"
    transcript = render_transcript(messages, max_chars_per_message=max_chars_per_message)
    source_tokens = _estimate_tokens(transcript)
    none = "（无）" if lang == "zh" else "(none)"
    user = _USER_PROMPT[lang].format(
        previous=previous_summary.strip() or none,
        count=len(messages),
        source_tokens=source_tokens,
        transcript=transcript or none,
        length_rule=_length_rule(target_tokens, source_tokens, lang),
    )
    return [{"role": "system", "content": _SYSTEM_PROMPT[lang]}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------------------------
# The LLM summarizer
# ---------------------------------------------------------------------------------------------

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# Reasoning models reject max_tokens/temperature and take max_completion_tokens instead.
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else None


class LLMSummarizer:
    """Summaries from any OpenAI-compatible chat-completions endpoint (official ``openai`` SDK).

    ``client`` may be an ``openai.OpenAI`` or ``openai.AsyncOpenAI``; otherwise one is made
    from ``base_url`` / ``api_key`` (OpenAI, DashScope compatible mode for Qwen, DeepSeek,
    vLLM, Ollama...). Timeouts and retries are the SDK's: exponential backoff with jitter,
    honouring ``Retry-After``, on connection errors, timeouts, 408/409/429 and 5xx.

    Every argument falls back to an environment variable, then a default:
    ``model`` ← ``WINDOWFIT_SUMMARY_MODEL`` (``gpt-4o-mini``), ``base_url`` ←
    ``WINDOWFIT_SUMMARY_BASE_URL`` (then the SDK's ``OPENAI_BASE_URL``), ``api_key`` ←
    ``WINDOWFIT_SUMMARY_API_KEY`` (then ``OPENAI_API_KEY``), ``timeout`` (per request) ←
    ``WINDOWFIT_SUMMARY_REQUEST_TIMEOUT`` (60 s), ``max_retries`` ←
    ``WINDOWFIT_SUMMARY_MAX_RETRIES`` (2). ``max_input_tokens`` caps how much history one call
    folds (the manager summarizes longer backlogs over several turns).

    Raises :class:`SummaryError` for empty, refused or cut-off answers, and the SDK's errors
    (``openai.APIStatusError``, ``openai.APITimeoutError``...) once retries are exhausted; the
    manager treats both as a failed, retryable summarization.
    """

    inline = False

    def __init__(
        self,
        client: Any = None,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        temperature: float | None = 0.2,
        language: str | None = None,
        async_client: Any = None,
        max_chars_per_message: int = 2000,
        extra_body: Mapping[str, Any] | None = None,
        max_input_tokens: int | None = 24_000,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "LLMSummarizer needs the openai package: pip install 'windowfit[openai]'"
            ) from exc
        self._openai = openai
        self.model = model or _env("WINDOWFIT_SUMMARY_MODEL") or "gpt-4o-mini"
        env_timeout = _env("WINDOWFIT_SUMMARY_REQUEST_TIMEOUT")
        env_retries = _env("WINDOWFIT_SUMMARY_MAX_RETRIES")
        try:
            self.timeout = float(timeout if timeout is not None else env_timeout or 60.0)
            self.max_retries = int(max_retries if max_retries is not None else env_retries or 2)
        except ValueError as exc:
            raise ValueError(
                f"invalid WINDOWFIT_SUMMARY_REQUEST_TIMEOUT / WINDOWFIT_SUMMARY_MAX_RETRIES: {exc}"
            ) from None
        if self.timeout <= 0 or self.max_retries < 0:
            raise ValueError("timeout must be > 0 and max_retries >= 0")
        if language not in (None, "auto", "zh", "en"):
            raise ValueError(f"language must be 'zh', 'en' or None, not {language!r}")
        self.language = None if language == "auto" else language
        self.temperature = temperature
        self.max_chars_per_message = max_chars_per_message
        self.extra_body = dict(extra_body) if extra_body else None
        self.max_input_tokens = max_input_tokens

        base_url = base_url or _env("WINDOWFIT_SUMMARY_BASE_URL")
        api_key = api_key or _env("WINDOWFIT_SUMMARY_API_KEY")
        if api_key is None and base_url is not None and not _env("OPENAI_API_KEY"):
            # Local servers (vLLM, Ollama) ignore the key but the SDK insists on one.
            api_key = "EMPTY"
        self._client_kwargs: dict[str, Any] = {
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }
        if base_url is not None:
            self._client_kwargs["base_url"] = base_url
        if api_key is not None:
            self._client_kwargs["api_key"] = api_key

        self._sync_client = None
        self._async_client = async_client
        self._async_clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        # Clients we build ourselves may be rebuilt per event loop; the user's are used as given.
        self._own_clients = client is None and async_client is None
        if client is not None:
            if isinstance(client, openai.AsyncOpenAI):
                self._async_client = client
            else:
                self._sync_client = client
            if timeout is not None or max_retries is not None:
                opts = {"timeout": self.timeout, "max_retries": self.max_retries}
                if self._sync_client is not None:
                    self._sync_client = self._sync_client.with_options(**opts)
                if self._async_client is not None:
                    self._async_client = self._async_client.with_options(**opts)
        elif self._async_client is None:
            # Fail at construction, not on the first long conversation, when misconfigured.
            self._sync_client = openai.OpenAI(**self._client_kwargs)

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self.model!r}, timeout={self.timeout}, max_retries={self.max_retries})"

    # -- request building -----------------------------------------------------------------------

    def _request(
        self,
        messages: Sequence[Message],
        previous_summary: str,
        target_tokens: int,
        language: str | None,
    ) -> dict[str, Any]:
        lang = self.language or (language if language in ("zh", "en") else None)
        lang = lang or _conversation_language(messages, previous_summary)
        prompt = build_summary_prompt(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=lang,
            max_chars_per_message=self.max_chars_per_message,
        )
        # Room for the model to overshoot a little; a longer answer is cut and then rejected.
        limit = int(target_tokens * 2.5) + 64
        kwargs: dict[str, Any] = {"model": self.model, "messages": prompt}
        if self.model.lower().rsplit("/", 1)[-1].startswith(_REASONING_PREFIXES):
            kwargs["max_completion_tokens"] = limit + 2048  # reasoning tokens count here too
        else:
            kwargs["max_tokens"] = limit
            if self.temperature is not None:
                kwargs["temperature"] = self.temperature
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        return kwargs

    @staticmethod
    def _answer(response: Any) -> str:
        choices = getattr(response, "choices", None)
        if not choices:
            raise SummaryError("the summary response has no choices")
        choice = choices[0]
        message = getattr(choice, "message", None)
        content = getattr(message, "content", None) if message is not None else None
        if getattr(choice, "finish_reason", None) == "length":
            raise SummaryError("the summary was cut off at the token limit")
        if getattr(message, "refusal", None):
            raise SummaryError(f"the summarizer refused: {message.refusal}")
        if not isinstance(content, str):
            raise SummaryError("the summary response has no text content")
        text = _THINK_RE.sub("", content).strip()
        if not text:
            raise SummaryError("the summarizer returned an empty summary")
        return text

    # -- protocol -------------------------------------------------------------------------------

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        kwargs = self._request(messages, previous_summary, target_tokens, language)
        client = self._sync_client or self._sync_twin()
        response = client.chat.completions.create(**kwargs)
        return self._answer(response)

    def _sync_twin(self) -> Any:
        """A sync client configured like the given async one, for sync calls.

        Driving the async client from a throwaway event loop would leave its connection pool
        bound to a closed loop, so sync calls get a client of their own instead.
        """
        with self._lock:
            if self._sync_client is None:
                c = self._async_client
                self._sync_client = self._openai.OpenAI(
                    api_key=c.api_key,
                    organization=getattr(c, "organization", None),
                    project=getattr(c, "project", None),
                    base_url=str(c.base_url),
                    timeout=c.timeout,
                    max_retries=c.max_retries,
                    default_headers=getattr(c, "_custom_headers", None) or None,
                    default_query=getattr(c, "_custom_query", None) or None,
                )
            return self._sync_client

    async def asummarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        kwargs = self._request(messages, previous_summary, target_tokens, language)
        return await self._acreate(kwargs)

    async def _acreate(self, kwargs: dict[str, Any]) -> str:
        if self._async_client is not None:
            client = self._async_client
        elif not self._own_clients:
            # Only a user-supplied sync client: keep the event loop free with a worker thread.
            response = await asyncio.to_thread(self._sync_client.chat.completions.create, **kwargs)
            return self._answer(response)
        else:
            client = self._loop_client()
        response = await client.chat.completions.create(**kwargs)
        return self._answer(response)

    def _loop_client(self) -> Any:
        # An AsyncOpenAI's connection pool belongs to one event loop; keep one per loop.
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._openai.AsyncOpenAI(**self._client_kwargs)
                self._async_clients[loop] = client
        return client
