"""The salience summarizer: rare facts over filler, dates, merging, Chinese, the token target."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
import windowfit as wf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windowfit.errors import WindowfitError
from windowfit.summarize.salience import (
    LABELS,
    LLM_SUMMARY_SECTIONS,
    SalienceSummarizer,
)

COUNTER = wf.Counter(model="gpt-4o")

FILLER_USER = ["Thanks!", "Haha, fair enough.", "Okay, sounds good.", "Good morning!"]
FILLER_ASSISTANT = [
    "That sounds wonderful! Let me know if there is anything else I can help with.",
    "You're welcome! I'm always happy to help.",
    "I understand. Take your time and let me know what you decide.",
]


def chat(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for user, assistant in pairs:
        out += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return out


def filler_pairs(n: int, offset: int = 0) -> list[tuple[str, str]]:
    return [
        (
            FILLER_USER[(i + offset) % len(FILLER_USER)],
            FILLER_ASSISTANT[(i + offset) % len(FILLER_ASSISTANT)],
        )
        for i in range(n)
    ]


def summarize(messages: list[dict[str, Any]], target: int = 120, previous: str = "") -> str:
    s = SalienceSummarizer(counter=COUNTER)
    return s(messages, previous_summary=previous, target_tokens=target, language=None)


def test_rare_facts_kept_over_filler() -> None:
    pairs = filler_pairs(12)
    pairs.insert(4, ("We finally adopted a ferret and named him Marzipan.", "Congratulations!"))
    pairs.insert(9, ("My booking reference for the Tallinn hotel is QX-48213.", "Noted."))
    out = summarize(chat(pairs), target=60)
    assert "Marzipan" in out
    assert "QX-48213" in out
    assert "Thanks!" not in out
    assert "always happy to help" not in out
    assert COUNTER.count(out) <= 60


def test_session_dates_are_kept_with_the_facts() -> None:
    msgs = chat(
        [
            ("[1:56 pm on 8 May, 2023] Hi again!", "Hello!"),
            ("I started cello lessons today.", "Lovely."),
            *filler_pairs(4),
            ("[10:02 am on 21 June, 2023] Morning!", "Good morning!"),
            ("My sister's wedding is in Ljubljana.", "How exciting."),
            *filler_pairs(4, 1),
        ]
    )
    out = summarize(msgs, target=100)
    assert "### 1:56 pm on 8 May, 2023" in out
    assert "### 10:02 am on 21 June, 2023" in out
    # each fact sits under the session it was said in, with its speaker
    first, second = out.index("8 May, 2023"), out.index("21 June, 2023")
    assert first < out.index("user:\n- I started cello lessons today.") < second
    assert second < out.index("user:\n- My sister's wedding is in Ljubljana.")


def test_timestamp_field_dates_a_message() -> None:
    msgs = [
        {"role": "user", "content": "Our office moved to Kestrel Road.", "timestamp": "2024-02-03"},
        {"role": "assistant", "content": "Noted."},
    ]
    out = summarize(msgs, target=60)
    assert "### 2024-02-03" in out and "Kestrel Road" in out


def test_previous_summary_is_merged_not_appended() -> None:
    first = chat(
        [
            ("[8 May 2023] Hi!", "Hello!"),
            ("Our new manager is Ingrid Moreau.", "Good to know."),
            *filler_pairs(5),
        ]
    )
    s1 = summarize(first, target=150)
    second = chat(
        [
            ("[9 May 2023] Hello again!", "Welcome back."),
            ("As I said, our new manager is Ingrid Moreau.", "Right."),
            ("The rent for the flat on Alder Street is $1,450 a month.", "Got it."),
            *filler_pairs(5, 2),
        ]
    )
    s2 = summarize(second, target=150, previous=s1)
    heading = "## " + LABELS["en"]["timeline"]
    assert s2.count(heading) == 1  # one structure, not two summaries glued together
    assert s2.count("Ingrid Moreau") == 1  # the restatement merged with the original
    assert "$1,450" in s2 and "### 8 May 2023" in s2 and "### 9 May 2023" in s2
    # a later summary with nothing new keeps the same facts
    s3 = summarize(chat(filler_pairs(6)), target=150, previous=s2)
    for fact in ("Ingrid Moreau", "$1,450", "Alder Street"):
        assert fact in s3


def test_near_duplicate_keeps_the_later_wording() -> None:
    msgs = chat(
        [
            ("The wedding venue in Lisbon is the Palacio Azul.", "Nice."),
            *filler_pairs(3),
            ("Update: the wedding venue in Lisbon is now the Palacio Verde.", "Noted."),
        ]
    )
    out = summarize(msgs, target=80)
    assert "Palacio Verde" in out


def test_chinese() -> None:
    msgs = chat(
        [
            ("[2022年1月6日 16:13] 又来找你聊天啦！", "你好！"),
            ("我家新养了一只兔子，名字叫糯米。", "真可爱！"),
            ("谢谢！", "不客气！很高兴能帮到你。"),
            ("好的", "听起来很棒！还有什么需要帮忙的随时告诉我。"),
            ("酒店预订号是CR-72146，帮我记一下。", "好的，我记住了。"),
            ("谢谢！", "不客气！很高兴能帮到你。"),
        ]
    )
    out = summarize(msgs, target=90)
    assert "## " + LABELS["zh"]["timeline"] in out
    assert "### 2022年1月6日 16:13" in out
    assert "糯米" in out and "CR-72146" in out
    assert "谢谢！" not in out


def test_agent_history_keeps_goal_actions_and_errors() -> None:
    msgs = [
        {
            "role": "user",
            "content": "Please fix the crash in pydicom/valuerep.py when PersonName is iterated.",
        },
        {
            "role": "assistant",
            "content": "Let me look at the file.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": '{"command": "cat pydicom/valuerep.py"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "line\n" * 50
            + "TypeError: argument of type 'PersonName3' is not iterable\n",
        },
    ]
    out = summarize(msgs, target=150)
    assert "## Goal" in out and "pydicom/valuerep.py" in out
    assert "bash: " in out and "is not iterable" in out


@pytest.mark.parametrize("target", [16, 40, 90, 200])
def test_target_respected_with_a_real_counter(target: int) -> None:
    msgs = chat(
        [
            (f"Fact {i}: the courier code for parcel {i} is ZX-{1000 + i} to Windhoek.", "Noted.")
            for i in range(40)
        ]
    )
    out = summarize(msgs, target=target)
    assert COUNTER.count(out) <= target


def test_async_twin_gives_the_same_summary() -> None:
    msgs = chat([("Our cat is called Pepper.", "Cute!"), *filler_pairs(3)])
    s = SalienceSummarizer(counter=COUNTER)
    sync = s(msgs, previous_summary="", target_tokens=60)
    assert asyncio.run(s.asummarize(msgs, previous_summary="", target_tokens=60)) == sync


def test_the_manager_uses_it() -> None:
    cm = wf.ContextManager(
        model="gpt-4o",
        context_window=2048,
        counter=COUNTER,
        summarizer=SalienceSummarizer(counter=COUNTER),
    )
    pairs = filler_pairs(80)
    pairs.insert(2, ("Remember: my passport number is P-99182736.", "Noted."))
    msgs = chat(pairs)
    state = None
    for i in range(1, len(msgs), 2):  # each call's history ends on the user's turn
        p = cm.prepare(msgs[:i], state)
        state = p.state
        assert not p.stats["summary_failed"]
        assert p.stats["tokens"] <= cm.context_window - cm.output_reserve
    assert state["summary"] and "P-99182736" in state["summary"]


def test_bad_settings_raise_library_errors() -> None:
    with pytest.raises(ValueError) as err:
        SalienceSummarizer(language="fr")
    assert isinstance(err.value, WindowfitError)
    with pytest.raises(ValueError):
        SalienceSummarizer(max_sentence_chars=3)


def test_llm_prompt_sections_match_the_offline_headings() -> None:
    for lang, labels in LABELS.items():
        for label in labels.values():
            assert f"## {label}" in LLM_SUMMARY_SECTIONS[lang]


# -- properties ----------------------------------------------------------------------------------

WORDS = [
    "Biscuit",
    "Lisbon",
    "thanks",
    "the",
    "rent",
    "$1,200",
    "QX-4821",
    "上海",
    "谢谢",
    "2023-05-08",
]
_TOKEN_RE = re.compile(r"[\w$,.\-]+", re.UNICODE)
message_st = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.lists(
            st.sampled_from(WORDS) | st.text(min_size=1, max_size=12), min_size=0, max_size=30
        ).map(" ".join),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(message_st, min_size=0, max_size=25),
    st.integers(min_value=16, max_value=300),
    st.booleans(),
)
def test_never_over_target_and_never_invents_text(
    msgs: list[dict[str, Any]], target: int, twice: bool
) -> None:
    s = SalienceSummarizer(counter=COUNTER)
    out = s(msgs, previous_summary="", target_tokens=target)
    if twice:  # a merge of its own previous summary obeys the same rules
        half = len(msgs) // 2
        first = s(msgs[:half], previous_summary="", target_tokens=target)
        out = s(msgs[half:], previous_summary=first, target_tokens=target)
    assert COUNTER.count(out) <= target
    source = " ".join(m["content"] for m in msgs)
    allowed = set(_TOKEN_RE.findall(source))
    for labels in LABELS.values():
        for label in labels.values():
            allowed.update(_TOKEN_RE.findall(label))
    allowed.update({"user", "assistant", "-", "##", "###"})
    flat = " ".join(source.split())
    for line in out.splitlines():
        if line.startswith("## ") or line in ("user:", "assistant:"):
            continue  # a section heading or a speaker label: fixed text
        body = (
            line[4:] if line.startswith("### ") else re.sub(r"^- (?:user: |assistant: )?", "", line)
        )
        # every line is a verbatim piece of the input (a long sentence may be cut short)
        assert body.rstrip("…").strip() in flat, line
        for word in _TOKEN_RE.findall(body):
            assert word in allowed or any(word in a for a in allowed), word


@pytest.mark.parametrize(
    ("said", "line"),
    [
        # a CJK fragment after a Latin sentence keeps the space it had (hypothesis found this)
        ("Biscuit Biscuit . 上海", "Biscuit Biscuit . 上海"),
        # a dropped fragment ("ok.") between two joined sentences stays in the joined line
        (
            "We met Anna in Lisbon on Monday. ok. 她很好。",
            "We met Anna in Lisbon on Monday. ok. 她很好。",
        ),
        # a pronoun sentence on its own line joins its antecedent with one space
        (
            "We adopted a ferret.\n\nThey named him   Marzipan.",
            "We adopted a ferret. They named him Marzipan.",
        ),
        ("我们养了一只雪貂。她叫小面包。", "我们养了一只雪貂。她叫小面包。"),
    ],
)
def test_a_joined_line_is_the_sources_own_stretch(said: str, line: str) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": said}]
    out = SalienceSummarizer(counter=COUNTER)(msgs, target_tokens=400)
    assert f"assistant:\n- {line}" in out, out


@pytest.mark.parametrize(
    ("opening", "date"),
    [
        ("[1:56 pm on 8 May, 2023] ", "1:56 pm on 8 May, 2023"),
        ("DATE: 1:56 pm on 8 May, 2023\n", "1:56 pm on 8 May, 2023"),
        ("Session 3 - 8 May 2023\n", "8 May 2023"),
        ("(2023-05-08 13:56) ", "2023-05-08 13:56"),
        ("【2023年5月8日】", "2023年5月8日"),
    ],
)
def test_session_stamp_formats(opening: str, date: str) -> None:
    msgs = [{"role": "user", "content": opening + "We adopted a ferret named Marzipan."}]
    out = summarize(msgs, target=60)
    assert f"### {date}\nuser:\n- We adopted a ferret named Marzipan." in out


def test_a_date_inside_a_sentence_is_a_fact_not_a_session() -> None:
    msgs = [{"role": "user", "content": "My fencing tournament is on 23 October 2025."}]
    out = summarize(msgs, target=60)
    assert "###" not in out and "23 October 2025" in out


def test_a_colon_in_a_fact_survives_a_merge() -> None:
    msgs = chat([("[8 May 2023] Reminder: the vet appointment for Biscuit is at 9:30.", "Ok.")])
    first = summarize(msgs, target=80)
    again = summarize([], target=80, previous=first)
    assert "user:\n- Reminder: the vet appointment for Biscuit is at 9:30." in again


def test_a_long_chinese_line_does_not_outrank_shorter_facts_by_its_length() -> None:
    """Chinese terms are character pairs, one per character: counted as whole words, a long
    chatty line (44 tokens) outweighed the short lines holding a title and a plan, and took
    the room of all three."""
    long_chat = (
        "爬到山顶前那段路要爬过石头和树根，还要躲开缝隙和碎石，一路上又危险又累，好在风景特别美。"
    )
    msgs = chat(
        [
            ("你好！", "你好！"),  # an opening greeting: no line below is the goal
            (long_chat, "听起来真不容易！"),
            ("我最近在读《百年孤独》。", "好书！"),
            ("我打算下个月去敦煌。", "祝你玩得开心！"),
            ("周末我们一起去公园散步了。", "真惬意！"),
        ]
    )
    out = summarize(msgs, target=70)
    assert "《百年孤独》" in out and "敦煌" in out and "公园" in out
    assert "山顶" not in out
    assert COUNTER.count(out) <= 70


def test_chinese_lines_naming_places_and_dishes_outrank_chatty_ones() -> None:
    """A Chinese character pair that straddles two common words ("须离" of "必须离开") is as
    rare in a conversation as a place's name ("鼓浪"), but its characters are each common
    apart: weighed by how much the pair is a word of its own, lines that only say common
    words in a new order give way to the lines that hold what a later question asks about."""
    words = "现在 必须 离开 事情 需要 处理 知道 应该 继续 感觉 时间 今天 工作 有点 累 休息 一下 觉得 可能 还是"
    common = words.split()
    facts = {
        5: "我最喜欢的地方是鼓浪屿。",
        17: "我比较喜欢川菜和粤菜。",
        29: "我下个月要去峨眉山。",
    }

    def chatty(i: int, n: int) -> str:
        return "".join(common[(7 * i + 3 * j) % len(common)] for j in range(n))

    pairs = [("你好！", "你好！")]
    for i in range(36):
        said = facts.get(i) or f"我{chatty(i, 6)}。"
        pairs.append((said, f"嗯，{chatty(i + 50, 4)}。"))
    out = summarize(chat(pairs), target=60)
    assert all(fact in out for fact in facts.values()), out
    assert COUNTER.count(out) <= 60
