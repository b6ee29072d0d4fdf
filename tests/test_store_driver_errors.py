"""Driver errors are translated where the store's connection runs a statement: the store's
own error classes, the driver's message and class name kept (agentrunner/store/driver.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrunner.store import TraceStore
from agentrunner.store.driver import SqliteConnection
from agentrunner.values.errors import StoreError, StoreFailedError, StoreRefusedError
from agentrunner.values.events import ModelChunk


def _connection(tmp_path: Path) -> SqliteConnection:
    raw = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    raw.execute("INSERT INTO t (id) VALUES (1)")
    return SqliteConnection(raw)


def test_a_refused_row_is_a_store_refused_error_with_the_drivers_words(tmp_path: Path) -> None:
    conn = _connection(tmp_path)
    with pytest.raises(StoreRefusedError, match="UNIQUE constraint failed") as caught:
        conn.execute("INSERT INTO t (id) VALUES (1)")
    assert (caught.value.driver, caught.value.server) == ("IntegrityError", "sqlite")
    assert isinstance(caught.value, StoreError)


def test_a_statement_that_cannot_run_is_a_store_failed_error(tmp_path: Path) -> None:
    conn = _connection(tmp_path)
    with pytest.raises(StoreFailedError, match="no such table: nope") as caught:
        conn.execute("SELECT * FROM nope")
    assert caught.value.driver == "OperationalError"


def test_a_failure_while_reading_rows_is_translated_too(tmp_path: Path) -> None:
    conn = _connection(tmp_path)
    conn.execute("INSERT INTO t (id) VALUES (2)")
    conn.raw.create_function("boom", 1, lambda key: 1 / (key - 2))  # fails on the second row
    rows = conn.execute("SELECT boom(id) FROM t ORDER BY id")
    with pytest.raises(StoreFailedError, match="user-defined function raised exception"):
        rows.fetchall()


def test_postgres_errors_are_translated_into_the_same_classes(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        conn = store.raw_connection()
        with pytest.raises(StoreFailedError, match="nope") as caught:
            conn.execute("SELECT * FROM nope")
        assert caught.value.server == "postgres"
        episode = store.create_episode(task_id="t", seed=0, env={}, model={})
        store.writer(episode).append(0, ModelChunk(call_id="c", channel="text", index=0, text="x"))
        with pytest.raises(StoreRefusedError, match="append-only"):
            conn.execute("DELETE FROM event_log")
