"""One body for a sync method and its async twin.

An operation is a generator that yields each `call` whose sync and async forms differ (an
LLM request, a store write) and receives its result (or its exception, thrown back in). The
rest of the logic is written once: `blocking` makes the sync method, which makes each call
``target.m(...)``; `awaitable` the async one, which awaits ``target.am(...)``. The manager,
sessions, usage, summarizers and framework hooks write their twins this way; a networked
store does the same one level down (`windowfit.store._steps`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["Call", "CallOp", "arun_calls", "awaitable", "blocking", "call", "run_calls"]

T = TypeVar("T")
S = TypeVar("S")
P = ParamSpec("P")

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

    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_calls(op(self, *args, **kwargs))

    return _presented_as(run, op, "")


def awaitable(
    op: Callable[Concatenate[S, P], CallOp[T]],
) -> Callable[Concatenate[S, P], Awaitable[T]]:
    """The async twin of operation ``op``: the same body, its calls awaited."""

    async def arun(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await arun_calls(op(self, *args, **kwargs))

    return _presented_as(arun, op, "a")


def _presented_as(method: Callable[..., Any], op: Callable[..., Any], prefix: str) -> Any:
    """``method`` named as the public method of operation ``op`` (``_op_x`` makes ``x`` and
    ``ax``), with its docstring and signature returning what the operation returns
    (``CallOp[X]`` is ``X``), so ``help()`` and ``inspect`` show the method itself."""
    functools.update_wrapper(method, op)
    name = prefix + op.__name__.removeprefix("_op_")
    method.__name__ = name
    method.__qualname__ = f"{op.__qualname__.rpartition('.')[0]}.{name}".lstrip(".")
    sig = inspect.signature(op)
    result = sig.return_annotation
    if isinstance(result, str) and result.startswith("CallOp[") and result.endswith("]"):
        result = result[len("CallOp[") : -1]
    method.__signature__ = sig.replace(return_annotation=result)  # type: ignore[attr-defined]
    method.__annotations__ = {**op.__annotations__, "return": result}
    return method
