"""The offline summary keeps what a later question needs: the user's own facts (what they
like, did, plan) over general advice and chit-chat, each under its date."""

from __future__ import annotations

import windowfit as wf
from windowfit.summarize.salience import SalienceSummarizer

COUNTER = wf.Counter(model="gpt-4o")

ADVICE = [
    "Regular exercise, balanced meals and enough sleep usually make a big difference over time.",
    "Reading before bed instead of scrolling through your phone often helps people relax.",
    "Spending time outdoors and talking with friends can really lift your mood.",
    "Setting small goals and celebrating progress keeps motivation high for most people.",
]
FACTS = [
    "I went hiking in the Dolomites with my cousin last weekend.",
    "I love cooking laksa when it rains.",
    "I plan to learn the accordion this winter.",
    "We adopted a ferret and called her Juniper.",
]


def conversation() -> list[dict[str, str]]:
    msgs = []
    for k, (fact, advice) in enumerate(zip(FACTS, ADVICE)):
        msgs.append({"role": "user", "content": fact, "date": f"2024-03-{k + 1:02d}"})
        msgs.append({"role": "assistant", "content": advice, "date": f"2024-03-{k + 1:02d}"})
    return msgs


def test_personal_facts_outrank_general_advice() -> None:
    summarizer = SalienceSummarizer(counter=COUNTER)
    summary = summarizer(conversation(), previous_summary="", target_tokens=110)
    kept_facts = sum(f in summary for f in FACTS)
    kept_advice = sum(a in summary for a in ADVICE)
    assert kept_facts == len(FACTS), summary
    assert kept_advice < len(ADVICE), summary
    assert "### 2024-03-01" in summary  # each fact under its date
