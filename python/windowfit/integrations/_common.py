"""Helpers shared by the framework integrations."""

from __future__ import annotations

from typing import Any, Literal

from windowfit.context import ContextManager
from windowfit.counting import Counter
from windowfit.counting import resolve_counter as counter_or_shared
from windowfit.errors import InvalidArgumentError, missing_extra
from windowfit.messages import canonical_role

__all__ = [
    "StartOn",
    "missing_extra",
    "start_on_rule",
    "resolve_counter",
    "resolve_manager",
]


#: what ``windowfit.fit`` takes as ``start_on``
StartOn = Literal["user"] | None


def start_on_rule(value: str | None) -> StartOn:
    """``fit``'s ``start_on`` for a framework's name of it (``"human"``, ``"any"``...)."""
    if value is None or value == "any":
        return None
    if canonical_role(value) == "user":
        return "user"
    raise InvalidArgumentError(f"start_on must be 'user', 'human', 'any' or None, not {value!r}")


def resolve_counter(counter: Any = None, model: str | None = None) -> Counter:
    """``counter`` itself, or one shared ``wf.Counter`` per model name.

    Sharing matters: the counter's cache is what makes re-counting a growing history cheap, and
    hooks run on every model call.
    """
    if counter is None and model is None:
        raise InvalidArgumentError("pass counter= or model=")  # hooks have no model to default to
    return counter_or_shared(counter, model)


def resolve_manager(manager: Any = None, **kwargs: Any) -> ContextManager:
    """``manager`` itself, or ``wf.ContextManager(**kwargs)`` (kwargs without None values)."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    if manager is not None:
        if given:
            raise InvalidArgumentError(
                f"pass either manager= or ContextManager arguments ({', '.join(given)})"
            )
        return manager
    return ContextManager(**given)
