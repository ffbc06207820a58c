"""``windowfit models``: the model registry as a table."""

from __future__ import annotations

import argparse
from dataclasses import asdict

from windowfit.cli._output import Out, print_json

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="known models: context window, output limit, prices, tokenizer, exact or estimated",
    )
    p.add_argument("--provider", help="only this provider (openai, anthropic, qwen, deepseek...)")
    p.add_argument("--json", action="store_true", help="print the registry as JSON")
    p.set_defaults(func=run)


def _price(p: float | None) -> str:
    return "-" if p is None else f"${p:g}"


def run(args: argparse.Namespace) -> int:
    import windowfit as wf

    models = wf.list_models(args.provider)
    if args.json:
        print_json([dict(asdict(m), is_exact=m.is_exact) for m in models])
        return 0
    rows = [
        [
            m.name,
            m.provider,
            f"{m.context_window:,}",
            f"{m.max_output_tokens:,}",
            _price(m.input_price),
            _price(m.cached_input_price),
            _price(m.output_price),
            m.tokenizer,
            "exact" if m.is_exact else "estimate",
        ]
        for m in models
    ]
    Out().table(
        [
            "model",
            "provider",
            "window",
            "max output",
            "input $/M",
            "cached $/M",
            "output $/M",
            "tokenizer",
            "counting",
        ],
        rows,
        title=f"{len(rows)} models (list prices, USD per million tokens)",
    )
    return 0
