"""Summarizers: fold the messages that fall out of the window into a running summary.

A summarizer is anything callable as::

    summarizer(messages, *, previous_summary: str, target_tokens: int, language: str) -> str

(or returning an awaitable of ``str``). ``messages`` are the newly evicted OpenAI-style chat
dicts, ``previous_summary`` is the summary they must be merged into (``""`` for the first one),
``target_tokens`` the length to aim for and ``language`` ``"zh"`` or ``"en"``. The result
replaces the previous summary, so it must carry forward whatever of it is still relevant.
The manager aims ``target_tokens`` 20% below the summary's room, since model-written summaries
overshoot; a summarizer with ``keeps_target = True`` and a ``counter`` that counts like the
manager's (the offline one) is trusted to stay within it and gets the whole room.

Two are built in:

- :class:`ExtractiveSummarizer` (also :class:`SalienceSummarizer`) — offline, deterministic,
  no LLM. It selects sentences by salience measured on the conversation itself (rare terms,
  names, numbers, dates, identifiers, paths, decisions, requests), drops filler, merges
  near-duplicates, files them under their session date with who said them, and merges the
  previous summary, under a token target.
- :class:`LLMSummarizer` — any OpenAI-compatible chat endpoint through the official ``openai``
  SDK, with a structured prompt (goal, decisions, done, to do, findings, key identifiers) in
  the conversation's language.

The package follows the two built-ins: ``base`` (the protocol, the error, language detection),
``patterns`` and ``salience`` (the offline summarizer), ``prompts`` and ``llm`` (the LLM one).
"""

from __future__ import annotations

from windowfit.messages import message_text
from windowfit.summarize.base import Summarizer, SummaryError, detect_language
from windowfit.summarize.llm import LLMSummarizer
from windowfit.summarize.patterns import _identifiers
from windowfit.summarize.prompts import build_summary_prompt, render_transcript
from windowfit.summarize.salience import (
    LLM_SUMMARY_SECTIONS,
    ExtractiveSummarizer,
    SalienceSettingError,
    SalienceSummarizer,
)

__all__ = [
    "LLM_SUMMARY_SECTIONS",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "SalienceSettingError",
    "SalienceSummarizer",
    "Summarizer",
    "SummaryError",
    "_identifiers",
    "build_summary_prompt",
    "detect_language",
    "message_text",
    "render_transcript",
]
