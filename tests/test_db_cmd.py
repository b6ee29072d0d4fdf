"""``agentrunner db migrate`` and ``db status``; a shared (Postgres) store is migrated by
``db migrate`` alone: readers of an older schema read it as it is, writers refuse it."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from agentrunner import TraceStore
from agentrunner.cli.main import main
from agentrunner.store import postgres_schema, schema
from agentrunner.values.errors import StoreSchemaError


def _postgres_store_behind(url: str, missing: int = 1) -> None:
    """A database as an agentrunner ``missing`` migrations older than this one made it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE agentrunner_migrations"
            " (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for name, statements in postgres_schema.MIGRATIONS[:-missing]:
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO agentrunner_migrations (name) VALUES (%s)", (name,))


def _sqlite_store_behind(path: Path) -> None:
    earlier = Migrations(schema.MIGRATION_SET)
    for name in schema.KNOWN_MIGRATIONS[:-1]:
        earlier(name=name)(getattr(schema, name))
    db = Database(sqlite3.connect(path))
    earlier.apply(db)
    db.close()


def _applied(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT name FROM agentrunner_migrations ORDER BY name").fetchall()
    return [name for (name,) in rows]


def _reader(url: str, *, grants: bool = True) -> tuple[str, str]:
    """A new login role that may only read (with ``grants``: the store's tables as they
    are now), and the URL that connects as it."""
    import psycopg

    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        schema_name = conn.execute("SELECT current_schema()").fetchone()
        assert schema_name is not None
        if grants:
            conn.execute(f"GRANT USAGE ON SCHEMA {schema_name[0]} TO {role}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema_name[0]} TO {role}")
    return role, url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    return code, json.loads(lines[-1]) if lines else None, err


def test_ls_leaves_a_postgres_store_one_migration_behind_unmigrated(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url)
    code, episodes, err = _cli_json(capsys, "ls", "--db", pg_url, "--json")
    assert (code, episodes) == (0, [])
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN[:-1])
    assert "agentrunner db migrate" in err


def test_run_refuses_a_postgres_store_one_migration_behind_naming_db_migrate(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url)
    code, error, _ = _cli_json(capsys, "run", "--db", pg_url, "--json")
    assert code == 1
    assert "`agentrunner db migrate" in error["error"]
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN[:-1])


def test_a_writing_command_that_makes_no_store_refuses_one_behind_too(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url)
    code, error, _ = _cli_json(capsys, "rm", "--db", pg_url, "--json", "01ABC")
    assert code == 1
    assert "agentrunner db migrate" in error["error"]


def test_the_library_refuses_to_write_to_a_postgres_store_behind(pg_url: str) -> None:
    _postgres_store_behind(pg_url)
    with pytest.raises(StoreSchemaError, match="agentrunner db migrate"):
        TraceStore(pg_url)
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN[:-1])


def test_a_read_only_role_lists_a_postgres_store_one_migration_behind(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url)
    _role, reader_url = _reader(pg_url)
    code, episodes, _ = _cli_json(capsys, "ls", "--db", reader_url, "--json")
    assert (code, episodes) == (0, [])


def test_db_migrate_applies_what_a_postgres_store_lacks(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url, missing=2)
    code, done, _ = _cli_json(capsys, "db", "migrate", "--db", pg_url, "--json")
    assert (code, done["applied"]) == (0, postgres_schema.KNOWN[-2:])
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN)
    TraceStore(pg_url).close()  # a writer opens it now


def test_db_migrate_refuses_a_postgres_store_of_a_newer_schema(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    TraceStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO agentrunner_migrations (name) VALUES ('p999_from_the_future')")
    code, error, _ = _cli_json(capsys, "db", "migrate", "--db", pg_url, "--json")
    assert code == 1
    assert "newer agentrunner" in error["error"]


def test_db_migrate_grant_read_lets_the_role_read_tables_later_migrations_add(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    _postgres_store_behind(pg_url)
    role, reader_url = _reader(pg_url, grants=False)
    code, done, _ = _cli_json(
        capsys, "db", "migrate", "--db", pg_url, "--grant-read", role, "--json"
    )
    assert (code, done["granted_read"]) == (0, role)
    with psycopg.connect(pg_url, autocommit=True) as owner:  # as a later migration would
        owner.execute("CREATE TABLE added_later (id INTEGER)")
    with psycopg.connect(reader_url) as reader:
        assert reader.execute("SELECT count(*) FROM added_later").fetchone() == (0,)
    code, episodes, _ = _cli_json(capsys, "ls", "--db", reader_url, "--json")
    assert (code, episodes) == (0, [])


def test_db_status_of_a_postgres_store_names_pending_migrations_sessions_and_sizes(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    _postgres_store_behind(pg_url)
    with psycopg.connect(pg_url, application_name="a-teammate"):
        code, status, _ = _cli_json(capsys, "db", "status", "--db", pg_url, "--json")
    assert code == 0
    assert status["pending"] == postgres_schema.KNOWN[-1:]
    assert status["newer"] == []
    assert "a-teammate" in [s["application"] for s in status["connected"]]
    assert status["tables"]["episodes"] > 0
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN[:-1])  # status only looks


def test_db_status_of_a_sqlite_store_says_who_is_connected_is_not_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.db"
    TraceStore(db).close()
    code, status, _ = _cli_json(capsys, "db", "status", "--db", str(db), "--json")
    assert code == 0
    assert (status["pending"], status["connected"]) == ([], None)
    assert status["tables"]["event_log"] > 0


def test_db_migrate_brings_a_sqlite_store_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.db"
    _sqlite_store_behind(db)
    code, status, _ = _cli_json(capsys, "db", "status", "--db", str(db), "--json")
    assert status["pending"] == schema.KNOWN_MIGRATIONS[-1:]
    code, done, _ = _cli_json(capsys, "db", "migrate", "--db", str(db), "--json")
    assert (code, done["applied"]) == (0, schema.KNOWN_MIGRATIONS[-1:])


def test_db_migrate_grant_read_on_a_sqlite_store_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "traces.db"
    TraceStore(db).close()
    code, error, _ = _cli_json(
        capsys, "db", "migrate", "--db", str(db), "--grant-read", "x", "--json"
    )
    assert code == 2
    assert "Postgres" in error["error"]


def test_a_reader_missing_a_table_of_a_later_schema_is_pointed_to_db_migrate(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    TraceStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as if a later migration made it
        conn.execute("DROP TABLE verifications")
    code, error, _ = _cli_json(capsys, "ls", "--db", pg_url, "--json")
    assert code == 1
    assert "`agentrunner db migrate`" in error["error"]


def test_db_migrate_grant_read_to_a_missing_role_changes_nothing(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _postgres_store_behind(pg_url)
    argv = ("db", "migrate", "--db", pg_url, "--grant-read", "no_such_role", "--json")
    code, error, _ = _cli_json(capsys, *argv)
    assert code == 1
    assert "create it first" in error["error"]
    assert _applied(pg_url) == sorted(postgres_schema.KNOWN[:-1])
