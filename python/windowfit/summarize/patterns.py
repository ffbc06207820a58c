"""What the extractive summarizer looks for: identifiers, decisions, errors, goals, sentences."""

from __future__ import annotations

import re

from windowfit.summarize.base import _CJK_RE

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
_CODE_BLOCK_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)


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
