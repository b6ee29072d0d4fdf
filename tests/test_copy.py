"""``agentrunner copy``: episodes between a SQLite file and a real Postgres database, both
ways, idempotent, lineage and side rows kept; the ``events`` view reads alike on both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.store.transfer import copy_episode, lineage_order
from agentrunner.values.events import MessageEvent
from providers.scripted import ScriptedModel


def _rows(store: TraceStore, episode_id: str) -> list[tuple[object, ...]]:
    return [
        tuple(r)
        for r in store.raw_connection()
        .execute(
            "SELECT episode_id, seq, attempt, turn, kind, ts, payload FROM events"
            " WHERE episode_id = ? ORDER BY seq",
            (episode_id,),
        )
        .fetchall()
    ]


@pytest.fixture
def local(tmp_path: Path) -> tuple[str, str, str]:
    """A SQLite store with an episode, a fork of it and a verification; their ids."""
    path = str(tmp_path / "local.db")
    with TraceStore(path) as store, WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        model = ScriptedModel("demo", pace=0)
        root = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
        (fork,) = fork_episode(store, root.episode_id, turn=3)
        resume_episode(store, fork, model_fn=model)
        store.add_verification(root.episode_id, "rule:reward>=1", 1.0, True, {"why": "ok"})
    return path, root.episode_id, fork


def _copy_all(src: str, dst: str) -> list[str]:
    with TraceStore(src) as a, TraceStore(dst) as b:
        return [copy_episode(a, b, e).outcome for e in lineage_order(a, None)]


def test_episodes_go_to_postgres_and_back_row_for_row(
    local: tuple[str, str, str], pg_url: str, tmp_path: Path
) -> None:
    path, root, fork = local
    assert _copy_all(path, pg_url) == ["new", "new"]
    back = str(tmp_path / "back.db")
    assert _copy_all(pg_url, back) == ["new", "new"]
    with TraceStore(path) as a, TraceStore(pg_url) as b, TraceStore(back) as c:
        for episode_id in (root, fork):
            assert _rows(a, episode_id) == _rows(b, episode_id) == _rows(c, episode_id)
            for store in (b, c):
                summary = store.episode(episode_id)
                assert summary.status == a.episode(episode_id).status
                assert summary.parent_episode_id == a.episode(episode_id).parent_episode_id
                assert store.reconstruct_request(episode_id, 4) == a.reconstruct_request(
                    episode_id, 4
                )
        assert [v.verifier for v in b.verifications(root)] == ["rule:reward>=1"]


def test_copying_again_writes_nothing_and_a_grown_episode_gets_only_its_new_events(
    local: tuple[str, str, str], pg_url: str
) -> None:
    path, root, _ = local
    _copy_all(path, pg_url)
    assert _copy_all(path, pg_url) == ["unchanged", "unchanged"]
    with TraceStore(path) as store:
        with store.lease(root):
            store.writer(root).append(8, MessageEvent(role="user", message_hash="h"))
        grown = len(_rows(store, root))
    with TraceStore(path) as a, TraceStore(pg_url) as b:
        done = copy_episode(a, b, root)
        assert (done.outcome, done.events) == ("grew", 1)
        assert len(_rows(b, root)) == grown
        assert b.verifications(root) and len(b.verifications(root)) == 1


def test_an_episode_written_on_both_sides_is_refused_and_left_alone(
    local: tuple[str, str, str], pg_url: str
) -> None:
    path, root, _ = local
    _copy_all(path, pg_url)
    for location, role in ((path, "user"), (pg_url, "assistant")):
        with TraceStore(location) as store, store.lease(root):
            store.writer(root).append(8, MessageEvent(role=role, message_hash="h"))
    result = run_cli("copy", "--from", path, "--to", pg_url, root, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout.splitlines()[-1])
    assert "differs" in report["failed"][0]["error"]
    with TraceStore(pg_url) as b:
        assert _rows(b, root)[-1][4] == "message"
        assert json.loads(str(_rows(b, root)[-1][6]))["role"] == "assistant"


def test_a_fork_is_copied_with_its_ancestors(local: tuple[str, str, str], tmp_path: Path) -> None:
    path, root, fork = local
    other = str(tmp_path / "other.db")
    result = run_cli("copy", "--from", path, "--to", other, fork[:10])
    assert result.returncode == 0, result.stderr
    with TraceStore(other) as store:
        assert store.episode_ids() == sorted([root, fork])
        assert store.episode(fork).parent_episode_id == root


def test_copy_explains_itself_and_needs_a_destination() -> None:
    result = run_cli("copy", "--help")
    assert result.returncode == 0 and "Postgres" in result.stdout and "--to" in result.stdout
    assert run_cli("copy").returncode == 2


def test_an_episode_running_in_the_source_is_not_copied(
    local: tuple[str, str, str], tmp_path: Path
) -> None:
    path, root, fork = local
    other = str(tmp_path / "other.db")
    with TraceStore(path) as store, store.lease(fork):
        result = run_cli("copy", "--from", path, "--to", other, "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout.splitlines()[-1])
    assert [c["episode_id"] for c in report["episodes"]] == [root]
    assert "is running in" in report["failed"][0]["error"]
    with TraceStore(other) as store:
        assert store.episode_ids() == [root]
        assert store.episode(root).status == "completed"  # the copy's lease was let go


def test_the_same_batch_run_in_two_stores_is_not_merged_silently(tmp_path: Path) -> None:
    """A batch holds one episode per (task, seed): the second store's episode of a pair the
    destination's batch already has is refused, and the rest is copied."""
    first, second, merged = (str(tmp_path / n) for n in ("a.db", "b.db", "merged.db"))
    batch = ("batch", "--task", "demo-mean", "--seeds", "0-1")
    for db in (first, second):
        assert run_cli(*batch, "--db", db).returncode == 0
    assert run_cli("copy", "--from", first, "--to", merged).returncode == 0
    refused = run_cli("copy", "--from", second, "--to", merged, "--json")
    assert refused.returncode == 1
    failed = json.loads(refused.stdout.splitlines()[-1])["failed"]
    assert len(failed) == 2
    assert all("already has episode" in f["error"] for f in failed)
    assert all("run in both stores" in f["error"] for f in failed)
    with TraceStore(merged) as store:
        assert len(store.episode_ids()) == 2  # the first store's two, nothing of the second's
        (batch_id,) = {b.batch_id for b in store.list_batches()}
        with TraceStore(first) as original:
            assert store.batch_members(batch_id) == original.batch_members(batch_id)


def test_a_missing_source_is_named_as_the_source_and_nothing_is_made(tmp_path: Path) -> None:
    missing, target = tmp_path / "nope.db", tmp_path / "target.db"
    result = run_cli("copy", "--from", str(missing), "--to", str(target))
    assert result.returncode == 2
    assert f"no trace store at {missing} (--from)" in result.stderr.replace("\n", "")
    assert "default" not in result.stderr and not target.exists()
