"""Frameworks are optional: windowfit imports without them, integrations name their extra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def run(code: str, blocked: set[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PYTHON_DIR), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-c", BLOCKER.format(blocked=blocked) + code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


FRAMEWORKS = {"langchain_core", "langchain", "langgraph", "pydantic_ai", "agents", "anthropic"}


def test_windowfit_and_adapters_import_without_any_framework() -> None:
    code = (
        "import windowfit, windowfit.adapters, windowfit.integrations\n"
        "from windowfit.adapters import from_anthropic, from_responses\n"
        "assert from_responses([{'role': 'user', 'content': 'x'}]).messages\n"
        "mods = [m for m in sys.modules if m.split('.')[0] in BLOCKED]\n"
        "assert not mods, mods\n"
        "print('ok')\n"
    )
    out = run(code, FRAMEWORKS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "module,extra",
    [
        ("langchain", "langchain"),
        ("langgraph", "langchain"),
        ("pydantic_ai", "pydantic-ai"),
        ("openai_agents", "openai-agents"),
        ("anthropic", "anthropic"),
    ],
)
def test_integration_without_its_framework_names_the_extra(module: str, extra: str) -> None:
    code = (
        "try:\n"
        f"    import windowfit.integrations.{module}\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = run(code, FRAMEWORKS)
    assert out.returncode == 0, out.stderr
    assert f"pip install 'windowfit[{extra}]'" in out.stdout


def test_langchain_core_without_langchain_v1_still_trims() -> None:
    code = (
        "from windowfit.integrations.langchain import trim\n"
        "from langchain_core.messages import HumanMessage\n"
        "assert trim([HumanMessage('hi')], 100, model='gpt-4o')\n"
        "try:\n"
        "    from windowfit.integrations.langchain import WindowfitMiddleware\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = run(code, {"langchain"})
    assert out.returncode == 0, out.stderr
    assert "pip install 'windowfit[langchain]'" in out.stdout
