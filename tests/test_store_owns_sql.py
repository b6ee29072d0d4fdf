"""The store is the only place that holds SQL (design §2): no module of ``agentrunner/`` or
``providers/`` outside ``agentrunner/store/`` writes a query or reaches for the store's
connection; readers use the store's named methods."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STORE = "agentrunner/store/"
TASK_DATA = "agentrunner/envs/data/"  # the bundled tasks' own repositories, not agentrunner
SQL = re.compile(
    r"\bSELECT\s.*\bFROM\b|\bSELECT\s+(\d|\*|count\(|max\(|min\()"
    r"|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bREPLACE\s+INTO\b|\bUPDATE\s+\w+\s+SET\b"
    r"|\bDELETE\s+FROM\b|\bCREATE\s+(TEMP\s+|UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER)\b"
    r"|\bDROP\s+(TABLE|INDEX|VIEW|TRIGGER)\b|\bALTER\s+TABLE\b|\bPRAGMA\s+\w+"
    r"|\bWITH\s+RECURSIVE\b|\bjson_extract\(",
    re.IGNORECASE | re.DOTALL,
)
TRANSACTION = re.compile(r"^\s*(BEGIN(\s+(IMMEDIATE|EXCLUSIVE|DEFERRED))?|COMMIT|ROLLBACK)\s*$")
"""Transaction statements, in capitals only: "commit" alone is also a git word."""
CONNECTION_NAMES = {"conn", "_conn", "_conns", "raw_connection"}
ALLOWED = {
    # a hint printed for the user to run by hand on a damaged store, not a query of ours
    ("agentrunner/cli/main.py", "PRAGMA integrity_check"),
}


def _modules() -> list[Path]:
    paths = [*ROOT.glob("agentrunner/**/*.py"), *ROOT.glob("providers/**/*.py")]
    return sorted(
        p for p in paths if not p.relative_to(ROOT).as_posix().startswith((STORE, TASK_DATA))
    )


def _docstrings(tree: ast.Module) -> set[int]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, owners)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def looks_like_sql(text: str) -> bool:
    return bool(SQL.search(text) or TRANSACTION.match(text))


def sql_strings(path: Path) -> list[str]:
    """``path:line: text`` of each string literal (f-string parts included, docstrings
    left out) that reads as SQL."""
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if id(node) in docs or not looks_like_sql(node.value):
            continue
        if any(rel == where and allowed in node.value for where, allowed in ALLOWED):
            continue
        found.append(f"{rel}:{node.lineno}: {node.value[:80]!r}")
    return found


def connection_uses(path: Path) -> list[str]:
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{rel}:{node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in CONNECTION_NAMES
    ]


def test_the_scan_covers_the_readers() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _modules()}
    assert {"agentrunner/tui/data.py", "agentrunner/export/sources.py"} <= names
    assert "providers/scripted.py" in names
    assert not any(n.startswith(STORE) for n in names)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT seq FROM events WHERE episode_id = ?",
        "select count(*) from episodes",
        "INSERT OR IGNORE INTO messages VALUES (?, ?, ?)",
        "UPDATE control SET heartbeat = ?",
        "DELETE FROM verifications WHERE episode_id = ?",
        "CREATE INDEX x ON events(kind)",
        "PRAGMA journal_mode = WAL",
        "WITH RECURSIVE t(id) AS (SELECT 1)",
        "BEGIN IMMEDIATE",
        "COMMIT",
    ],
)
def test_the_scan_recognises_sql(text: str) -> None:
    assert looks_like_sql(text)


@pytest.mark.parametrize(
    "text",
    [
        "select an event",
        "Create a fork of EP at model turn K",
        "create N sibling forks (default 1)",
        "commit",
        "Delete an episode that no fork depends on",
    ],
)
def test_the_scan_lets_prose_be(text: str) -> None:
    assert not looks_like_sql(text)


def test_no_module_outside_the_store_holds_sql() -> None:
    found = [hit for path in _modules() for hit in sql_strings(path)]
    assert found == []


def test_no_module_outside_the_store_touches_its_connection() -> None:
    found = [hit for path in _modules() for hit in connection_uses(path)]
    assert found == []
