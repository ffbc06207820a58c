"""An in-process store for tests and notebooks: same protocol and JSON encoding, no durability."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from windowfit.store._common import already_finished, encode_child, not_a_child, state_conflict
from windowfit.store.base import (
    BaseStore,
    RecentOps,
    SessionInfo,
    UsageRecord,
    UsageRow,
    decode_messages,
    decode_meta,
    decode_state,
    encode_message,
    encode_state,
    new_epoch,
    sort_rows,
    ttl_seconds,
    validate_op_id,
    validate_session_id,
)

__all__ = ["MemoryStore"]

T = TypeVar("T")


@dataclass
class _Session:
    epoch: str
    created_at: float
    updated_at: float
    records: list[str] = field(default_factory=list)
    state: str | None = None
    state_version: int = 0
    parent_id: str | None = None
    task: str | None = None
    tool_call_id: str | None = None
    meta: str | None = None
    status: str = "open"
    result: str | None = None
    children: list[str] = field(default_factory=list)


class MemoryStore(BaseStore):
    """Sessions and usage in a dict, guarded by a lock (thread-safe, one process).

    Messages are kept JSON-encoded exactly as the durable stores keep them, so code tested
    against a MemoryStore behaves the same on SQLite or Redis (and reads return fresh copies).
    """

    def __init__(self, *, ttl: float | timedelta | None = None) -> None:
        self.ttl = ttl_seconds(ttl)
        self._lock = threading.RLock()
        self._sessions: dict[str, _Session] = {}
        self._usage: list[UsageRecord] = []
        self._ops = RecentOps()

    def __repr__(self) -> str:
        return f"MemoryStore(sessions={len(self._sessions)})"

    # in-memory operations never block: skip the worker thread
    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)

    def _get_or_create(self, session_id: str, now: float) -> _Session:
        s = self._sessions.get(session_id)
        if s is None:
            s = self._sessions[session_id] = _Session(new_epoch(), now, now)
        return s

    def append(self, session_id: str, messages: Sequence[Any], *, op_id: str | None = None) -> int:
        validate_session_id(session_id)
        validate_op_id(op_id)
        now = time.time()
        encoded = [encode_message(m, now=now) for m in messages]
        with self._lock:
            done = self._ops.get(session_id, op_id)
            if done is not None:
                return done
            s = self._sessions.get(session_id)
            if not encoded:
                return len(s.records) if s else 0
            s = self._get_or_create(session_id, now)
            start = len(s.records)
            s.records.extend(encoded)
            s.updated_at = now
            self._ops.put(session_id, op_id, start)
            return start

    def read(self, session_id: str, start: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                return None, []
            epoch, records = s.epoch, s.records[start:]
        return epoch, decode_messages(records, session_id, start)

    def info(self, session_id: str) -> SessionInfo | None:
        with self._lock:
            s = self._sessions.get(session_id)
            return None if s is None else self._info(session_id, s)

    def _info(self, session_id: str, s: _Session) -> SessionInfo:
        return SessionInfo(
            id=session_id,
            length=len(s.records),
            created_at=s.created_at,
            updated_at=s.updated_at,
            parent_id=s.parent_id,
            task=s.task,
            tool_call_id=s.tool_call_id,
            status=s.status,
            result=s.result,
            state_version=s.state_version,
            meta=decode_meta(s.meta, session_id),
            epoch=s.epoch,
        )

    def load_state(self, session_id: str) -> tuple[dict[str, Any] | None, int]:
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                return None, 0
            raw, version = s.state, s.state_version
        return decode_state(raw, session_id), version

    def save_state(
        self, session_id: str, state: Mapping[str, Any] | None, expected_version: int
    ) -> int:
        validate_session_id(session_id)
        encoded = encode_state(state)
        with self._lock:
            current = (
                self._sessions[session_id].state_version if session_id in self._sessions else 0
            )
            if current != expected_version:
                raise state_conflict(session_id, current, expected_version)
            now = time.time()
            s = self._get_or_create(session_id, now)
            s.state = encoded
            s.state_version += 1
            s.updated_at = now
            return s.state_version

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
        now = time.time()
        encoded, meta_json = encode_child(parent_id, child_id, messages, meta, now)
        with self._lock:
            if child_id in self._sessions:
                return False
            parent = self._get_or_create(parent_id, now)
            child = self._get_or_create(child_id, now)
            child.parent_id, child.task, child.tool_call_id = parent_id, task, tool_call_id
            child.meta = meta_json
            child.records.extend(encoded)
            parent.children.append(child_id)
            parent.updated_at = now
            return True

    def finish_child(self, child_id: str, result: str, message: Mapping[str, Any]) -> int:
        encoded = encode_message(message)
        with self._lock:
            child = self._sessions.get(child_id)
            if child is None or child.parent_id is None:
                raise not_a_child(child_id)
            if child.status == "finished":
                raise already_finished(child_id)
            now = time.time()
            parent = self._get_or_create(child.parent_id, now)
            index = len(parent.records)
            parent.records.append(encoded)
            parent.updated_at = child.updated_at = now
            child.status, child.result = "finished", result
            return index

    def children(self, session_id: str) -> list[SessionInfo]:
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                return []
            return [
                self._info(cid, self._sessions[cid]) for cid in s.children if cid in self._sessions
            ]

    def list_sessions(self, limit: int | None = 100) -> list[SessionInfo]:
        with self._lock:
            infos = [self._info(sid, s) for sid, s in self._sessions.items()]
        infos.sort(key=lambda i: i.updated_at, reverse=True)
        return infos if limit is None else infos[:limit]

    def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._sessions.pop(session_id, None) is not None

    def cleanup(self, older_than: float | timedelta | None = None) -> int:
        cutoff = self._cutoff(older_than)
        with self._lock:
            old = [sid for sid, s in self._sessions.items() if s.updated_at < cutoff]
            for sid in old:
                del self._sessions[sid]
            return len(old)

    def record_usage(self, record: UsageRecord) -> None:
        with self._lock:
            self._usage.append(record)

    def usage_rows(
        self, *, model: str | None = None, day: str | None = None, session_id: str | None = None
    ) -> list[UsageRow]:
        rows: dict[tuple[str, str], UsageRow] = {}
        with self._lock:
            records = list(self._usage)
        for r in records:
            if (model is not None and r.model != model) or (day is not None and r.day != day):
                continue
            if session_id is not None and r.session_id != session_id:
                continue
            rows.setdefault((r.day, r.model), UsageRow(r.day, r.model)).add(r)
        return sort_rows(list(rows.values()))
