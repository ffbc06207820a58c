"""What every store does alike around its own storage: the checks and encoding a write makes
before any I/O, and the protocol's errors, written once so that every store raises them word
for word alike (callers and tests match their classes and messages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from windowfit.store.base import ConflictError, encode_message, encode_meta, validate_session_id

__all__ = ["already_finished", "encode_child", "not_a_child", "state_conflict"]


def encode_child(
    parent_id: str,
    child_id: str,
    messages: Sequence[Any],
    meta: Mapping[str, Any] | None,
    now: float,
) -> tuple[list[str], str | None]:
    """``create_child``'s checks and payload: both ids validated, then the child's first
    messages and its metadata in their stored form (in this order, so every store reports the
    same first error)."""
    validate_session_id(parent_id)
    validate_session_id(child_id)
    return [encode_message(m, now=now) for m in messages], encode_meta(meta)


def state_conflict(session_id: str, current: int, expected: int) -> ConflictError:
    """``save_state``'s error when another writer saved version ``current`` first."""
    return ConflictError(
        f"session {session_id!r}: state version is {current}, not {expected}: "
        "another writer saved first; reload and retry",
        session_id=session_id,
        current_version=current,
    )


def not_a_child(child_id: str) -> ValueError:
    """``finish_child``'s error for a session that has no parent."""
    return ValueError(f"session {child_id!r} is not a sub-agent session")


def already_finished(child_id: str) -> ConflictError:
    """``finish_child``'s error for a sub-agent that returned its result already."""
    return ConflictError(f"sub-agent {child_id!r} is already finished", session_id=child_id)
