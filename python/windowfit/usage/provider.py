"""Reading a provider response's token usage into windowfit's one meaning of it.

``prompt_tokens`` is every input token of the call, of which ``cached_tokens`` were read from
the provider's prompt cache and ``cache_write_tokens`` were written to it. OpenAI reports it
so; Anthropic's ``input_tokens`` excludes both cache parts, so they are added back. Kept apart
from ``usage`` (which records and prices calls) because it only reads SDK objects and dicts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from windowfit.errors import InvalidArgumentError

__all__ = ["extract_usage"]

_MISSING = object()


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _has(obj: Any, name: str) -> bool:
    if isinstance(obj, Mapping):
        return name in obj
    return getattr(obj, name, _MISSING) is not _MISSING


def _int(value: Any, name: str) -> int:
    """A token count the provider reported: a whole number >= 0 (an integral float from a
    JSON parser too); anything else names the field rather than being cut or overflowing."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InvalidArgumentError(f"usage field {name!r} must be an integer, not {value!r}")
    try:
        number = int(value) if not isinstance(value, float) else value
    except ValueError:
        raise InvalidArgumentError(f"usage field {name!r} is not an integer: {value!r}") from None
    if isinstance(number, float):
        if not math.isfinite(number) or not number.is_integer():
            raise InvalidArgumentError(f"usage field {name!r} is not a whole number: {value!r}")
        number = int(number)
    if number < 0:
        raise InvalidArgumentError(f"usage field {name!r} must be >= 0, got {value!r}")
    return number


def _looks_like_usage(obj: Any) -> bool:
    return _has(obj, "prompt_tokens") or _has(obj, "input_tokens")


def extract_usage(response: Any) -> dict[str, Any]:
    """Normalized usage of an OpenAI / Anthropic response (object or dict), or of its usage.

    Reads chat completions (``prompt_tokens``, ``completion_tokens``,
    ``prompt_tokens_details.cached_tokens``, DeepSeek's ``prompt_cache_hit_tokens``), the
    Responses API (``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``),
    Anthropic messages (``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
    ``cache_creation_input_tokens``) and LangChain's ``usage_metadata``. Returns
    ``{"model", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens"}``
    (model None when the response does not say).
    """
    model = None
    if _looks_like_usage(response):
        usage = response
    else:
        model = _get(response, "model")
        meta = _get(response, "response_metadata")  # LangChain AIMessage
        if not model and meta is not None:
            model = _get(meta, "model_name") or _get(meta, "model")
        usage = _get(response, "usage")
        if usage is None:
            usage = _get(response, "usage_metadata")
        if usage is None and meta is not None:
            usage = _get(meta, "token_usage")
        if usage is None or not _looks_like_usage(usage):
            raise InvalidArgumentError(
                f"no token usage found in {type(response).__name__}: pass a chat completion, "
                "Responses API or Anthropic response (the last stream chunk with usage), or "
                "call UsageTracker.record(...) with the numbers"
            )
    if _has(usage, "prompt_tokens"):  # chat completions and compatible APIs
        prompt = _int(_get(usage, "prompt_tokens"), "prompt_tokens")
        completion = _int(_get(usage, "completion_tokens"), "completion_tokens")
        details = _get(usage, "prompt_tokens_details")
        cached = _int(_get(details, "cached_tokens"), "cached_tokens") if details is not None else 0
        write = (
            _int(_get(details, "cache_write_tokens"), "cache_write_tokens")
            if details is not None
            else 0
        )
        if not cached:
            cached = _int(
                _get(usage, "prompt_cache_hit_tokens"), "prompt_cache_hit_tokens"
            )  # DeepSeek
        return _usage(model, prompt, completion, cached, write)
    prompt = _int(_get(usage, "input_tokens"), "input_tokens")
    completion = _int(_get(usage, "output_tokens"), "output_tokens")
    if _has(usage, "cache_read_input_tokens") or _has(usage, "cache_creation_input_tokens"):
        # Anthropic: input_tokens counts only the uncached part; add the cache parts back
        read = _int(_get(usage, "cache_read_input_tokens"), "cache_read_input_tokens")
        write = _int(_get(usage, "cache_creation_input_tokens"), "cache_creation_input_tokens")
        return _usage(model, prompt + read + write, completion, read, write)
    details = _get(usage, "input_tokens_details")  # OpenAI Responses API: input includes cache
    if details is not None:
        cached = _int(_get(details, "cached_tokens"), "cached_tokens")
        return _usage(
            model,
            prompt,
            completion,
            cached,
            _int(_get(details, "cache_write_tokens"), "cache_write_tokens"),
        )
    details = _get(usage, "input_token_details")  # LangChain usage_metadata: input includes cache
    if details is not None:
        read = _int(_get(details, "cache_read"), "cache_read")
        write = _int(_get(details, "cache_creation"), "cache_creation")
        return _usage(model, prompt, completion, read, write)
    return _usage(model, prompt, completion, 0, 0)


def _usage(model: Any, prompt: int, completion: int, cached: int, write: int) -> dict[str, Any]:
    # providers report cache parts "unadjusted": never let them exceed the prompt
    cached = min(cached, prompt)
    write = min(write, prompt - cached)
    return {
        "model": model if isinstance(model, str) and model else None,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "cache_write_tokens": write,
    }
