"""Durable session stores: SQLite (default), Redis or Redis Cluster (many workers), PostgreSQL
(teams that keep their data there), memory (tests).

All share one protocol (`BaseStore`); `Session(store, id)` gives a `windowfit.Session`.
`RedisStore` and `PostgresStore` import their client packages only when constructed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from windowfit.store.base import (
    BaseStore,
    ConflictError,
    SessionInfo,
    StoreCorruptError,
    StoreError,
    StoreOutcomeUnknownError,
    UsageRecord,
    UsageRow,
)
from windowfit.store.memory import MemoryStore
from windowfit.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from windowfit.store.postgres import PostgresStore
    from windowfit.store.redis import RedisStore

__all__ = [
    "BaseStore",
    "ConflictError",
    "MemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "SessionInfo",
    "StoreCorruptError",
    "StoreError",
    "StoreOutcomeUnknownError",
    "UsageRecord",
    "UsageRow",
    "open_store",
]


def __getattr__(name: str) -> Any:
    # RedisStore's module is light, but keep `import windowfit.store` free of optional deps
    if name == "RedisStore":
        from windowfit.store.redis import RedisStore

        return RedisStore
    if name == "PostgresStore":
        from windowfit.store.postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(target: str | None = None, **kwargs: Any) -> BaseStore:
    """A store from a location: ``redis://``/``rediss://``/``unix://`` URLs -> RedisStore,
    ``postgresql://``/``postgres://`` -> PostgresStore, ``memory:`` -> MemoryStore, anything
    else a SQLite path (default ``sessions.db``)."""
    target = target or "sessions.db"
    if target.startswith(("postgresql://", "postgres://")):
        from windowfit.store.postgres import PostgresStore

        return PostgresStore(target, **kwargs)
    if target.startswith(("redis://", "rediss://", "unix://")):
        from windowfit.store.redis import RedisStore

        return RedisStore(target, **kwargs)
    if target == "memory:":
        return MemoryStore(**kwargs)
    return SQLiteStore(target, **kwargs)
