"""Pure conversions between message formats and windowfit's canonical (OpenAI chat) format.

No framework package is needed here: Responses API items and Anthropic messages are plain dicts
(SDK objects are read through ``model_dump``). The framework integrations built on these live in
:mod:`windowfit.integrations`.
"""

from __future__ import annotations

from .anthropic import fit_anthropic, from_anthropic, to_anthropic
from .canonical import (
    SYSTEM_ROLES,
    Converted,
    as_dict,
    content_text,
    history_problems,
    is_valid_history,
    json_arguments,
    make_tool_call,
)
from .fitting import Fitted, Prepared, aprepare_converted, fit_converted, prepare_converted
from .openai_responses import fit_responses, from_responses, to_responses

__all__ = [
    "SYSTEM_ROLES",
    "Converted",
    "Fitted",
    "Prepared",
    "aprepare_converted",
    "as_dict",
    "content_text",
    "fit_anthropic",
    "fit_converted",
    "fit_responses",
    "from_anthropic",
    "from_responses",
    "history_problems",
    "is_valid_history",
    "json_arguments",
    "make_tool_call",
    "prepare_converted",
    "to_anthropic",
    "to_responses",
]
