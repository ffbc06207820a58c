"""pytest fixtures for testing windows, registered through the ``pytest11`` entry point (so
they are there once windowfit is installed; or list ``"windowfit.testing.pytest_plugin"`` in
``pytest_plugins``).

- ``wf_counter``: a counter for ``--windowfit-model`` (default gpt-4o, or ``WINDOWFIT_TEST_MODEL``)
- ``check_window``: :func:`windowfit.testing.check_window`, as a fixture
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["check_window_fixture", "pytest_addoption", "wf_counter"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("windowfit")
    group.addoption(
        "--windowfit-model",
        default=None,
        help="model whose tokenizer the wf_counter fixture counts with (default: gpt-4o, "
        "or the WINDOWFIT_TEST_MODEL environment variable)",
    )


@pytest.fixture(scope="session")
def wf_counter(request: pytest.FixtureRequest) -> Any:
    """A shared ``wf.Counter`` for the chosen model (its cache is shared across tests)."""
    import windowfit as wf

    model = (
        request.config.getoption("--windowfit-model")
        or os.environ.get("WINDOWFIT_TEST_MODEL")
        or "gpt-4o"
    )
    return wf.Counter(model=model)


@pytest.fixture(name="check_window")
def check_window_fixture() -> Callable[..., None]:
    """:func:`windowfit.testing.check_window`: raises an ``AssertionError`` naming the broken
    window invariant."""
    from windowfit.testing.invariants import check_window

    return check_window
