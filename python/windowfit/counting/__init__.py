"""Counting: ``Counter`` (any tokenizer, messages, tools), ``get_encoding``, ``count``.

The first step of every call: how many tokens a text, a message list and its tools cost.
"""

from __future__ import annotations

from windowfit.counting.counter import (
    ENCODINGS,
    Counter,
    Encoding,
    MissingTokenizerError,
    count,
    encoding_for_model,
    get_encoding,
    render_tools,
    resolve_counter,
)

__all__ = [
    "ENCODINGS",
    "Counter",
    "Encoding",
    "MissingTokenizerError",
    "count",
    "encoding_for_model",
    "get_encoding",
    "render_tools",
    "resolve_counter",
]
