"""windowfit's exceptions: one base, ``WindowfitError``, under every error the library raises.

Each error also keeps the builtin base a caller would catch without knowing windowfit
(``ValueError`` for bad values, ``TypeError`` for wrong types, ``KeyError`` for unknown names),
so ``except ValueError`` code keeps working. The Rust core raises the classes defined here
(imported by the bindings), so there is one class per error kind whichever layer raised it.
"""

from __future__ import annotations


class WindowfitError(Exception):
    """Base of every exception windowfit raises on purpose."""


class BudgetError(WindowfitError, ValueError):
    """The pinned messages alone exceed the token budget."""


class InvalidMessageError(WindowfitError, ValueError):
    """A message has a bad value; the message names its index and field."""


class MessageTypeError(WindowfitError, TypeError):
    """A message or one of its fields has the wrong type; the message names its index and field."""


class VocabularyError(WindowfitError, ValueError):
    """A vocabulary or tokenizer file is corrupt or unsupported."""


class InvalidArgumentError(WindowfitError, ValueError):
    """An argument has a value the operation cannot use; the message names the argument."""


class ArgumentTypeError(WindowfitError, TypeError):
    """An argument has the wrong type; the message names the argument."""


class TokenizerFileNotFoundError(WindowfitError, FileNotFoundError):
    """A tokenizer or vocabulary file does not exist."""


class DisallowedSpecialTokenError(WindowfitError, ValueError):
    """The text spells a special token (``<|endoftext|>``) that ``encode`` was not allowed to
    emit: pass it in ``allowed_special``, or drop it from ``disallowed_special``."""


class InternalError(WindowfitError, RuntimeError):
    """A bug inside windowfit (a Rust panic caught at the boundary); please report it."""


class UnsafeFolderError(WindowfitError, PermissionError):
    """A folder windowfit would write into is not safely its own (a link, another user's, or
    writable by others); the message names the folder and what is wrong."""


class UnknownEncodingError(WindowfitError, KeyError):
    """No embedded encoding has this name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def missing_extra(module: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError module ``module`` (its ``__name__``) raises when the optional dependencies
    of ``windowfit[extra]`` are missing."""
    err = ImportError(
        f"{module} needs the optional dependencies of windowfit[{extra}]: "
        f"pip install 'windowfit[{extra}]' ({exc})"
    )
    err.name = getattr(exc, "name", None)
    return err


__all__ = [
    "ArgumentTypeError",
    "BudgetError",
    "DisallowedSpecialTokenError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "MessageTypeError",
    "TokenizerFileNotFoundError",
    "UnknownEncodingError",
    "UnsafeFolderError",
    "VocabularyError",
    "WindowfitError",
    "missing_extra",
]
