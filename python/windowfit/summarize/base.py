"""What every summarizer shares: the protocol, its error, language detection, and the one body
of a summarizer's sync and async twins."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from windowfit._twins import CallOp, awaitable, blocking
from windowfit.counting import Counter
from windowfit.errors import WindowfitError
from windowfit.messages import message_text

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


class SummaryError(WindowfitError, RuntimeError):
    """A summarizer produced no usable summary (empty, cut off, refused, malformed)."""


class TwinSummarizer:
    """A summarizer whose ``__call__`` and ``asummarize`` are one operation.

    The protocol's signature and the choice of summary language are written once here; a
    subclass writes `_summary` as an operation (`windowfit._twins`) that yields the one
    call that differs between the twins (the LLM request), or none when it runs in-process.
    """

    #: The language the summarizer was built with; None follows the call, then the conversation.
    language: str | None

    def _op_summarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> CallOp[str]:
        lang = self.language or (language if language in ("zh", "en") else None)
        lang = lang or _conversation_language(messages, previous_summary)
        return (yield from self._summary(messages, previous_summary, target_tokens, lang))

    def _summary(
        self, messages: Sequence[Message], previous_summary: str, target_tokens: int, language: str
    ) -> CallOp[str]:
        raise NotImplementedError

    __call__ = blocking(_op_summarize)
    asummarize = awaitable(_op_summarize)
    # `blocking` names the sync twin after the operation; this one is the call itself.
    __call__.__name__, __call__.__qualname__ = "__call__", "TwinSummarizer.__call__"


# ---------------------------------------------------------------------------------------------
# Message text and language
# ---------------------------------------------------------------------------------------------

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z]{2,}")


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


@functools.cache
def estimator() -> Counter:
    """The counting module's estimate, for texts measured without a model's tokenizer."""
    return Counter.heuristic()
