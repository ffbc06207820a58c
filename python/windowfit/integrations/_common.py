"""Helpers shared by the framework integrations."""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "START_ON_ALIASES",
    "StartOn",
    "missing_extra",
    "start_on_rule",
    "resolve_counter",
    "resolve_manager",
]

# frameworks name the user role differently; fit speaks canonical roles
START_ON_ALIASES = {"human": "user", "user": "user", None: None, "any": None}

#: what ``windowfit.fit`` takes as ``start_on``
StartOn = Literal["user"] | None


def start_on_rule(value: str | None) -> StartOn:
    """``fit``'s ``start_on`` for a framework's name of it (``"human"``, ``"any"``...)."""
    rule = START_ON_ALIASES.get(value, value)
    if rule is None:
        return None
    if rule == "user":
        return "user"
    raise ValueError(f"start_on must be 'user', 'human', 'any' or None, not {value!r}")


def missing_extra(module: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError an integration raises when its framework is not installed."""
    err = ImportError(
        f"windowfit.integrations.{module} needs the optional dependencies of windowfit[{extra}]: "
        f"pip install 'windowfit[{extra}]' ({exc})"
    )
    err.name = getattr(exc, "name", None)
    return err


def resolve_counter(counter: Any = None, model: str | None = None) -> Any:
    """``counter`` itself, or one shared ``wf.Counter`` per model name.

    Sharing matters: the counter's cache is what makes re-counting a growing history cheap, and
    hooks run on every model call.
    """
    if counter is None and model is None:
        raise ValueError("pass counter= or model=")  # hooks have no model to default to
    from windowfit.counting import resolve_counter as resolve

    return resolve(counter, model)


def resolve_manager(manager: Any = None, **kwargs: Any) -> Any:
    """``manager`` itself, or ``wf.ContextManager(**kwargs)`` (kwargs without None values)."""
    given = {k: v for k, v in kwargs.items() if v is not None}
    if manager is not None:
        if given:
            raise ValueError(
                f"pass either manager= or ContextManager arguments ({', '.join(given)})"
            )
        return manager
    from windowfit.context import ContextManager

    return ContextManager(**given)
