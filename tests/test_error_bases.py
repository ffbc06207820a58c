"""Every error windowfit raises on purpose is a ``WindowfitError`` that keeps its built-in base:
the package's source and the Rust bindings are scanned for a bare built-in raise."""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Collection
from pathlib import Path

import pytest
import windowfit as wf
from windowfit import errors

PACKAGE = Path(wf.__file__).parent
BINDINGS = Path(__file__).resolve().parent.parent / "src" / "py"

#: built-ins raised by protocol, not as an error of the library: a module's ``__getattr__``
#: (AttributeError), a missing optional dependency (ImportError), an abstract method
PROTOCOL = {"AttributeError", "ImportError", "NotImplementedError", "StopIteration"}
BUILTIN_ERRORS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
} - PROTOCOL


def bare_raises(root: Path, skip: Collection[str] = ()) -> list[str]:
    """``path:line: Name`` for each ``raise`` of a built-in exception class under ``root``."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id in BUILTIN_ERRORS:
                found.append((str(path.relative_to(root)), node.lineno, raised.id))
    return [f"{path}:{line}: {name}" for path, line, name in sorted(found)]


def test_the_package_raises_no_bare_builtin_error() -> None:
    assert bare_raises(PACKAGE) == []


def test_the_scan_finds_bare_raises(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('bad')\n"
        "    raise KeyError\n"
        "def g():\n"
        "    raise NotImplementedError\n"
    )
    assert bare_raises(tmp_path) == ["m.py:3: ValueError", "m.py:4: KeyError"]


def test_the_bindings_raise_no_bare_builtin_error() -> None:
    if not BINDINGS.is_dir():
        pytest.skip("the Rust sources are not beside this checkout")
    bare = re.compile(r"\bPy(" + "|".join(sorted(BUILTIN_ERRORS)) + r")::new_err")
    found = [
        f"{path.name}:{n}"
        for path in sorted(BINDINGS.glob("*.rs"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (errors.InvalidArgumentError, ValueError),
        (errors.ArgumentTypeError, TypeError),
        (errors.InternalError, RuntimeError),
        (errors.UnknownEncodingError, KeyError),
    ],
)
def test_each_error_class_keeps_its_builtin_base(error: type, builtin: type) -> None:
    assert issubclass(error, errors.WindowfitError) and issubclass(error, builtin)


@pytest.mark.parametrize(
    ("call", "builtin"),
    [
        (lambda: wf.truncate("x", 1, direction="middle"), ValueError),
        (lambda: wf.truncate(b"x", 1), TypeError),  # type: ignore[arg-type]
        (lambda: wf.fit([], 10, max_turns=1.5), TypeError),
        (lambda: wf.fit([], 10, max_messages=-1), ValueError),
        (lambda: wf.ToolOutputTruncator(max_lines=None, max_bytes=None), ValueError),
        (lambda: wf.ToolOutputTruncator(direction="middle"), ValueError),
        (lambda: wf.MemoryStore().cleanup(), ValueError),
        (lambda: wf.Session(wf.MemoryStore(), ""), ValueError),
        (lambda: wf.Counter(model="gpt-4o", encoding="cl100k_base"), ValueError),
    ],
)
def test_bad_arguments_raise_windowfit_errors_that_keep_the_builtin_base(
    call: object, builtin: type
) -> None:
    with pytest.raises(builtin) as raised:
        call()  # type: ignore[operator]
    assert isinstance(raised.value, wf.WindowfitError), type(raised.value)
