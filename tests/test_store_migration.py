"""A store of the previous layout (the log in a plain ``events`` table, migrations m001-m004)
opens, is converted in place, and reads exactly as it read; a process of the previous version
still writing to it is refused with a clear message, and nothing is damaged."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli
from sqlite_utils import Database

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.store import schema
from providers.scripted import ScriptedModel

OLD_MIGRATIONS = (
    schema.m001_initial,
    schema.m002_groups_batches_verifications,
    schema.m003_workspace_snapshots,
    schema.m004_json_payloads,
)
COPIED_TABLES = ("messages", "tools", "blobs", "snapshots", "verifications", "control")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def _old_store(path: Path) -> None:
    """An empty store of the previous layout, made from its own DDL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    db = Database(conn)
    db.execute(
        'CREATE TABLE "_sqlite_migrations" (id INTEGER PRIMARY KEY, migration_set TEXT,'
        " name TEXT, applied_at TEXT)"
    )
    for migration in OLD_MIGRATIONS:
        migration(db)
        db.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('agentrunner', ?, '2026-11-01 00:00:00+00:00')",
            [migration.__name__],
        )
    conn.close()


def _copy_into_old(source: Path, dest: Path) -> None:
    """Every row of ``source`` written into the previous layout at ``dest``."""
    src = sqlite3.connect(source)
    dst = sqlite3.connect(dest, isolation_level=None)
    dst.execute("BEGIN")
    for row in src.execute(
        "SELECT id, parent_episode_id, fork_seq, task_id, seed, created_at, env, model"
        " FROM episodes ORDER BY key"
    ):
        dst.execute("INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
    for row in src.execute("SELECT * FROM events ORDER BY episode_id, seq"):
        dst.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    for table in COPIED_TABLES:  # the columns the previous layout has
        columns = ", ".join(r[1] for r in dst.execute(f"PRAGMA table_info({table})"))
        rows = src.execute(f"SELECT {columns} FROM {table}").fetchall()
        if rows:
            marks = ", ".join("?" for _ in rows[0])
            dst.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
    dst.execute("COMMIT")
    src.close()
    dst.close()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """A store made by this version (a run, a fork of it, a fork of the fork), and the same
    rows in a store of the previous layout."""
    root = tmp_path_factory.mktemp("migration")
    new, old = root / "new.db", root / "old.db"
    with TraceStore(new) as store, WorkspaceEnv() as env:
        model = ScriptedModel("demo", pace=0)
        ep = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
        (child,) = fork_episode(store, ep.episode_id, turn=5)
        resume_episode(store, child, model_fn=model)
        (grandchild,) = fork_episode(store, child, turn=3)
        resume_episode(store, grandchild, model_fn=model)
    _old_store(old)
    _copy_into_old(new, old)
    return new, old, [ep.episode_id, child, grandchild]


def test_the_old_store_is_of_the_previous_layout(stores: tuple[Path, Path, list[str]]) -> None:
    _, old, _ = stores
    with sqlite3.connect(old) as conn:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master WHERE name = 'events'"))
    assert kinds == {"events": "table"}


@pytest.fixture(scope="module")
def migrated(stores: tuple[Path, Path, list[str]]) -> Path:
    _, old, _ = stores
    TraceStore(old).close()  # opening it migrates it
    return old


@pytest.mark.parametrize(
    "command",
    [
        ["ls", "--json"],
        ["show", "{ep}", "--events"],
        ["show", "{fork}", "--events", "-v"],
        ["export", "--format", "sft"],
        ["export", "--format", "dpo"],
        ["diff", "{fork}"],
    ],
)
def test_every_command_reads_the_migrated_store_as_the_original(
    stores: tuple[Path, Path, list[str]], migrated: Path, command: list[str]
) -> None:
    new, _, ids = stores
    args = [a.format(ep=ids[0], fork=ids[2]) for a in command]
    before = cli(*args, "--db", str(new))
    after = cli(*args, "--db", str(migrated))
    assert before.returncode == 0, before.stderr
    assert after.returncode == before.returncode
    assert after.stdout == before.stdout


def test_the_migrated_log_keeps_every_row_byte_for_byte(
    stores: tuple[Path, Path, list[str]], migrated: Path
) -> None:
    new, _, _ = stores
    query = "SELECT * FROM events ORDER BY episode_id, seq"
    with sqlite3.connect(new) as a, sqlite3.connect(migrated) as b:
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        assert b.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_process_of_the_previous_version_is_refused_clearly(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    with TraceStore(source) as store, WorkspaceEnv() as env:
        ep = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0), store=store
        ).episode_id
    old = tmp_path / "old.db"
    _old_store(old)
    _copy_into_old(source, old)
    writer = sqlite3.connect(old, isolation_level=None)  # an older runner, writing the log
    writer.execute("SELECT count(*) FROM events").fetchone()
    TraceStore(old).close()  # a newer one opens the store meanwhile and migrates it
    payload = json.dumps({"where": "between_turns", "reason": "late"})
    with pytest.raises(sqlite3.IntegrityError, match="upgraded by a newer agentrunner"):
        writer.execute(
            "INSERT INTO events (episode_id, seq, attempt, turn, kind, ts, payload)"
            " VALUES (?, 999, 1, 0, 'cancel', '2026-01-01T00:00:00+00:00', ?)",
            (ep, payload),
        )
    writer.close()
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT max(seq) FROM events").fetchone()[0] < 999
