"""A hot path may run statements on the bare driver connection (``bare()``), translating the
driver's errors itself into the very errors the translating connection raises
(agentrunner/store/driver.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from agentrunner.store import TraceStore
from agentrunner.store.driver import Bare, HasBare, SqliteConnection
from agentrunner.values.errors import StoreDriverError, StoreFailedError, StoreRefusedError


def _translated(bare: Bare, sql: str, parameters: tuple[Any, ...] = ()) -> StoreDriverError:
    try:
        bare.execute(bare.native(sql), parameters)
    except bare.error as exc:
        return bare.translated(exc)
    raise AssertionError(f"{sql!r} ran")


def _sqlite(tmp_path: Path) -> SqliteConnection:
    raw = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    raw.execute("INSERT INTO t (id) VALUES (1)")
    return SqliteConnection(raw)


def test_a_refused_row_on_the_bare_sqlite_driver_is_the_same_store_refused_error(
    tmp_path: Path,
) -> None:
    conn = _sqlite(tmp_path)
    error = _translated(conn.bare(), "INSERT INTO t (id) VALUES (?)", (1,))
    assert isinstance(error, StoreRefusedError)
    assert (str(error), error.driver, error.server) == (
        "UNIQUE constraint failed: t.id",
        "IntegrityError",
        "sqlite",
    )


def test_the_bare_sqlite_driver_runs_the_stores_sql_as_it_is(tmp_path: Path) -> None:
    bare = _sqlite(tmp_path).bare()
    assert bare.native("SELECT ? FROM t") == "SELECT ? FROM t"
    assert bare.execute("INSERT INTO t (id) VALUES (?)", (2,)).rowcount == 1
    assert isinstance(_translated(bare, "SELECT * FROM nope"), StoreFailedError)


def test_the_bare_postgres_driver_takes_the_stores_sql_and_translates_alike(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        conn = store.raw_connection()
        assert isinstance(conn, HasBare)
        bare = conn.bare()
        assert bare.execute(bare.native("SELECT ?::int + 1"), (41,)).fetchone()[0] == 42
        error = _translated(bare, "SELECT * FROM nope WHERE x = ?", (1,))
        assert isinstance(error, StoreFailedError) and error.server == "postgres"
        assert "nope" in str(error)
