"""The counting benchmarks' corpora, built from packages every run has (no windowfit import:
the field benchmark loads them in peers' fresh processes too)."""

from __future__ import annotations

import json
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
