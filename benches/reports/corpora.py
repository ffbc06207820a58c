"""The counting benchmarks' corpora, built from packages every run has (no windowfit import:
the field benchmark loads them in peers' fresh processes too)."""

from __future__ import annotations

import json
import sys
import sysconfig
import tempfile
from pathlib import Path


def prose() -> list[str]:
    """Python's own documentation topics, one paragraph a text."""
    from pydoc_data.topics import topics

    return [p.strip() for doc in topics.values() for p in doc.split("\n\n") if p.strip()]


def code(limit: int = 2_000_000) -> list[str]:
    """The standard library's sources, whole files, about ``limit`` bytes."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    texts, size = [], 0
    for path in sorted(lib.glob("*.py")) + sorted(lib.glob("*/*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        size += len(text.encode())
        if size >= limit:
            break
    return texts


def conversations(english: bool | None = None) -> list[str]:
    """chatterbot-corpus dialogs, one conversation a text: the English ones (``True``), those
    of every other language (``False``) or all of them (``None``)."""
    import chatterbot_corpus
    import yaml

    root = Path(chatterbot_corpus.__file__).parent / "data"
    texts = []
    for path in sorted(root.glob("*/*.yml")):
        if english is not None and (path.parent.name == "english") != english:
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for conv in data.get("conversations") or []:
            texts.append("\n".join(str(line) for line in conv))
    return texts


def agent_messages() -> list[str]:
    """The texts an agent sends on every turn, from the real agent runs the context eval reads
    (``benches/eval/eval_context.py``: ``shared/data/agent-sessions/`` beside the repository,
    or ``WINDOWFIT_EVAL_DATA``; each run as OpenAI chat messages, its closing ``exit`` record
    dropped): each message's content and each tool call's arguments, every distinct text once
    (a system prompt repeated in every run would be a whole-text cache's hit, not a count).
    Raises ``FileNotFoundError`` naming where it looked when the runs are absent."""
    # imported here: the eval imports windowfit, which the field's timed processes must not
    # have imported before they time their load
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
    import eval_context

    archive = eval_context.find_agent_data()
    if archive is None:
        raise FileNotFoundError(
            "real agent runs absent: no shared/data/agent-sessions/ beside the repository and "
            "no WINDOWFIT_EVAL_DATA"
        )
    seen: dict[str, None] = {}
    for _, messages in eval_context.agent_runs(archive):
        for message in messages:
            calls = message.get("tool_calls") or []
            for text in [message.get("content"), *(c["function"]["arguments"] for c in calls)]:
                if isinstance(text, str) and text:
                    seen.setdefault(text, None)
    return list(seen)


def memorybank_messages() -> list[str]:
    """Real multi-day dialogs, Chinese and English, as the recall eval reads them
    (``benches/eval/eval_recall.py``: ``shared/data/dialogs-memorybank/`` beside the
    repository): every distinct message, the Chinese dialogs' first. Raises
    ``FileNotFoundError`` where they are absent."""
    # imported here, as agent_messages' reader: the eval imports windowfit
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
    import eval_recall

    folder = eval_recall.find_memorybank(None)
    if folder is None:
        raise FileNotFoundError(
            "the MemoryBank dialogs are absent: no shared/data/dialogs-memorybank/ beside the "
            "repository"
        )
    seen: dict[str, None] = {}
    for language in ("zh", "en"):
        for conversation in eval_recall.memorybank_conversations(folder, language):
            for message in conversation.messages:
                if message["content"]:
                    seen.setdefault(message["content"], None)
    return list(seen)


def files(folder: Path, pattern: str = "*", limit: int = 2_000_000) -> list[str]:
    """Your own texts: every regular file under ``folder`` whose name matches ``pattern``
    (``*.rs``; at any depth), whole, in path order, until they hold ``limit`` bytes of UTF-8.
    A file that is not UTF-8 is left out, and so is a text met before (a whole-text cache
    would answer it). Raises ``FileNotFoundError`` where the folder is absent or gives no
    text."""
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}")
    seen: dict[str, None] = {}
    size = 0
    for path in sorted(folder.rglob(pattern)):
        if size >= limit:
            break
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text and text not in seen:
            seen[text] = None
            size += len(text.encode())
    if not seen:
        raise FileNotFoundError(f"no UTF-8 text under {folder} matches {pattern!r}")
    return list(seen)


def cached_conversations() -> list[str]:
    """``conversations()``, kept as JSON beside the system's temporary files: parsing its YAML
    costs billions of instructions, which would only add noise to a profile."""
    path = Path(tempfile.gettempdir()) / "windowfit-dialog-corpus.json"
    if path.exists():
        texts: list[str] = json.loads(path.read_text(encoding="utf-8"))
        return texts
    texts = conversations()
    path.write_text(json.dumps(texts), encoding="utf-8")
    return texts
