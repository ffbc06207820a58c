"""The SQL of PostgresStore: its tables (schema version 1) and the statements it repeats."""

from __future__ import annotations

_SCHEMA = """
CREATE TABLE IF NOT EXISTS windowfit_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS windowfit_sessions (
    id            TEXT PRIMARY KEY,
    epoch         TEXT NOT NULL,
    parent_id     TEXT,
    task          TEXT,
    tool_call_id  TEXT,
    meta          TEXT,
    created_at    DOUBLE PRECISION NOT NULL,
    updated_at    DOUBLE PRECISION NOT NULL,
    state         TEXT,
    state_version BIGINT NOT NULL DEFAULT 0,
    status        TEXT NOT NULL DEFAULT 'open',
    result        TEXT,
    length        BIGINT NOT NULL DEFAULT 0,
    created_seq   BIGSERIAL
);
CREATE INDEX IF NOT EXISTS windowfit_sessions_parent ON windowfit_sessions (parent_id, created_at);
CREATE INDEX IF NOT EXISTS windowfit_sessions_updated ON windowfit_sessions (updated_at);
CREATE TABLE IF NOT EXISTS windowfit_messages (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    data       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS windowfit_ops (
    id     TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    at     DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS windowfit_ops_at ON windowfit_ops (at);
CREATE TABLE IF NOT EXISTS windowfit_usage (
    id                 BIGSERIAL PRIMARY KEY,
    ts                 DOUBLE PRECISION NOT NULL,
    day                TEXT NOT NULL,
    model              TEXT NOT NULL,
    session_id         TEXT,
    prompt_tokens      BIGINT NOT NULL,
    completion_tokens  BIGINT NOT NULL,
    cached_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost               DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS windowfit_usage_day ON windowfit_usage (day, model);
CREATE INDEX IF NOT EXISTS windowfit_usage_session ON windowfit_usage (session_id)
"""

# Columns windowfit needs in each table: a same-named table without them is foreign data.
_COLUMNS = {
    "windowfit_sessions": {
        "id", "epoch", "parent_id", "task", "tool_call_id", "meta", "created_at", "updated_at",
        "state", "state_version", "status", "result", "length",
    },
    "windowfit_messages": {"session_id", "seq", "data"},
    "windowfit_ops": {"id", "result", "at"},
    "windowfit_usage": {
        "id", "ts", "day", "model", "session_id", "prompt_tokens", "completion_tokens",
        "cached_tokens", "cache_write_tokens", "cost",
    },
}  # fmt: skip

# Upgrades from each older schema version to the next; add one when the tables change.
_MIGRATIONS: dict[int, str] = {}

_INFO = (
    "SELECT id, epoch, parent_id, task, tool_call_id, meta, created_at, updated_at, "
    "state_version, status, result, length FROM windowfit_sessions "
)

# Reserve `n` sequence numbers of a session (creating it), returning the first.
_RESERVE = (
    "INSERT INTO windowfit_sessions AS s (id, epoch, created_at, updated_at, length) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE "
    "SET updated_at = EXCLUDED.updated_at, length = s.length + EXCLUDED.length "
    "RETURNING s.length - %s"
)
_INSERT_MESSAGES = (
    "INSERT INTO windowfit_messages (session_id, seq, data) "
    "SELECT %s, %s + t.ord - 1, t.data FROM unnest(%s::text[]) WITH ORDINALITY AS t(data, ord)"
)
