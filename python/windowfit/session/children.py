"""Sub-agents of a session: a child session per delegated task, one message back.

``child = session.child(task)`` creates session ``subagent-xxxxxxxx`` with its own history
(the task as first user message), state and budget, stored in the same store. The sub-agent's
tool calls and outputs stay in the child. ``child.finish(result)`` hands back exactly one
message to the parent, atomically with marking the child finished:

* a ``{"role": "tool", "tool_call_id": ..., "content": result}`` message when the child was
  created for a tool call (``child(task, tool_call_id=call.id)``), so the parent's tool call
  gets its answer;
* otherwise ``{"role": "assistant", "name": <child id>, "content": result}`` (the sub-agent
  did work on the parent's behalf), or another ``role=`` if given.

``finish`` without a result takes the child's last assistant message text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from windowfit._twins import CallOp, awaitable, blocking, call
from windowfit.errors import ArgumentTypeError, InvalidArgumentError
from windowfit.messages import content_text
from windowfit.store.base import ConflictError, SessionInfo, new_child_id, validate_session_id

if TYPE_CHECKING:
    # typing_extensions is not a run-time dependency: Self is only read by type checkers
    from typing_extensions import Self

__all__ = ["SubAgents"]

# Attempts at a fresh sub-agent id before giving up (8 hex digits collide rarely, but do).
_CHILD_ID_ATTEMPTS = 16


def _child_messages(task: str, system: str | None) -> list[dict[str, Any]]:
    if not isinstance(task, str) or not task:
        raise InvalidArgumentError("a sub-agent needs a non-empty task (str)")
    messages: list[dict[str, Any]] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": task})
    return messages


class SubAgents:
    """The sub-agent half of ``Session`` (see the module docstring)."""

    store: Any
    id: str
    _parent_id: str | bool | None

    def _load_op(self) -> CallOp[list[dict[str, Any]]]:
        raise NotImplementedError  # pragma: no cover - Session's

    def _handle(self, session_id: str) -> Self:
        raise NotImplementedError  # pragma: no cover - Session's

    @property
    def parent_id(self) -> str | None:
        """The id of the session this sub-agent belongs to (None for a top-level session)."""
        if self._parent_id is False:
            info = self.store.info(self.id)
            if info is None:
                return None  # not created yet: look again next time
            self._parent_id = info.parent_id
        return self._parent_id  # type: ignore[return-value]

    def parent(self) -> Self | None:
        pid = self.parent_id
        return None if pid is None else self._handle(pid)

    def _op_child(
        self,
        task: str,
        *,
        system: str | None = None,
        tool_call_id: str | None = None,
        meta: Mapping[str, Any] | None = None,
        child_id: str | None = None,
    ) -> CallOp[Self]:
        """A new sub-agent session under this one, its history starting with ``task``.

        ``system`` prepends a system message; ``tool_call_id`` (the parent's tool call that
        started the sub-agent) makes ``finish`` answer that call; ``meta`` is stored with it.
        """
        messages = _child_messages(task, system)
        for _ in range(_CHILD_ID_ATTEMPTS):
            cid = validate_session_id(child_id) if child_id is not None else new_child_id()
            created = yield call(
                self.store,
                "create_child",
                self.id,
                cid,
                task=task,
                messages=messages,
                tool_call_id=tool_call_id,
                meta=meta,
            )
            if created:
                return self._child_handle(cid)
            if child_id is not None:
                raise InvalidArgumentError(f"session {child_id!r} already exists")
        raise ConflictError(
            "could not find a free sub-agent id", session_id=self.id
        )  # pragma: no cover

    child = blocking(_op_child)
    achild = awaitable(_op_child)

    def _child_handle(self, cid: str) -> Self:
        child = self._handle(cid)
        child._parent_id = self.id
        return child

    def _op_children(self) -> CallOp[list[Self]]:
        """The sub-agent sessions created under this one, oldest first."""
        infos = yield call(self.store, "children", self.id)
        return [self._child_handle(i.id) for i in infos]

    children = blocking(_op_children)
    achildren = awaitable(_op_children)

    def _op_finish(self, result: Any = None, *, role: str | None = None) -> CallOp[dict[str, Any]]:
        """End this sub-agent: its parent receives ``result`` as ONE message (returned).

        ``result``: text, or any JSON-serializable value (sent as JSON text); None takes the
        content of this session's last assistant message. Raises ConflictError if already
        finished, ValueError if this session is not a sub-agent.
        """
        info = self._check_child((yield call(self.store, "info", self.id)))
        history = (yield from self._load_op()) if result is None else None
        text = self._result_text(result, history)
        message = self._result_message(info, text, role)
        yield call(self.store, "finish_child", self.id, text, message)
        return message

    finish = blocking(_op_finish)
    afinish = awaitable(_op_finish)

    def _result_text(self, result: Any, history: list[dict[str, Any]] | None) -> str:
        if result is None:
            for msg in reversed(history or []):
                if msg.get("role") == "assistant" and not msg.get("tool_calls"):
                    return content_text(msg.get("content"))
            raise InvalidArgumentError(
                f"sub-agent {self.id!r} has no final assistant message: pass finish(result)"
            )
        if isinstance(result, str):
            return result
        try:
            return json.dumps(result, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ArgumentTypeError(
                f"sub-agent result must be str or JSON-serializable: {exc}"
            ) from None

    def _check_child(self, info: SessionInfo | None) -> SessionInfo:
        if info is None or info.parent_id is None:
            raise InvalidArgumentError(f"session {self.id!r} is not a sub-agent session")
        if info.status == "finished":
            raise ConflictError(f"sub-agent {self.id!r} is already finished", session_id=self.id)
        return info

    def _result_message(self, info: SessionInfo, text: str, role: str | None) -> dict[str, Any]:
        if role is None:
            role = "tool" if info.tool_call_id else "assistant"
        if role == "tool":
            if not info.tool_call_id:
                raise InvalidArgumentError(
                    f"sub-agent {self.id!r} was not created for a tool call: "
                    "pass child(task, tool_call_id=...) or another role"
                )
            return {"role": "tool", "tool_call_id": info.tool_call_id, "content": text}
        if role == "assistant":
            return {"role": "assistant", "name": self.id, "content": text}
        return {"role": role, "content": text}
