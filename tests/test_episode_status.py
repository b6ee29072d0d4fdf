"""One status rule: ``ls`` (the CLI) and the ``episode_summary`` view give every episode the
same status, on SQLite and Postgres: completed, cancelled, failed, running, interrupted, a
fork made without ``--run`` (pending until it runs) and an imported session (completed).
A store made before the rule reached the view is migrated to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import last_json, run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.store import postgres_schema, schema
from agentrunner.values.errors import BadRequestError
from agentrunner.values.events import EpisodeStart
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentTurn
from providers.scripted import ScriptedModel

BACKENDS = ["sqlite", "postgres"]
STATUS_OF = {"imported": "completed"}
"""The status of each kind of episode made below that is not named after it."""


def _location(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "traces.db")


def _refused(context: AgentContext) -> AgentTurn:
    raise BadRequestError("the provider refuses this request")


def _episodes_of_every_kind(store: TraceStore) -> dict[str, str]:
    """An episode of each kind, by kind (its status, or see :data:`STATUS_OF`); the running
    one is held by this process (its lease claimed, never released)."""
    made: dict[str, str] = {}
    model = ScriptedModel("demo", pace=0)
    with WorkspaceEnv() as env:
        done = run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
        made["completed"] = done.episode_id
    with WorkspaceEnv() as env:
        stopped = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store, cancel_check=lambda: True
        )
        made["cancelled"] = stopped.episode_id
    with WorkspaceEnv() as env:
        failed = run_agent_episode(env=env, task_id="demo-mean", model_fn=_refused, store=store)
        made["failed"] = failed.episode_id
    parent = store.episode(done.episode_id)

    def started(claim: bool) -> str:
        start = EpisodeStart(
            task_id="demo-mean", seed=0, env=parent.env, model=parent.model, config={}, version="t"
        )
        return store.create_episode(
            task_id="demo-mean",
            seed=0,
            env=parent.env,
            model=parent.model,
            claim=claim,
            first_event=(0, start),
        )

    made["running"] = started(claim=True)
    interrupted = started(claim=True)
    store.release_writer(interrupted)  # its writer gone without an end
    made["interrupted"] = interrupted
    (made["pending"],) = fork_episode(store, done.episode_id, turn=3, message="look again")
    made["imported"] = _imported(store, parent.model)
    return made


def _imported(store: TraceStore, model: dict[str, Any]) -> str:
    """An imported session as an importer leaves it: created claimed, events, released."""
    env = {"kind": "import", "format": "test", "source": "session.jsonl"}
    start = EpisodeStart(
        task_id="import:session", seed=0, env=env, model=model, config={}, version="t"
    )
    episode = store.create_episode(
        task_id="import:session", seed=0, env=env, model=model, claim=True, first_event=(0, start)
    )
    store.release_writer(episode)
    return episode


def _view(store: TraceStore) -> dict[str, str]:
    rows = store._conn.execute("SELECT episode_id, status FROM episode_summary").fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_summary_view_and_ls_give_every_episode_the_same_status(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = _location(backend, tmp_path, request)
    with TraceStore(location) as store:
        made = _episodes_of_every_kind(store)
        listed = last_json(run_cli("ls", "--db", location, "--json").stdout)
        store.heartbeat(made["running"])  # fresh, as a live writer's heartbeat thread keeps it
        view = _view(store)
    by_cli = {e["episode_id"]: e["status"] for e in listed}
    expected = {episode: STATUS_OF.get(kind, kind) for kind, episode in made.items()}
    assert by_cli == expected
    assert view == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_made_before_the_rule_reached_the_view_is_migrated_to_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = _location(backend, tmp_path, request)
    with TraceStore(location) as store:
        imported = _imported(store, {"spec": "scripted:demo"})
        _back_to_the_old_view(store, backend)
        assert _view(store) == {imported: "running or interrupted"}
    if backend == "postgres":  # a shared store is migrated by `db migrate` alone
        assert run_cli("db", "migrate", "--db", location).returncode == 0
    with TraceStore(location) as store:  # a file is migrated as it is opened
        assert _view(store) == {imported: "completed"}


def _back_to_the_old_view(store: TraceStore, backend: str) -> None:
    """The view and migration record a store had before ``m010``/``p003``."""
    if backend == "postgres":
        (old,) = [s for s in postgres_schema.P001_INITIAL if "VIEW episode_summary" in s]
        forget = "DELETE FROM agentrunner_migrations WHERE name = 'p003_one_status_rule'"
    else:
        old = schema._VIEWS[0]
        forget = "DELETE FROM _sqlite_migrations WHERE name = 'm010_one_status_rule'"
    store._conn.execute("DROP VIEW episode_summary")
    store._conn.execute(old)
    store._conn.execute(forget)


def test_a_fork_made_without_run_is_pending_until_resume_runs_it(tmp_path: Path) -> None:
    db = str(tmp_path / "traces.db")
    parent = last_json(run_cli("run", "--db", db, "--json").stdout)["episode_id"]
    made = last_json(run_cli("fork", parent, "--turn", "3", "--db", db, "--json").stdout)
    (fork,) = made["forks"]
    listed = last_json(run_cli("ls", "--db", db, "--json").stdout)
    shown = run_cli("show", fork, "--db", db)
    assert {e["episode_id"]: e["status"] for e in listed}[fork] == "pending"
    assert shown.returncode == 0 and "pending" in shown.stdout
    resumed = last_json(run_cli("resume", fork, "--db", db, "--json").stdout)
    assert (resumed["episode_id"], resumed["status"]) == (fork, "completed")


def test_resume_all_runs_a_pending_fork(tmp_path: Path) -> None:
    db = str(tmp_path / "traces.db")
    parent = last_json(run_cli("run", "--db", db, "--json").stdout)["episode_id"]
    (fork,) = last_json(run_cli("fork", parent, "--turn", "3", "--db", db, "--json").stdout)[
        "forks"
    ]
    done = last_json(run_cli("resume", "--all", "--db", db, "--json").stdout)
    assert [(r["episode_id"], r["status"]) for r in done["resumed"]] == [(fork, "completed")]
    assert json.dumps(done["not_resumable"]) == "[]"
