"""Errors raised by the Rust core are the classes of ``windowfit.errors``, under one base."""

from __future__ import annotations

import pytest
import windowfit as wf
from windowfit import _core, errors


def test_core_reexports_the_very_classes_of_windowfit_errors() -> None:
    for name in ("BudgetError", "InvalidMessageError", "MessageTypeError", "VocabularyError"):
        assert getattr(_core, name) is getattr(errors, name)
        assert issubclass(getattr(errors, name), errors.WindowfitError)
    assert _core.UnknownEncodingError is errors.UnknownEncodingError
    assert issubclass(wf.MissingTokenizerError, errors.WindowfitError)
    assert issubclass(wf.MissingTokenizerError, ImportError)


def test_each_core_error_kind_raises_its_class() -> None:
    with pytest.raises(errors.UnknownEncodingError) as e:
        wf.get_encoding("p50k_base")
    assert isinstance(e.value, KeyError) and "p50k_base" in str(e.value)
    with pytest.raises(errors.TokenizerFileNotFoundError) as f:
        wf.Counter.from_tokenizer_json("/nonexistent/tokenizer.json")
    assert isinstance(f.value, FileNotFoundError) and "/nonexistent" in str(f.value)
    counter = wf.Counter(encoding="cl100k_base")
    with pytest.raises(errors.InvalidMessageError, match="message 1: role"):
        counter.count_messages(
            [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]
        )
    with pytest.raises(errors.MessageTypeError, match="message 0: content"):
        counter.count_messages([{"role": "user", "content": 3}])
    with pytest.raises(errors.BudgetError):
        wf.fit([{"role": "system", "content": "x " * 200}], 10, counter=counter)
    with pytest.raises(errors.InvalidArgumentError):
        counter.set_calibration(-1.0)
