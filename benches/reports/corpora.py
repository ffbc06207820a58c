"""The counting benchmarks' corpora, built from packages every run has (no windowfit import:
the field benchmark loads them in peers' fresh processes too)."""

from __future__ import annotations

import json
import sysconfig
import tarfile
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
    """The texts an agent counts on every turn, from the real agent runs beside the repository
    (``shared/data/agent-sessions/``, or the folder ``WINDOWFIT_AGENT_SESSIONS`` names): each
    message's content and each tool call's arguments, every distinct text once (a system
    prompt repeated in every run would be a whole-text cache's hit, not a count). Raises
    ``FileNotFoundError`` naming where it looked when the runs are absent."""
    from _agent_runs import TARBALL, tarball  # tests/: the one place that finds the runs

    archive = tarball()
    if archive is None:
        raise FileNotFoundError(
            f"real agent runs absent: no shared/data/agent-sessions/{TARBALL} beside the "
            "repository and no WINDOWFIT_AGENT_SESSIONS"
        )
    seen: dict[str, None] = {}
    with tarfile.open(archive) as tar:
        for member in sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name):
            f = tar.extractfile(member)
            try:
                run = json.load(f) if f is not None else {}
            except ValueError:  # the archive holds one empty run file
                continue
            for message in run.get("messages", []):
                for text in _message_texts(message):
                    seen.setdefault(text, None)
    return list(seen)


def _message_texts(message: dict[str, object]) -> list[str]:
    """A chat message's content (a string or text parts) and its tool calls' arguments."""
    content = message.get("content")
    parts = content if isinstance(content, list) else [content]
    texts = [
        p if isinstance(p, str) else p.get("text") for p in parts if isinstance(p, (str, dict))
    ]
    for call in message.get("tool_calls") or []:  # type: ignore[attr-defined]
        texts.append((call.get("function") or {}).get("arguments"))
    return [t for t in texts if isinstance(t, str) and t]


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
