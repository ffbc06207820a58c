"""Chat histories for the fitting tests: the public strategies and validator of
``windowfit.testing``, and a slow, obvious reference of the fitting rules.

Nothing here imports windowfit's fitting code: the validator checks OpenAI's pairing rule on
the output alone, and the reference (``analyze`` / ``expect``) re-derives the spec of
ARCHITECTURE.md "Window invariants" from scratch, message by message, re-summing everything.
The only windowfit API used is the counter (``count_message`` / ``count_messages``).

Histories are lists of OpenAI chat dicts; call messages may also carry Anthropic
``tool_use`` blocks and result messages Anthropic ``tool_result`` blocks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# The strategies, the message facts, the pairing analysis and the request validator are the
# public ``windowfit.testing`` (users property-test their own windows with them); the slow
# reference of the fitting rules below stays here.
from windowfit.testing import (
    Analysis,
    analyze,
    call_ids,
    has_content,
    histories,
    is_system,
    is_user_turn,
    priming,
    request_problems,
    result_ids,
    strip_calls,
    valid_histories,
)
from windowfit.testing import strategies as _strategies

# How many examples each property test runs (raise it for a soak: FIT_EXAMPLES=2000).
EXAMPLES = int(os.environ.get("FIT_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

Msg = dict[str, Any]

texts = _strategies.texts()
huge_texts = _strategies.huge_texts()

__all__ = [
    "EXAMPLES",
    "SETTINGS",
    "Analysis",
    "Expected",
    "PinError",
    "analyze",
    "call_ids",
    "expect",
    "has_content",
    "histories",
    "huge_texts",
    "is_system",
    "is_user_turn",
    "priming",
    "request_problems",
    "result_ids",
    "sent_message",
    "strip_calls",
    "texts",
    "valid_histories",
]


# ----------------------------------------------------------------------------- the reference


def sent_message(msgs: list[Msg], a: Analysis, i: int) -> Msg:
    m = a.paired[i]
    if i in a.strips or ("tool_calls" in m and not m["tool_calls"]):
        return strip_calls(m, a.strips.get(i, []))
    return m


class PinError(Exception):
    """An explicit pin names a message that cannot be sent: fit must raise ValueError."""


@dataclass
class Expected:
    """What fit must return for one case, derived from the spec alone."""

    analysis: Analysis
    cost: list[int]  # per message, as sent (stripped heads recounted)
    pinned_units: set[int]
    pins_tokens: int
    priming: int
    latest_user: int | None  # message index of the latest user turn
    budget_error: bool
    kept: list[int] | None = None
    stop_reason: str | None = None

    def pinned_msg(self, i: int) -> bool:
        u = self.analysis.unit_of[i]
        return u is not None and u in self.pinned_units

    def unit_cost(self, u: int) -> int:
        return sum(self.cost[i] for i in self.analysis.units[u])


def expect(
    msgs: list[Msg],
    budget: int,
    counter: Any,
    *,
    keep_system: bool = True,
    keep_last_user: bool = True,
    start_on: str | None = "user",
    pinned: tuple[int, ...] | list[int] = (),
    unanswered: str = "drop",
    max_messages: int | None = None,
    max_turns: int | None = None,
) -> Expected:
    """The slow, obvious fit: pins, then growth steps (units newest first down to the latest
    user turn, then whole rounds) each re-summed from scratch; a step that would pass the
    budget, then ``max_messages`` (messages kept, pins included, at least the pins), then
    ``max_turns`` (user turns likewise) stops the window. Raises ``PinError``."""
    n = len(msgs)
    a = analyze(msgs, unanswered)
    cost = [counter.count_message(sent_message(msgs, a, i)) if a.valid(i) else 0 for i in range(n)]
    nu = len(a.units)
    head_user = [is_user_turn(a.paired[a.units[u][0]]) for u in range(nu)]
    pins: set[int] = set()
    for p in pinned:
        q = p + n if p < 0 else p
        if not a.valid(q):
            raise PinError(q)
        pins.add(a.unit_of[q])  # type: ignore[arg-type]
    if keep_system:
        pins |= {a.unit_of[i] for i in range(n) if is_system(msgs[i]) and a.valid(i)}  # type: ignore[misc]
    user_units = [u for u in range(nu) if head_user[u]]
    last_u = user_units[-1] if user_units else None
    if keep_last_user and last_u is not None:
        pins.add(last_u)
    P = priming(counter)
    total = lambda us: sum(cost[i] for u in us for i in a.units[u])
    pins_tokens = total(pins)
    # An empty window is never sent, so it primes nothing: without pins there is no error.
    e = Expected(
        a,
        cost,
        pins,
        pins_tokens,
        P,
        a.units[last_u][0] if last_u is not None else None,
        bool(pins) and pins_tokens + P > budget,
    )
    if e.budget_error:
        return e
    floor = last_u if (start_on is not None and last_u is not None) else 0
    steps = [[u] for u in range(nu - 1, floor - 1, -1) if u not in pins]
    end = floor
    for k in range(floor - 1, -1, -1):
        if head_user[k]:
            steps.append([u for u in range(k, end) if u not in pins])
            end = k
    chosen = set(pins)
    stop = None
    n_msgs = lambda us: sum(len(a.units[u]) for u in us)
    n_turns = lambda us: sum(head_user[u] for u in us)
    for s in steps:
        grown = chosen | set(s)
        if total(grown) + P > budget:
            stop = "budget"
        elif max_messages is not None and n_msgs(grown) > max(max_messages, n_msgs(pins)):
            stop = "max_messages"
        elif max_turns is not None and n_turns(grown) > max(max_turns, n_turns(pins)):
            stop = "max_turns"
        if stop:
            break
        chosen = grown
    if stop is None:
        stop = "start_on_user" if len(chosen) < nu else "all_fit"
    e.kept = sorted(i for u in chosen for i in a.units[u])
    e.stop_reason = stop
    return e


# ----------------------------------------------------------------------------- budgets


def pins_cost(msgs: list[Msg], counter: Any) -> int:
    """What the pins plus priming cost by the reference: the least budget without a
    ``BudgetError`` (for an empty history, 0)."""
    e = expect(msgs, 10**12, counter)
    return e.pins_tokens + e.priming if msgs else 0


def _offset(kind: int, x: float) -> float:
    if kind == 9:
        return -0.01 - 0.29 * x  # below the pins: a BudgetError must follow
    if kind == 8:
        return [-1e-9, 0.0, 1.0][int(x * 2.999)]  # one token short, the pins exactly, all
    return 1.2 * x


#: Where a property test's budget falls: below 0, a share of the pins' cost (a ``BudgetError``
#: must follow); from 0, between the pins' cost and the whole history (and a bit beyond).
#: One example in ten lands below the pins, one in ten on an exact boundary. (Not
#: ``st.one_of``: hypothesis favours its first branch, which skewed the mix.)
budget_offsets = st.builds(_offset, st.integers(0, 9), st.floats(0, 1))


def budget_from(offset: float, need: int, total: int) -> int:
    """A budget for ``offset`` (see ``budget_offsets``); -1e-9 is one token below the pins."""
    if offset < 0:
        return max(0, min(need - 1, int(need * (1 + offset))))
    return need + int(max(total - need, 0) * offset)


def fit_at_offset(offset: float, canonical: list[Msg], counter: Any, fit: Any, tally: Any) -> Any:
    """Fit at the budget ``offset`` picks (see ``budget_offsets``) with ``fit(budget)``;
    returns ``(result, budget)``, the result None after a ``BudgetError`` that the reference
    justifies: it must come exactly when the pins plus priming of ``canonical`` exceed the
    budget. Counts each branch in ``tally`` (a ``collections.Counter``) and as a hypothesis
    event, so a test can show most examples reached the fitted branch."""
    import windowfit as wf
    from hypothesis import event

    need = pins_cost(canonical, counter)
    budget = budget_from(offset, need, counter.count_messages(canonical))
    too_small = expect(canonical, budget, counter).budget_error
    try:
        out = fit(budget)
    except wf.BudgetError:
        assert too_small, f"BudgetError at {budget} though the pins cost {need}"
        tally["budget_error"] += 1
        event("budget error")
        return None, budget
    assert not too_small, f"no BudgetError at {budget} though the pins cost {need}"
    tally["fitted"] += 1
    event("fitted")
    return out, budget
