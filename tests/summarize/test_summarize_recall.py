"""Dialog recall under the manager's summary cap: early facts must survive summarization.

The regression this guards against: ``summary_max_tokens`` (1,024 here; 1,536 by default)
bounds the summary on an 8k window, and the manager aimed the offline summarizer at 80% of that room (the headroom kept
for summarizers that overshoot), so a third fewer facts reached the prompt than the same
summarizer kept before the cap. And trivia questions naming famous people outranked the user's
own plain-word facts, because a question's names counted as specifics.
"""

from __future__ import annotations

import random
from typing import Any

import windowfit as wf
from windowfit.summarize.salience import LABELS, SalienceSummarizer

COUNTER = wf.Counter(model="gpt-4o")
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def _fact_dialog(
    seed: int, facts: int, filler_turns: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """User facts (each with a unique booking code) spread over the first part of a long
    conversation, between generic turns that push them out of the window. Returns the
    messages and the codes."""
    rng = random.Random(seed)
    codes: list[str] = []
    while len(codes) < facts:
        code = "".join(rng.choices(_LETTERS, k=3)) + "-" + str(rng.randint(1000, 99999))
        if code not in codes:
            codes.append(code)
    generic = (
        "That is a good question and there are many ways to look at it, so let us go through "
        "the options one by one and see which of them suits you best in the long run."
    )
    filler = [
        {"role": "user", "content": "Tell me more."},
        {"role": "assistant", "content": generic},
    ]
    msgs: list[dict[str, Any]] = []
    for k, code in enumerate(codes):
        msgs.append({"role": "user", "content": f"Booking number {k + 1} for my trips is {code}."})
        msgs.append({"role": "assistant", "content": "Noted."})
        msgs.extend(filler * 2)
    msgs.extend(filler * filler_turns)
    return msgs, codes


def _replay(cm: wf.ContextManager, msgs: list[dict[str, Any]]) -> list[Any]:
    state, out = None, []
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            p = cm.prepare(msgs[:i], state)
            state = p.state
            out.append(p)
    return out


def test_the_offline_summary_fills_its_room_under_the_absolute_cap() -> None:
    msgs, codes = _fact_dialog(seed=1, facts=120, filler_turns=60)
    cm = wf.ContextManager(
        model="gpt-4o",
        context_window=8192,
        summarizer=wf.ExtractiveSummarizer(),
        mask_keep=0,
        summary_max_tokens=1024,
    )
    prepared = _replay(cm, msgs)
    budget = cm.budget(msgs)
    room = min(budget.summary_budget, cm.summary_max_tokens)
    assert budget.summary_budget > cm.summary_max_tokens  # the cap is what binds here
    assert not any(p.stats["summary_failed"] for p in prepared)
    assert all(p.stats["tokens_total"] <= budget.prompt_budget for p in prepared)
    summary = prepared[-1].state["summary"]
    tokens = COUNTER.count(summary)
    # more facts were folded than fit, so the summary is as full as its room allows: past
    # the 80% a summarizer that may overshoot is aimed at, and within the room
    assert 0.8 * room < tokens <= room
    kept = [c for c in codes if c in summary]
    assert kept and all(c in {*codes} for c in kept)
    # every fact line costs the same, so the kept share follows the room: more than the
    # 80%-of-room summary held
    per_fact = max(COUNTER.count(f"- Booking number 10 for my trips is {c}.") for c in codes)
    assert len(kept) > (0.8 * room) // per_fact


def test_a_summarizer_that_may_overshoot_keeps_the_headroom() -> None:
    msgs, _ = _fact_dialog(seed=2, facts=120, filler_turns=60)
    targets: list[int] = []

    def estimating(
        messages: Any, *, previous_summary: str, target_tokens: int, language: str
    ) -> str:
        targets.append(target_tokens)
        return SalienceSummarizer()(  # no counter: an estimate, which may differ
            messages, previous_summary=previous_summary, target_tokens=target_tokens
        )

    cm = wf.ContextManager(model="gpt-4o", context_window=8192, summarizer=estimating, mask_keep=0)
    _replay(cm, msgs)
    room = min(cm.budget(msgs).summary_budget, cm.summary_max_tokens)
    assert targets and max(targets) <= 0.8 * room


def test_a_stated_fact_outranks_a_trivia_question_that_names_people() -> None:
    fact = "Lately I am really into pottery; signed up for a class at the community centre."
    questions = [
        "In which film did father and son actors Will and Jaden Smith first appear together?",
        "What currency is used in South Africa?",
    ]
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": questions[0]},
        {"role": "assistant", "content": "Good one."},
        {"role": "user", "content": fact},
        {"role": "assistant", "content": "Nice."},
        {"role": "user", "content": questions[1]},
        {"role": "assistant", "content": "Rand."},
    ]
    s = SalienceSummarizer(counter=COUNTER)
    assert "pottery" in s(msgs, target_tokens=2000)
    # room for the fact alone: the fact is the line kept, not a question about celebrities
    alone = f"## {LABELS['en']['timeline']}\nuser:\n- {fact}"
    # (a few tokens over: the selection counts a newline per row, the question needs 10 more)
    tight = s(msgs, target_tokens=COUNTER.count(alone) + 4)
    assert "pottery" in tight
    assert not any(q in tight for q in questions)
    # a question that carries a code or a date still states something worth keeping
    booking = "The hotel booking reference is VP-6702, could you keep that handy?"
    kept = s([*msgs, {"role": "user", "content": booking}], target_tokens=2000)
    assert "VP-6702" in kept
