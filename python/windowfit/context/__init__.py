"""The context manager: budgets, progressive transactional summarization, cache-stable windows.

``ContextManager.prepare(messages, state)`` turns a full, append-only chat history into the
prompt to send — system messages, a running summary of what fell out, and the recent messages
verbatim — within the model's context window, and returns the JSON state to pass back next turn::

    cm = wf.ContextManager(model="gpt-4o")
    p = cm.prepare(history, state=saved_state, tools=tools)
    reply = client.chat.completions.create(model="gpt-4o", messages=p.messages, tools=tools)
    saved_state = p.state          # JSON: store it beside the session

``ContextManager`` is a façade over stages, each built once from the frozen settings and
taking what it works on as arguments, in the order a call uses them:

- ``config``: constructor arguments and ``WINDOWFIT_*`` variables parsed into ``Settings``;
- ``budget``: how the window splits into budgets, how long a summary should be;
- ``state``: ``StateLoader``, the one place a carried state is loaded and checked, and the
  incremental scan of the history;
- ``strategy``: truncate or summarize;
- ``tool_outputs``, ``masking`` and ``masker``: tool outputs cut to the cap, old ones masked;
- ``window`` and ``planner``: the virtual list a fit sees and where this call's window starts;
- ``runner``: the summarizer call (threads, timeouts, async), settled transactionally;
- ``stats`` and ``prepared``: ``Prepared`` and its typed ``stats``;
- ``manager``: the ``ContextManager`` façade, ``prepare`` written as the pipeline.

A summary aims at ``summary_length_ratio`` of everything evicted so far (0.15 by default),
within 80% of the summary budget; the offline summarizer, which selects lines and keeps its
target exactly, aims at the whole summary budget unless ``summary_length_ratio`` is set.
"""

from __future__ import annotations

from windowfit.context.budget import Budget, compute_budget, summary_target_tokens
from windowfit.context.config import ENV_VARS
from windowfit.context.manager import ContextManager
from windowfit.context.prepared import Prepared, PreparedStats
from windowfit.context.strategy import StrategyDecision, choose_strategy

__all__ = [
    "ENV_VARS",
    "Budget",
    "ContextManager",
    "Prepared",
    "PreparedStats",
    "StrategyDecision",
    "choose_strategy",
    "compute_budget",
    "summary_target_tokens",
]
