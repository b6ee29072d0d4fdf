"""Choosing the sandbox: bwrap when it works, process with a warning that tells the truth,
a clear error when bwrap is asked for and cannot run (also when resuming a bwrap episode)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.jail import PROCESS_MODE_WARNING, SandboxConfig, bwrap_problem
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

NO_BWRAP = {"PATH": "/nonexistent"}  # bwrap is looked up on PATH; nothing else here needs it
needs_bwrap = pytest.mark.skipif(bwrap_problem() is not None, reason=f"{bwrap_problem()}")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"AGENTRUNNER_SANDBOX": None, **(env or {})})


def sandbox_of(db: Path) -> dict:  # type: ignore[type-arg]
    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
        start = store.events(episode.episode_id, kinds=["episode.start"])[0].payload
    sandbox = start["env"]["sandbox"]
    assert isinstance(sandbox, dict)
    return sandbox


def test_sandbox_bwrap_where_it_cannot_run_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = cli("run", "--sandbox", "bwrap", "--db", str(db), env=NO_BWRAP)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--sandbox bwrap cannot be used: bwrap is not installed" in proc.stderr
    assert not db.exists()


def test_auto_without_bwrap_runs_in_process_mode_and_warns_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = cli("run", "--db", str(db), "--json", env=NO_BWRAP)
    assert proc.returncode == 0, proc.stderr
    warning = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1
    assert "bubblewrap is not available" in warning[0] and "the trace store" in warning[0]
    assert sandbox_of(db)["mode"] == "process"


def test_the_process_mode_warning_names_what_it_does_not_protect() -> None:
    text = PROCESS_MODE_WARNING.format(reason="x")
    for exposed in ("trace store", "$HOME", "runner's", "other processes", "network", "setsid"):
        assert exposed in text


@needs_bwrap
def test_auto_uses_bwrap_where_it_works_and_records_its_limits(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = cli("run", "--db", str(db), "--processes", "64", "--memory", "1024", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    sandbox = sandbox_of(db)
    assert sandbox["mode"] == "bwrap" and sandbox["network"] is False
    assert sandbox["limits"]["processes"] == 64 and sandbox["limits"]["memory_mb"] == 1024


@needs_bwrap
def test_resuming_a_bwrap_episode_without_bwrap_says_how_to_continue(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    calls = [0]

    def cancel() -> bool:
        calls[0] += 1
        return calls[0] > 40

    with TraceStore(db) as store, WorkspaceEnv(sandbox=SandboxConfig(mode="bwrap")) as env:
        episode = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=ScriptedModel("demo", pace=0),
            store=store,
            cancel_check=cancel,
        ).episode_id
    refused = cli("resume", episode, "--db", str(db), env=NO_BWRAP)
    assert refused.returncode == 2
    assert "AGENTRUNNER_SANDBOX=process" in refused.stderr
    resumed = cli(
        "resume",
        episode,
        "--db",
        str(db),
        "--json",
        env={**NO_BWRAP, "AGENTRUNNER_SANDBOX": "process"},
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["status"] == "completed"
