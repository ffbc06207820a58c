"""The summarizer's near-duplicate merge: the indexed merge keeps exactly what comparing every
line with every kept line keeps (the reference below), and its work grows near-linearly."""

from __future__ import annotations

import copy
import json
import random
import tarfile
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf
from _agent_runs import ABSENT, find_agent_data
from hypothesis import given, settings
from hypothesis import strategies as st
from windowfit.summarize import near_duplicates
from windowfit.summarize.salience import SalienceSummarizer, _Line, _parse_summary

COUNTER = wf.Counter(model="gpt-4o")


def reference_merge(lines: list[_Line]) -> list[_Line]:
    """The pairwise merge: each line against every kept line of its section, oldest first."""
    kept: list[_Line] = []
    for line in sorted(lines, key=lambda x: x.seq):
        if line.score <= 0:
            continue
        for k, other in enumerate(kept):
            if other.section != line.section:
                continue
            if line.section == "identifiers":
                if line.text in other.text or other.text in line.text:
                    if len(line.text) > len(other.text):
                        line.score = max(line.score, other.score)
                        kept[k] = line
                    else:
                        other.score = max(other.score, line.score)
                    break
                continue
            a, b = line.terms, other.terms
            if a and b and len(a & b) / min(len(a), len(b)) >= 0.8:
                if a - b:
                    line.score = max(line.score, other.score)
                    kept[k] = line
                else:
                    other.score = max(other.score, line.score)
                break
        else:
            kept.append(line)
    return kept


def scored_lines(messages: list[dict[str, Any]], previous: str = "") -> list[_Line]:
    s = SalienceSummarizer(counter=COUNTER)
    lines = _parse_summary(previous, s.max_item_chars)
    lines.extend(s._extract(messages, has_goal=any(x.section == "goal" for x in lines)))
    s._score(lines)
    return lines


def view(lines: list[_Line]) -> list[tuple[Any, ...]]:
    return [(x.section, x.text, x.speaker, x.date, x.seq, x.score) for x in lines]


def assert_same_merge(lines: list[_Line]) -> None:
    expected = reference_merge(copy.deepcopy(lines))
    got = SalienceSummarizer._merge(copy.deepcopy(lines))
    assert view(got) == view(expected)


def _data_dir(name: str) -> Path | None:
    here = Path(__file__).resolve().parent
    return next(
        (
            p / "shared" / "data" / name
            for p in here.parents
            if (p / "shared" / "data" / name).is_dir()
        ),
        None,
    )


def memorybank_chats(lang: str) -> list[list[dict[str, Any]]]:
    root = _data_dir("dialogs-memorybank")
    if root is None:
        pytest.skip("the MemoryBank dialogs (shared/data/dialogs-memorybank/) are absent")
    people = json.loads((root / f"memory_bank_{lang}.json").read_text(encoding="utf-8"))
    chats = []
    for person in people.values():
        msgs: list[dict[str, Any]] = []
        for date, turns in sorted(person["history"].items()):
            for i, turn in enumerate(turns):
                stamp = f"[{date}] " if i == 0 else ""
                msgs.append({"role": "user", "content": stamp + str(turn["query"])})
                msgs.append({"role": "assistant", "content": str(turn["response"])})
        chats.append(msgs)
    return chats


@pytest.mark.parametrize("lang", ["en", "cn"])
def test_merge_matches_pairwise_on_memorybank(lang: str) -> None:
    chats = memorybank_chats(lang)
    for msgs in chats:
        assert_same_merge(scored_lines(msgs))
    # several at once: many dates, near-restatements across people
    assert_same_merge(scored_lines([m for msgs in chats[:3] for m in msgs]))


def test_merge_matches_pairwise_on_agent_runs(tmp_path: Path) -> None:
    tb = find_agent_data()
    if tb is None:
        pytest.skip(ABSENT)
    with tarfile.open(tb) as tar:
        members = sorted(
            (m for m in tar.getmembers() if m.name.endswith(".traj.json")), key=lambda m: m.name
        )
        runs = []
        for member in members[:6]:
            f = tar.extractfile(member)
            assert f is not None
            data = json.loads(f.read() or b"{}")
            msgs = [
                {"role": m["role"], "content": m["content"]}
                for m in data.get("messages", [])
                if isinstance(m, dict) and isinstance(m.get("content"), str)
            ]
            runs.append(msgs)
    assert any(runs)
    for msgs in runs:
        assert_same_merge(scored_lines(msgs))
    assert_same_merge(scored_lines([m for msgs in runs[:3] for m in msgs]))


def test_merge_matches_pairwise_on_a_previous_summary() -> None:
    chat = memorybank_chats("en")[0]
    first = SalienceSummarizer(counter=COUNTER)(chat[:60], target_tokens=300)
    assert_same_merge(scored_lines(chat[60:], previous=first))


WORDS = [f"w{i}" for i in range(30)] + ["/srv/app/main.py", "ERR-42", "v1.2.3", "2024-05-01"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "tool"]),
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=9),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_merge_matches_pairwise_on_overlapping_sentences(
    rows: list[tuple[str, list[str]]],
) -> None:
    """Sentences drawn from a small vocabulary overlap heavily: every branch of the rule
    (restatement, update, identifier inside identifier) is exercised."""
    msgs: list[dict[str, Any]] = []
    for role, words in rows:
        if role == "tool":
            msgs.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "sh", "arguments": "{}"},
                        }
                    ],
                }
            )
            msgs.append(
                {"role": "tool", "tool_call_id": "c", "content": "Error in " + " ".join(words)}
            )
        else:
            msgs.append({"role": role, "content": "I saw " + " ".join(words) + " there."})
    assert_same_merge(scored_lines(msgs))


def test_merge_work_grows_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct facts (each with its own ticket, file and date) are never compared with every
    earlier one: the comparisons stay a small multiple of the line count."""
    made: list[near_duplicates.NearDuplicateIndex] = []
    real = near_duplicates.NearDuplicateIndex

    def tracking(lines: Any) -> near_duplicates.NearDuplicateIndex:
        made.append(real(lines))
        return made[-1]

    monkeypatch.setattr("windowfit.summarize.salience.NearDuplicateIndex", tracking)
    rng = random.Random(7)
    msgs: list[dict[str, Any]] = []
    for i in range(3000):
        city = rng.choice(["Tallinn", "Lisbon", "Osaka", "Quito"])
        msgs.append(
            {
                "role": "user",
                "content": f"My ticket T-{i} about src/mod{i}.py in {city} is due 2024-{1 + i % 12:02d}-{1 + i % 28:02d}.",
            }
        )
        msgs.append({"role": "assistant", "content": f"Noted: ticket T-{i} for src/mod{i}.py."})
    lines = scored_lines(msgs)
    kept = SalienceSummarizer._merge(lines)
    assert len(kept) > 300
    assert made[-1].comparisons <= 4 * len(lines)
