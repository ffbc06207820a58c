"""Context quality: the summarizing manager against a plain window at the same prompt budget.

    make eval                                     # both suites, table + plot
    .venv/bin/python benches/eval/eval_context.py --dialogs 8 --runs 60 --json

Two suites, replayed call by call (each assistant turn is one LLM call whose prompt is
prepared from the history before it):

- **dialogs**: long multi-session conversations with questions, generated from a seed
  (``benches/eval/dialogs.py``), English and Chinese, an 8k window. The final prompt (after a
  closing user message) is scored by answer-word recall: the share of each question's answer
  words it still holds, averaged over questions; the whole history is the ceiling.
- **agent runs**: real mini-swe-agent runs (``shared/data/agent-sessions/``, found beside the
  repository or given with ``--data`` / ``WINDOWFIT_EVAL_DATA``), a 16k window. Reports
  whether the budget and tool-call pairing held on every call and whether the task's
  identifiers (file paths, function and class names of the task statement) are still in the
  final prompt.

Every policy gets the same prompt budget (context window minus the manager's output reserve).
Per policy: recall, budget kept, pairing kept, mean budget use (over the calls where the whole
history no longer fits: below that, sending everything is the only sensible prompt), prefix
reuse (share of calls whose prompt starts with the whole previous prompt, and the share of
sent tokens that repeat the previous prompt's leading messages — what a provider's prompt
cache can serve), tokens sent against the whole history, and cost at the model's uncached and
cached input prices (``wf.get_model``). ``--plot`` writes tokens per call (whole history, sent,
cached prefix) as a PNG (needs matplotlib: ``pip install 'windowfit[plot]'``).

The replay loop is :func:`replay`; it is meant to be shared with the CLI's ``bench`` command.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import windowfit as wf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dialogs import Dialog, generate_dialogs  # noqa: E402

logger = logging.getLogger("windowfit.eval")

Message = dict[str, Any]
Policy = Callable[[list[Message]], list[Message]]

DIALOG_MODEL = "gpt-4o"
DIALOG_WINDOW = 8192
AGENT_MODEL = "deepseek-chat"
AGENT_WINDOW = 16384
ARCHIVE = "mini-swe-agent-deepseek-60.tar.gz"
_CLOSING = {
    "en": "Before we wrap up, can you recap the important things I have told you?",
    "zh": "最后，能帮我回顾一下我之前告诉过你的重要事情吗？",
}


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------

_WORD_RE = re.compile(
    r"\d{4}年\d{1,2}月\d{1,2}日|[A-Za-z0-9]+(?:[-_./:,][A-Za-z0-9]+)*|[\u3400-\u4dbf\u4e00-\u9fff]+"
)
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def prompt_text(messages: Sequence[Message]) -> str:
    """Everything a model reads in ``messages``: contents and tool-call arguments."""
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return "\n".join(parts)


def word_recall(answer_words: Sequence[str], text: str) -> float:
    """The share of ``answer_words`` present in ``text``.

    A Latin word or number must be a whole word of the text (case-insensitive: ``"rome"``
    is not found in ``"Romeo"``), a phrase of several ("Taxi Driver") a whole phrase; a word
    with Chinese characters, which has no spaces to delimit it, must occur as a substring. No
    words means nothing to miss: 1.0.
    """
    if not answer_words:
        return 1.0
    words = {w.lower() for w in _WORD_RE.findall(text)}
    lowered = text.lower()
    found = sum(1 for w in answer_words if _holds(w, words, lowered))
    return found / len(answer_words)


def _holds(term: str, words: set[str], lowered: str) -> bool:
    if _CJK_RE.search(term):
        return term.lower() in lowered
    if _WORD_RE.fullmatch(term):
        return term.lower() in words
    phrase = r"(?<![A-Za-z0-9])" + re.escape(term.lower()) + r"(?![A-Za-z0-9])"
    return re.search(phrase, lowered) is not None


def pairing_ok(messages: Sequence[Message]) -> bool:
    """Every tool result follows its call and every tool call has its result (checked here,
    independently of the library's own pairing logic)."""
    open_calls: set[str] = set()
    for m in messages:
        if m.get("role") == "assistant":
            if open_calls:
                return False  # a call left unanswered before the next assistant turn
            open_calls = {str(c.get("id")) for c in m.get("tool_calls") or ()}
        elif m.get("role") == "tool":
            cid = str(m.get("tool_call_id"))
            if cid not in open_calls:
                return False
            open_calls.discard(cid)
        elif open_calls:
            return False
    return not open_calls


_IDENT_RE = re.compile(
    r"(?:[\w.-]+/)+[\w.-]+\.\w+"  # paths
    r"|\b[\w-]+\.(?:py|pyx|cfg|toml|rst|txt|json|yaml|yml|ini)\b"  # file names
    r"|`([A-Za-z_][\w.]*)(?:\(\))?`"  # quoted code names
    r"|\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\("  # dotted calls
    r"|\b([a-z]+_[a-z_]+|[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+)\b"  # snake_case and CamelCase
)


def task_identifiers(task: str, limit: int = 20) -> list[str]:
    """File paths, file names and code names (snake_case, CamelCase, `quoted`) of a task."""
    body = task.split("</pr_description>")[0]
    seen: list[str] = []
    for m in _IDENT_RE.finditer(body):
        value = next((g for g in m.groups() if g), m.group()).strip("`.")
        if len(value) >= 4 and value not in seen:
            seen.append(value)
        if len(seen) == limit:
            break
    return seen


# ---------------------------------------------------------------------------------------------
# The replay
# ---------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One replayed LLM call."""

    index: int  # the prompt was prepared from history[:index]
    tokens_full: int  # sending the whole history
    tokens_sent: int
    tokens_cached: int  # the leading messages identical to the previous prompt's
    prefix_full: bool  # the whole previous prompt is a prefix of this one
    budget_ok: bool
    pairing_ok: bool


def replay(
    messages: Sequence[Message],
    calls: Sequence[int],
    policy: Policy,
    counter: Any,
    budget: int,
) -> tuple[list[Call], list[Message]]:
    """Replay ``messages`` call by call: at each index of ``calls`` the prompt is
    ``policy(history[:index])``. Returns the calls and the last prompt."""
    out: list[Call] = []
    previous: list[Message] = []
    prompt: list[Message] = []
    for index in calls:
        history = list(messages[:index])
        prompt = policy(history)
        same = 0
        for a, b in zip(previous, prompt):
            if a != b:
                break
            same += 1
        sent = counter.count_messages(prompt)
        cached = sum(counter.count_message(m) for m in prompt[:same]) if same else 0
        out.append(
            Call(
                index=index,
                tokens_full=counter.count_messages(history),
                tokens_sent=sent,
                tokens_cached=cached,
                prefix_full=bool(previous) and same == len(previous),
                budget_ok=sent <= budget,
                pairing_ok=pairing_ok(prompt),
            )
        )
        previous = prompt
    return out, prompt


def plain_policy(budget: int, counter: Any) -> Policy:
    """The plain window: ``wf.fit`` at the budget, no state."""
    return lambda history: list(wf.fit(history, budget, counter=counter).messages)


class ManagerPolicy:
    """``ContextManager.prepare`` with the state carried from call to call."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.state: dict[str, Any] | None = None
        self.summary_failures = 0
        self.strategies: list[str] = []  # stats["strategy"] of each call

    def __call__(self, history: list[Message]) -> list[Message]:
        prepared = self.manager.prepare(history, self.state)
        self.state = prepared.state
        self.summary_failures += bool(prepared.stats.get("summary_failed"))
        self.strategies.append(str(prepared.stats.get("strategy")))
        return list(prepared.messages)


#: The manager's strategies, for counting which one broke the prompt prefix.
STRATEGIES = ("keep", "mask", "summarize", "truncate", "fallback")


def prefix_breaks(calls: Sequence[Call], policy: Policy) -> dict[str, int]:
    """``calls_broken_by_<strategy>``: how many calls did not extend the previous prompt, by
    the strategy the manager reported for them (what to tune when prefix reuse is low)."""
    strategies = getattr(policy, "strategies", None)
    if strategies is None:
        return {}
    out = {f"calls_broken_by_{k}": 0 for k in STRATEGIES}
    for call, strategy in zip(calls[1:], strategies[1:]):
        if not call.prefix_full:
            key = f"calls_broken_by_{strategy}"
            out[key] = out.get(key, 0) + 1
    return out


@dataclass
class Score:
    """A policy's figures over one conversation."""

    calls: list[Call]
    budget: int
    recall: float | None = None
    identifiers: float | None = None
    cost: float = 0.0
    cost_full: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        c = self.calls
        later = c[1:] or c
        over = [x for x in c if x.tokens_full > self.budget]
        sent = sum(x.tokens_sent for x in c)
        return {
            "calls": len(c),
            "recall": self.recall,
            "identifiers": self.identifiers,
            "budget_kept": all(x.budget_ok for x in c),
            "pairing_kept": all(x.pairing_ok for x in c),
            "budget_use": (
                sum(x.tokens_sent / self.budget for x in over) / len(over) if over else None
            ),
            "prefix_reuse": sum(x.prefix_full for x in later) / len(later),
            "cached_share": sum(x.tokens_cached for x in later)
            / max(1, sum(x.tokens_sent for x in later)),
            "tokens_sent": sent,
            "tokens_full": sum(x.tokens_full for x in c),
            "cost": self.cost,
            "cost_full": self.cost_full,
            **self.extra,
        }


def _cost(calls: Sequence[Call], info: Any, *, full: bool = False) -> float:
    """Input cost in USD: uncached tokens at the input price, cached ones at the cached price.
    For the whole history every call repeats the previous one's messages (append-only)."""
    inp = info.input_price or 0.0
    cached_price = info.cached_input_price if info.cached_input_price is not None else inp
    total = 0.0
    prev_full = 0
    for x in calls:
        if full:
            cached, sent = min(prev_full, x.tokens_full), x.tokens_full
            prev_full = x.tokens_full
        else:
            cached, sent = x.tokens_cached, x.tokens_sent
        total += (cached * cached_price + (sent - cached) * inp) / 1e6
    return total


# ---------------------------------------------------------------------------------------------
# Suites
# ---------------------------------------------------------------------------------------------


def summarizers() -> dict[str, Callable[[Any], Any]]:
    """Name -> factory(counter) of the offline summarizers compared (the salience one is the
    package's offline summarizer, ``wf.ExtractiveSummarizer``)."""
    return {"extractive": lambda c: wf.ExtractiveSummarizer(counter=c)}


#: Extra ``ContextManager`` arguments for every manager (``--manager key=value``).
MANAGER_ARGS: dict[str, Any] = {}


def _policies(
    model: str, window: int, names: Sequence[str], counter: Any
) -> tuple[int, dict[str, Policy]]:
    made = summarizers()
    managers = {
        name: wf.ContextManager(
            model=model,
            context_window=window,
            counter=counter,
            summarizer=made[name](counter),
            **MANAGER_ARGS,
        )
        for name in names
    }
    budget = next(iter(managers.values())).output_reserve
    budget = window - budget
    policies: dict[str, Policy] = {"window": plain_policy(budget, counter)}
    policies.update({f"manager+{n}": ManagerPolicy(m) for n, m in managers.items()})
    return budget, policies


def eval_dialog(
    dialog: Dialog, names: Sequence[str], counter: Any, window: int = DIALOG_WINDOW
) -> dict[str, Score]:
    """The policies over one generated dialog (8k window by default)."""
    info = wf.get_model(DIALOG_MODEL)
    closing = {"role": "user", "content": _CLOSING[dialog.language]}
    messages = [*dialog.messages, closing]
    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"] + [len(messages)]
    budget, policies = _policies(DIALOG_MODEL, window, names, counter)
    whole = prompt_text(messages)
    ceiling = sum(word_recall(q.answer_words, whole) for q in dialog.questions)
    out: dict[str, Score] = {}
    for name, policy in policies.items():
        recorded, final = replay(messages, calls, policy, counter, budget)
        text = prompt_text(final)
        n = max(1, len(dialog.questions))
        score = Score(recorded, budget)
        score.recall = sum(word_recall(q.answer_words, text) for q in dialog.questions) / n
        score.cost = _cost(recorded, info)
        score.cost_full = _cost(recorded, info, full=True)
        score.extra = {"recall_ceiling": ceiling / n, "language": dialog.language}
        out[name] = score
    return out


def find_agent_data(explicit: str | None = None) -> Path | None:
    """The agent-sessions archive: ``explicit``, ``WINDOWFIT_EVAL_DATA``, else
    ``shared/data/agent-sessions/`` beside the repository or one of its parent folders."""
    for candidate in (explicit, os.environ.get("WINDOWFIT_EVAL_DATA")):
        if candidate:
            p = Path(candidate)
            p = p / ARCHIVE if p.is_dir() else p
            return p if p.is_file() else None
    for parent in Path(__file__).resolve().parents:
        p = parent / "shared" / "data" / "agent-sessions" / ARCHIVE
        if p.is_file():
            return p
    return None


_OPENAI_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def agent_runs(archive: Path, limit: int | None = None) -> Iterator[tuple[str, list[Message]]]:
    """``(name, messages)`` of each readable run in the archive (the first ``limit`` files,
    in name order), as OpenAI chat dicts: provider-specific keys dropped and the closing
    ``exit`` record removed."""
    with tarfile.open(archive) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
        for member in members[:limit]:
            f = tar.extractfile(member)
            if f is None:
                continue
            try:
                data = json.load(f)
            except ValueError as exc:  # the archive holds one empty file
                logger.warning("skipping %s: not a JSON run (%s)", member.name, exc)
                continue
            msgs = [
                {k: m[k] for k in _OPENAI_KEYS if m.get(k) is not None}
                for m in data["messages"]
                if m.get("role") in ("system", "user", "assistant", "tool")
            ]
            yield data.get("instance_id") or member.name, msgs


def eval_agent_run(
    messages: list[Message], names: Sequence[str], counter: Any, window: int = AGENT_WINDOW
) -> dict[str, Score]:
    """The policies over one real agent run (16k window by default), one call per assistant
    turn."""
    info = wf.get_model(AGENT_MODEL)
    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    task = next((m["content"] for m in messages if m["role"] == "user"), "")
    idents = task_identifiers(task if isinstance(task, str) else "")
    budget, policies = _policies(AGENT_MODEL, window, names, counter)
    out: dict[str, Score] = {}
    for name, policy in policies.items():
        recorded, final = replay(messages, calls, policy, counter, budget)
        text = prompt_text(final)
        score = Score(recorded, budget)
        score.identifiers = (sum(i in text for i in idents) / len(idents)) if idents else 1.0
        score.cost = _cost(recorded, info)
        score.cost_full = _cost(recorded, info, full=True)
        score.extra = prefix_breaks(recorded, policy)
        out[name] = score
    return out


# ---------------------------------------------------------------------------------------------
# Aggregation and output
# ---------------------------------------------------------------------------------------------


def aggregate(rows: Sequence[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per policy: means of the per-conversation figures, ``all`` of the booleans, sums of
    tokens and cost."""
    out: dict[str, dict[str, Any]] = {}
    for name in rows[0] if rows else ():
        items = [r[name] for r in rows]
        agg: dict[str, Any] = {"conversations": len(items)}
        for key in items[0]:
            values = [i[key] for i in items if i[key] is not None]
            if not values or isinstance(values[0], str):
                continue
            if isinstance(values[0], bool):
                agg[key] = all(values)
            elif key.startswith(("tokens", "cost", "calls")):
                agg[key] = sum(values)
            else:
                agg[key] = sum(values) / len(values)
        if agg.get("tokens_full"):
            agg["tokens_saved"] = 1 - agg["tokens_sent"] / agg["tokens_full"]
        out[name] = agg
    return out


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if pct:
        return f"{value:.0%}"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(title: str, agg: dict[str, dict[str, Any]], recall_key: str) -> str:
    """A Markdown table of the aggregated figures."""
    head = (
        f"| {title} | {recall_key} | budget kept | pairing kept | budget use | prefix reuse "
        "| cached share | tokens sent / whole | cost / whole |"
    )
    lines = [head, "|" + "---|" * 9]
    for name, a in agg.items():
        ratio = a["tokens_sent"] / a["tokens_full"] if a.get("tokens_full") else None
        cost_ratio = a["cost"] / a["cost_full"] if a.get("cost_full") else None
        lines.append(
            f"| {name} | {_fmt(a.get(recall_key))} | {_fmt(a.get('budget_kept'))} "
            f"| {_fmt(a.get('pairing_kept'))} | {_fmt(a.get('budget_use'), True)} "
            f"| {_fmt(a.get('prefix_reuse'), True)} | {_fmt(a.get('cached_share'), True)} "
            f"| {_fmt(ratio, True)} | {_fmt(cost_ratio, True)} |"
        )
    return "\n".join(lines)


def plot(path: Path, panels: Sequence[tuple[str, dict[str, Score]]]) -> bool:
    """Tokens per call (whole history, sent, cached prefix) for each panel; False without
    matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("no plot: matplotlib is not installed (pip install 'windowfit[plot]')")
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 4 * len(panels)), squeeze=False)
    for ax, (title, scores) in zip(axes[:, 0], panels):
        first = next(iter(scores.values()))
        xs = range(len(first.calls))
        ax.plot(xs, [c.tokens_full for c in first.calls], label="whole history", color="0.6")
        for name, score in scores.items():
            line = ax.plot(xs, [c.tokens_sent for c in score.calls], label=f"sent: {name}")
            if name != "window":
                ax.plot(
                    xs,
                    [c.tokens_cached for c in score.calls],
                    linestyle=":",
                    color=line[0].get_color(),
                    label=f"cached prefix: {name}",
                )
        ax.axhline(first.budget, color="k", linewidth=0.8, linestyle="--", label="budget")
        ax.set_title(title)
        ax.set_xlabel("call")
        ax.set_ylabel("tokens")
        ax.set_ylim(0, max(first.budget * 2.5, 1))
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def run(args: argparse.Namespace) -> dict[str, Any]:
    names = [n for n in args.summarizers.split(",") if n]
    unknown = set(names) - set(summarizers())
    if unknown:
        raise SystemExit(f"unknown summarizer(s): {', '.join(sorted(unknown))}")
    result: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "summarizers": names,
        "manager_args": dict(MANAGER_ARGS),
    }
    panels: list[tuple[str, dict[str, Score]]] = []
    t0 = time.perf_counter()
    if args.dialogs:
        counter = wf.Counter(model=DIALOG_MODEL)
        per_lang: dict[str, list[dict[str, dict[str, Any]]]] = {}
        rows = []
        for dialog in generate_dialogs(args.dialogs, seed=args.seed):
            scores = eval_dialog(dialog, names, counter)
            row = {k: s.summary() for k, s in scores.items()}
            rows.append(row)
            per_lang.setdefault(dialog.language, []).append(row)
            if len(panels) == 0:
                panels.append((f"dialog seed {dialog.seed} ({dialog.language}), 8k window", scores))
            logger.info(
                "dialog %s/%s: %s",
                dialog.seed,
                dialog.language,
                {k: round(v["recall"], 3) for k, v in row.items()},
            )
        result["dialogs"] = aggregate(rows)
        result["dialogs_by_language"] = {k: aggregate(v) for k, v in per_lang.items()}
    if args.runs:
        archive = find_agent_data(args.data)
        if archive is None:
            result["agent_runs"] = None
            logger.warning(
                "agent runs skipped: %s not found (give --data or WINDOWFIT_EVAL_DATA)", ARCHIVE
            )
        else:
            counter = wf.Counter(model=AGENT_MODEL)
            rows = []
            for name, msgs in agent_runs(archive, args.runs):
                if not any(m["role"] == "assistant" for m in msgs):
                    logger.warning("skipping %s: no assistant turn, so no call to replay", name)
                    continue
                scores = eval_agent_run(msgs, names, counter)
                rows.append({k: s.summary() for k, s in scores.items()})
                if len(panels) < 2:
                    panels.append((f"agent run {name}, 16k window", scores))
                logger.info("run %s: %d messages", name, len(msgs))
            result["agent_runs"] = aggregate(rows)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    if args.plot and panels:
        result["plot"] = str(args.plot) if plot(Path(args.plot), panels) else None
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogs", type=int, default=8, help="generated dialogs (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="first dialog seed")
    parser.add_argument("--runs", type=int, default=60, help="real agent runs (0: none)")
    parser.add_argument("--data", help="the agent-sessions folder or archive")
    parser.add_argument(
        "--summarizers",
        default=",".join(summarizers()),
        help="comma-separated offline summarizers for the manager (default: all)",
    )
    parser.add_argument("--plot", default="target/eval_context.png", help="PNG path ('' none)")
    parser.add_argument(
        "--manager",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a ContextManager argument for every manager, e.g. summary_length_ratio=0.3",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    for item in args.manager:
        key, _, value = item.partition("=")
        try:
            MANAGER_ARGS[key.strip()] = json.loads(value) if value.strip() else None
        except json.JSONDecodeError:
            parser.error(f'--manager {item}: the value is JSON (false, 0.3, "text")')
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )
    result = run(args)
    if args.json:
        json.dump(result, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    out = [f"$ {result['command']}  ({result['seconds']} s)", ""]
    if result.get("dialogs"):
        out += [table("dialogs, 8k", result["dialogs"], "recall"), ""]
        for lang, agg in result["dialogs_by_language"].items():
            out += [table(f"dialogs {lang}", agg, "recall"), ""]
        ceiling = next(iter(result["dialogs"].values())).get("recall_ceiling")
        out += [f"whole-history recall (ceiling): {_fmt(ceiling)}", ""]
    if result.get("agent_runs"):
        out += [table("agent runs, 16k", result["agent_runs"], "identifiers"), ""]
        for name, agg in result["agent_runs"].items():
            broken = {
                k.removeprefix("calls_broken_by_"): v
                for k, v in agg.items()
                if k.startswith("calls_broken_by_") and v
            }
            if broken:
                out += [f"{name}: calls not extending the previous prompt, by strategy: {broken}"]
        out.append("")
    elif args.runs:
        out += ["agent runs: skipped (archive not found)", ""]
    if result.get("plot"):
        out.append(f"plot: {result['plot']}")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
