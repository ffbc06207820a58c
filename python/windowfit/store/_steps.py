"""One body for the sync and async twins of a networked store.

A networked store (Redis, PostgreSQL) writes each operation once, as a generator that yields the
requests it needs (a script call, a pipeline, an SQL statement) and receives their results.
`run_steps` drives it with a blocking client, `arun_steps` with an asyncio one. `StepStore`
implements the whole protocol, sync and async, on top of one method that builds an operation:
the twins share every line of logic and differ only in how a request is executed.

The layers above a store write their twins the same way, one level up: `windowfit._twins`.
"""

from __future__ import annotations

import abc
import functools
import inspect
import secrets
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from windowfit.store.base import BaseStore

__all__ = [
    "Operation",
    "Step",
    "StepStore",
    "arun_steps",
    "new_op_id",
    "run_steps",
]

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")

#: A request an operation yields to its runner; its meaning belongs to the store.
Step = tuple[Any, ...]
#: Makes a fresh run of one call's operation (a retry runs it again from the start).
Operation = Callable[[], Generator[Step, Any, Any]]


def run_steps(op: Generator[Step, Any, T], execute: Callable[[Step], Any]) -> T:
    """Run ``op``, executing each step it yields with ``execute`` (blocking)."""
    try:
        step = next(op)
        while True:
            step = op.send(execute(step))
    except StopIteration as stop:
        return stop.value


async def arun_steps(op: Generator[Step, Any, T], execute: Callable[[Step], Any]) -> T:
    """Run ``op``, awaiting ``execute(step)`` for each step it yields."""
    try:
        step = next(op)
        while True:
            step = op.send(await execute(step))
    except StopIteration as stop:
        return stop.value


def new_op_id() -> str:
    """A fresh operation id. A write carries one, made by the client, so the server can tell a
    resent write (after a lost connection) from a new one and apply it once."""
    return secrets.token_hex(12)


def _subject(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The session an operation's errors name."""
    if name in ("list_sessions", "cleanup"):
        return None
    if name == "create_child":
        return str(args[1])
    if name == "record_usage":
        return args[0].session_id
    if name == "usage_rows":
        return kwargs.get("session_id")
    return str(args[0])


#: The return types of the protocol a store's raw result is converted to (annotations are
#: strings here: ``from __future__ import annotations``).
_RESULTS: dict[str, Callable[[Any], Any]] = {"int": int, "bool": bool, "None": lambda _: None}


def _forwarders(
    method: Callable[Concatenate[S, P], T],
) -> tuple[Callable[Concatenate[S, P], T], Callable[Concatenate[S, P], Coroutine[Any, Any, T]]]:
    """The sync and async implementations of protocol ``method`` on a `StepStore`.

    Both build the same operation (arguments bound to the protocol's own signature, so they
    reach ``_operation`` in one order whether passed by position or by name, defaults
    filled) and differ only in the driver that runs it. Made from the protocol method itself,
    so no signature is written twice.
    """
    name = method.__name__
    signature = inspect.signature(method)
    result = _RESULTS.get(str(method.__annotations__.get("return")), _same)

    def operation(store: Any, args: Any, kwargs: Any) -> tuple[Operation, str | None]:
        bound = signature.bind(store, *args, **kwargs)
        bound.apply_defaults()
        args, kwargs = bound.args[1:], bound.kwargs
        return store._operation(name, *args, **kwargs), _subject(name, args, kwargs)

    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return result(cast(Any, self)._drive(*operation(self, args, kwargs)))

    async def arun(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return result(await cast(Any, self)._adrive(*operation(self, args, kwargs)))

    for twin, prefix in ((run, ""), (arun, "a")):
        # the protocol's docstring, and __wrapped__ so inspect.signature shows its signature;
        # never its __dict__, which marks it abstract
        functools.update_wrapper(twin, method, assigned=("__doc__",), updated=())
        twin.__name__ = prefix + name
        twin.__qualname__ = f"StepStore.{prefix}{name}"
    return run, arun


def _same(value: Any) -> Any:
    return value


class StepStore(BaseStore):
    """A store whose operations are generators of steps (see the module docstring).

    Subclasses implement ``_operation`` (build one call's operation) and the two drivers.
    """

    @abc.abstractmethod
    def _operation(self, name: str, *args: Any, **kwargs: Any) -> Operation:
        """The operation of protocol method ``name`` called with these arguments.

        Validation and encoding happen here or at the operation's first step, before any I/O.
        """

    @abc.abstractmethod
    def _drive(self, make: Operation, session_id: str | None) -> Any:
        """Run ``make()`` with the blocking client; errors become StoreError naming the session."""

    @abc.abstractmethod
    async def _adrive(self, make: Operation, session_id: str | None) -> Any:
        """Run ``make()`` with the asyncio client."""

    # ------------------------------------------------------------------ the protocol, sync and async

    append, aappend = _forwarders(BaseStore.append)
    read, aread = _forwarders(BaseStore.read)
    info, ainfo = _forwarders(BaseStore.info)
    load_state, aload_state = _forwarders(BaseStore.load_state)
    save_state, asave_state = _forwarders(BaseStore.save_state)
    create_child, acreate_child = _forwarders(BaseStore.create_child)
    finish_child, afinish_child = _forwarders(BaseStore.finish_child)
    children, achildren = _forwarders(BaseStore.children)
    list_sessions, alist_sessions = _forwarders(BaseStore.list_sessions)
    delete, adelete = _forwarders(BaseStore.delete)
    cleanup, acleanup = _forwarders(BaseStore.cleanup)
    record_usage, arecord_usage = _forwarders(BaseStore.record_usage)
    usage_rows, ausage_rows = _forwarders(BaseStore.usage_rows)
