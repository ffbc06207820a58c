"""The package's shape, as ``make lint`` checks it (``tools/check_layout.py``): no import cycle
of any length (imports inside functions and under ``TYPE_CHECKING`` counted), none between the
Rust binding files, the context manager's stages never import the manager, the store never
imports the session, no private name imported across packages, and a short top level."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def _load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_layout", REPO / "tools" / "check_layout.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layout"] = module
    spec.loader.exec_module(module)
    return module


layout = _load_checker()


def test_the_package_keeps_its_layout() -> None:
    assert layout.problems() == []


def test_the_top_level_holds_what_every_step_shares() -> None:
    assert len(layout.top_level()) <= layout.MAX_TOP_LEVEL
    for step in ("counting", "fitting", "truncation", "context", "session", "store", "usage"):
        assert (layout.ROOT / step / "__init__.py").is_file(), step


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "windowfit"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_cycle_through_a_function_and_a_type_checking_import_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a.py": "def f():\n    from windowfit import b\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import windowfit.c\n",
            "c.py": "from windowfit.a import f\n",
            "d.py": "from windowfit import a\n",
        },
    )
    assert layout.cycles(layout.import_graph(root)) == [
        ["windowfit.a", "windowfit.b", "windowfit.c"]
    ]


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"p/__init__.py": "from .x import y\n", "p/x.py": "from . import z\n", "p/z.py": ""},
    )
    graph = layout.import_graph(root)
    assert graph["windowfit.p"] == {"windowfit.p.x"}
    assert graph["windowfit.p.x"] == {"windowfit.p.z"}


def test_a_stage_importing_the_manager_and_the_store_importing_the_session_are_found(
    tmp_path: Path,
) -> None:
    root = _package(
        tmp_path,
        {
            "context/__init__.py": "from windowfit.context.manager import M\n",
            "context/manager.py": "from windowfit.context import planner\n",
            "context/planner.py": "def f():\n    from windowfit.context.manager import M\n",
            "session/__init__.py": "",
            "store/__init__.py": "",
            "store/base.py": "import windowfit.session\n",
        },
    )
    assert layout.forbidden_edges(layout.import_graph(root)) == [
        "windowfit.context.planner -> windowfit.context.manager (a stage imports the manager)",
        "windowfit.store.base -> windowfit.session (the store imports the session)",
    ]


def test_a_private_name_taken_from_another_package_is_found(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "a/__init__.py": "",
            "a/x.py": "_hidden = 1\n_own = 2\n",
            "a/y.py": "from windowfit.a.x import _own\n",  # within its package: fine
            "b.py": "from windowfit.a.x import _hidden\n",
        },
    )
    assert layout.private_imports(root) == [
        "windowfit.b imports windowfit.a.x._hidden (a private name)"
    ]


def test_a_cycle_between_binding_files_is_found(tmp_path: Path) -> None:
    (tmp_path / "mod.rs").write_text("mod a;\nmod b;\n")
    (tmp_path / "a.rs").write_text("use super::b::thing;\n")
    (tmp_path / "b.rs").write_text("use super::{a::other, errors};\nfn f(x: super::c::T) {}\n")
    (tmp_path / "c.rs").write_text("")
    graph = layout.binding_graph(tmp_path)
    assert graph == {"a": {"b"}, "b": {"a", "c"}, "c": set()}
    assert layout.cycles(graph) == [["a", "b"]]


def test_a_crowded_top_level_is_found(tmp_path: Path) -> None:
    root = _package(tmp_path, {f"m{i}.py": "" for i in range(layout.MAX_TOP_LEVEL + 1)})
    assert any("top-level modules" in p for p in layout.problems(root))


@pytest.mark.parametrize("graph", [{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}])
def test_cycle_finder_finds_a_cycle(graph: dict[str, set[str]]) -> None:
    assert layout.cycles(graph) == [["a", "b", "c"]]


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


def test_old_import_paths_still_work() -> None:
    from windowfit.history_io import load_history
    from windowfit.replay import replay
    from windowfit.replay.history_io import load_history as moved

    assert load_history is moved and callable(replay)


def test_counting_imports_no_later_step() -> None:
    """``import windowfit`` then a count: a fresh process that only counts never imports the
    fitting, the manager, the stores or the summarizers (they cost 135 ms of its load)."""
    code = (
        "import sys, windowfit as wf\n"
        "assert wf.count('hello world') == 2\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('windowfit.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    later = (
        "fitting",
        "truncation",
        "context",
        "recalling",
        "session",
        "store",
        "summarize",
        "usage",
    )
    assert not {m for m in loaded if m.split(".")[1] in later}, loaded
    assert "windowfit.counting" in loaded


def test_every_public_name_resolves_and_the_lazy_ones_are_typed() -> None:
    """Each name of ``__all__`` is an attribute of the package (the lazy ones imported on first
    use), and the names imported lazily are exactly those the ``TYPE_CHECKING`` block imports
    for type checkers, module by module."""
    import ast

    import windowfit as wf

    assert all(getattr(wf, name) is not None for name in wf.__all__)
    assert set(wf.__all__) <= set(dir(wf))
    tree = ast.parse((layout.ROOT / "__init__.py").read_text(encoding="utf-8"))
    typed: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                typed.setdefault(imp.module, set()).update(a.name for a in imp.names)
    assert typed == {module: set(names) for module, names in wf._LAZY.items()}
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = wf.no_such_name  # type: ignore[attr-defined]
