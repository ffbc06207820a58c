"""Recall evaluation: does the prompt for a question hold what answers it, once the answer has
left the window long ago?

    .venv/bin/python benches/eval/eval_recall.py                       # dialogs + MemoryBank, tables
    .venv/bin/python benches/eval/eval_recall.py --dialogs 10 --json   # figures as JSON
    .venv/bin/python benches/eval/eval_recall.py --timing 10000        # prepare time, 10k messages

Four prompts side by side, each within the same prompt budget (context window minus the
manager's output reserve):

- **whole**: the whole history (does not fit: the ceiling);
- **window**: the plain last-N window (``wf.fit``);
- **summary**: ``ContextManager(recall=False)`` (summary + window);
- **summary+recall**: ``ContextManager()`` (summary + window + recalled units).

Per conversation, the conversation is replayed call by call (one call per assistant turn, the
manager's state carried), which gives **prefix reuse**: the share of each prompt's tokens that
are a prefix shared with the previous prompt (what a provider's prompt cache serves). Then
each question is asked at the end, as the latest user message, from the end-of-conversation
state (each question on its own): the **per-question answer-word recall** is the share of the
question's answer words found in the prompt, with budget, pairing and "question is the last
message" checked on every prompt. **End of conversation**, scored over all questions' answer
words against the plain window: with a closing recap request instead of a question (*recap
asked*), and the prompt of the conversation's own last call (*last turn*: nothing asked, what
a conversation that simply ends leaves in the prompt).

Suites:

- **dialogs** (``benches/eval/dialogs.py``): generated long multi-session dialogs in English and
  Chinese with questions and their answer words, an 8k window.
- **memorybank** (``shared/data/dialogs-memorybank``): real Chinese and English multi-day
  dialogs with probing questions but no reference answers, a 2k window (they are 3-6k tokens).
  The answers are annotated (``memorybank_answers.jsonl``, written by reading each user's
  history: the terms a correct answer holds, verbatim from the history; a second, separate
  annotation in ``memorybank_answers_second.jsonl``, chosen with ``--answers``); 199 of the
  200 questions are answerable. ``--proxy-answers`` scores by the earlier *proxy* instead:
  the evidence exchange is the one sharing most content words with the question (on the day
  the question names, if it names one), and its answer words are its rarest content words
  that the question does not contain. The proxy rewards generic words ("wonderful", "day")
  and, in Chinese, pairs of characters across words ("些电" of "一些电影"): the annotated
  figures are the ones to read.
- **memorybank-joined**: the same data as one long real conversation per language: every
  user's days one after the other (each message keeps its date, moved after the previous
  user's last day, and so does the day a question names), all users' probing questions
  asked at the end, an 8k window (about 60k tokens of history per language). A question's
  proxy answer is found among its own user's exchanges, as above. Skipped, with a message,
  when the data is absent.

**Prepare time** (``--timing N``): ``prepare`` p50 over single warm calls on an N-message
history (dialogs concatenated), state and indexes warm. Wall-clock on whatever machine runs
it: on a loaded machine the figure is an upper bound.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import statistics
import sys
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import windowfit as wf
from windowfit import _core

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dialogs import generate_dialogs  # noqa: E402
from eval_context import _CLOSING, pairing_ok, prompt_text, replay, word_recall  # noqa: E402

Message = dict[str, Any]
MODEL = "gpt-4o"
POLICIES = ("whole", "window", "summary", "summary+recall")


@dataclass
class Conversation:
    name: str
    language: str
    messages: list[Message]
    questions: list[tuple[str, tuple[str, ...]]]  # (question, answer words)


@dataclass
class Figures:
    recall: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in POLICIES})
    closing: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in POLICIES})
    last_turn: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in POLICIES})
    cached_share: dict[str, list[float]] = field(default_factory=dict)
    prefix_full: dict[str, list[float]] = field(default_factory=dict)
    violations: dict[str, int] = field(default_factory=lambda: {p: 0 for p in POLICIES})
    recalled_units: list[int] = field(default_factory=list)

    def merge(self, other: Figures) -> None:
        for mine, theirs in (
            (self.recall, other.recall),
            (self.closing, other.closing),
            (self.last_turn, other.last_turn),
            (self.cached_share, other.cached_share),
            (self.prefix_full, other.prefix_full),
        ):
            for k, v in theirs.items():
                mine.setdefault(k, []).extend(v)
        for k, n in other.violations.items():
            self.violations[k] = self.violations.get(k, 0) + n
        self.recalled_units.extend(other.recalled_units)


# ---------------------------------------------------------------------------------------------
# Conversations
# ---------------------------------------------------------------------------------------------


def dialog_conversations(count: int, seed: int) -> list[Conversation]:
    return [
        Conversation(
            f"dialog {d.seed}/{d.language}",
            d.language,
            d.messages,
            [(q.text, q.answer_words) for q in d.questions],
        )
        for d in generate_dialogs(count, seed=seed)
    ]


_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}|\d+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_EN_STOP = frozenset(
    """the and for you your are was were with that this what which who when where how did does
    have has had about from they them their there then than into just also very can could would
    should will like some any all one ones me my mine our ours his her its not but yes no so
    before after recently remember mentioned told tell said say asked ask recommend recommended
    something things thing know think please thank thanks really much many more most""".split()
)
_MONTH_DAY = re.compile(
    r"(?i)(april|may)\s+(\d{1,2})(?:st|nd|rd|th)?|(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]"
)


def _content_words(text: str, zh: bool) -> list[str]:
    if zh:
        out = []
        for run in _CJK_RUN.findall(text):
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        return out + [w.lower() for w in _EN_WORD.findall(text)]
    return [w.lower() for w in _EN_WORD.findall(text) if w.lower() not in _EN_STOP]


def _named_date(question: str) -> str | None:
    m = _MONTH_DAY.search(question)
    if not m:
        return None
    if m.group(1):
        month = 4 if m.group(1).lower() == "april" else 5
        return f"2023-{month:02d}-{int(m.group(2)):02d}"
    return f"2023-{int(m.group(3)):02d}-{int(m.group(4)):02d}"


def _proxy_answer(
    question: str, exchanges: list[tuple[str, str]], zh: bool, df: Tally[str]
) -> tuple[str, ...]:
    """The rarest content words of the exchange sharing the most with the question (on the
    day it names), that the question does not hold. Shared words weigh by their rarity (idf):
    counted plainly, a greeting sharing "went" and "movie" beat the exchange naming the film."""
    q = set(_content_words(question, zh))
    day = _named_date(question)
    pool = [(d, t) for d, t in exchanges if day is None or d == day] or exchanges
    n = len(exchanges)

    def shared(e: tuple[str, str]) -> float:
        # summed in a fixed order: a set's order follows the process's string hashing, and
        # float sums in another order broke ties between exchanges differently from run to run
        shared_words = sorted(q & set(_content_words(e[1], zh)))
        return sum(math.log((n + 1) / (df[w] + 0.5)) for w in shared_words)

    best = max(pool, key=shared)
    words = [w for w in dict.fromkeys(_content_words(best[1], zh)) if w not in q]
    words.sort(key=lambda w: (df[w], w))
    return tuple(words[:6])


#: Reference answers to the MemoryBank probing questions, written by reading each user's
#: history: per question the terms (names, titles, places, things) a correct answer holds,
#: each copied verbatim from the history, or ``answerable: false`` where the history holds no
#: answer (those questions are left out). Two annotations made apart from each other (the
#: second, ``--answers``, shares a term with the first on 184 of the 200 questions): a figure
#: that moves between them is within the annotators' disagreement.
ANSWERS = Path(__file__).resolve().parent / "memorybank_answers.jsonl"
SECOND_ANSWERS = ANSWERS.with_name("memorybank_answers_second.jsonl")

Answers = dict[tuple[str, str, int], tuple[str, ...] | None]


def load_answers(path: Path = ANSWERS) -> Answers:
    """``(language, user, question index) -> terms`` (None: not answerable)."""
    out: Answers = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            terms = tuple(row["terms"]) if row["answerable"] else None
            out[(row["language"], row["user"], int(row["index"]))] = terms
    return out


def memorybank_conversations(
    folder: Path, language: str, answers: Answers | None = None
) -> list[Conversation]:
    """Per user, the history and the probing questions, each with its annotated answer terms
    (``answers``; unanswerable questions left out) or, without ``answers``, its proxy answer."""
    suffix = "cn" if language == "zh" else "en"
    # some user names carry stray spaces in one file and not the other (" Roland " / "Roland")
    raw = json.loads((folder / f"memory_bank_{suffix}.json").read_text("utf-8"))
    data = {user.strip(): record for user, record in raw.items()}
    questions: dict[str, list[str]] = {}
    for line in (folder / f"probing_questions_{suffix}.jsonl").read_text("utf-8").splitlines():
        if line.strip():
            questions.update((u.strip(), qs) for u, qs in json.loads(line).items())
    out = []
    zh = language == "zh"
    for user, record in data.items():
        messages: list[Message] = []
        exchanges: list[tuple[str, str]] = []
        for date in sorted(record.get("history", {})):
            for ex in record["history"][date]:
                q, r = str(ex.get("query", "")), str(ex.get("response", ""))
                messages.append({"role": "user", "content": q, "date": date})
                messages.append({"role": "assistant", "content": r, "date": date})
                exchanges.append((date, f"{q}\n{r}"))
        if not messages or user not in questions:
            continue
        df: Tally[str] = Tally()
        for _, text in exchanges:
            df.update(set(_content_words(text, zh)))
        if answers is None:
            qs = [(q, _proxy_answer(q, exchanges, zh, df)) for q in questions[user]]
        else:
            annotated = (
                (q, answers.get((language, user, k))) for k, q in enumerate(questions[user])
            )
            qs = [(q, terms) for q, terms in annotated if terms]
        out.append(Conversation(f"memorybank {user}/{language}", language, messages, qs))
    return out


def _shifted(date: str, days: int) -> str:
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def _shift_question(question: str, days: int) -> str:
    """``question`` with the day it names (if any) moved ``days`` later, in its own style."""
    day = _named_date(question)
    if day is None or not days:
        return question
    moved = dt.date.fromisoformat(_shifted(day, days))

    def write(m: re.Match[str]) -> str:
        if m.group(1):
            return f"{moved.strftime('%B')} {moved.day}"
        return f"{moved.month}月{moved.day}{m.group(0)[-1]}"

    return _MONTH_DAY.sub(write, question, count=1)


def joined_conversations(folder: Path, answers: Answers | None = None) -> list[Conversation]:
    """Per language, every user's days one after the other as one long conversation: each
    user's dates (and the day a question names) moved after the previous user's last day, so
    the dates keep increasing as in a real conversation of months; every user's questions at
    the end, each with its annotated answer or the proxy answer of its own user's exchanges."""
    out = []
    for language in ("zh", "en"):
        messages: list[Message] = []
        questions: list[tuple[str, tuple[str, ...]]] = []
        shift = 0
        for conv in memorybank_conversations(folder, language, answers):
            dates = sorted({str(m["date"]) for m in conv.messages})
            messages += [{**m, "date": _shifted(str(m["date"]), shift)} for m in conv.messages]
            questions += [(_shift_question(q, shift), words) for q, words in conv.questions]
            first, last = dt.date.fromisoformat(dates[0]), dt.date.fromisoformat(dates[-1])
            shift += (last - first).days + 1
        if messages:
            out.append(Conversation(f"memorybank joined/{language}", language, messages, questions))
    return out


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


def _manager(window: int, counter: Any, recall: bool, ratio: float | None) -> wf.ContextManager:
    extra = {} if ratio is None else {"recall_ratio": ratio}
    return wf.ContextManager(
        model=MODEL, context_window=window, counter=counter, recall=recall, **extra
    )


def _final_state(cm: wf.ContextManager, messages: list[Message], counter: Any, budget: int):
    """Replay call by call; returns (calls, the last call's prompt, the state at the end)."""
    state: dict[str, Any] | None = None

    def policy(history: list[Message]) -> list[Message]:
        nonlocal state
        p = cm.prepare(history, state)
        state = p.state
        return list(p.messages)

    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    recorded, last = replay(messages, calls, policy, counter, budget)
    return recorded, last, state


def evaluate(conv: Conversation, window: int, counter: Any, ratio: float | None) -> Figures:
    fig = Figures()
    managers = {
        "summary": _manager(window, counter, False, ratio),
        "summary+recall": _manager(window, counter, True, ratio),
    }
    budget = window - managers["summary"].output_reserve
    states: dict[str, Any] = {}
    everything = [w for _, ws in conv.questions for w in ws]
    turns = [i for i, m in enumerate(conv.messages) if m["role"] == "assistant"]
    before_last = conv.messages[: turns[-1]] if turns else conv.messages
    fig.last_turn["whole"].append(word_recall(everything, prompt_text(before_last)))
    window_last = list(wf.fit(before_last, budget, counter=counter).messages)
    fig.last_turn["window"].append(word_recall(everything, prompt_text(window_last)))
    for name, cm in managers.items():
        calls, last, states[name] = _final_state(cm, conv.messages, counter, budget)
        fig.last_turn[name].append(word_recall(everything, prompt_text(last)))
        later = calls[1:] or calls
        fig.cached_share[name] = [c.tokens_cached / max(1, c.tokens_sent) for c in later]
        fig.prefix_full[name] = [float(c.prefix_full) for c in later]

    def prompt_for(name: str, history: list[Message]) -> list[Message]:
        if name == "whole":
            return history
        if name == "window":
            return list(wf.fit(history, budget, counter=counter).messages)
        p = managers[name].prepare(history, states[name])
        if name == "summary+recall":
            fig.recalled_units.append(len(p.stats.get("recalled") or ()))
        return list(p.messages)

    for question, words in conv.questions:
        ask = {"role": "user", "content": question}
        history = [*conv.messages, ask]
        for name in POLICIES:
            prompt = prompt_for(name, history)
            ok = name == "whole" or (
                counter.count_messages(prompt) <= budget
                and pairing_ok(prompt)
                and prompt[-1] is ask
            )
            fig.violations[name] += not ok
            fig.recall[name].append(word_recall(words, prompt_text(prompt)))
    closing = {"role": "user", "content": _CLOSING[conv.language]}
    for name in POLICIES:
        prompt = prompt_for(name, [*conv.messages, closing])
        fig.closing[name].append(word_recall(everything, prompt_text(prompt)))
    return fig


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(fig: Figures) -> dict[str, Any]:
    whole = _mean(fig.recall["whole"]) or 0.0
    out: dict[str, Any] = {"questions": len(fig.recall["whole"])}
    for name in POLICIES:
        r = _mean(fig.recall[name])
        out[name] = {
            "recall": r,
            "share_of_whole": (r / whole) if r is not None and whole else None,
            "closing_recall": _mean(fig.closing[name]),
            "last_turn_recall": _mean(fig.last_turn[name]),
            "cached_share": _mean(fig.cached_share.get(name, [])),
            "prefix_reuse": _mean(fig.prefix_full.get(name, [])),
            "violations": fig.violations[name],
        }
    out["closing_gain_over_window"] = {
        name: (out[name]["closing_recall"] or 0.0) - (out["window"]["closing_recall"] or 0.0)
        for name in ("summary", "summary+recall")
    }
    out["last_turn_gain_over_window"] = {
        name: (out[name]["last_turn_recall"] or 0.0) - (out["window"]["last_turn_recall"] or 0.0)
        for name in ("summary", "summary+recall")
    }
    out["mean_units_recalled"] = _mean([float(n) for n in fig.recalled_units])
    return out


def timed_question(n: int, counter: Any, window: int) -> tuple[Any, list[Message], Any, Message]:
    """The manager, ``n - 1`` messages of generated dialogs, its state once their fold is done,
    and the question ``timing`` asks (also the callgrind workload ``recall_question_10k``)."""
    history: list[Message] = []
    questions: list[str] = []
    seed = 0
    while len(history) < n:
        for d in generate_dialogs(2, seed=seed):
            history.extend(d.messages)
            questions.extend(q.text for q in d.questions)
        seed += 2
    history = history[: n - 1]
    cm = wf.ContextManager(model=MODEL, context_window=window, counter=counter)
    # cold: counts and indexes everything; an inline fold is bounded per call, so the first
    # calls of an imported history summarize it in steps: carry the state until they are done
    state = None
    for _ in range(64):
        p = cm.prepare(history, state)
        state = p.state
        if p.stats["strategy"] != "summarize":
            break
    # A question timed with the work it costs: the first of the dialogs' own questions for
    # which recall brings a block back (one the summary and window already answer is not
    # searched past that check).
    asked = next(
        (
            {"role": "user", "content": q}
            for q in questions
            if cm.prepare([*history, {"role": "user", "content": q}], state).stats.get("recalled")
        ),
        {"role": "user", "content": questions[0]},
    )
    return cm, history, state, asked


def _day_question(history: list[Message]) -> Message:
    """A question naming the day the history's first session was held (long evicted): the
    day's messages are found by their session stamps, whatever its words."""
    day = next(d for m in history for d in _core.recall_named_days(str(m.get("content"))))
    year, month, date = day
    when = f"{dt.date(year or 2000, month, date):%B} {date}" + (f", {year}" if year else "")
    return {"role": "user", "content": f"What did we talk about on {when}?"}


def timing(n: int, counter: Any, window: int, runs: int) -> dict[str, Any]:
    """p50 / p90 of single warm ``prepare`` calls on an ``n``-message history."""
    cm, history, state, asked = timed_question(n, counter, window)
    out: dict[str, Any] = {"messages": n, "runs": runs}
    out["question_text"] = asked["content"]
    out["question_units"] = len(cm.prepare([*history, asked], state).stats.get("recalled") or ())
    for label, ask in (
        ("question", asked),
        ("day named", _day_question(history)),
        ("chit-chat", {"role": "user", "content": "Thanks, that helps a lot!"}),
    ):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            cm.prepare([*history, ask], state)
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out[label] = {
            "p50_ms": round(statistics.median(times), 2),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))], 2),
        }
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def table(title: str, s: dict[str, Any]) -> str:
    lines = [
        f"| {title} ({s['questions']} questions) | per-question recall | share of whole "
        "| end-of-conversation recall (recap asked) | last turn (nothing asked) "
        "| prefix share (tokens) | prefix reuse (calls) | bad prompts |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in POLICIES:
        f = s[name]
        lines.append(
            f"| {name} | {_fmt(f['recall'])} | {_fmt(f['share_of_whole'])} "
            f"| {_fmt(f['closing_recall'])} | {_fmt(f['last_turn_recall'])} "
            f"| {_fmt(f['cached_share'])} "
            f"| {_fmt(f['prefix_reuse'])} | {f['violations']} |"
        )
    gains, last = s["closing_gain_over_window"], s["last_turn_gain_over_window"]
    lines.append(
        f"\nend of conversation over the plain window, recap asked: summary "
        f"{gains['summary']:+.3f}, summary+recall {gains['summary+recall']:+.3f}; last turn: "
        f"summary {last['summary']:+.3f}, summary+recall {last['summary+recall']:+.3f}; "
        f"units recalled per question: {_fmt(s['mean_units_recalled'])}"
    )
    return "\n".join(lines)


def find_memorybank(explicit: str | None) -> Path | None:
    if explicit:
        return Path(explicit) if Path(explicit).is_dir() else None
    for parent in Path(__file__).resolve().parents:
        p = parent / "shared" / "data" / "dialogs-memorybank"
        if p.is_dir():
            return p
    return None


def run_suite(
    convs: list[Conversation],
    window: int,
    counter: Any,
    ratio: float | None,
    log: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    total = Figures()
    by_lang: dict[str, Figures] = {}
    for conv in convs:
        fig = evaluate(conv, window, counter, ratio)
        total.merge(fig)
        by_lang.setdefault(conv.language, Figures()).merge(fig)
        log(f"{conv.name}: {len(conv.messages)} messages, {len(conv.questions)} questions")
    return summarize(total), {k: summarize(v) for k, v in by_lang.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=10, help="generated dialogs (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="first dialog seed")
    parser.add_argument("--window", type=int, default=8192, help="dialogs' context window")
    parser.add_argument("--memorybank", default=None, help="the dialogs-memorybank folder")
    parser.add_argument("--memorybank-window", type=int, default=2048)
    parser.add_argument("--no-memorybank", action="store_true")
    parser.add_argument(
        "--joined-window",
        type=int,
        default=8192,
        help="window of the MemoryBank users joined into one conversation (0: skip that suite)",
    )
    parser.add_argument(
        "--ratio", type=float, default=None, help="recall_ratio (default: the manager's)"
    )
    parser.add_argument(
        "--timing", type=int, default=0, help="prepare time on N messages (0: skip)"
    )
    parser.add_argument("--runs", type=int, default=30, help="timed calls for --timing")
    parser.add_argument(
        "--answers",
        type=Path,
        default=ANSWERS,
        help=f"the MemoryBank answer file (default {ANSWERS.name}; {SECOND_ANSWERS.name} "
        "is the second annotation)",
    )
    parser.add_argument(
        "--proxy-answers",
        action="store_true",
        help="MemoryBank questions scored by proxy answer words, not the annotated answers",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    counter = wf.Counter(model=MODEL)
    log = (lambda s: print(s, file=sys.stderr)) if args.verbose else (lambda s: None)
    result: dict[str, Any] = {"command": " ".join(sys.argv), "ratio": args.ratio}
    t0 = time.perf_counter()
    if args.dialogs:
        convs = dialog_conversations(args.dialogs, args.seed)
        result["dialogs"], result["dialogs_by_language"] = run_suite(
            convs, args.window, counter, args.ratio, log
        )
    folder = None if args.no_memorybank else find_memorybank(args.memorybank)
    answers = None if args.proxy_answers else load_answers(args.answers)
    answered = "proxy answers" if answers is None else f"answers of {args.answers.name}"
    result["memorybank_answers"] = answered
    if folder is not None:
        convs = [
            c for lang in ("zh", "en") for c in memorybank_conversations(folder, lang, answers)
        ]
        result["memorybank"], result["memorybank_by_language"] = run_suite(
            convs, args.memorybank_window, counter, args.ratio, log
        )
        if args.joined_window:
            result["memorybank_joined"], result["memorybank_joined_by_language"] = run_suite(
                joined_conversations(folder, answers), args.joined_window, counter, args.ratio, log
            )
    elif not args.no_memorybank:
        print(
            "the MemoryBank dialogs (shared/data/dialogs-memorybank/) are absent: skipping the "
            "memorybank and memorybank-joined suites (--memorybank DIR names the folder)",
            file=sys.stderr,
        )
    if args.timing:
        result["timing"] = timing(args.timing, counter, args.window, args.runs)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if args.json:
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    out = [f"$ {result['command']}  ({result['seconds']} s)", ""]
    for key, title in (
        ("dialogs", f"dialogs, {args.window} window"),
        ("memorybank", f"MemoryBank ({answered}), {args.memorybank_window} window"),
        (
            "memorybank_joined",
            f"MemoryBank users joined ({answered}), {args.joined_window} window",
        ),
    ):
        if key in result:
            out += [table(title, result[key]), ""]
            for lang, s in result[f"{key}_by_language"].items():
                out += [table(f"{title}, {lang}", s), ""]
    if "timing" in result:
        out.append(f"prepare, warm: {json.dumps(result['timing'])}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
