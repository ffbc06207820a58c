"""The context-quality harness (benches/eval/eval_context.py) and its dialog generator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import windowfit as wf

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches" / "eval"))
import eval_context as ev  # noqa: E402
from dialogs import answer_words, generate_dialog  # noqa: E402

COUNTER = wf.Counter(model="gpt-4o")


# -- the recall metric, on cases computed by hand ---------------------------------------------


@pytest.mark.parametrize(
    ("words", "text", "expected"),
    [
        (("biscuit",), "We named her Biscuit.", 1.0),
        (("rome",), "Romeo and Juliet", 0.0),  # whole words only
        (("ingrid", "moreau"), "my manager Ingrid left", 0.5),
        (("23", "october", "2025"), "on 23 October, 2025", 1.0),
        (("23", "october", "2025"), "on 3 October 2025", 2 / 3),
        (("1,250",), "rent is $1,250 monthly", 1.0),
        (("1,250",), "rent is $1,2500", 0.0),
        (("rt-86218",), "reference RT-86218, please", 1.0),
        (("糯米",), "我家的兔子叫糯米。", 1.0),  # Chinese: substring
        (("糯米",), "我家的兔子叫年糕。", 0.0),
        (("2022年1月6日",), "[2022年1月6日 16:13] 你好", 1.0),
        ((), "anything", 1.0),
        (("Taxi Driver",), "a film called Taxi Driver.", 1.0),  # a phrase: as a whole
        (("taxi driver",), "a taxi. Driver", 0.0),
        (("Guns N' Roses",), "bands like Guns N' Roses and AC/DC", 1.0),
        (("Guns N' Roses",), "bands like Guns N' Rosesy", 0.0),
        (("摔跤吧！爸爸",), "电影《摔跤吧！爸爸》", 1.0),
    ],
)
def test_word_recall(words: tuple[str, ...], text: str, expected: float) -> None:
    assert ev.word_recall(words, text) == pytest.approx(expected)


def test_answer_words() -> None:
    assert answer_words("The Salt Road") == ("salt", "road")
    assert answer_words("$1,250") == ("1,250",)
    assert answer_words("2022年1月6日") == ("2022年1月6日",)
    assert answer_words("《海上灯塔》") == ("海上灯塔",)


def test_pairing_check() -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f"}}]}
    result = {"role": "tool", "tool_call_id": "a", "content": "ok"}
    user = {"role": "user", "content": "hi"}
    assert ev.pairing_ok([user, call, result, user])
    assert not ev.pairing_ok([user, call, user])  # unanswered
    assert not ev.pairing_ok([user, result])  # orphan result
    assert not ev.pairing_ok([user, call])  # unanswered at the end


def test_task_identifiers() -> None:
    task = (
        "<pr_description>\nMake `PersonName3` iterable: pydicom/valuerep.py raises in "
        "Dataset.get_item() and read_file fails.\n</pr_description> ignore_this_part"
    )
    ids = ev.task_identifiers(task)
    for ident in ("PersonName3", "pydicom/valuerep.py", "Dataset.get_item", "read_file"):
        assert ident in ids
    assert "ignore_this_part" not in ids


# -- the replay -------------------------------------------------------------------------------


def test_replay_of_a_history_that_fits_reuses_every_prefix() -> None:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(8)]
    calls = [1, 3, 5, 7]
    recorded, final = ev.replay(msgs, calls, ev.plain_policy(10_000, COUNTER), COUNTER, 10_000)
    assert final == msgs[:7]
    assert [c.tokens_sent for c in recorded] == [COUNTER.count_messages(msgs[:i]) for i in calls]
    assert [c.tokens_full for c in recorded] == [c.tokens_sent for c in recorded]
    assert [c.prefix_full for c in recorded] == [False, True, True, True]
    # cached = the previous prompt's messages, without the reply priming
    prime = COUNTER.count_messages(msgs[:1]) - COUNTER.count_message(msgs[0])
    expected = [0] + [COUNTER.count_messages(msgs[:i]) - prime for i in calls[:-1]]
    assert [c.tokens_cached for c in recorded] == expected
    assert all(c.budget_ok and c.pairing_ok for c in recorded)


def test_replay_flags_a_broken_budget() -> None:
    msgs = [{"role": "user", "content": "word " * 50}] * 3
    recorded, _ = ev.replay(msgs, [1, 3], lambda h: h, COUNTER, 100)
    assert [c.budget_ok for c in recorded] == [True, False]


def test_cost_counts_cached_tokens_at_the_cached_price() -> None:
    info = wf.get_model("gpt-4o")
    calls = [
        ev.Call(1, 1000, 1000, 0, False, True, True),
        ev.Call(3, 2000, 2000, 1000, True, True, True),
    ]
    expected = (
        1000 * info.input_price + 1000 * info.cached_input_price + 1000 * info.input_price
    ) / 1e6
    assert ev._cost(calls, info) == pytest.approx(expected)
    assert ev._cost(calls, info, full=True) == pytest.approx(expected)


# -- the suites -------------------------------------------------------------------------------


def test_dialog_generator_is_deterministic_and_answerable() -> None:
    a = generate_dialog(5, language="en")
    b = generate_dialog(5, language="en")
    assert a.messages == b.messages and a.questions == b.questions
    assert generate_dialog(6, language="en").messages != a.messages
    for lang in ("en", "zh"):
        d = generate_dialog(3, language=lang)
        assert 300 <= len(d.messages) <= 700 and len(d.questions) >= 20
        whole = ev.prompt_text(d.messages)
        for q in d.questions:  # every answer is in the history
            assert ev.word_recall(q.answer_words, whole) == 1.0, q
        kinds = {q.kind for q in d.questions}
        assert {"name", "place", "number", "date", "identifier", "session_date"} <= kinds


def test_harness_on_a_tiny_dialog() -> None:
    dialog = generate_dialog(1, language="en", messages=(120, 130), sessions=(4, 4))
    scores = ev.eval_dialog(dialog, ["extractive"], COUNTER, window=2048)
    assert set(scores) == {"window", "manager+extractive"}
    for score in scores.values():
        s = score.summary()
        assert s["budget_kept"] and s["pairing_kept"]
        assert 0.0 <= s["recall"] <= s["recall_ceiling"] == 1.0
        assert s["tokens_sent"] < s["tokens_full"]  # the history outgrew the window
        assert 0.0 < s["budget_use"] <= 1.0
    # once the history outgrows it, the plain window slides: its prefix is rarely reused
    window = scores["window"]
    over = [c for c in window.calls[1:] if c.tokens_full > window.budget]
    assert over and sum(c.prefix_full for c in over) / len(over) < 0.5
    agg = ev.aggregate([{k: v.summary() for k, v in scores.items()}])
    assert agg["window"]["conversations"] == 1 and 0 < agg["window"]["tokens_saved"] < 1


def test_harness_on_a_real_agent_run() -> None:
    archive = ev.find_agent_data()
    if archive is None:
        pytest.skip("the agent-sessions archive (shared/data/agent-sessions/) is not present")
    name, msgs = next(ev.agent_runs(archive, limit=1))
    assert msgs[0]["role"] == "system" and all(m["role"] != "exit" for m in msgs)
    counter: Any = wf.Counter(model=ev.AGENT_MODEL)
    scores = ev.eval_agent_run(msgs, ["extractive"], counter, window=8192)
    for score in scores.values():
        s = score.summary()
        assert s["calls"] == sum(m["role"] == "assistant" for m in msgs)
        assert s["budget_kept"] and s["pairing_kept"], name
        assert s["identifiers"] == 1.0  # the task statement is always sent


def test_memorybank_joined_suite_is_every_user_in_turn(tmp_path: Path) -> None:
    """The joined suite: one conversation per language, each user's days in date order one
    after the other, dates moved after the previous user's last day (and the day a question
    names with them), every user's questions at the end answered from that user's own
    exchanges; a missing folder is skipped, not an error."""
    import json

    import eval_recall as er

    data = {
        "ann": {
            "history": {
                "2023-05-01": [{"query": "I adopted a corgi", "response": "Cute!"}],
                "2023-04-30": [{"query": "I baked focaccia", "response": "Yum"}],
            }
        },
        "bob": {"history": {"2023-04-29": [{"query": "I visited Lisbon", "response": "Nice"}]}},
    }
    (tmp_path / "memory_bank_en.json").write_text(json.dumps(data), "utf-8")
    (tmp_path / "probing_questions_en.jsonl").write_text(
        json.dumps({"ann": ["What did I bake?"]})
        + "\n"
        + json.dumps({"bob": ["Where did I go on April 29th?"]}),
        "utf-8",
    )
    (tmp_path / "memory_bank_cn.json").write_text("{}", "utf-8")
    (tmp_path / "probing_questions_cn.jsonl").write_text("", "utf-8")
    [conv] = er.joined_conversations(tmp_path)
    assert conv.language == "en"
    assert [(m["content"], m["date"]) for m in conv.messages if m["role"] == "user"] == [
        ("I baked focaccia", "2023-04-30"),
        ("I adopted a corgi", "2023-05-01"),
        ("I visited Lisbon", "2023-05-01"),  # ann's two days, then bob's
    ]
    assert [q for q, _ in conv.questions] == ["What did I bake?", "Where did I go on May 1?"]
    assert "focaccia" in conv.questions[0][1] and "lisbon" in conv.questions[1][1]
    assert er.find_memorybank(str(tmp_path / "absent")) is None


def test_memorybank_questions_take_their_annotated_answers(tmp_path: Path) -> None:
    """With an answer file, each question is scored by its annotated terms, an unanswerable
    one is left out, and a user named with stray spaces in one file is still matched."""
    import json

    import eval_recall as er

    data = {
        " bob ": {"history": {"2023-04-29": [{"query": "I saw Taxi Driver", "response": "ok"}]}}
    }
    (tmp_path / "memory_bank_en.json").write_text(json.dumps(data), "utf-8")
    (tmp_path / "probing_questions_en.jsonl").write_text(
        json.dumps({"bob": ["Which film did I see?", "What did I eat?"]}), "utf-8"
    )
    rows = [
        {"language": "en", "user": "bob", "index": 0, "answerable": True, "terms": ["Taxi Driver"]},
        {"language": "en", "user": "bob", "index": 1, "answerable": False, "terms": []},
    ]
    answers_file = tmp_path / "answers.jsonl"
    answers_file.write_text("\n".join(json.dumps(r) for r in rows), "utf-8")
    [conv] = er.memorybank_conversations(tmp_path, "en", er.load_answers(answers_file))
    assert conv.questions == [("Which film did I see?", ("Taxi Driver",))]
    [proxy] = er.memorybank_conversations(tmp_path, "en")
    assert len(proxy.questions) == 2  # the proxy answers every question


@pytest.mark.parametrize("name", ["memorybank_answers.jsonl", "memorybank_answers_second.jsonl"])
def test_annotated_answers_are_verbatim_from_the_real_dialogs(name: str) -> None:
    """Every annotated term occurs in its user's history, on the question as the data has it."""
    import json

    import eval_recall as er

    folder = er.find_memorybank(None)
    if folder is None:
        pytest.skip("shared/data/dialogs-memorybank/ is absent (the real MemoryBank dialogs)")
    rows = [json.loads(line) for line in (er.ANSWERS.parent / name).read_text("utf-8").splitlines()]
    assert len(rows) == 200
    for language, suffix in (("zh", "cn"), ("en", "en")):
        raw = json.loads((folder / f"memory_bank_{suffix}.json").read_text("utf-8"))
        histories = {
            user.strip(): "\n".join(
                f"{e['query']}\n{e['response']}" for day in rec["history"].values() for e in day
            )
            for user, rec in raw.items()
        }
        questions = {}
        for line in (folder / f"probing_questions_{suffix}.jsonl").read_text("utf-8").splitlines():
            questions.update((u.strip(), qs) for u, qs in json.loads(line).items())
        for row in (r for r in rows if r["language"] == language):
            assert questions[row["user"]][row["index"]] == row["question"]
            assert row["answerable"] == bool(row["terms"])
            for term in row["terms"]:
                assert term in histories[row["user"]], (row["user"], row["index"], term)
