"""The SQL stores' one schema definition, rendered per dialect: SQLite builds the tables from it
(checked against SQLite's own view of them), PostgreSQL gets its types and its extra tables."""

from __future__ import annotations

import sqlite3

import pytest
from windowfit.store.schema import TABLES, ddl, required_columns


def _sqlite_tables() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    for statement in ddl("sqlite"):
        db.execute(statement)
    return db


def test_sqlite_builds_every_table_it_keeps_with_the_defined_columns() -> None:
    db = _sqlite_tables()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {
        "windowfit_meta",
        "windowfit_sessions",
        "windowfit_messages",
        "windowfit_usage",
    }
    for table, needed in required_columns("sqlite").items():
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        assert needed <= have, table
    types = {r[1]: r[2] for r in db.execute("PRAGMA table_info(windowfit_usage)")}
    assert types["cost"] == "REAL" and types["prompt_tokens"] == "INTEGER"


def test_the_rendered_schema_is_idempotent_and_keys_messages_by_session_and_seq() -> None:
    db = _sqlite_tables()
    for statement in ddl("sqlite"):  # a store opened twice creates nothing twice
        db.execute(statement)
    db.execute("INSERT INTO windowfit_messages VALUES ('s', 0, 'a')")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("INSERT INTO windowfit_messages VALUES ('s', 0, 'b')")
    db.execute(
        "INSERT INTO windowfit_usage (ts, day, model, prompt_tokens, completion_tokens) "
        "VALUES (1, '2026-01-01', 'm', 1, 2)"
    )
    assert db.execute("SELECT id, cached_tokens FROM windowfit_usage").fetchall() == [(1, 0)]


def test_postgres_renders_its_own_types_and_the_tables_only_it_keeps() -> None:
    sql = "\n".join(ddl("postgres"))
    assert "created_at DOUBLE PRECISION NOT NULL" in sql
    assert "id BIGSERIAL PRIMARY KEY" in sql
    assert "PRIMARY KEY (session_id, seq)" in sql
    assert "CREATE TABLE IF NOT EXISTS windowfit_ops" in sql
    assert "windowfit_ops" not in "\n".join(ddl("sqlite"))
    assert "length" in required_columns("postgres")["windowfit_sessions"]
    assert "length" not in required_columns("sqlite")["windowfit_sessions"]
    assert "created_seq" in required_columns("postgres")["windowfit_sessions"]


def test_every_dialect_renders_every_shared_table() -> None:
    for dialect in ("sqlite", "postgres"):
        sql = "\n".join(ddl(dialect))
        for table in TABLES:
            assert (f"EXISTS {table.name} (" in sql) == table.kept_by(dialect), (dialect, table)
