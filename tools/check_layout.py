"""The package's layering, checked from its source (no import of windowfit needed).

Every import counts as an edge, wherever it sits: at module level, inside a function, or under
``TYPE_CHECKING`` (a type-only import still ties the two modules together). The rules:

- no import cycle of any length between modules, nor between the Rust binding files
  (``src/py/*.rs``, linked by ``super::name``);
- the context manager's stages (``windowfit.context.*`` other than the manager module and the
  package's façade) never import the manager;
- the store never imports the session;
- no module imports a private name (``_name``) from another package;
- at most ``MAX_TOP_LEVEL`` modules at the package's top level (the façade's ``__init__`` and
  the compiled ``_core`` not counted): what every step shares; the steps are packages.

Run as ``python tools/check_layout.py``; exits 1 and names each broken rule.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "windowfit"
REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "python" / PACKAGE
#: the PyO3 binding files: one per core module, none using another that uses it back
BINDINGS = REPO / "src" / "py"
MAX_TOP_LEVEL = 12
#: the modules a stage of the context manager must not import (it is composed of the stages)
MANAGER_MODULES = {"windowfit.context.manager"}
#: modules of ``context`` that may import the manager: the package's façade
MANAGER_USERS = {"windowfit.context"}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    mods = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyi")]):
        if path.suffix == ".pyi" and path.with_suffix(".py").exists():
            continue  # a stub beside its module; a stub alone stands for a compiled module
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = path
    return mods


def _source(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    """The dotted module a ``from ... import`` reads from (relative imports resolved)."""
    base = node.module or ""
    if node.level:
        parts = here.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    return base


def _targets(node: ast.AST, here: str, is_package: bool, mods: dict[str, Path]) -> Iterator[str]:
    """The package's modules one import statement names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in mods:
                yield alias.name
    elif isinstance(node, ast.ImportFrom):
        base = _source(node, here, is_package)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in mods:
                yield sub  # "from pkg import submodule"
            elif base in mods:
                yield base


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules ``name`` imports anywhere in its source."""
    if path.suffix == ".pyi":
        return set()  # a compiled module imports nothing of the package
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        found.update(_targets(node, name, is_package, mods))
    found.discard(name)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = module_files(root)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return sorted(found)


def binding_graph(root: Path = BINDINGS) -> dict[str, set[str]]:
    """Each binding file and the sibling files it names (``super::count``, ``use super::{a, b}``)."""
    files = {p.stem for p in root.glob("*.rs")} - {"mod"}
    graph = {}
    for name in sorted(files):
        text = (root / f"{name}.rs").read_text(encoding="utf-8")
        named = set(re.findall(r"super::(\w+)", text))
        for group in re.findall(r"super::\{([^}]*)\}", text):
            named.update(part.split("::")[0].strip() for part in group.split(","))
        graph[name] = (named & files) - {name}
    return graph


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def forbidden_edges(graph: dict[str, set[str]]) -> list[str]:
    """Each import that breaks a layering rule, as ``"a -> b (rule)"``."""
    broken = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            if (
                _within(mod, "windowfit.context")
                and mod not in MANAGER_MODULES | MANAGER_USERS
                and dep in MANAGER_MODULES
            ):
                broken.append(f"{mod} -> {dep} (a stage imports the manager)")
            if _within(mod, "windowfit.store") and _within(dep, "windowfit.session"):
                broken.append(f"{mod} -> {dep} (the store imports the session)")
    return broken


def _home(name: str, root: Path = ROOT) -> str:
    """The subpackage a module belongs to (``windowfit.session``), or the module itself."""
    parts = name.split(".")
    if len(parts) > 1 and (root / parts[1]).is_dir():
        return ".".join(parts[:2])
    return name


def private_imports(root: Path = ROOT) -> list[str]:
    """Each private name (``_name``) a module imports from another package's module."""
    mods = module_files(root)
    found = []
    for name, path in mods.items():
        if path.suffix == ".pyi":
            continue
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = _source(node, name, is_package)
            if base not in mods or _home(base, root) == _home(name, root):
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{base}.{alias.name}" not in mods:
                    found.append(f"{name} imports {base}.{alias.name} (a private name)")
    return sorted(found)


def top_level(root: Path = ROOT) -> list[str]:
    """The modules at the package's top level (``__init__`` not counted)."""
    return sorted(p.stem for p in root.glob("*.py") if p.name != "__init__.py")


def problems(root: Path = ROOT) -> list[str]:
    graph = import_graph(root)
    found = [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    if root == ROOT and BINDINGS.is_dir():
        bindings = cycles(binding_graph())
        found += [f"cycle between binding files: {' <-> '.join(c)}" for c in bindings]
    found += forbidden_edges(graph)
    found += private_imports(root)
    names = top_level(root)
    if len(names) > MAX_TOP_LEVEL:
        found.append(f"{len(names)} top-level modules (at most {MAX_TOP_LEVEL}): {names}")
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"layout ok: {len(module_files())} modules, no cycle, layers kept")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
