"""The extractive summarizer, language detection and the LLM summary prompt."""

from __future__ import annotations

import json

import pytest
import windowfit as wf
from hypothesis import given, settings
from hypothesis import strategies as st
from windowfit.summarize import (
    ExtractiveSummarizer,
    _identifiers,
    build_summary_prompt,
    detect_language,
    message_text,
    render_transcript,
)
from windowfit.summarize.salience import LABELS


def _call(cid: str, name: str, **args: object) -> dict:
    return {
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


EN_CONVERSATION = [
    {"role": "system", "content": "You are a data assistant. SYSTEM-SECRET-PROMPT"},
    {"role": "user", "content": "I want a grade report for my class. Remember: classId=C-4821."},
    {
        "role": "assistant",
        "content": "Let me query the database.",
        "tool_calls": [_call("c1", "query_db", sql="select * from grades where class='C-4821'")],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "ERROR: relation grades does not exist\n" + "x\n" * 400,
    },
    {
        "role": "assistant",
        "content": "The grades table is missing. We decided to use exports/grades_2024.csv instead.",
    },
    {
        "role": "user",
        "content": "OK. The deadline is 2024-06-30 and the budget is $12,500. See https://wiki.example.com/grades.",
    },
    {
        "role": "assistant",
        "content": "Understood, I will read the file.",
        "tool_calls": [_call("c2", "read_file", path="exports/grades_2024.csv")],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "id,name,score\n1,Alice,90\n2,Bob,75"},
    {"role": "assistant", "content": "The file has 2 rows; the average score is 82.5."},
]

ZH_CONVERSATION = [
    {
        "role": "user",
        "content": "帮我分析三年级二班的期末成绩。请记住：班级编号：C-7305，学号是 2023011234。",
    },
    {
        "role": "assistant",
        "content": "好的，我决定先读取成绩文件 scores_final.xlsx。",
        "tool_calls": [_call("z1", "read_file", path="data/scores_final.xlsx")],
    },
    {"role": "tool", "tool_call_id": "z1", "content": "错误：文件不存在"},
    {"role": "assistant", "content": "文件不存在，我改用数据库查询。"},
    {"role": "user", "content": "注意：数据库主机是 db-prod-03.internal:5432，只能读。"},
]


@pytest.fixture(scope="module")
def counter() -> wf.Counter:
    return wf.Counter(model="gpt-4o")


def test_identifiers_are_extracted() -> None:
    text = (
        "classId=C-4821, file src/app/main.py, https://docs.example.com/a/b?x=1. Budget $12,500, "
        "3.5% on 2024-05-01, v1.2.3, order ORD-2024-0042, 学号是 2023011234, sha 3f9a2b1c, "
        "mail ops@example.org"
    )
    found = _identifiers(text)
    for expected in (
        "classId=C-4821",
        "src/app/main.py",
        "https://docs.example.com/a/b?x=1",
        "$12,500",
        "3.5%",
        "2024-05-01",
        "v1.2.3",
        "ORD-2024-0042",
        "2023011234",
        "3f9a2b1c",
        "ops@example.org",
    ):
        assert any(expected in f for f in found), (expected, found)
    # sentence punctuation is not part of a file name or URL
    assert "grades_2024.csv" in _identifiers("We use exports/grades_2024.csv.")[0]
    assert not any(f.endswith(".") for f in _identifiers("See https://example.com/x."))


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Please fix the failing tests in src/app.py", "en"),
        ("帮我修复 src/app.py 里失败的测试", "zh"),
        ("请检查 classId=C-4821 的 grades_2024.csv 文件", "zh"),
        ("The student 王芳 scored 90 points on the final exam", "en"),
        ("", "en"),
    ],
)
def test_detect_language(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def test_message_text_handles_parts_and_tool_calls() -> None:
    msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at this"},
            {"type": "image_url", "image_url": {"url": "x"}},
        ],
    }
    assert message_text(msg) == "look at this\n[image]"
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("a", "grep", pattern="TODO")],
    }
    assert message_text(call) == 'grep({"pattern": "TODO"})'


def test_extractive_keeps_goal_decisions_errors_and_identifiers(counter: wf.Counter) -> None:
    s = ExtractiveSummarizer(counter=counter)
    out = s(EN_CONVERSATION, previous_summary="", target_tokens=220, language="en")
    assert counter.count(out) <= 220
    assert out.startswith("## Goal\n- I want a grade report")
    for fact in (
        "classId=C-4821",
        "exports/grades_2024.csv",
        "2024-06-30",
        "$12,500",
        "https://wiki.example.com/grades",
    ):
        assert fact in out, fact
    assert "relation grades does not exist" in out  # the tool error is a finding
    assert "query_db" in out and "read_file" in out  # what was done
    assert "SYSTEM-SECRET-PROMPT" not in out  # system prompts are sent verbatim, never summarized
    assert "We decided to use exports/grades_2024.csv instead" in out  # the decision


def test_extractive_is_deterministic(counter: wf.Counter) -> None:
    s = ExtractiveSummarizer(counter=counter)
    a = s(EN_CONVERSATION, previous_summary="", target_tokens=150, language="en")
    b = ExtractiveSummarizer(counter=counter)(
        EN_CONVERSATION, previous_summary="", target_tokens=150, language="en"
    )
    assert a == b


def test_extractive_writes_in_the_conversation_language(counter: wf.Counter) -> None:
    out = ExtractiveSummarizer(counter=counter)(
        ZH_CONVERSATION, previous_summary="", target_tokens=200, language="auto"
    )
    assert out.startswith("## 任务目标")
    for fact in ("C-7305", "2023011234", "db-prod-03.internal:5432"):
        assert fact in out, fact
    assert "文件不存在" in out
    forced = ExtractiveSummarizer(counter=counter, language="en")(
        ZH_CONVERSATION, previous_summary="", target_tokens=200, language="zh"
    )
    assert forced.startswith("## Goal")


def test_extractive_respects_small_targets(counter: wf.Counter) -> None:
    s = ExtractiveSummarizer(counter=counter)
    for target in (24, 48, 80, 120):
        out = s(EN_CONVERSATION, previous_summary="", target_tokens=target, language="en")
        # the goal always stays (shortened); everything else competes for the room
        assert out.startswith("## Goal")
        assert counter.count(out) <= max(target, 24) + 4


def test_extractive_merges_previous_summary_incrementally(counter: wf.Counter) -> None:
    s = ExtractiveSummarizer(counter=counter)
    first = s(EN_CONVERSATION[:4], previous_summary="", target_tokens=150, language="en")
    second = s(ZH_CONVERSATION, previous_summary=first, target_tokens=300, language="en")
    # the goal of the first batch survives, and facts of both batches are present
    assert "I want a grade report" in second
    assert "classId=C-4821" in second
    assert "C-7305" in second and "2023011234" in second
    # merging with an empty batch keeps the summary's content
    again = s([], previous_summary=second, target_tokens=300, language="en")
    for fact in ("classId=C-4821", "C-7305", "2023011234"):
        assert fact in again


def test_planted_facts_survive_many_merges(counter: wf.Counter) -> None:
    """Hundreds of routine identifiers must not push out the facts the user asked to keep."""
    s = ExtractiveSummarizer(counter=counter)
    summary = s(
        [
            {
                "role": "user",
                "content": "Remember: our classId=C-4821 and the deploy key is vault:secret/deploy-7.",
            }
        ],
        previous_summary="",
        target_tokens=200,
        language="en",
    )
    for batch in range(40):
        msgs = []
        for i in range(10):
            n = batch * 10 + i
            msgs.append(
                {"role": "user", "content": f"Check ticket T-{5000 + n} in src/mod_{n}.py please."}
            )
            msgs.append(
                {
                    "role": "assistant",
                    "content": f"Ticket T-{5000 + n} is fixed in commit {n:07x}a.",
                }
            )
        summary = s(msgs, previous_summary=summary, target_tokens=300, language="en")
        assert counter.count(summary) <= 300
    assert "classId=C-4821" in summary
    assert "secret/deploy-7" in summary


def test_extractive_condenses_a_foreign_previous_summary(counter: wf.Counter) -> None:
    foreign = (
        "The user works on the billing service. They chose Postgres 16 and the account id "
        "ACC-99812. Earlier tests failed because of a timezone bug. " * 5
    )
    out = ExtractiveSummarizer(counter=counter)(
        [], previous_summary=foreign, target_tokens=80, language="en"
    )
    assert counter.count(out) <= 84
    assert "ACC-99812" in out


def test_extractive_async_interface(counter: wf.Counter) -> None:
    import asyncio

    s = ExtractiveSummarizer(counter=counter)
    a = asyncio.run(
        s.asummarize(EN_CONVERSATION, previous_summary="", target_tokens=150, language="en")
    )
    assert a == s(EN_CONVERSATION, previous_summary="", target_tokens=150, language="en")


def test_extractive_without_counter_estimates_pessimistically(counter: wf.Counter) -> None:
    out = ExtractiveSummarizer()(
        EN_CONVERSATION + ZH_CONVERSATION, previous_summary="", target_tokens=150, language="en"
    )
    assert counter.count(out) <= 150


def test_extractive_rejects_bad_language() -> None:
    with pytest.raises(ValueError):
        ExtractiveSummarizer(language="fr")


_message = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.text(max_size=300)),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.text(max_size=300)),
    st.builds(lambda t: {"role": "tool", "tool_call_id": "x", "content": t}, st.text(max_size=600)),
    st.builds(
        lambda t: {"role": "assistant", "content": None, "tool_calls": [_call("x", "f", q=t)]},
        st.text(max_size=80),
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_message, max_size=12), st.text(max_size=400), st.integers(min_value=16, max_value=400)
)
def test_extractive_never_crashes_and_stays_near_target(
    msgs: list, previous: str, target: int
) -> None:
    counter = wf.Counter(model="gpt-4o")
    out = ExtractiveSummarizer(counter=counter)(
        msgs, previous_summary=previous, target_tokens=target, language="auto"
    )
    assert isinstance(out, str)
    # only the always-kept goal may be shortened past the target, and then only a little
    assert counter.count(out) <= target + 12


def test_prompt_structure_en_and_zh() -> None:
    en = build_summary_prompt(
        EN_CONVERSATION, previous_summary="## Goal\n- old goal", target_tokens=300, language="en"
    )
    assert [m["role"] for m in en] == ["system", "user"]
    body = en[1]["content"]
    for part in (
        "Previous summary",
        "old goal",
        *(f"## {label}" for label in LABELS["en"].values()),
        "about 300 tokens",
        "classId=C-4821",
    ):
        assert part in body, part
    assert "SYSTEM-SECRET-PROMPT" not in body
    zh = build_summary_prompt(
        ZH_CONVERSATION, previous_summary="", target_tokens=200, language="zh"
    )
    body = zh[1]["content"]
    for part in (
        "请将以下对话历史压缩为结构化摘要",
        *(f"## {label}" for label in LABELS["zh"].values()),
        "（无）",
        "请用简洁的中文输出",
    ):
        assert part in body, part


def test_transcript_clips_long_outputs() -> None:
    text = render_transcript(EN_CONVERSATION, max_chars_per_message=200)
    assert "characters omitted" in text
    assert "TOOL RESULT [c1]: ERROR: relation grades does not exist" in text
    assert 'ASSISTANT → TOOL CALL query_db({"sql"' in text
    assert "SYSTEM-SECRET-PROMPT" not in text
