"""One body for the sync and async twins of a networked store.

A networked store (Redis, PostgreSQL) writes each operation once, as a generator that yields the
requests it needs (a script call, a pipeline, an SQL statement) and receives their results.
`run_steps` drives it with a blocking client, `arun_steps` with an asyncio one. `StepStore`
implements the whole protocol, sync and async, on top of one method that builds an operation:
the twins share every line of logic and differ only in how a request is executed.

The layers above a store (``Session``, ``UsageTracker``) write their twins the same way, one
level up: an operation yields `Call`s on objects whose every method ``m`` has an async twin
``am`` (a store, a ContextManager); `blocking` and `awaitable` make the two public methods of
one operation.
"""

from __future__ import annotations

import abc
import functools
import secrets
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar

from windowfit.store.base import BaseStore, SessionInfo, UsageRecord, UsageRow

__all__ = [
    "Call",
    "CallOp",
    "Operation",
    "Step",
    "StepStore",
    "arun_calls",
    "arun_steps",
    "awaitable",
    "blocking",
    "call",
    "new_op_id",
    "run_calls",
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


#: A method call an operation yields: ``(target, method, args, kwargs)``.
Call = tuple[Any, str, tuple[Any, ...], dict[str, Any]]
#: An operation of calls; it receives each call's result, or its exception thrown back in.
CallOp = Generator[Call, Any, T]


def call(target: Any, method: str, *args: Any, **kwargs: Any) -> Call:
    """The step "call ``target.method(*args, **kwargs)``" (``target.amethod`` when async)."""
    return (target, method, args, kwargs)


class _CallRunner:
    """Steps an operation of calls: the sync and async runners differ only in making a call.

    A call's exception is thrown into the operation, so it handles a store's ConflictError
    where it made the call (or lets it propagate)."""

    def __init__(self, op: CallOp[Any]) -> None:
        self.op = op
        self.value: Any = None
        self.result: Any = None
        self._error: BaseException | None = None

    def next(self) -> Call | None:
        """The operation's next call; None once it returned (its value in ``result``)."""
        error, self._error = self._error, None
        try:
            return self.op.throw(error) if error is not None else self.op.send(self.value)
        except StopIteration as stop:
            self.result = stop.value
            return None

    def failed(self, exc: BaseException) -> None:
        self.value, self._error = None, exc


def run_calls(op: CallOp[T]) -> T:
    """Run ``op``, making each call on the sync API."""
    runner = _CallRunner(op)
    while (c := runner.next()) is not None:
        try:
            runner.value = getattr(c[0], c[1])(*c[2], **c[3])
        except Exception as exc:  # noqa: BLE001 - thrown into the operation, which decides
            runner.failed(exc)
    return runner.result


async def arun_calls(op: CallOp[T]) -> T:
    """Run ``op``, awaiting each call's ``a``-prefixed twin."""
    runner = _CallRunner(op)
    while (c := runner.next()) is not None:
        try:
            runner.value = await getattr(c[0], "a" + c[1])(*c[2], **c[3])
        except Exception as exc:  # noqa: BLE001 - thrown into the operation, which decides
            runner.failed(exc)
    return runner.result


def blocking(op: Callable[Concatenate[S, P], CallOp[T]]) -> Callable[Concatenate[S, P], T]:
    """The sync method of operation ``op`` (same signature and docstring)."""

    @functools.wraps(op)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_calls(op(self, *args, **kwargs))

    return run


def awaitable(
    op: Callable[Concatenate[S, P], CallOp[T]],
) -> Callable[Concatenate[S, P], Awaitable[T]]:
    """The async twin of operation ``op``: the same body, its calls awaited."""

    @functools.wraps(op)
    async def arun(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await arun_calls(op(self, *args, **kwargs))

    return arun


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

    def _call_sync(self, name: str, *args: Any, **kwargs: Any) -> Any:
        make = self._operation(name, *args, **kwargs)
        return self._drive(make, _subject(name, args, kwargs))

    async def _call_async(self, name: str, *args: Any, **kwargs: Any) -> Any:
        make = self._operation(name, *args, **kwargs)
        return await self._adrive(make, _subject(name, args, kwargs))

    # ------------------------------------------------------------------ protocol (sync)

    def append(self, session_id: str, messages: Sequence[Any]) -> int:
        return int(self._call_sync("append", session_id, messages))

    def read(self, session_id: str, start: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
        return self._call_sync("read", session_id, start)

    def info(self, session_id: str) -> SessionInfo | None:
        return self._call_sync("info", session_id)

    def load_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        return self._call_sync("load_state", session_id)

    def save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        return int(self._call_sync("save_state", session_id, state, expected_version))

    def create_child(
        self,
        parent_id: str,
        child_id: str,
        *,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        kw = {"task": task, "messages": messages, "tool_call_id": tool_call_id, "meta": meta}
        return bool(self._call_sync("create_child", parent_id, child_id, **kw))

    def finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        return int(self._call_sync("finish_child", child_id, result, message))

    def children(self, session_id: str) -> list[SessionInfo]:
        return self._call_sync("children", session_id)

    def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        return self._call_sync("list_sessions", limit)

    def delete(self, session_id: str) -> bool:
        return bool(self._call_sync("delete", session_id))

    def cleanup(self, older_than: float | timedelta | None = None) -> int:
        return int(self._call_sync("cleanup", older_than))

    def record_usage(self, record: UsageRecord) -> None:
        self._call_sync("record_usage", record)

    def usage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        return self._call_sync("usage_rows", model=model, day=day, session_id=session_id)

    # ------------------------------------------------------------------ protocol (async)

    async def aappend(self, session_id: str, messages: Sequence[Any]) -> int:
        return int(await self._call_async("append", session_id, messages))

    async def aread(
        self, session_id: str, start: int = 0
    ) -> tuple[str | None, list[dict[str, Any]]]:
        return await self._call_async("read", session_id, start)

    async def ainfo(self, session_id: str) -> SessionInfo | None:
        return await self._call_async("info", session_id)

    async def aload_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        return await self._call_async("load_state", session_id)

    async def asave_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        return int(await self._call_async("save_state", session_id, state, expected_version))

    async def acreate_child(
        self,
        parent_id: str,
        child_id: str,
        *,
        task: str | None,
        messages: Sequence[Any],
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> bool:
        kw = {"task": task, "messages": messages, "tool_call_id": tool_call_id, "meta": meta}
        return bool(await self._call_async("create_child", parent_id, child_id, **kw))

    async def afinish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        return int(await self._call_async("finish_child", child_id, result, message))

    async def achildren(self, session_id: str) -> list[SessionInfo]:
        return await self._call_async("children", session_id)

    async def alist_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        return await self._call_async("list_sessions", limit)

    async def adelete(self, session_id: str) -> bool:
        return bool(await self._call_async("delete", session_id))

    async def acleanup(self, older_than: float | timedelta | None = None) -> int:
        return int(await self._call_async("cleanup", older_than))

    async def arecord_usage(self, record: UsageRecord) -> None:
        await self._call_async("record_usage", record)

    async def ausage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        return await self._call_async("usage_rows", model=model, day=day, session_id=session_id)
