"""An inline summarizer (the default offline one) folds a bounded share of a long imported
history per call: the first prepare of thousands of messages never folds them all at once,
and later calls fold the rest."""

from __future__ import annotations

from typing import Any

import windowfit as wf
from windowfit.context.planner import INLINE_FOLD_MESSAGES, INLINE_FOLD_WINDOWS


def imported_history(n: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel assistant."}]
    for i in range(n):
        msgs.append(
            {
                "role": "user",
                "content": f"Booking {i}: my flight QX-{1000 + i} to city {i} on day {i % 28 + 1}.",
            }
        )
        msgs.append({"role": "assistant", "content": f"Noted booking {i}, flight QX-{1000 + i}."})
    return msgs


def test_first_prepare_of_a_long_import_folds_a_bounded_share() -> None:
    cm = wf.ContextManager(model="gpt-4o", context_window=4000, output_reserve=500)
    msgs = imported_history(1500)
    p = cm.prepare(msgs)
    assert p.stats["summary_triggered"] and not p.stats["summary_failed"]
    folded = p.state["summarized_until"]
    cap = INLINE_FOLD_WINDOWS * p.stats["history_budget"]
    folded_tokens = sum(cm.counter.count_message(m) for m in msgs[1:folded])
    # at most the cap, plus the one tool unit that crossed it
    assert folded_tokens <= cap + max(cm.counter.count_message(m) for m in msgs)
    assert folded - 1 <= INLINE_FOLD_MESSAGES
    assert folded < p.state["cut"] < len(msgs)  # the rest is left for later calls
    # later calls fold the rest, a bounded share each, never going back, one share per call
    # (the limit on summaries per window is for cuts, not for finishing an import)
    pending = sum(cm.counter.count_message(m) for m in msgs[folded : p.state["cut"]])
    calls = -(-pending // (cap - max(cm.counter.count_message(m) for m in msgs))) + 1
    state, marks = p.state, [folded]
    for _ in range(calls):
        p = cm.prepare(msgs, state=state)
        state = p.state
        marks.append(state["summarized_until"])
        if marks[-1] >= state["cut"]:
            break
    assert marks == sorted(marks) and marks[-1] >= state["cut"] > folded
    assert "QX-" in state["summary"]
