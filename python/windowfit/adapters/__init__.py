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
from .fitting import (
    FittedItems,
    PreparedItems,
    aprepare_converted,
    fit_converted,
    prepare_converted,
)
from .openai_responses import fit_responses, from_responses, to_responses

#: the earlier names of :class:`FittedItems` and :class:`PreparedItems` (``windowfit.Prepared``
#: is the manager's own result, which :class:`PreparedItems` wraps)
Fitted = FittedItems
Prepared = PreparedItems

__all__ = [
    "SYSTEM_ROLES",
    "Converted",
    "Fitted",
    "FittedItems",
    "Prepared",
    "PreparedItems",
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
