"""The context manager: budgets, progressive transactional summarization, cache-stable windows.

``ContextManager.prepare(messages, state)`` turns a full, append-only chat history into the
prompt to send — system messages, a running summary of what fell out, and the recent messages
verbatim — within the model's context window, and returns the JSON state to pass back next turn::

    cm = wf.ContextManager(model="gpt-4o")
    p = cm.prepare(history, state=saved_state, tools=tools)
    reply = client.chat.completions.create(model="gpt-4o", messages=p.messages, tools=tools)
    saved_state = p.state          # JSON: store it beside the session

One module per concern, in the order a call uses them:

- ``config``: constructor arguments and ``WINDOWFIT_*`` variables (the table of parameters);
- ``budget``: how the window splits into budgets, how long a summary should be;
- ``state``: the state carried between calls, loaded, validated, and the incremental scan;
- ``strategy``: truncate or summarize;
- ``window`` and ``planner``: the virtual list a fit sees and where this call's window starts;
- ``runner``: the summarizer call (threads, timeouts, async), transactional;
- ``stats``: ``Prepared.stats``;
- ``manager``: the ``ContextManager`` façade that ties them together.

A summary aims at ``summary_length_ratio`` of everything evicted so far, within 80% of the
summary budget.
"""

from __future__ import annotations

from windowfit.context.budget import Budget, compute_budget, summary_target_tokens
from windowfit.context.config import ENV_VARS
from windowfit.context.manager import ContextManager, Prepared
from windowfit.context.strategy import StrategyDecision, choose_strategy

__all__ = [
    "ENV_VARS",
    "Budget",
    "ContextManager",
    "Prepared",
    "StrategyDecision",
    "choose_strategy",
    "compute_budget",
    "summary_target_tokens",
]
