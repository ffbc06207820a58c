"""The SQL stores' tables (schema version 1), defined once and rendered per dialect.

SQLite and PostgreSQL keep the same tables; they differ in column types, in how a composite
row key is spelled, and in what only PostgreSQL records: the session's length (SQLite reads it
from its messages inside the same transaction) and the operation ids that make a retried write
idempotent over the network (``windowfit_ops``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MIGRATIONS", "TABLES", "Column", "Dialect", "Table", "ddl", "required_columns"]

Dialect = Literal["sqlite", "postgres"]
DIALECTS: tuple[Dialect, ...] = ("sqlite", "postgres")

# The portable type names of the definitions below, spelled per dialect.
_TYPES: dict[Dialect, dict[str, str]] = {
    "sqlite": {
        "text": "TEXT",
        "real": "REAL",
        "int": "INTEGER",
        "serial": "INTEGER",
        "row_id": "INTEGER PRIMARY KEY",
    },
    "postgres": {
        "text": "TEXT",
        "real": "DOUBLE PRECISION",
        "int": "BIGINT",
        "serial": "BIGSERIAL",
        "row_id": "BIGSERIAL PRIMARY KEY",
    },
}
# A composite row key: SQLite's tables have always said UNIQUE (a rowid table's primary key
# is no stronger), PostgreSQL's PRIMARY KEY.
_ROW_KEY: dict[Dialect, str] = {"sqlite": "UNIQUE", "postgres": "PRIMARY KEY"}


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # a key of _TYPES
    constraint: str = ""  # NOT NULL, DEFAULT..., PRIMARY KEY
    only: Dialect | None = None  # kept by one dialect alone


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    row_key: tuple[str, ...] = ()  # a composite key, rendered per dialect
    indexes: tuple[tuple[str, str], ...] = ()  # (index name, column list)
    only: Dialect | None = None

    def kept_by(self, dialect: Dialect) -> bool:
        return self.only in (None, dialect)


TABLES: tuple[Table, ...] = (
    Table(
        "windowfit_meta",
        (Column("key", "text", "PRIMARY KEY"), Column("value", "text", "NOT NULL")),
    ),
    Table(
        "windowfit_sessions",
        (
            Column("id", "text", "PRIMARY KEY"),
            Column("epoch", "text", "NOT NULL"),
            Column("parent_id", "text"),
            Column("task", "text"),
            Column("tool_call_id", "text"),
            Column("meta", "text"),
            Column("created_at", "real", "NOT NULL"),
            Column("updated_at", "real", "NOT NULL"),
            Column("state", "text"),
            Column("state_version", "int", "NOT NULL DEFAULT 0"),
            Column("status", "text", "NOT NULL DEFAULT 'open'"),
            Column("result", "text"),
            Column("length", "int", "NOT NULL DEFAULT 0", only="postgres"),
            # orders children created in the same instant
            Column("created_seq", "serial", only="postgres"),
        ),
        indexes=(
            ("windowfit_sessions_parent", "parent_id, created_at"),
            ("windowfit_sessions_updated", "updated_at"),
        ),
    ),
    Table(
        "windowfit_messages",
        (
            Column("session_id", "text", "NOT NULL"),
            Column("seq", "int", "NOT NULL"),
            Column("data", "text", "NOT NULL"),
        ),
        row_key=("session_id", "seq"),
    ),
    Table(
        "windowfit_ops",
        (
            Column("id", "text", "PRIMARY KEY"),
            Column("result", "text", "NOT NULL"),
            Column("at", "real", "NOT NULL"),
        ),
        indexes=(("windowfit_ops_at", "at"),),
        only="postgres",
    ),
    Table(
        "windowfit_usage",
        (
            Column("id", "row_id"),
            Column("ts", "real", "NOT NULL"),
            Column("day", "text", "NOT NULL"),
            Column("model", "text", "NOT NULL"),
            Column("session_id", "text"),
            Column("prompt_tokens", "int", "NOT NULL"),
            Column("completion_tokens", "int", "NOT NULL"),
            Column("cached_tokens", "int", "NOT NULL DEFAULT 0"),
            Column("cache_write_tokens", "int", "NOT NULL DEFAULT 0"),
            Column("cost", "real"),
        ),
        indexes=(
            ("windowfit_usage_day", "day, model"),
            ("windowfit_usage_session", "session_id"),
        ),
    ),
)


#: per dialect, the statements that upgrade each older schema version to the next; add one
#: (for every dialect) when the tables change
MIGRATIONS: dict[Dialect, dict[int, str]] = {"sqlite": {}, "postgres": {}}


def _columns(table: Table, dialect: Dialect) -> list[Column]:
    return [c for c in table.columns if c.only in (None, dialect)]


def _create(table: Table, dialect: Dialect) -> str:
    types = _TYPES[dialect]
    lines = [
        " ".join(part for part in (c.name, types[c.type], c.constraint) if part)
        for c in _columns(table, dialect)
    ]
    if table.row_key:
        lines.append(f"{_ROW_KEY[dialect]} ({', '.join(table.row_key)})")
    body = ",\n    ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {table.name} (\n    {body}\n)"


def ddl(dialect: Dialect) -> list[str]:
    """The statements that create the tables and indexes ``dialect``'s store keeps (each
    idempotent: ``IF NOT EXISTS``)."""
    out = []
    for table in TABLES:
        if not table.kept_by(dialect):
            continue
        out.append(_create(table, dialect))
        out += [
            f"CREATE INDEX IF NOT EXISTS {name} ON {table.name} ({columns})"
            for name, columns in table.indexes
        ]
    return out


def required_columns(dialect: Dialect) -> dict[str, set[str]]:
    """The columns each data table must have: a same-named table without them is foreign."""
    return {
        table.name: {c.name for c in _columns(table, dialect)}
        for table in TABLES
        if table.kept_by(dialect) and table.name != "windowfit_meta"
    }
