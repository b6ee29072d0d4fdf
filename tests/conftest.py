"""Shared fixtures: a real SQLite store file in a temp dir, the workspace env, scripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openenv_server
import pg
import pytest
import real_clients
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Builds the real OpenEnv server's venv once, before any test runs, when an ``openenv``
    test is selected: the build (minutes on a loaded machine) is bounded by its own limit, not
    by the first test's timeout; a build that fails makes those tests skip with the reason."""
    if any(item.get_closest_marker("openenv") for item in items):
        openenv_server.prepare()


def pytest_collection_finish(session: pytest.Session) -> None:
    """The Python agents' venv (aider, mini-swe-agent, the OpenAI Agents SDK) likewise, once,
    when a test of a module marked ``NEEDS_AGENTS_VENV`` is selected (``-m`` already applied)."""
    if any(getattr(getattr(i, "module", None), "NEEDS_AGENTS_VENV", False) for i in session.items):
        real_clients.prepare_agents()


@pytest.fixture(autouse=True)
def _no_pacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")


@pytest.fixture(autouse=True)
def _own_data_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """An empty XDG data folder per test (inherited by the CLI subprocesses a test starts):
    the per-user default store lands there, never in the real home folder."""
    data = tmp_path_factory.mktemp("xdg-data")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    return data


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A real Postgres server for the session (skipped, with the reason, where none can run)."""
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A ``postgresql://`` URL of an empty store of this test's own (a fresh schema)."""
    return pg_server.schema_url()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "traces" / "traces.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[TraceStore]:
    s = TraceStore(db_path)
    yield s
    s.close()


@pytest.fixture
def env(tmp_path: Path) -> Iterator[WorkspaceEnv]:
    e = WorkspaceEnv(snapshot_dir=tmp_path / "snapshots")
    yield e
    e.close()


@pytest.fixture
def script(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a one-episode script (matching any prompt) and return a ScriptedModel for it."""

    def make(turns: list[dict[str, Any]], pace: float = 0.0) -> ScriptedModel:
        path = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
        path.write_text(json.dumps({"name": "t", "episodes": [{"match": "", "turns": turns}]}))
        return ScriptedModel(str(path), pace=pace)

    return make
