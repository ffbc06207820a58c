"""Every exception class windowfit exports derives from ``WindowfitError`` and keeps the builtin
base a caller without windowfit in mind would catch."""

from __future__ import annotations

import inspect

import pytest
import windowfit as wf
from windowfit import _core, errors

_PUBLIC = sorted(
    (name for name in wf.__all__ if inspect.isclass(getattr(wf, name))),
)
_EXCEPTIONS = [name for name in _PUBLIC if issubclass(getattr(wf, name), BaseException)]


def test_the_package_exports_its_exceptions() -> None:
    assert "WindowfitError" in wf.__all__
    assert wf.WindowfitError is errors.WindowfitError
    assert len(_EXCEPTIONS) >= 10  # the core's five, models, summaries, usage, stores


@pytest.mark.parametrize("name", _EXCEPTIONS)
def test_every_public_exception_is_a_windowfit_error(name: str) -> None:
    cls = getattr(wf, name)
    assert issubclass(cls, wf.WindowfitError), name


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("UnknownModelError", KeyError),
        ("SummaryError", RuntimeError),
        ("QuotaExceededError", RuntimeError),
        ("MissingTokenizerError", ImportError),
        ("BudgetError", ValueError),
        ("InvalidMessageError", ValueError),
        ("MessageTypeError", TypeError),
        ("UnknownEncodingError", KeyError),
        ("VocabularyError", ValueError),
    ],
)
def test_exceptions_keep_their_builtin_base(name: str, builtin: type[BaseException]) -> None:
    assert issubclass(getattr(wf, name), builtin)


def test_the_core_raises_the_classes_of_windowfit_errors() -> None:
    # one class per error kind, whichever layer raised it
    for name in ("BudgetError", "InvalidMessageError", "MessageTypeError", "VocabularyError"):
        assert getattr(_core, name) is getattr(errors, name) is getattr(wf, name)


def test_an_unknown_model_is_caught_as_both() -> None:
    with pytest.raises(wf.WindowfitError) as info:
        wf.get_model("no-such-model-anywhere")
    assert isinstance(info.value, KeyError)
