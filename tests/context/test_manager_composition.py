"""The manager is a façade over stages: no inheritance tower, and no stage imports the façade."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import windowfit as wf
from windowfit.context.config import Settings

CONTEXT = Path(wf.__file__).parent / "context"


def test_the_manager_is_one_class_over_object() -> None:
    cm = wf.ContextManager(model="gpt-4o")
    ours = [c for c in type(cm).__mro__ if c.__module__.startswith("windowfit")]
    assert ours == [wf.ContextManager]


@pytest.mark.parametrize(
    "module",
    sorted(p.name for p in CONTEXT.glob("*.py") if p.name not in ("manager.py", "__init__.py")),
)
def test_no_stage_imports_the_manager(module: str) -> None:
    tree = ast.parse((CONTEXT / module).read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m in ("windowfit.context.manager", "windowfit.context")}


def test_settings_are_frozen_and_an_assignment_reconfigures_the_stages() -> None:
    cm = wf.ContextManager(model="gpt-4o", context_window=8_000)
    with pytest.raises(AttributeError):
        cm.settings.context_window = 5  # type: ignore[misc]
    before = cm.settings
    cm.tool_output_max_tokens = 40
    assert cm.settings is not before and cm.settings.tool_output_max_tokens == 40
    assert before.tool_output_max_tokens is None  # the old settings are unchanged
    history = [
        {"role": "user", "content": "run it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "line of output\n" * 400},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "b", "type": "function", "function": {"name": "sh", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "ok"},
    ]
    cm.tool_output_dir = None  # nothing saved to files here
    p = cm.prepare(history)
    assert p.stats["tool_outputs_truncated"] == 1  # the older output, cut to the new cap


def test_settings_parse_reads_the_environment_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WINDOWFIT_CONTEXT_WINDOW", "9000")
    s = Settings.parse()
    monkeypatch.setenv("WINDOWFIT_CONTEXT_WINDOW", "7000")
    assert s.context_window == 9000
    assert Settings.parse(context_window=5000).context_window == 5000
