"""Both migration lists arrive at the one table definition (agentrunner/store/tables.py): a new
SQLite store, a new Postgres store, and a store of each earlier schema of either, migrated up,
hold its tables, columns (names, types as the database spells them, nullability, defaults,
uniqueness, foreign keys), primary keys, indexes, views and triggers."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from agentrunner import TraceStore
from agentrunner.store import postgres_schema, schema
from agentrunner.store.dialect import POSTGRES, SQLITE, Dialect
from agentrunner.store.tables import TRIGGERS, VIEWS, tables

Shape = dict[str, Any]
"""A database's tables, views and triggers, in the terms compared."""


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
            "primary key": table.primary_key,
            "unique": {c.name for c in table.columns if c.unique},
            "references": {c.name: c.references for c in table.columns if c.references},
            "indexes": {i.name: (i.columns, i.unique, i.where) for i in table.indexes},
            "without rowid": table.without_rowid,
        }
    return shape


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
                    "unique": set(),
                    "references": {},
                    "indexes": {},
                    "without rowid": False,
                },
            )
            entry["columns"][column] = (type_, not_null, default, identity)
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
    differences = _differences(_sqlite_shape(path), _expected(SQLITE))
    assert not differences, "\n".join(differences)


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
    TraceStore(pg_url).close()  # opening it makes or migrates it
    differences = _differences(_postgres_shape(pg_url), _expected(POSTGRES))
    assert not differences, "\n".join(differences)
