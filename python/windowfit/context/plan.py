"""The internal records of one ``prepare`` call, passed between the stages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from windowfit.context.budget import Budget
from windowfit.context.prepared import PreparedStats
from windowfit.fitting import FitResult

#: A message as the manager reads it (OpenAI-style dicts; never modified).
Message = Mapping[str, Any]


@dataclass
class Job:
    """One summarization to run between planning and finishing."""

    messages: list[dict[str, Any]]
    previous: str
    target: int
    limit: int
    language: str
    lo: int
    hi: int
    new_cut: int
    fold_tokens: int
    fold_count: int


@dataclass
class Plan:
    """Where this call's window starts, and the summarization to run first (if any)."""

    msgs: list[Message]
    state: dict[str, Any]
    stats: PreparedStats
    budget: Budget
    tools_fp: str
    last_user: int | None
    system_idx: list[int]
    system_tokens: int  # measured tokens of all system messages (all are always sent)
    cut: int  # window start used if no summary job succeeds (fallback / truncate / keep)
    job: Job | None = None
    started: float = 0.0
    start_cut: int = 0  # the cut this call started from
    cut_tokens: int = 0  # raw tokens of msgs[:start_cut]
    cut_check: int | None = None  # the state's check of start_cut and cut_tokens, if it vouched
    # Truncated tool outputs by source index from the mask boundary on, computed once per call
    # for msgs[trunc_from:]; below the boundary the window comes from ``masked``
    trunc: dict[int, tuple[dict[str, Any], int]] = field(default_factory=dict)
    trunc_from: int = -1
    masked: MaskedPrefix | None = None  # checked against this history for msgs[masked_from:]
    masked_from: int = -1


@dataclass
class MaskedPrefix:
    """The window below the mask boundary, kept from one call to the next.

    The masked (or truncated) copies of old messages do not change while the boundary, the
    placeholders' language, the tool-output cap and the source messages stay the same, so a
    turn reuses them as one list slice instead of walking every masked row again.
    """

    key: tuple[int, str | None, int]  # (boundary, placeholder language, tool-output cap)
    base: int  # first history index covered
    source: list[Message]  # msgs[base:boundary] as they were: reused while these are the same
    sent: list[Message]  # what the window sends in their place
    edited_before: list[int]  # edited copies in sent[:k], for k in 0..len(sent)
    saved_before: list[int]  # tokens those copies save

    @property
    def until(self) -> int:
        return self.base + len(self.sent)


@dataclass
class Fitted:
    """A fit made for (cut, summary): reused by _finish when the final choice is the same."""

    cut: int
    summary: str  # the summary asked for ("" in the view if it had to be dropped)
    view: View
    result: FitResult


@dataclass
class Outcome:
    """What a summarizer call returned (``text``: not checked yet) or why it failed."""

    text: object
    error: str | None
    elapsed_ms: float


@dataclass
class View:
    """The virtual list handed to fit: head (system, summary, latest user) + window."""

    messages: list[Message]
    source: list[int]  # source index per virtual message, -1 for summary messages
    head_len: int
    summary_idx: list[int]
    pinned: list[int]  # the summary and a held user message: pinned for fit
    truncated: int = 0
    truncated_tokens: int = 0
