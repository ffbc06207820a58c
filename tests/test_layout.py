"""The package's shape: no import cycles between its modules, and no module that grew into
several (the context manager's files each hold one concern)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import windowfit

ROOT = Path(windowfit.__file__).parent


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _imports(path: Path, mods: dict[str, Path]) -> set[str]:
    """Modules imported at import time (not in functions, not under TYPE_CHECKING)."""
    deps: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module in mods:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            if all(s in mods or s.endswith("._core") for s in subs):
                deps.update(s for s in subs if s in mods)  # "from pkg import submodule"
            else:
                deps.add(node.module)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names if a.name in mods)
    return deps


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    mods = _modules()
    graph = {name: _imports(path, mods) - {name} for name, path in mods.items()}
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_context_modules_each_stay_small() -> None:
    sizes = {
        p.name: len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "context").glob("*.py")
    }
    assert {"config.py", "budget.py", "state.py", "planner.py", "runner.py", "stats.py"} <= set(
        sizes
    )
    assert max(sizes.values()) <= 400, sizes


def test_the_package_imports_with_no_dependencies_installed() -> None:
    """``dependencies = []`` in pyproject: the core package and its stores' base must import
    without any third-party module (typing_extensions and the optional extras blocked)."""
    blocked = ["typing_extensions", "redis", "psycopg", "openai", "rich", "langchain_core"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import windowfit, windowfit.session, windowfit.store, windowfit.store.sqlite\n"
        "import windowfit.store.memory, windowfit.context, windowfit.testing.invariants\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
