"""A new store is made from the one table definition (agentrunner/store/tables.py), and both
migration lists arrive at it: a new SQLite store, a new Postgres store, and a store of each
earlier schema of either, migrated up, hold its tables, columns (names, order, types as the
database spells them, nullability, defaults, uniqueness, foreign keys, checks), primary keys,
indexes, views and triggers; a store migrated from the first schema holds what a new one holds,
down to the text of its views, triggers and constraints.

One allowance, for old SQLite stores only (:data:`OLD_SQLITE_STORES_LACK`): their
``event_log`` was made by ``m005`` without the checks on ``attempt`` and ``turn``, and adding a
CHECK to a SQLite table means copying the table, the whole log, so they keep it without."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from agentrunner import TraceStore
from agentrunner.cli.main import main
from agentrunner.store import postgres_schema, schema
from agentrunner.store.dialect import POSTGRES, SQLITE, Dialect
from agentrunner.store.tables import TRIGGERS, VIEWS, Table, tables
from agentrunner.values.errors import StoreError, StoreSchemaError

Shape = dict[str, Any]
"""A database's tables, views and triggers, in the terms compared."""

OLD_SQLITE_STORES_LACK = {"event_log": {(None, "attempt>=1"), (None, "turn>=0")}}
"""The checks (as :func:`_check` reads them) a SQLite store of an earlier schema lacks."""


def _check(name: str | None, condition: str) -> tuple[str | None, str]:
    """A check as compared: its name when one was given, its condition without parentheses,
    spaces or Postgres' casts of a column to text (each database prints it its own way)."""
    return name, re.sub(r"[() ]|::text", "", condition)


def _checks(table: Table, dialect: Dialect) -> set[tuple[str | None, str]]:
    found = {_check(None, condition) for condition in table.checks}
    for c in table.columns:
        if c.json:
            found.add(_check(c.constraint, dialect.is_json(c.name)))
        if c.check:
            found.add(_check(c.constraint, c.check))
    return found


def _expected(dialect: Dialect) -> Shape:
    """The one definition as ``dialect``'s database should hold it."""
    shape: Shape = {"views": set(VIEWS), "triggers": set(TRIGGERS[dialect.name])}
    for name, table in tables(dialect).items():
        shape[name] = {
            "columns": {
                c.name: (
                    dialect.column_type(c.type),
                    c.not_null,
                    c.default,
                    c.identity if dialect == POSTGRES else None,
                )
                for c in table.columns
            },
            "column order": tuple(c.name for c in table.columns),
            "checks": _checks(table, dialect),
            "primary key": table.primary_key,
            "unique": {c.name for c in table.columns if c.unique},
            "references": {c.name: c.references for c in table.columns if c.references},
            "indexes": {i.name: (i.columns, i.unique, i.where) for i in table.indexes},
            "without rowid": table.without_rowid,
        }
    return shape


_SQLITE_CHECK = re.compile(r"(?:CONSTRAINT\s+(\w+)\s+)?CHECK\s*\(", re.IGNORECASE)


def _sqlite_checks(sql: str) -> set[tuple[str | None, str]]:
    """The checks of a ``CREATE TABLE`` statement (each condition up to its closing
    parenthesis)."""
    found = set()
    for match in _SQLITE_CHECK.finditer(sql):
        depth, end = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            end += 1
        found.add(_check(match.group(1), sql[match.end() : end - 1]))
    return found


def _spaced(sql: str) -> str:
    return " ".join(sql.split())


def _sqlite_shape(path: Path) -> Shape:
    db = Database(sqlite3.connect(path))
    master = list(db.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    shape: Shape = {
        "views": {name for kind, name, _ in master if kind == "view"},
        "triggers": {name for kind, name, _ in master if kind == "trigger"},
    }
    sql_of = {name: sql for _, name, sql in master}
    for name in db.table_names():
        if name == "_sqlite_migrations":
            continue
        table = db.table(name)
        indexes = table.indexes
        shape[name] = {
            "columns": {
                c.name: (c.type.upper(), bool(c.notnull), c.default_value, None)
                for c in table.columns
            },
            "column order": tuple(c.name for c in table.columns),
            "checks": _sqlite_checks(sql_of[name]),
            "primary key": tuple(
                c.name for c in sorted((c for c in table.columns if c.is_pk), key=lambda c: c.is_pk)
            ),
            "unique": {i.columns[0] for i in indexes if i.origin == "u" and len(i.columns) == 1},
            "references": {
                k.column: f"{k.other_table}.{k.other_column}" for k in table.foreign_keys
            },
            "indexes": {
                i.name: (
                    tuple(i.columns),
                    bool(i.unique),
                    sql_of[i.name].split(" WHERE ", 1)[1].strip() if i.partial else None,
                )
                for i in indexes
                if i.origin == "c"
            },
            "without rowid": "WITHOUT ROWID" in sql_of[name].upper(),
        }
    db.close()
    return shape


_PG_COLUMNS = """
    SELECT c.table_name, c.column_name, upper(c.data_type), c.is_nullable = 'NO',
        c.column_default, c.is_identity = 'YES'
    FROM information_schema.columns c JOIN information_schema.tables t
        ON t.table_schema = c.table_schema AND t.table_name = c.table_name
    WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
        AND c.table_name <> 'agentrunner_migrations'
    ORDER BY c.ordinal_position
"""
_PG_CHECKS = """
    SELECT t.relname, k.conname, pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
    WHERE k.contype = 'c' AND k.connamespace = current_schema()::regnamespace
"""
_PG_INDEXES = """
    SELECT t.relname, i.relname, x.indisunique, x.indisprimary,
        EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid),
        pg_get_expr(x.indpred, x.indrelid),
        ARRAY(SELECT a.attname FROM unnest(x.indkey) WITH ORDINALITY AS key(num, pos)
            JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = key.num
            ORDER BY key.pos)
    FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
    WHERE t.relnamespace = current_schema()::regnamespace
        AND t.relname <> 'agentrunner_migrations'
"""
_PG_REFERENCES = """
    SELECT t.relname, a.attname, o.relname || '.' || oa.attname
    FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
        JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
        JOIN pg_class o ON o.oid = k.confrelid
        JOIN pg_attribute oa ON oa.attrelid = k.confrelid AND oa.attnum = k.confkey[1]
    WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace
"""
_PG_TRIGGERS = """
    SELECT g.tgname FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
    WHERE t.relnamespace = current_schema()::regnamespace AND NOT g.tgisinternal
"""


def _postgres_shape(url: str) -> Shape:
    import psycopg

    with psycopg.connect(url) as conn:
        views = conn.execute(
            "SELECT table_name FROM information_schema.views WHERE table_schema = current_schema()"
        )
        shape: Shape = {
            "views": {name for (name,) in views},
            "triggers": {name for (name,) in conn.execute(_PG_TRIGGERS)},
        }
        for table, column, type_, not_null, default, identity in conn.execute(_PG_COLUMNS):
            entry = shape.setdefault(
                table,
                {
                    "columns": {},
                    "column order": (),
                    "checks": set(),
                    "unique": set(),
                    "references": {},
                    "indexes": {},
                    "without rowid": False,
                },
            )
            entry["columns"][column] = (type_, not_null, default, identity)
            entry["column order"] += (column,)
        for table, name, definition in conn.execute(_PG_CHECKS):
            named = not re.fullmatch(rf"{table}_(\w+_)?check\d*", name)
            shape[table]["checks"].add(_check(name if named else None, definition[6:]))
        for table, index, unique, primary, constraint, where, columns in conn.execute(_PG_INDEXES):
            entry = shape[table]
            if primary:
                entry["primary key"] = tuple(columns)
            elif constraint:
                entry["unique"].update(columns)
            else:
                entry["indexes"][index] = (tuple(columns), unique, where and where.strip("()"))
        for table, column, target in conn.execute(_PG_REFERENCES):
            shape[table]["references"][column] = target
    return shape


def _differences(held: Shape, defined: Shape) -> list[str]:
    """Each part where the database differs from the definition, named
    (``table.part.item: held != defined``)."""
    found = []
    for name in sorted(held.keys() | defined.keys()):
        if name not in held or name not in defined:
            found.append(f"{name}: {'only in the database' if name in held else 'missing'}")
        elif isinstance(defined[name], set):
            if held[name] != defined[name]:
                found.append(f"{name}: {sorted(held[name])} != {sorted(defined[name])}")
        else:
            for part, value in defined[name].items():
                found += _differing(f"{name}.{part}", held[name].get(part), value)
    return found


def _differing(where: str, held: Any, defined: Any) -> list[str]:
    if isinstance(held, dict) and isinstance(defined, dict):
        return [
            f"{where}.{key}: {held.get(key, 'missing')} != {defined.get(key, 'missing')}"
            for key in sorted(held.keys() | defined.keys())
            if held.get(key) != defined.get(key)
        ]
    return [] if held == defined else [f"{where}: {held} != {defined}"]


def _sqlite_store_of_schema(path: Path, applied: int) -> None:
    """A store file as an agentrunner whose last migration was the ``applied``-th made it."""
    earlier = Migrations(schema.MIGRATION_SET)
    for name in schema.KNOWN_MIGRATIONS[:applied]:
        earlier(name=name)(getattr(schema, name))
    db = Database(sqlite3.connect(path))
    earlier.apply(db)
    db.close()


def _postgres_store_of_schema(url: str, applied: int) -> None:
    """A database as an agentrunner whose last migration was the ``applied``-th made it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE agentrunner_migrations"
            " (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for name, statements in postgres_schema.MIGRATIONS[:applied]:
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO agentrunner_migrations (name) VALUES (%s)", (name,))


@pytest.mark.parametrize(
    "applied",
    range(len(schema.KNOWN_MIGRATIONS)),
    ids=["new", *(f"after_{name}" for name in schema.KNOWN_MIGRATIONS[:-1])],
)
def test_a_sqlite_store_new_or_of_an_earlier_schema_holds_the_one_definition(
    applied: int, tmp_path: Path
) -> None:
    path = tmp_path / "traces.db"
    if applied:
        _sqlite_store_of_schema(path, applied)
    TraceStore(path).close()  # opening it makes or migrates it
    expected = _expected(SQLITE)
    if applied:
        for table, lacking in OLD_SQLITE_STORES_LACK.items():
            expected[table]["checks"] -= lacking
    differences = _differences(_sqlite_shape(path), expected)
    assert not differences, "\n".join(differences)


def test_a_new_sqlite_store_holds_the_checks_old_ones_are_allowed_to_lack(
    tmp_path: Path,
) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    TraceStore(new).close()
    _sqlite_store_of_schema(old, 1)
    TraceStore(old).close()
    held_new, held_old = _sqlite_shape(new), _sqlite_shape(old)
    for table, lacking in OLD_SQLITE_STORES_LACK.items():
        assert held_new[table]["checks"] - held_old[table]["checks"] == lacking


def _sqlite_definitions(path: Path) -> dict[str, str]:
    """Every index, trigger and view of the store by name, as its SQL (spaces normalized)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type <> 'table' AND sql IS NOT NULL"
        ).fetchall()
    conn.close()
    return {name: " ".join(sql.split()) for name, sql in rows}


def test_a_sqlite_store_migrated_from_the_first_schema_holds_what_a_new_one_holds(
    tmp_path: Path,
) -> None:
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    TraceStore(new).close()
    _sqlite_store_of_schema(old, 1)
    TraceStore(old).close()
    held_new, held_old = _sqlite_shape(new), _sqlite_shape(old)
    for table, lacking in OLD_SQLITE_STORES_LACK.items():
        held_new[table]["checks"] -= lacking
    assert _differing("store", held_old, held_new) == []
    assert _sqlite_definitions(old) == _sqlite_definitions(new)


def _migrate_postgres(url: str) -> None:
    """What migrates a Postgres store (or makes a new one): ``agentrunner db migrate``."""
    assert main(["db", "migrate", "--db", url]) == 0


@pytest.mark.parametrize(
    "applied",
    range(len(postgres_schema.KNOWN)),
    ids=["new", *(f"after_{name}" for name in postgres_schema.KNOWN[:-1])],
)
def test_a_postgres_store_new_or_of_an_earlier_schema_holds_the_one_definition(
    applied: int, pg_url: str
) -> None:
    if applied:
        _postgres_store_of_schema(pg_url, applied)
    _migrate_postgres(pg_url)
    differences = _differences(_postgres_shape(pg_url), _expected(POSTGRES))
    assert not differences, "\n".join(differences)


_PG_DEFINITIONS = """
    SELECT 'view ' || c.relname, pg_get_viewdef(c.oid) FROM pg_class c
    WHERE c.relkind = 'v' AND c.relnamespace = current_schema()::regnamespace
    UNION ALL
    SELECT 'index ' || i.relname, pg_get_indexdef(i.oid) FROM pg_index x
        JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
    WHERE t.relnamespace = current_schema()::regnamespace
        AND t.relname <> 'agentrunner_migrations'
    UNION ALL
    SELECT 'constraint ' || t.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
    FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid
    WHERE k.connamespace = current_schema()::regnamespace
        AND t.relname <> 'agentrunner_migrations'
    UNION ALL
    SELECT 'trigger ' || g.tgname, pg_get_triggerdef(g.oid) FROM pg_trigger g
        JOIN pg_class t ON t.oid = g.tgrelid
    WHERE t.relnamespace = current_schema()::regnamespace AND NOT g.tgisinternal
    UNION ALL
    SELECT 'function ' || p.proname, p.prosrc FROM pg_proc p
    WHERE p.pronamespace = current_schema()::regnamespace
"""


def _postgres_definitions(url: str) -> dict[str, str]:
    """Every view, index, constraint, trigger and function of the store by kind and name, as
    Postgres prints it (names of the schema left out: each test has its own)."""
    import psycopg

    with psycopg.connect(url) as conn:
        schema_name = conn.execute("SELECT current_schema()").fetchone()
        rows = conn.execute(_PG_DEFINITIONS).fetchall()
    prefix = f"{schema_name[0] if schema_name else ''}."
    return {name: definition.replace(prefix, "") for name, definition in rows}


def test_a_postgres_store_migrated_from_the_first_schema_holds_what_a_new_one_holds(
    pg_server: Any,
) -> None:
    new, old = pg_server.schema_url(), pg_server.schema_url()
    TraceStore(new).close()
    _postgres_store_of_schema(old, 1)
    _migrate_postgres(old)
    assert _differing("store", _postgres_shape(old), _postgres_shape(new)) == []
    assert _postgres_definitions(old) == _postgres_definitions(new)


def _applied_in_postgres(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT name FROM agentrunner_migrations ORDER BY name").fetchall()
    return [name for (name,) in rows]


def test_a_new_postgres_store_records_every_migration_once(pg_url: str) -> None:
    TraceStore(pg_url).close()
    TraceStore(pg_url).close()
    assert _applied_in_postgres(pg_url) == sorted(postgres_schema.KNOWN)


def test_a_postgres_store_of_a_newer_schema_is_refused(pg_url: str) -> None:
    import psycopg

    TraceStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO agentrunner_migrations (name) VALUES ('p999_from_the_future')")
    with pytest.raises(StoreSchemaError, match="newer agentrunner"):
        TraceStore(pg_url)


def test_a_postgres_database_with_an_episodes_table_of_its_own_is_refused(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE episodes (id TEXT)")
    with pytest.raises(StoreError, match="agentrunner did not make"):
        TraceStore(pg_url)
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    assert tables == [("episodes",)]  # nothing made beside it
