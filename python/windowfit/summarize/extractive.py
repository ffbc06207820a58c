"""The extractive summarizer: offline, deterministic, selects what matters and never invents."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from windowfit.messages import message_text
from windowfit.summarize.base import Message, _clip, _conversation_language, estimator
from windowfit.summarize.patterns import (
    _CODE_BLOCK_RE,
    _CUE_RE,
    _DECISION_RE,
    _ERROR_RE,
    _GOAL_RE,
    _ID_SEP,
    _KIND_BONUS,
    _LABEL_TO_SECTION,
    _LABELS,
    _SECTIONS,
    _SOURCE_SCORE,
    _identifier_spans,
    _sentences,
)

logger = logging.getLogger(__name__)


@dataclass
class _Item:
    section: str
    text: str
    score: float
    seq: float
    tokens: int = 0


class ExtractiveSummarizer:
    """Offline, deterministic summarizer: selects what matters, never invents anything.

    Keeps the first request as the goal, user requests, decisions and standing instructions,
    tool actions (grouped per tool with their arguments), errors, and every identifier it
    finds — ``key=value`` pairs, ticket / class / order IDs, file names and paths, URLs,
    e-mails, money, dates, versions, long numbers — preferring what the user said (and flagged:
    "remember", "记住") over what tools printed. Merges with the previous summary (its own
    format, whose identifier list is kept in importance order so importance survives many
    merges; or any other text, which it condenses), and stays under ``target_tokens`` by
    dropping the lowest-value items first.

    ``counter`` (a ``windowfit.Counter``) measures exactly; without one a slightly pessimistic
    estimate is used. ``language`` forces ``"zh"`` or ``"en"`` headings instead of detecting.
    """

    # Called inline by the manager: it is fast and cannot hang, so no timeout thread needed.
    inline = True

    def __init__(
        self,
        *,
        counter: Any = None,
        language: str | None = None,
        max_item_chars: int = 160,
        tool_scan_chars: int = 6000,
        identifier_share: float = 0.5,
    ) -> None:
        if language not in (None, "auto", "zh", "en"):
            raise ValueError(f"language must be 'zh', 'en' or None, not {language!r}")
        if not 0 <= identifier_share <= 1:
            raise ValueError(f"identifier_share must be in [0, 1], got {identifier_share}")
        self.identifier_share = identifier_share
        self.counter = counter
        self.language = None if language == "auto" else language
        self.max_item_chars = max_item_chars
        self.tool_scan_chars = tool_scan_chars

    def with_counter(self, counter: Any) -> ExtractiveSummarizer:
        """A copy that measures with ``counter``."""
        return ExtractiveSummarizer(
            counter=counter,
            language=self.language,
            max_item_chars=self.max_item_chars,
            tool_scan_chars=self.tool_scan_chars,
            identifier_share=self.identifier_share,
        )

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(language={self.language!r})"

    # -- protocol -------------------------------------------------------------------------------

    def __call__(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        lang = self.language or (language if language in ("zh", "en") else None)
        lang = lang or _conversation_language(messages, previous_summary)
        items = self._parse_previous(previous_summary or "")
        items.extend(self._extract(messages, has_goal=any(i.section == "goal" for i in items)))
        return self._compose(items, max(16, int(target_tokens)), lang)

    async def asummarize(
        self,
        messages: Sequence[Message],
        *,
        previous_summary: str = "",
        target_tokens: int = 400,
        language: str | None = None,
    ) -> str:
        return self(
            messages,
            previous_summary=previous_summary,
            target_tokens=target_tokens,
            language=language,
        )

    # -- extraction -----------------------------------------------------------------------------

    def _tokens(self, text: str) -> int:
        if self.counter is not None:
            return int(self.counter.count(text))
        return estimator().count(text)

    def _parse_previous(self, summary: str) -> list[_Item]:
        """Items of a previous summary; our own headings map back to sections."""
        items: list[_Item] = []
        section = "earlier"
        # Previous items sort before new ones (negative seq) and score a little below new ones
        # of the same kind; identifiers were rendered most important first, so their rank
        # carries their importance into this merge.
        base = {
            "goal": 1000.0,
            "requests": 4.0,
            "decisions": 6.5,
            "done": 2.5,
            "findings": 3.5,
            "earlier": 4.0,
        }
        lines = [ln.strip() for ln in summary.splitlines() if ln.strip()]
        n = len(lines)
        for k, line in enumerate(lines):
            heading = line.lstrip("#").strip().rstrip(":：").strip().lower()
            if line.startswith("#") and heading in _LABEL_TO_SECTION:
                section = _LABEL_TO_SECTION[heading]
                continue
            text = line[2:].strip() if line.startswith(("- ", "* ", "• ")) else line
            if not text:
                continue
            age = (n - k) / max(n, 1) * 0.4  # older lines lose a little
            seq = -(n - k)
            if section == "identifiers":
                idents = [i.strip() for i in text.split(_ID_SEP) if i.strip()]
                for rank, ident in enumerate(idents):
                    items.append(
                        _Item("identifiers", ident, 9.0 - 2.0 * rank / max(len(idents), 1), seq)
                    )
                continue
            sents = _sentences(text) if section == "earlier" else [text]
            for sent in sents or [text]:
                clipped = sent if section != "earlier" else _clip(sent, self.max_item_chars)
                items.append(
                    _Item(section, clipped, base[section] - (0 if section == "goal" else age), seq)
                )
                # identifiers inside a previous sentence outlive the sentence itself
                for ident, kind in _identifier_spans(sent, limit=6, context=True):
                    items.append(
                        _Item("identifiers", ident, 6.5 + _KIND_BONUS.get(kind, 0) - age, seq)
                    )
        return items

    def _extract(self, messages: Sequence[Message], *, has_goal: bool) -> list[_Item]:
        items: list[_Item] = []
        total = max(len(messages), 1)
        id_scores: dict[str, float] = {}
        id_seq: dict[str, float] = {}
        tool_names: dict[str, str] = {}  # tool_call_id -> tool name
        done: dict[str, list[str]] = {}  # tool name -> brief argument lists, in order
        done_seq: dict[str, float] = {}

        def add_ids(text: str, source: str, seq: float, limit: int | None = None) -> None:
            prose = source in ("user", "assistant")
            # sentence by sentence only when a cue ("remember", "记住") marks some of them
            split = prose and _CUE_RE.search(text) is not None
            for sent in _sentences(text) if split else [text]:
                cue = 1.5 if split and _CUE_RE.search(sent) else 0.0
                for ident, kind in _identifier_spans(sent, limit=limit, context=prose):
                    score = _SOURCE_SCORE[source] + _KIND_BONUS.get(kind, 0.0) + cue
                    prev = id_scores.get(ident)
                    # repeated mentions raise the score a little, capped
                    id_scores[ident] = (
                        score if prev is None else min(max(prev, score) + 0.5, score + 2)
                    )
                    id_seq.setdefault(ident, seq)

        for pos, msg in enumerate(messages):
            role = msg.get("role")
            recency = pos / total  # 0 oldest .. 1 newest in this batch
            seq = float(pos)
            if role in ("system", "developer"):
                continue  # system prompts are always sent verbatim; never summarize them
            if role == "user":
                raw = message_text(msg)
                add_ids(raw, "user", seq)
                text = _CODE_BLOCK_RE.sub(" [code] ", raw)
                if not text.strip():
                    continue
                if not has_goal:
                    items.append(_Item("goal", _clip(text, self.max_item_chars * 2), 1000.0, seq))
                    has_goal = True
                else:
                    score = 4.5 + recency + (0.5 if _GOAL_RE.search(text) else 0.0)
                    items.append(_Item("requests", _clip(text, self.max_item_chars), score, seq))
                for sent in _sentences(text):
                    if _CUE_RE.search(sent):
                        # a standing instruction or fact the user asked to keep
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 8.0 + recency, seq)
                        )
                    elif _DECISION_RE.search(sent):
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 6.5 + recency, seq)
                        )
            elif role == "assistant":
                for call in msg.get("tool_calls") or ():
                    fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
                    name = str(fn.get("name") or "tool")
                    if isinstance(call, Mapping) and call.get("id"):
                        tool_names[str(call["id"])] = name
                    brief = self._brief_args(fn.get("arguments"))
                    done.setdefault(name, [])
                    if brief and brief not in done[name]:
                        done[name].append(brief)
                    done_seq.setdefault(name, seq)
                    add_ids(str(fn.get("arguments") or ""), "tool_args", seq, limit=8)
                text = message_text({"content": msg.get("content")})
                if not text.strip():
                    continue
                add_ids(text, "assistant", seq, limit=12)
                prose = _CODE_BLOCK_RE.sub(" ", text)
                for k, sent in enumerate(_sentences(prose)):
                    if _ERROR_RE.search(sent):
                        items.append(
                            _Item("findings", _clip(sent, self.max_item_chars), 5.0 + recency, seq)
                        )
                    elif _DECISION_RE.search(sent):
                        items.append(
                            _Item("decisions", _clip(sent, self.max_item_chars), 6.0 + recency, seq)
                        )
                    elif k == 0 and len(sent) >= 16:
                        # the opening sentence of a reply usually states its conclusion
                        items.append(
                            _Item("findings", _clip(sent, self.max_item_chars), 2.0 + recency, seq)
                        )
            elif role in ("tool", "function"):
                text = message_text(msg)
                if len(text) > self.tool_scan_chars:
                    # errors and results sit at either end of long outputs (logs, tracebacks)
                    half = self.tool_scan_chars // 2
                    text = text[:half] + "\n" + text[-half:]
                name = tool_names.get(str(msg.get("tool_call_id")), msg.get("name") or "tool")
                errors: list[str] = []
                for m in _ERROR_RE.finditer(text):  # the lines holding the first two errors
                    lo = text.rfind("\n", 0, m.start()) + 1
                    hi = text.find("\n", m.end())
                    line = text[lo : hi if hi >= 0 else len(text)].strip()
                    if line not in errors:
                        errors.append(line)
                    if len(errors) == 2:
                        break
                for line in errors:
                    items.append(
                        _Item(
                            "findings",
                            _clip(f"{name}: {line}", self.max_item_chars),
                            5.0 + recency,
                            seq,
                        )
                    )
                # identifiers of a tool result: its head and tail are what a reader looks at
                add_ids(
                    text if len(text) <= 3000 else text[:2000] + "\n" + text[-1000:],
                    "tool",
                    seq,
                    limit=5,
                )

        for name, briefs in done.items():
            shown = ", ".join(briefs[:4]) + (", …" if len(briefs) > 4 else "")
            count = f" ×{len(briefs)}" if len(briefs) > 1 else ""
            text = f"{name}{count}" + (f" ({shown})" if shown else "")
            items.append(_Item("done", _clip(text, self.max_item_chars), 3.0, done_seq[name]))
        for ident, score in id_scores.items():
            items.append(_Item("identifiers", ident, score, id_seq[ident]))
        return items

    @staticmethod
    def _brief_args(arguments: Any) -> str:
        if arguments is None or arguments == "":
            return ""
        data = arguments
        if isinstance(arguments, str):
            try:
                data = json.loads(arguments)
            except ValueError:
                return _clip(arguments, 60)
        if isinstance(data, Mapping):
            parts = []
            for key, value in list(data.items())[:2]:
                if isinstance(value, (str, int, float, bool)):
                    parts.append(f"{key}={_clip(str(value), 48)}")
            return ", ".join(parts)
        return _clip(json.dumps(data, ensure_ascii=False), 60)

    # -- composition ----------------------------------------------------------------------------

    def _compose(self, items: list[_Item], target: int, lang: str) -> str:
        labels = _LABELS[lang]
        # Deduplicate: identical text in the same section keeps its best score, earliest seq
        unique: dict[tuple[str, str], _Item] = {}
        for item in items:
            key = (item.section, item.text.casefold())
            prev = unique.get(key)
            if prev is None:
                unique[key] = item
            else:
                prev.score = max(prev.score, item.score)
                prev.seq = min(prev.seq, item.seq)
        pool = list(unique.values())
        # Identifiers contained in a longer identifier are the same fact: keep the longer one
        idents = sorted((i for i in pool if i.section == "identifiers"), key=lambda i: -len(i.text))
        kept_ids: list[_Item] = []
        for item in idents:
            holder = next((k for k in kept_ids if item.text in k.text), None)
            if holder is None:
                kept_ids.append(item)
            else:
                holder.score = max(holder.score, item.score)
                holder.seq = min(holder.seq, item.seq)
        # Only one goal: the earliest
        goals = sorted((i for i in pool if i.section == "goal"), key=lambda i: i.seq)
        pool = [i for i in pool if i.section not in ("goal", "identifiers")] + goals[:1] + kept_ids
        for item in pool:
            # a bullet costs its text plus the "- " / separator and newline
            item.tokens = self._tokens(item.text) + 2

        header_cost = {s: self._tokens(f"## {labels[s]}") + 1 for s in (*_SECTIONS, "earlier")}
        # Deterministic order: score desc, then newest first, then text
        ranked = sorted(pool, key=lambda i: (-i.score, -i.seq, i.text))
        chosen: list[_Item] = []
        state = {"used": 0, "ids": 0}
        sections_used: set[str] = set()
        # Identifiers first get at most this share, so a conversation full of IDs still keeps
        # its requests and decisions; a second pass hands any unused room to whatever is left.
        id_quota = int(target * self.identifier_share)

        def take(item: _Item, respect_quota: bool) -> bool:
            if item.section == "identifiers" and any(
                item.text in c.text for c in chosen if c.section != "identifiers"
            ):
                return True  # already visible verbatim in a chosen sentence
            cost = item.tokens + (0 if item.section in sections_used else header_cost[item.section])
            if respect_quota and item.section == "identifiers" and state["ids"] + cost > id_quota:
                return False
            if state["used"] + cost > target:
                if item.section != "goal":
                    return False
                # the goal always stays, shortened to what fits
                room = max(8, target - state["used"] - header_cost["goal"])
                item = _Item("goal", self._fit_text(item.text, room), item.score, item.seq)
                cost = self._tokens(item.text) + 2 + header_cost["goal"]
            chosen.append(item)
            state["used"] += cost
            if item.section == "identifiers":
                state["ids"] += cost
            sections_used.add(item.section)
            if item.section != "identifiers":
                # identifiers now shown inside this sentence no longer need their own entry
                for c in [c for c in chosen if c.section == "identifiers" and c.text in item.text]:
                    chosen.remove(c)
                    state["used"] -= c.tokens
                    state["ids"] -= c.tokens
            return True

        leftover = [item for item in ranked if not take(item, respect_quota=True)]
        for item in leftover:
            take(item, respect_quota=False)
        return self._render(chosen, labels)

    def _fit_text(self, text: str, max_tokens: int) -> str:
        if self._tokens(text) <= max_tokens:
            return text
        lo, hi = 1, len(text)
        while lo < hi:  # longest prefix within budget
            mid = (lo + hi + 1) // 2
            if self._tokens(text[:mid] + "…") <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo].rstrip() + "…"

    @staticmethod
    def _render(chosen: list[_Item], labels: Mapping[str, str]) -> str:
        blocks: list[str] = []
        for section in ("goal", "earlier", *_SECTIONS[1:]):
            members = [i for i in chosen if i.section == section]
            if not members:
                continue
            if section == "identifiers":
                # most important first: the next merge reads importance back from the rank
                members.sort(key=lambda i: (-i.score, i.seq, i.text))
                body = "- " + _ID_SEP.join(i.text for i in members)
            else:
                members.sort(key=lambda i: (i.seq, i.text))
                body = "\n".join(f"- {i.text}" for i in members)
            blocks.append(f"## {labels[section]}\n{body}")
        return "\n".join(blocks)
