"""The offline summarizer: keeps what a later question is likely to ask about.

:class:`SalienceSummarizer` (public name :class:`windowfit.ExtractiveSummarizer`, the
``ContextManager``'s default) is called as ``summarizer(messages, previous_summary=...,
target_tokens=..., language=...)``, with an ``asummarize`` twin. It never writes a word that
is not in the conversation: it *selects* sentences, verbatim, and arranges them.

How a sentence earns its place, measured on the conversation itself rather than on a word
list:

- **rare terms**: a term (word, number, Chinese character pair) said in only one or two
  lines of the material being folded and the previous summary counts; what keeps coming
  back ("thanks", a template's words, a recurring topic) is background;
- **specifics**: names (rare capitalized words inside a sentence), numbers, dates,
  identifiers, file paths, quoted titles;
- **intent**: decisions, user requests, "remember this" from the user, errors, the speaker
  talking about themselves;
- **who said it**: the user's words first, then the assistant's, then tool output; value is
  measured per token, so a long sentence must carry proportionally more.

Filler (greetings, thanks, acknowledgements, small talk with nothing specific) is dropped, not
ranked. Near-duplicate sentences merge: a restatement that adds nothing keeps the original
(and its date); one that adds something — an update, a correction — replaces it. Sentences
are filed under the session date or timestamp in force when they were said (a bracketed or
labelled date opening a message, or a ``timestamp`` / ``created_at`` / ``date`` field), with
their speaker. The summary is incremental: the previous summary is parsed back into dated,
attributed lines that compete with the new material, so the result is one merged summary,
never an appended one. It stays within ``target_tokens`` (measured with ``counter`` when
given), dropping the least salient lines first.

``LLM_SUMMARY_SECTIONS`` holds the matching instructions for an LLM summarizer, section by
section, so both kinds of summary read the same.
"""

from __future__ import annotations

import math
import re
from collections import Counter as _Tally
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from windowfit._twins import CallOp
from windowfit.errors import WindowfitError
from windowfit.messages import SYSTEM_ROLES, message_text
from windowfit.summarize.base import TwinSummarizer, _clip, estimator
from windowfit.summarize.near_duplicates import NearDuplicateIndex
from windowfit.summarize.patterns import (
    _CODE_BLOCK_RE,
    _CUE_RE,
    _DECISION_RE,
    _ERROR_RE,
    _GOAL_RE,
    _identifier_spans,
)

__all__ = [
    "LLM_SUMMARY_SECTIONS",
    "ExtractiveSummarizer",
    "SalienceSettingError",
    "SalienceSummarizer",
]

Message = Mapping[str, Any]


class SalienceSettingError(WindowfitError, ValueError):
    """A summarizer setting is out of range (the message names the setting)."""


#: Section headings of the summary, per language (also the LLM prompt's sections).
LABELS: dict[str, dict[str, str]] = {
    "en": {
        "goal": "Goal",
        "timeline": "Timeline (who said what, by date)",
        "done": "Done",
        "errors": "Errors and open problems",
        "identifiers": "Other key facts and identifiers",
    },
    "zh": {
        "goal": "任务目标",
        "timeline": "时间线（谁说了什么，按日期）",
        "done": "已完成操作",
        "errors": "错误与未解决的问题",
        "identifiers": "其他关键事实与标识",
    },
}
_SECTIONS = ("goal", "timeline", "done", "errors", "identifiers")
_HEADING_TO_SECTION = {
    label.casefold(): section for labels in LABELS.values() for section, label in labels.items()
}

#: What an LLM summarizer is asked to write, in the same sections and layout as the offline
#: summary, so the two kinds read alike and either can merge the other's previous summary
#: (to replace the "Summary requirements" part of ``LLMSummarizer``'s prompt).
LLM_SUMMARY_SECTIONS: dict[str, str] = {
    "en": (
        "Write the summary in these sections, in this order, omitting empty ones:\n"
        "## Goal\nThe user's overall goal or task, in one or two lines.\n"
        "## Timeline (who said what, by date)\n"
        "One '### <session date or timestamp>' line per session (copy the date exactly as "
        "written), then who spoke on a line of its own ('user:' or 'assistant:') followed by "
        "one '- ...' line per fact they stated. Keep every "
        "name, place, date, number, amount, identifier, file path, preference, decision and "
        "request; when a later message corrects a fact, keep only the corrected version. Drop "
        "greetings, thanks and small talk.\n"
        "## Done\nActions and tool calls already carried out, with their key arguments.\n"
        "## Errors and open problems\nErrors seen and what is still unresolved.\n"
        "## Other key facts and identifiers\nIDs, paths, URLs and numbers not shown above, "
        "copied verbatim, separated by '; '.\n"
        "Merge the previous summary into this structure: never repeat a fact, never invent one."
    ),
    "zh": (
        "请按以下部分依次输出摘要，没有内容的部分省略：\n"
        "## 任务目标\n用户的总体目标或任务，一到两行。\n"
        "## 时间线（谁说了什么，按日期）\n"
        "每个会话一行“### <会话日期或时间>”（日期照原文抄写），其下先单独一行写说话人"
        "（“user:”或“assistant:”），再每条事实一行“- ……”。保留所有人名、地点、日期、数字、金额、标识、"
        "文件路径、偏好、决定和请求；后面的消息更正了某个事实时，只保留更正后的版本。"
        "删除问候、感谢和闲聊。\n"
        "## 已完成操作\n已经执行的操作和工具调用及其关键参数。\n"
        "## 错误与未解决的问题\n出现过的错误和仍未解决的问题。\n"
        "## 其他关键事实与标识\n上文未出现的 ID、路径、URL 和数字，原样抄写，用“; ”分隔。\n"
        "把已有摘要合并进这个结构：不要重复事实，也不要编造。"
    ),
}

# ---------------------------------------------------------------------------------------------
# Text analysis
# ---------------------------------------------------------------------------------------------

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
#: About this many Chinese characters (or character pairs, one per character) carry what one
#: English content word does.
_CJK_PER_WORD = 3
#: The rarity of a Chinese character pair counts this share of a word's once weighed by its
#: cohesion ([`_cohesion`]): a word of two or three characters holds one or two cohesive pairs.
_CJK_PAIRS_PER_WORD = 1.5
#: Lines a batch needs before a character pair's cohesion can reach 1 ([`_cohesion`]).
_COHESION_LINES = 100
_CJK_RUN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LATIN_RE = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")
_NUMBER_RE = re.compile(r"\d+(?:[.,:/-]\d+)*")
_CAPITAL_RE = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")
_SPLIT_RE = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+(?=[^a-z0-9])|\n+")
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
# A date written out anywhere ("8 May 2023", "May 8, 2023", "2023-05-08", "2023年5月8日").
_DATE_RE = re.compile(
    r"(?i)\b\d{1,2}\s(?:" + _MONTHS + r")\.?,?\s\d{4}\b|\b(?:" + _MONTHS + r")\.?\s\d{1,2}"
    r"(?:st|nd|rd|th)?,?\s\d{4}\b|\b\d{4}-\d{1,2}-\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?\b"
    r"|\d{4}年\d{1,2}月\d{1,2}日"
)
# A session stamp opening a message: "[1:56 pm on 8 May, 2023]", "(2023-05-08 13:56)",
# "DATE: 8 May 2023", "Session 3 - 8 May 2023", "【2023年5月8日】".
_STAMP_RE = re.compile(
    r"^\s*(?:[\[(（【]\s*([^\])）】\n]{4,60}?)\s*[\])）】]"
    r"|(?i:(?:date|time|timestamp|session[^:\n]{0,20}|日期|时间|会话[^：:\n]{0,10})\s*[:：—-]\s*)"
    r"([^\n]{4,60}))"
)
# The speaker talking about themselves: what a later question about them asks for.
_SELF_RE = re.compile(r"(?i)\b(?:i|i'm|i've|i'll|i'd|my|mine|we|we're|we've|our|ours)\b|我|咱")
_QUESTION_END = ("?", "？")
# A personal fact: what the speaker likes, owns, did, plans or is (what a later question about
# them asks for), as opposed to advice or small talk.
_FACT_RE = re.compile(
    r"(?i)\b(?:i|we|my|our)\b[^.!?\n]{0,40}?\b(?:like[sd]?|love[sd]?|enjoy(?:ed|s)?|hate[sd]?|"
    r"prefer(?:red|s)?|favou?rite|plan(?:ned|ning)? to|going to|will|want(?:ed)? to|decided|bought|"
    r"adopted|moved|visited|went|started|finished|met|named|called|live[sd]?|work(?:ed|s)?|"
    r"born|allergic|birthday|cooked|booked|signed up|joined)\b"
    r"|我[^。！？\n]{0,12}?(?:喜欢|爱|讨厌|最爱|偏爱|打算|计划|准备|决定|想要|买了|养了|搬|去了|去过|"
    r"开始|认识|叫|住在|在.{0,6}工作|生日|过敏|报名|参加|做了|看了|读了)"
)
# Exception names (TypeError, ValueError...) besides the shared error words.
_TOOL_ERROR_RE = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b")
STAMP_KEYS = ("timestamp", "created_at", "date", "time")
_FILLER_RE = re.compile(
    r"(?i)^(?:(?:ok(?:ay)?|sure|yes|yeah|yep|no|nope|right|cool|great|nice|awesome|perfect|"
    r"thanks?(?: you)?(?: so much| a lot)?|thank you|ty|lol|haha+|hah|hmm+|wow|oh|ah|hi|hello|"
    r"hey|good (?:morning|night|evening|afternoon)|bye|goodbye|see you|got it|sounds good|"
    r"of course|no problem|you'?re welcome|exactly|indeed|agreed|me too|same)[\s,!.~]*)+$"
    r"|^(?:好的?|嗯+|哈+|谢谢(?:你)?|多谢|感谢|收到|没问题|不客气|是的|对|好吧|再见|早上好|晚安|你好)"
    r"[\s，。！!~？?…]*$"
)
_STOPWORDS = frozenset(
    """a an the and or but if of at in on to for with by from as is are was were be been being
    am do does did done have has had having i me my mine we us our you your yours he him his
    she her hers it its they them their this that these those there here what which who whom
    whose when where why how all any both each few more most other some such no nor not only
    own same so than too very can could will would shall should may might must just also
    really about into over after before again then once out up down off under until while
    because through during between against above below get got getting go going went gone
    make made let let's i'm i've i'll i'd it's that's there's don't didn't doesn't can't
    won't isn't aren't wasn't weren't you're we're they're yeah oh ok okay well like
    thing things something anything everything one two lot lots bit much many today
    yesterday tomorrow now still even though back way time day know think want need see
    say said tell told hope sure good great nice""".split()
)


def _terms(text: str) -> list[str]:
    """The content terms of ``text``: lowercased Latin words (no stopwords), numbers, and
    Chinese character bigrams (Chinese has no spaces, bigrams approximate its words)."""
    out = [w.lower() for w in _LATIN_RE.findall(text)]
    out = [w for w in out if len(w) > 1 and w not in _STOPWORDS]
    out.extend(_NUMBER_RE.findall(text))
    for run in _CJK_RUN_RE.findall(text):
        if len(run) == 1:
            continue
        out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def _cohesion(lines: Sequence[_Line], pairs: Mapping[str, int]) -> Callable[[str], float]:
    """How much a Chinese character pair is a word rather than the seam of two, in [0, 1]:
    its pointwise mutual information over the lines (``pairs`` counts the lines holding each
    pair). "峨眉", whose characters occur only together, scores high; "须离", two characters
    each common apart, near 0. In a batch of few lines every character is rare and every
    pair looks like a word, so the scale is that of [`_COHESION_LINES`] lines at least: a
    short batch's pairs count for less, as they did before cohesion was measured."""
    chars: _Tally[str] = _Tally()
    for line in lines:
        chars.update(set(_CJK_RE.findall(line.text)))
    n = max(2, len(lines))
    scale = math.log(max(n, _COHESION_LINES))

    def cohesion(pair: str) -> float:
        apart = max(1, chars[pair[0]] * chars[pair[1]])
        return min(1.0, max(0.0, math.log(n * pairs[pair] / apart) / scale))

    return cohesion


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    """Where each sentence of ``text`` starts and ends (surrounding whitespace left out)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for end, after in [(m.start(), m.end()) for m in _SPLIT_RE.finditer(text)] + [
        (len(text), len(text))
    ]:
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        body = piece.strip()
        # a fragment such as a list number ("4.") says nothing on its own
        if body and (len(body) >= 4 or _CJK_RE.search(body)):
            spans.append((start + lead, start + lead + len(body)))
        start = after
    return spans


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in _sentence_spans(text)]


_PRONOUN_START_RE = re.compile(
    r"(?i)(?:they|he|she|it|this|that|these|those|his|her|their|its|there)\b|[他她它这那其]"
)


def _joined(text: str) -> list[str]:
    """The sentences of ``text``, where one opening on a pronoun ("They named him Marzipan.")
    stays with the sentence it refers back to, so a selected line never loses whom or what it
    is about. A joined line is the source's own stretch (whitespace runs made one space), so
    it reads as written, in any script."""
    groups: list[list[int]] = []
    for a, b in _sentence_spans(text):
        sent = text[a:b]
        # so does a fragment ("Lisbon!", "拉萨！"): alone it would be dropped as too short
        short = len(_LATIN_RE.findall(sent)) < 3 and len(_CJK_RE.findall(sent)) < 6
        if groups and (short or _PRONOUN_START_RE.match(sent)):
            groups[-1][1] = b
        else:
            groups.append([a, b])
    return [" ".join(text[a:b].split()) for a, b in groups]


def said_at(message: Message, text: str) -> tuple[str | None, str]:
    """The session date or timestamp a message carries, and its text without it."""
    for key in STAMP_KEYS:
        value = message.get(key)
        if isinstance(value, str) and _DATE_RE.search(value):
            return value.strip(), text
    m = _STAMP_RE.match(text)
    if m and m.group(1):
        value = m.group(1).strip()
        if _DATE_RE.search(value) or re.search(r"\d{4}", value):
            return value, text[m.end() :].strip()
    elif m:
        # a labelled stamp runs to the end of its last date ("DATE: 1:56 pm on 8 May, 2023")
        dates = list(_DATE_RE.finditer(m.group(2)))
        if dates:
            end = m.start(2) + dates[-1].end()
            return text[m.start(2) : end].strip(), text[end:].strip()
    return None, text


# ---------------------------------------------------------------------------------------------
# The summarizer
# ---------------------------------------------------------------------------------------------


@dataclass
class _Line:
    section: str
    text: str
    speaker: str  # "user", "assistant", tool name, or "" (identifiers, goal)
    date: str  # the session date in force, "" if none known
    seq: float  # order of appearance; a previous summary's lines are negative
    score: float = 0.0
    terms: frozenset[str] = frozenset()
    tokens: int = 0

    def render(self) -> str:
        return f"- {self.speaker}: {self.text}" if self.speaker else f"- {self.text}"


#: How long a summary line may be before it is clipped (a sentence cut at a word, "…").
DEFAULT_MAX_ITEM_CHARS = 240
_SPEAKER_RE = re.compile(r"[\w.-]{1,24}:")
_ROLE_WEIGHT = {"user": 1.0, "assistant": 0.8, "tool": 0.45}
_ID_SEP = "; "


class SalienceSummarizer(TwinSummarizer):
    """Offline, deterministic, incremental summarizer ranking sentences by salience.

    ``counter`` (a ``windowfit.Counter``) measures the target exactly; without one a slightly
    pessimistic estimate is used (a ``ContextManager`` hands it its own counter).
    ``language`` forces ``"zh"`` or ``"en"`` headings instead of detecting them.
    ``max_sentence_chars`` cuts very long sentences (at a word boundary, marked with "…");
    ``tool_scan_chars`` bounds how much of one tool output is read (its head and tail, where
    results and errors are).

    """

    # Called inline by the manager: it is fast and cannot hang, so no timeout thread needed.
    inline = True
    # Its text never exceeds ``target_tokens`` as ``counter`` counts (lines are dropped until
    # the exact count fits), so a manager counting alike may aim at its whole summary room.
    keeps_target = True

    def __init__(
        self,
        *,
        counter: Any = None,
        language: str | None = None,
        max_sentence_chars: int = DEFAULT_MAX_ITEM_CHARS,
        tool_scan_chars: int = 4000,
    ) -> None:
        if language not in (None, "auto", "zh", "en"):
            raise SalienceSettingError(f"language must be 'zh', 'en' or None, not {language!r}")
        if max_sentence_chars < 16:
            raise SalienceSettingError(
                f"max_sentence_chars must be >= 16, got {max_sentence_chars}"
            )
        if tool_scan_chars < 0:
            raise SalienceSettingError(f"tool_scan_chars must be >= 0, got {tool_scan_chars}")
        self.counter = counter
        self.language = None if language == "auto" else language
        self.max_item_chars = max_sentence_chars
        self.tool_scan_chars = tool_scan_chars

    def with_counter(self, counter: Any) -> SalienceSummarizer:
        """A copy that measures with ``counter``."""
        return SalienceSummarizer(
            counter=counter,
            language=self.language,
            max_sentence_chars=self.max_item_chars,
            tool_scan_chars=self.tool_scan_chars,
        )

    def __repr__(self) -> str:
        return f"SalienceSummarizer(language={self.language!r})"

    # -- protocol -------------------------------------------------------------------------------

    def _summary(
        self, messages: Sequence[Message], previous_summary: str, target_tokens: int, language: str
    ) -> CallOp[str]:
        yield from ()  # in-process: no call differs between the twins
        lines = _parse_summary(previous_summary or "", self.max_item_chars)
        lines.extend(self._extract(messages, has_goal=any(x.section == "goal" for x in lines)))
        return self._compose(lines, max(16, int(target_tokens)), language)

    def _tokens(self, text: str) -> int:
        if self.counter is not None:
            return int(self.counter.count(text))
        return estimator().count(text)

    def _fit_text(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (marked "…") within ``max_tokens``."""
        if self._tokens(text) <= max_tokens:
            return text
        lo, hi = 1, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._tokens(text[:mid] + "…") <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo].rstrip() + "…"

    # -- reading --------------------------------------------------------------------------------

    def _clip(self, text: str) -> str:
        return _clip(text, self.max_item_chars)

    def _extract(self, messages: Sequence[Message], *, has_goal: bool) -> list[_Line]:
        lines: list[_Line] = []
        date = ""
        opening = not has_goal  # only the conversation's opening request can be its goal
        tool_names: dict[str, str] = {}
        for pos, msg in enumerate(messages):
            role = str(msg.get("role") or "")
            seq = float(pos)
            raw = message_text({"content": msg.get("content")})
            stamp, text = said_at(msg, raw)
            if stamp:
                date = stamp
            if role in SYSTEM_ROLES:
                continue  # always sent verbatim; a session header only sets the date
            if role == "assistant":
                for call in msg.get("tool_calls") or ():
                    fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
                    name = str(fn.get("name") or "tool")
                    if isinstance(call, Mapping) and call.get("id"):
                        tool_names[str(call["id"])] = name
                    args = fn.get("arguments")
                    brief = self._clip(args if isinstance(args, str) else str(args or ""))
                    lines.append(_Line("done", brief, name, date, seq))
            if role in ("tool", "function"):
                name = tool_names.get(str(msg.get("tool_call_id")), str(msg.get("name") or "tool"))
                lines.extend(self._tool_lines(text, name, date, seq))
                continue
            speaker = "user" if role == "user" else "assistant"
            prose = _CODE_BLOCK_RE.sub(" ", text)
            if role == "user" and opening:
                opening = False
                if _GOAL_RE.search(prose) and not _FILLER_RE.match(prose.strip()):
                    lines.append(_Line("goal", self._clip(prose), "", date, seq))
                    continue
            for k, sent in enumerate(_joined(prose)):
                lines.append(_Line("timeline", self._clip(sent), speaker, date, seq + k / 1000))
        return lines

    def _tool_lines(self, text: str, name: str, date: str, seq: float) -> list[_Line]:
        if self.tool_scan_chars and len(text) > self.tool_scan_chars:
            half = self.tool_scan_chars // 2
            text = text[:half] + "\n" + text[-half:]
        out: list[_Line] = []
        errors = sorted(
            [*_TOOL_ERROR_RE.finditer(text), *_ERROR_RE.finditer(text)], key=lambda m: m.start()
        )
        for m in errors:  # the lines holding the first two errors
            lo = text.rfind("\n", 0, m.start()) + 1
            hi = text.find("\n", m.end())
            line = self._clip(text[lo : hi if hi >= 0 else len(text)].strip())
            if line and all(line != x.text for x in out):
                out.append(_Line("errors", line, name, date, seq))
            if len(out) == 2:
                break
        for ident, _kind in _identifier_spans(text[:3000], limit=6):
            out.append(_Line("identifiers", ident, "", date, seq))
        return out

    # -- scoring --------------------------------------------------------------------------------

    def _score(self, lines: list[_Line]) -> None:
        """Salience of every line from the conversation's own term statistics."""
        for line in lines:
            line.terms = frozenset(_terms(line.text))
        df: _Tally[str] = _Tally()
        for line in lines:
            df.update(line.terms)
        cohesion = _cohesion(lines, df)
        newest = max((x.seq for x in lines), default=0.0)
        oldest = min((x.seq for x in lines), default=0.0)
        span = max(newest - oldest, 1.0)
        for line in lines:
            text = line.text
            if line.section == "goal":
                line.score = 1e9  # the task itself is never dropped
                continue
            if _FILLER_RE.match(text) or not line.terms:
                line.score = 0.0
                continue
            question = text.rstrip().endswith(_QUESTION_END)
            # A question asks about the names it holds ("Who wrote The Canterbury Tales?"):
            # they are its topic, not a fact; a date, number or code in it still is one.
            names = (
                0 if question else sum(1 for w in _CAPITAL_RE.findall(text) if df[w.lower()] <= 2)
            )
            specifics = (
                len(_DATE_RE.findall(text)) * 2.0
                + names * 1.5
                + len(_NUMBER_RE.findall(text)) * 1.0
                + len(_identifier_spans(text, limit=4)) * 1.5
                + len(re.findall(r"[《“「『\"]", text)) * 1.0
            )
            # "remember this" counts from the user; an assistant's "I'll remember" is an echo
            cue = line.speaker == "user" and _CUE_RE.search(text) is not None
            intent = (
                (2.5 if cue else 0.0)
                + (1.5 if _DECISION_RE.search(text) else 0.0)
                + (1.0 if line.speaker == "user" and _GOAL_RE.search(text) else 0.0)
                + (1.0 if line.section in ("errors", "done", "identifiers") else 0.0)
                + (1.0 if line.section == "timeline" and _SELF_RE.search(text) else 0.0)
                + (1.5 if line.speaker == "user" and _FACT_RE.search(text) else 0.0)
            )
            # Small talk ("Take your time and let me know.", "很高兴能帮到你") has neither
            # specifics nor intent and few content words: it is dropped, not ranked.
            content = (
                sum(1 for t in line.terms if not _CJK_RE.match(t))
                + len(_CJK_RE.findall(text)) / _CJK_PER_WORD
            )
            if specifics == 0 and not cue and content < 3:
                line.score = 0.0
                continue
            # Only terms said in at most two lines count: a template's words and a topic
            # that keeps coming back are the conversation's background, not its facts.
            # A Chinese term is a character pair: a sentence has one per character, most of
            # them straddling two words ("须离" of "必须离开"), rare as pairs though made of
            # common characters. Each counts by its cohesion, a share of a word's weight:
            # counted as words, chatty lines ("现在我必须离开了") outranked lines holding a
            # place or a dish ("我喜欢川菜和粤菜"), and the summary kept fewer facts.
            rarity = sum(
                max(0.0, math.log(3 / df[t])) * cohesion(t) / _CJK_PAIRS_PER_WORD
                if _CJK_RE.match(t)
                else max(0.0, math.log(3 / df[t]))
                for t in line.terms
            )
            if rarity == 0 and specifics == 0:
                line.score = 0.0  # said over and over, nothing specific: background
                continue
            weight = _ROLE_WEIGHT.get(line.speaker, _ROLE_WEIGHT["tool"])
            if line.section == "identifiers":
                weight = 0.6
            recency = 0.85 + 0.15 * (line.seq - oldest) / span
            # value per token: a long sentence must carry proportionally more
            tokens = max(4, self._tokens(text))
            line.score = weight * recency * (rarity + specifics + intent) / tokens**0.6
            if specifics == 0 and question:
                line.score *= 0.6  # a bare question states no fact; its answer may
            if line.speaker == "assistant" and specifics == 0 and not cue:
                line.score *= 0.5  # general advice, with nothing specific: rarely asked about

    @staticmethod
    def _merge(lines: list[_Line]) -> list[_Line]:
        """Near-duplicates collapse into one line, keeping the best score: a restatement that
        adds nothing keeps the original (and so its date); one that adds terms is an update
        or correction, and its newer wording stands for both. Identical identifiers collapse.
        Each line is compared only with the kept lines an index says can match it, so a long
        history folds in near-linear time."""
        kept: list[_Line] = []
        index = NearDuplicateIndex(lines)
        for line in sorted(lines, key=lambda x: x.seq):  # oldest first
            if line.score <= 0:
                continue
            k = index.first_match(line, kept)
            if k is None:
                index.add(line, len(kept))
                kept.append(line)
                continue
            other = kept[k]
            if line.section == "identifiers":
                newer_wording = len(line.text) > len(other.text)
            else:  # new information: the later wording replaces the earlier
                newer_wording = bool(line.terms - other.terms)
            if newer_wording:
                line.score = max(line.score, other.score)
                kept[k] = line
                index.add(line, k)
            else:
                other.score = max(other.score, line.score)
        return kept

    # -- composition ----------------------------------------------------------------------------

    def _compose(self, lines: list[_Line], target: int, lang: str) -> str:
        previous = [x for x in lines if x.seq < 0]
        if previous:
            # New lines said before the batch's first stamp belong to the session the
            # previous summary ended in; and the opening request is already behind us, so a
            # request in this batch is one step among others, not the goal.
            last = next((x.date for x in reversed(previous) if x.date), "")
            for x in lines:
                if x.seq >= 0:
                    if x.date:
                        break
                    x.date = last
            for x in lines:
                if x.seq >= 0 and x.section == "goal":
                    x.section, x.speaker = "timeline", "user"
        self._score(lines)
        pool = self._merge(lines)
        goals = sorted((x for x in pool if x.section == "goal"), key=lambda x: x.seq)
        pool = [x for x in pool if x.section != "goal"] + goals[:1]
        for line in pool:
            shown = f"- {line.text}" if line.section == "timeline" else line.render()
            line.tokens = self._tokens(shown) + 1
        labels = LABELS[lang]
        chosen: list[_Line] = []
        used = 0
        headers: set[tuple[str, str]] = set()

        def header_cost(line: _Line) -> int:
            cost = 0
            if (line.section, "") not in headers:
                cost += self._tokens(f"## {labels[line.section]}") + 1
            if (
                line.section == "timeline"
                and line.date
                and (line.section, line.date) not in headers
            ):
                cost += self._tokens(f"### {line.date}") + 1
            if line.section == "timeline" and (line.date, line.speaker) not in headers:
                cost += self._tokens(f"{line.speaker}:") + 1  # at least one speaker label
            return cost

        for line in sorted(pool, key=lambda x: (-x.score, -x.seq, x.text)):
            if line.section == "identifiers" and any(
                line.text in c.text for c in chosen if c.section != "identifiers"
            ):
                continue  # already shown inside a chosen sentence
            cost = line.tokens + header_cost(line)
            if used + cost > target:
                if line.section != "goal":
                    continue
                room = max(8, target - used - header_cost(line) - 2)
                line = _Line("goal", self._fit_text(line.text, room), "", line.date, line.seq, 1e9)
                line.tokens = self._tokens(line.render()) + 1
                cost = line.tokens + header_cost(line)
            chosen.append(line)
            used += cost
            headers.add((line.section, ""))
            if line.section == "timeline":
                headers.add((line.section, line.date))
                headers.add((line.date, line.speaker))
        text = self._render(chosen, labels)
        # The estimate per line is close but not exact (joins can merge tokens): drop the
        # least salient lines until the exact count fits.
        while chosen and self._tokens(text) > target:
            worst = min(chosen, key=lambda x: (x.score, x.seq))
            chosen.remove(worst)
            text = self._render(chosen, labels)
        return text

    @staticmethod
    def _render(chosen: list[_Line], labels: Mapping[str, str]) -> str:
        blocks: list[str] = []
        for section in _SECTIONS:
            members = sorted((x for x in chosen if x.section == section), key=lambda x: x.seq)
            if not members:
                continue
            rows = [f"## {labels[section]}"]
            if section == "identifiers":
                rows.append("- " + _ID_SEP.join(x.text for x in members))
            elif section == "timeline":
                # by date, in order of first appearance; undated lines first
                order: list[str] = []
                for x in members:
                    if x.date not in order:
                        order.append(x.date)
                order.sort(key=lambda d: d != "")
                for d in order:
                    if d:
                        rows.append(f"### {d}")
                    # who is speaking is said once per run of lines, not on every line
                    speaker = None
                    for x in members:
                        if x.date != d:
                            continue
                        if x.speaker != speaker:
                            speaker = x.speaker
                            rows.append(f"{speaker}:")
                        rows.append(f"- {x.text}")
            else:
                rows.extend(x.render() for x in members)
            blocks.append("\n".join(rows))
        return "\n".join(blocks)


def _parse_summary(summary: str, max_item_chars: int) -> list[_Line]:
    """The lines of a summary (:meth:`SalienceSummarizer._render`'s format), back in their
    sections with date and speaker; a row over ``max_item_chars`` split into its sentences.

    Text in any other format (another summarizer's) becomes undated timeline lines."""
    lines: list[_Line] = []
    section, date, current = "timeline", "", ""
    rows = [r.strip() for r in summary.splitlines() if r.strip()]
    for k, row in enumerate(rows):
        seq = float(k - len(rows))  # before every new message, in their old order
        if row.startswith("### "):
            date = row[4:].strip()
            continue
        if row.startswith("#"):
            heading = row.lstrip("#").strip().rstrip(":：").casefold()
            section = _HEADING_TO_SECTION.get(heading, "timeline")
            date = current = ""
            continue
        if section == "timeline" and _SPEAKER_RE.fullmatch(row):
            current = row[:-1]
            continue
        body = row[2:].strip() if row.startswith(("- ", "* ", "• ")) else row
        if section == "identifiers":
            for ident in (i.strip() for i in body.split(_ID_SEP)):
                if ident:
                    lines.append(_Line("identifiers", ident, "", "", seq))
            continue
        speaker = current if section == "timeline" else ""
        head, sep, rest = body.partition(": ")
        # "- bash: …" names its tool; a timeline line carries its speaker inline only in
        # a summary without speaker labels (so "- Reminder: …" under "user:" stays whole)
        inline = section in ("done", "errors") or (section == "timeline" and not current)
        if sep and inline and 0 < len(head) <= 24 and " " not in head.strip():
            speaker, body = head.strip(), rest
        # a long row is prose from another summarizer: its sentences compete one by one
        pieces = _sentences(body) if len(body) > max_item_chars else [body]
        lines.extend(_Line(section, p, speaker, date, seq) for p in pieces if p)
    return lines


#: The public name of the offline summarizer (the one ``ContextManager`` uses by default).
ExtractiveSummarizer = SalienceSummarizer
