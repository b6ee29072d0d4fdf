"""Rows the store did not write: a payload that is not JSON is refused at insert, and one that
exists (from another tool, or a store older than the check) is reported as corruption naming
the episode and seq, while the other episodes stay readable."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli
from rawstore import insert_event, next_seq

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import StoreCorruptError
from providers.scripted import ScriptedModel


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=120)


@pytest.fixture
def two_episodes(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "t.db"
    with TraceStore(db) as store:
        ids = []
        for task in ("demo-mean", "paginate-off-by-one"):
            with WorkspaceEnv() as env:
                rollout = run_agent_episode(
                    env=env, task_id=task, model_fn=ScriptedModel("demo", pace=0), store=store
                )
            ids.append(rollout.episode_id)
    return db, ids[0], ids[1]


def _insert_raw(db: Path, episode: str, payload: str, *, keep_trigger: bool) -> None:
    with sqlite3.connect(db) as conn:
        if not keep_trigger:  # as another tool, or a store older than the check, would
            conn.execute("PRAGMA ignore_check_constraints = ON")
        seq = next_seq(conn, episode)
        insert_event(conn, episode, seq, "tool.result", payload, turn=9)


def test_a_payload_that_is_not_json_is_refused_at_insert(
    two_episodes: tuple[Path, str, str],
) -> None:
    db, bad, _ = two_episodes
    with pytest.raises(sqlite3.IntegrityError, match="payload_must_be_json_text"):
        _insert_raw(db, bad, "{not json", keep_trigger=True)


def test_ls_lists_the_other_episodes_and_names_the_corrupt_one_and_its_seq(
    two_episodes: tuple[Path, str, str],
) -> None:
    db, bad, good = two_episodes
    _insert_raw(db, bad, "{not json", keep_trigger=False)
    proc = cli("ls", "--db", str(db), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    listed = [e["episode_id"] for e in json.loads(proc.stdout.strip().splitlines()[-1])]
    assert listed == [good]
    assert f"episode {bad} is corrupt" in proc.stderr and "is not JSON" in proc.stderr


def test_show_of_the_corrupt_episode_is_a_clear_error_naming_the_seq(
    two_episodes: tuple[Path, str, str],
) -> None:
    db, bad, _ = two_episodes
    _insert_raw(db, bad, "{not json", keep_trigger=False)
    with sqlite3.connect(db) as conn:
        seq = next_seq(conn, bad) - 1
    proc = cli("show", bad, "--db", str(db))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"event seq {seq}" in proc.stderr


def test_show_of_another_episode_still_works(two_episodes: tuple[Path, str, str]) -> None:
    db, bad, good = two_episodes
    _insert_raw(db, bad, "{not json", keep_trigger=False)
    assert cli("show", good, "--db", str(db)).returncode == 0


def test_listing_without_a_place_for_problems_raises_store_corruption(
    two_episodes: tuple[Path, str, str],
) -> None:
    db, bad, _ = two_episodes
    _insert_raw(db, bad, "[1, 2", keep_trigger=False)
    with TraceStore(db) as store, pytest.raises(StoreCorruptError, match=bad):
        store.list_episodes()
