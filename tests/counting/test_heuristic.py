"""The heuristic estimate (``Counter.heuristic()``): its measured error against the exact
tokenizers, by corpus category, within generous bounds; and a Python mirror of
src/tokenize/heuristic.rs that must agree with it on every corpus text.

The error is measured against max(cl100k_base, o200k_base) per text (the estimate is meant to
cover both; on Chinese cl100k_base is ~1.5x o200k_base, so no single estimate is close to
both) and reported against each. ``PYTHONPATH=tests python tests/counting/test_heuristic.py`` prints the table that
goes into benches/RESULTS.md; ``PYTHONPATH=tests python tests/counting/test_heuristic.py --fit`` refits the constants
(85th-percentile regression: estimates lean high) and prints them for heuristic.rs. The shipped
constants are that fit except DIGIT_GROUP and CJK_COMMON_CHAR, set to their exact cl100k value
1.0 (the fit says 0.97-0.98), and BRAHMIC_CHAR 2.01 (an earlier fit; the refit says ~1.65).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import pytest
import windowfit as wf
from _corpus import CATEGORIES, corpus, tiktoken_cl100k
from hypothesis import given, settings
from hypothesis import strategies as st

# --------------------------------------------------------------------------- the Python mirror
# Line for line the algorithm of src/tokenize/heuristic.rs (same classes, same arithmetic in
# the same order, so the same float sums). Change both together.

C = {
    "LETTER_RUN": 1.0,
    "LETTER_FREE": 7,
    "LETTER_EXCESS": 0.28,
    "LETTER_NON_ASCII": 1.87,
    "LETTER_BARE": 0.37,
    "LETTER_CAPS": 0.07,
    "DIGIT_GROUP": 1.0,
    "CJK_COMMON_CHAR": 1.0,
    "HAN_CHAR": 2.3,
    "KANA_CHAR": 1.78,
    "HANGUL_CHAR": 2.17,
    "SPACE_RUN": 0.5,
    "SPACE_EXTRA": 0.01,
    "NEWLINE_RUN": 1.2,
    "NEWLINE_EXTRA": 0.65,
    "PUNCT_RUN": 1.12,
    "PUNCT_EXTRA": 0.06,
    "CJK_PUNCT_CHAR": 1.31,
    "ALPHA2_RUN": 0.1,
    "ALPHA2_CHAR": 0.67,
    "RTL_RUN": 2.04,
    "RTL_CHAR": 0.72,
    "BRAHMIC_CHAR": 2.01,
    "OTHER_BYTE": 0.78,
}

_ASCII_SPACE = "\t\x0b\x0c "
_ASCII_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_WS = {0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
_LETTERISH = {"Letter", "Alpha2", "Rtl", "Brahmic", "Han", "Kana", "Hangul"}


def _common_cjk() -> frozenset[int]:
    """The kana / Hangul / Han characters cl100k_base encodes as one token (heuristic.rs's
    CJK_COMMON table is this set)."""
    enc = tiktoken_cl100k()
    ranges = [
        (0x3040, 0x3100),
        (0x31F0, 0x3200),
        (0x3400, 0x4DC0),
        (0x4E00, 0xA000),
        (0xAC00, 0xD7B0),
        (0x1100, 0x1200),
        (0x3130, 0x3190),
        (0xF900, 0xFB00),
    ]
    return frozenset(
        cp for a, b in ranges for cp in range(a, b) if len(enc.encode_ordinary(chr(cp))) == 1
    )


_COMMON: frozenset[int] | None = None


def classify(ch: str) -> str:
    o = ord(ch)
    if o < 0x80:
        if 0x61 <= o <= 0x7A or 0x41 <= o <= 0x5A:
            return "Letter"
        if 0x30 <= o <= 0x39:
            return "Digit"
        if ch in "\n\r":
            return "Newline"
        if ch in _ASCII_SPACE:
            return "Space"
        return "Punct" if ch in _ASCII_PUNCT else "Other"
    if o in _WS:
        return "Space"
    if o in (0xD7, 0xF7):
        return "Other"
    if 0xC0 <= o <= 0x24F:
        return "Letter"
    if 0x300 <= o <= 0x36F:
        return "Mark"
    if 0x370 <= o <= 0x58F or 0x1F00 <= o <= 0x1FFF:
        return "Alpha2"
    if 0x590 <= o <= 0x7FF or 0xFB1D <= o <= 0xFDFF or 0xFE70 <= o <= 0xFEFF:
        return "Rtl"
    if 0x1E00 <= o <= 0x1EFF:
        return "Letter"
    if 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F or 0xAC00 <= o <= 0xD7AF:
        return "Hangul"
    if 0x800 <= o <= 0x1FFF:
        return "Brahmic"
    if 0x3040 <= o <= 0x30FF or 0x31F0 <= o <= 0x31FF:
        return "Kana"
    if (
        0x3400 <= o <= 0x4DBF
        or 0x4E00 <= o <= 0x9FFF
        or 0xF900 <= o <= 0xFAFF
        or 0x20000 <= o <= 0x3FFFF
    ):
        return "Han"
    if 0x3000 <= o <= 0x303F or 0xFF00 <= o <= 0xFFEF:
        return "CjkPunct"
    return "Other"


def _run_cost(
    cls: str, run: str, prev: str | None, nxt: str | None, c: dict[str, Any] = C
) -> float:
    n = len(run)
    if cls == "Letter":
        excess = float(max(n - c["LETTER_FREE"], 0))
        non_ascii = float(sum(1 for ch in run if ord(ch) >= 0x80))
        caps = float(sum(1 for ch in run[1:] if "A" <= ch <= "Z"))
        cost = (
            c["LETTER_RUN"]
            + c["LETTER_EXCESS"] * excess
            + c["LETTER_NON_ASCII"] * non_ascii
            + c["LETTER_CAPS"] * caps
        )
        if prev not in ("Space", "Punct"):
            cost += c["LETTER_BARE"]
        return cost
    if cls == "Digit":
        return c["DIGIT_GROUP"] * float(-(-n // 3))
    if cls in ("Han", "Kana", "Hangul"):
        assert _COMMON is not None
        rare = {"Han": c["HAN_CHAR"], "Kana": c["KANA_CHAR"], "Hangul": c["HANGUL_CHAR"]}[cls]
        common = sum(1 for ch in run if ord(ch) in _COMMON)
        return c["CJK_COMMON_CHAR"] * float(common) + rare * float(n - common)
    if cls == "Space":
        return c["SPACE_RUN"] + c["SPACE_EXTRA"] * float(n - 2) if n >= 2 else 0.0
    if cls == "Newline":
        return c["NEWLINE_RUN"] + c["NEWLINE_EXTRA"] * float(n - 1)
    if cls == "Punct":
        effective = n - (1 if nxt in _LETTERISH else 0)
        return c["PUNCT_RUN"] + c["PUNCT_EXTRA"] * float(effective - 1) if effective > 0 else 0.0
    if cls == "CjkPunct":
        return c["CJK_PUNCT_CHAR"] * float(n)
    if cls == "Alpha2":
        return c["ALPHA2_RUN"] + c["ALPHA2_CHAR"] * float(n)
    if cls == "Rtl":
        return c["RTL_RUN"] + c["RTL_CHAR"] * float(n)
    if cls == "Brahmic":
        return c["BRAHMIC_CHAR"] * float(n)
    return c["OTHER_BYTE"] * float(len(run.encode("utf-8", "surrogatepass")))


def runs(text: str) -> list[tuple[str, str]]:
    """(class, text) runs; combining marks join the run before them."""
    classes = [classify(ch) for ch in text]
    out, i = [], 0
    while i < len(text):
        j = i + 1
        while j < len(text) and (classes[j] == classes[i] or classes[j] == "Mark"):
            j += 1
        out.append((classes[i], text[i:j]))
        i = j
    return out


def py_estimate(text: str, c: dict[str, Any] = C) -> int:
    global _COMMON
    if _COMMON is None:
        _COMMON = _common_cjk()
    if not text:
        return 0
    rs = runs(text)
    total = 0.0
    for k, (cls, run) in enumerate(rs):
        prev = rs[k - 1][0] if k else None
        nxt = rs[k + 1][0] if k + 1 < len(rs) else None
        total += _run_cost(cls, run, prev, nxt, c)
    return max(math.ceil(total), 1)


# --------------------------------------------------------------------------- measuring

MEASURED = ("english", "chinese", "multilingual", "code", "json", "logs", "mixed", "fuzz", "edge")


def _stats(est: Sequence[int], ref: Sequence[int]) -> dict[str, float]:
    pairs = [(e, r) for e, r in zip(est, ref) if r > 0]
    rel = [(e - r) / r for e, r in pairs]
    return {
        "n": len(pairs),
        "signed": sum(rel) / len(rel),
        "abs": sum(abs(x) for x in rel) / len(rel),
        "total": sum(e for e, _ in pairs) / sum(r for _, r in pairs) - 1,
        "under": sum(1 for x in rel if x < 0) / len(rel),
        "under20": sum(1 for x in rel if x < -0.2) / len(rel),
    }


def measure() -> dict[str, dict[str, dict[str, float]]]:
    """category -> reference -> error stats of ``Counter.heuristic()``."""
    h = wf.Counter.heuristic(cache_entries=0)
    refs = {
        "cl100k": wf.Counter(encoding="cl100k_base"),
        "o200k": wf.Counter(encoding="o200k_base"),
    }
    out: dict[str, dict[str, dict[str, float]]] = {}
    by_cat: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for s in corpus():
        by_cat[s.category].append(s.text)
    for cat in MEASURED:
        texts = by_cat[cat]
        est = h.count_many(texts)
        counts = {name: c.count_many(texts) for name, c in refs.items()}
        envelope = [max(a, b) for a, b in zip(counts["cl100k"], counts["o200k"])]
        out[cat] = {
            "max": _stats(est, envelope),
            **{name: _stats(est, v) for name, v in counts.items()},
        }
    return out


@pytest.fixture(scope="module")
def errors() -> dict[str, dict[str, dict[str, float]]]:
    return measure()


# Generous bounds on the measured error (README / RESULTS.md have the actual numbers).
MAIN = ("english", "chinese", "code", "json", "logs", "mixed")


@pytest.mark.parametrize("category", MAIN)
def test_mean_abs_error_vs_envelope(errors: dict[str, Any], category: str) -> None:
    e = errors[category]["max"]
    assert e["abs"] < 0.30, f"{category}: mean |error| {e['abs']:.1%} vs max(cl100k, o200k)"


@pytest.mark.parametrize("category", MAIN)
def test_rarely_undercounts(errors: dict[str, Any], category: str) -> None:
    e = errors[category]["max"]
    limit = 0.10 if category == "chinese" else 0.25
    assert e["under"] < limit, f"{category}: undercounts {e['under']:.1%} of texts"
    assert e["under20"] < 0.05, (
        f"{category}: undercounts by over 20% on {e['under20']:.1%} of texts"
    )
    assert e["total"] > 0, (
        f"{category}: the summed estimate is below the summed count ({e['total']:+.1%})"
    )


@pytest.mark.parametrize("category", ["english", "code", "json", "logs"])
def test_close_to_each_openai_encoding_where_they_agree(
    errors: dict[str, Any], category: str
) -> None:
    for ref in ("cl100k", "o200k"):
        e = errors[category][ref]
        assert e["abs"] < 0.30, f"{category} vs {ref}: mean |error| {e['abs']:.1%}"
        assert abs(e["total"]) < 0.25, f"{category} vs {ref}: total error {e['total']:+.1%}"


def test_chinese_is_not_undercounted_like_chars_over_4() -> None:
    # the failure the estimate exists to avoid: chars/4 undercounts Chinese several times over
    h = wf.Counter.heuristic()
    zh = [s.text for s in corpus() if s.category == "chinese"]
    est, ref = sum(h.count_many(zh)), sum(wf.Counter(encoding="o200k_base").count_many(zh))
    assert est >= ref
    assert sum(len(t) for t in zh) / 4 < ref / 2


def test_estimate_is_not_exact_and_cannot_encode() -> None:
    h = wf.Counter.heuristic()
    assert not h.is_exact
    assert h.count("") == 0
    assert h.count(" ") >= 1
    with pytest.raises(ValueError):
        h.encode("x")


@settings(max_examples=300, deadline=None)
@given(a=st.text(max_size=200), b=st.text(max_size=200))
def test_property_estimate_is_sane(a: str, b: str) -> None:
    h = wf.Counter.heuristic(cache_entries=0)
    n = h.count(a)
    assert (n == 0) == (a == "")
    assert n <= 2 * len(a.encode("utf-8")) + 1  # bounded by the bytes
    # joining two texts merges at most the two runs at the seam: a few tokens, never more
    assert h.count(a + b) >= h.count(a) + h.count(b) - 6


# Independent of the mirror: which CJK characters are "common" is decided by tiktoken alone.
CJK_SCRIPTS = {
    "han": (0x4E00, 0x9FFF, "HAN_CHAR"),
    "kana": (0x3041, 0x30FF, "KANA_CHAR"),
    "hangul": (0xAC00, 0xD7A3, "HANGUL_CHAR"),
}


@pytest.mark.parametrize("script", list(CJK_SCRIPTS))
def test_cjk_characters_cl100k_encodes_whole_cost_one(script: str) -> None:
    """The documented rule, checked against tiktoken over every character of the block: a
    character cl100k_base encodes as one token costs 1, any other its script's per-character
    cost (2.3 Han, 1.78 kana, 2.17 Hangul). A run of 10 shows the cost without rounding
    hiding it. 776 characters are common across the three blocks (RESULTS.md)."""
    lo, hi, const = CJK_SCRIPTS[script]
    enc = tiktoken_cl100k()
    h = wf.Counter.heuristic(cache_entries=0)
    common = rare = 0
    wrong = []
    for cp in range(lo, hi + 1):
        ch = chr(cp)
        one = len(enc.encode_ordinary(ch)) == 1
        want = 10 if one else math.ceil(10 * C[const])
        got = h.count(ch * 10)
        if got != want:
            wrong.append((hex(cp), one, got, want))
        common += one
        rare += not one
    assert not wrong, f"{len(wrong)} characters: {wrong[:5]}"
    assert common > 0 and rare > 0  # both sides of the rule were exercised


def test_rust_estimator_equals_its_python_mirror() -> None:
    """Guards the refit tool (``PYTHONPATH=tests python tests/counting/test_heuristic.py --fit`` runs the mirror), not
    the estimate: agreeing with a copy of itself proves nothing about the estimate's quality,
    which the error tests above and the CJK test measure against tiktoken."""
    h = wf.Counter.heuristic(cache_entries=0)
    samples = corpus()
    ours = h.count_many([s.text for s in samples])
    bad = [
        (s.category, ascii(s.text[:80]), r, py_estimate(s.text))
        for s, r in zip(samples, ours)
        if r != py_estimate(s.text)
    ]
    assert not bad, f"{len(bad)} texts differ (category, text, rust, python): {bad[:5]}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "hello",
        "Hello, world!",
        "你好，世界",
        "cafe\u0301",
        "ΣΊΣΥΦΟΣ",
        "مرحبا",
        "नमस्ते",
        "😀👍🏽",
        "x = [1, 2, 3]\n    return x\n",
        "   \n\n\t",
        "1234567",
        "上下文窗口 context",
    ],
)
def test_rust_estimator_equals_mirror_on_samples(text: str) -> None:
    assert wf.Counter.heuristic(cache_entries=0).count(text) == py_estimate(text)


# --------------------------------------------------------------------------- report / fit


def _report() -> str:
    errs = measure()
    lines = [
        (
            "| category | texts | vs max(cl100k, o200k): mean signed | mean abs | total | texts under | "
            "vs cl100k: signed / abs | vs o200k: signed / abs |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cat in MEASURED:
        m, c, o = errs[cat]["max"], errs[cat]["cl100k"], errs[cat]["o200k"]
        lines.append(
            f"| {cat} | {m['n']:.0f} | {m['signed']:+.1%} | {m['abs']:.1%} | {m['total']:+.1%} | {m['under']:.1%} | "
            f"{c['signed']:+.1%} / {c['abs']:.1%} | {o['signed']:+.1%} / {o['abs']:.1%} |"
        )
    return "\n".join(lines)


def _fit() -> dict[str, float]:  # pragma: no cover - a maintenance tool
    """Refit the linear constants by 85th-percentile regression (IRLS) on the corpus, every
    category weighted equally, against max(cl100k, o200k). Needs numpy."""
    import numpy as np

    py_estimate("")  # loads the CJK_COMMON set
    names = [k for k in C if k != "LETTER_FREE"]
    samples = corpus()
    cl, o = wf.Counter(encoding="cl100k_base"), wf.Counter(encoding="o200k_base")
    y = np.array(
        [
            max(a, b)
            for a, b in zip(
                cl.count_many([s.text for s in samples]), o.count_many([s.text for s in samples])
            )
        ],
        float,
    )
    # the estimate is linear in the constants: feature k = the estimate's derivative
    rows = []
    for s in samples:
        base = {k: 0.0 for k in names} | {"LETTER_FREE": C["LETTER_FREE"]}
        rs = runs(s.text)
        feats = []
        for k in names:
            unit = dict(base, **{k: 1.0})
            feats.append(
                sum(
                    _run_cost(
                        cls,
                        r,
                        rs[i - 1][0] if i else None,
                        rs[i + 1][0] if i + 1 < len(rs) else None,
                        unit,
                    )
                    for i, (cls, r) in enumerate(rs)
                )
            )
        rows.append(feats)
    X = np.array(rows)
    cats = np.array([s.category for s in samples])
    keep = (y > 0) & np.isin(cats, MEASURED)
    weight = np.array(
        [(0.3 if c in ("fuzz", "edge") else 1.0) / np.sum(keep & (cats == c)) for c in cats]
    )
    A, b, base_w = X[keep] / y[keep, None], (y[keep] - 0.5) / y[keep], weight[keep]
    w = np.linalg.lstsq(A, b, rcond=None)[0]
    tau = 0.85
    for _ in range(60):
        r = A @ w - b
        sw = np.sqrt(base_w * np.where(r < 0, tau, 1 - tau) / np.maximum(np.abs(r), 1e-3))
        w = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)[0]
    return {k: round(max(float(v), 0.0), 2) for k, v in zip(names, w)}


if __name__ == "__main__":  # pragma: no cover
    if "--fit" in sys.argv:
        for k, v in _fit().items():
            print(f"{k} = {v}")
    else:
        print(_report())
