"""Prompts for LLM summaries: a structured summary (goal, decisions, done, to do, findings,
key identifiers) whose length follows how much material it covers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from windowfit.messages import SYSTEM_ROLES, message_text
from windowfit.summarize.base import Message, estimator
from windowfit.summarize.salience import LLM_SUMMARY_SECTIONS

_SYSTEM_PROMPT = {
    "en": (
        "You maintain the running summary of a long conversation between a user and an AI "
        "assistant that uses tools. You merge the previous summary with newly archived messages "
        "into one updated summary that lets the assistant continue the work without the original "
        "messages. Never invent facts. Output only the summary."
    ),
    "zh": (
        "你负责维护用户与使用工具的 AI 助手之间长对话的滚动摘要。请把已有摘要与新归档的消息合并为一份更新后的"
        "摘要，使助手无需原始消息也能继续工作。不要编造任何信息。只输出摘要本身。"
    ),
}

_USER_PROMPT = {
    "en": """Compress the conversation history below into a structured summary, keeping the key information.

## Previous summary
{previous}

## New messages to merge ({count} messages, about {source_tokens} tokens)
{transcript}

## Summary requirements
{sections}

Carry over everything from the previous summary that is still relevant, and never drop an
identifier. {length_rule} Write in English.""",
    "zh": """请将以下对话历史压缩为结构化摘要，保留关键信息：

## 已有摘要
{previous}

## 需要合并的新消息（共 {count} 条，约 {source_tokens} tokens）
{transcript}

## 摘要要求
{sections}

保留已有摘要中仍然相关的全部内容，不要丢弃任何标识。{length_rule}请用简洁的中文输出。""",
}


def _length_rule(target_tokens: int, source_tokens: int, lang: str) -> str:
    # Tiers: short material gets a brief gist, long material a layered summary.
    if lang == "zh":
        if source_tokens < 300:
            return f"内容较短，请简要概括，不超过 {max(30, target_tokens // 2)} tokens。"
        if source_tokens < 1500:
            return f"请用约 {target_tokens} tokens 总结关键信息和要点，每部分不超过 3 行。"
        return f"请用约 {target_tokens} tokens 分层总结（主要话题、关键决策、重要细节），每部分不超过 5 行。"
    if source_tokens < 300:
        return f"The material is short: summarize it briefly in at most {max(30, target_tokens // 2)} tokens."
    if source_tokens < 1500:
        return f"Aim for about {target_tokens} tokens, at most 3 lines per section."
    return (
        f"Aim for about {target_tokens} tokens, layered (main topics, key decisions, important "
        f"details), at most 5 lines per section."
    )


def render_transcript(messages: Sequence[Message], *, max_chars_per_message: int = 2000) -> str:
    """The messages as a compact transcript for an LLM summarizer.

    Long contents keep their head and tail (where results and errors usually are).
    """
    lines: list[str] = []
    for msg in messages:
        role = str(msg.get("role", "?"))
        if role in SYSTEM_ROLES:
            continue
        content = message_text({"content": msg.get("content")})
        if len(content) > max_chars_per_message:
            head = int(max_chars_per_message * 0.7)
            tail = max_chars_per_message - head
            omitted = len(content) - head - tail
            content = f"{content[:head]}\n…[{omitted} characters omitted]…\n{content[-tail:]}"
        if role == "tool":
            name = msg.get("name") or msg.get("tool_call_id") or "tool"
            lines.append(f"TOOL RESULT [{name}]: {content}")
            continue
        label = role.upper()
        if content.strip():
            lines.append(f"{label}: {content}")
        for call in msg.get("tool_calls") or ():
            fn = (call.get("function") or {}) if isinstance(call, Mapping) else {}
            args = fn.get("arguments", "")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            if len(args) > max_chars_per_message:
                args = args[:max_chars_per_message] + "…"
            lines.append(f"{label} → TOOL CALL {fn.get('name', '?')}({args})")
    return "\n".join(lines)


def build_summary_prompt(
    messages: Sequence[Message],
    *,
    previous_summary: str = "",
    target_tokens: int = 400,
    language: str = "en",
    max_chars_per_message: int = 2000,
) -> list[dict[str, str]]:
    """The chat messages asking an LLM to merge ``messages`` into ``previous_summary``."""
    lang = language if language in _USER_PROMPT else "en"
    transcript = render_transcript(messages, max_chars_per_message=max_chars_per_message)
    source_tokens = estimator().count(transcript)
    none = "（无）" if lang == "zh" else "(none)"
    user = _USER_PROMPT[lang].format(
        previous=previous_summary.strip() or none,
        count=len(messages),
        source_tokens=source_tokens,
        transcript=transcript or none,
        length_rule=_length_rule(target_tokens, source_tokens, lang),
        # the offline summary's sections, so either summary merges the other's
        sections=LLM_SUMMARY_SECTIONS[lang],
    )
    return [{"role": "system", "content": _SYSTEM_PROMPT[lang]}, {"role": "user", "content": user}]
