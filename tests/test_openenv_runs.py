"""Episodes through ``agentrunner run --env URL`` and the runner against OpenEnv servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openenv import fake_openenv, observation_reply
from openenv_server import running_openenv_server

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.openenv_client import OpenEnvEnv
from providers.scripted import ScriptedModel

ECHO_TURNS = [
    {
        "reasoning": "Say hello first.",
        "tool_calls": [{"name": "echo", "arguments": {"message": "hi"}}],
    },
    {"tool_calls": [{"name": "echo", "arguments": {"message": "hello there"}}]},
    {
        "text": "One more, longer.",
        "tool_calls": [{"name": "echo", "arguments": {"message": "x" * 12}}],
    },
]


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "echo.json"
    path.write_text(json.dumps({"episodes": [{"match": "", "turns": ECHO_TURNS}]}))
    return path


@pytest.mark.openenv
def test_run_records_the_real_servers_observations(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with running_openenv_server(tmp_path) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentrunner.cli.main",
                "run",
                "--env",
                server.url,
                "--task",
                "echo",
                "--model",
                f"scripted:{_script(tmp_path)}",
                "--max-turns",
                "3",
                "--db",
                str(db),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"},
        )
    result = json.loads(proc.stdout.splitlines()[-1])
    with TraceStore(db) as store:
        results = [e.payload for e in store.events(result["episode_id"], kinds=["tool.result"])]
    assert proc.returncode == 0 and result["stop_reason"] == "max_turns"
    assert [r["observation"].splitlines()[0] for r in results] == [
        "echoed_message: hi",
        "echoed_message: hello there",
        "echoed_message: xxxxxxxxxxxx",
    ]
    assert [r["reward"] for r in results] == [pytest.approx(0.2), pytest.approx(1.0), 1.0]


def test_server_dying_mid_episode_leaves_an_interrupted_episode_with_the_error(
    tmp_path: Path,
) -> None:
    replies = [
        observation_reply({"echoed_message": "ready"}),
        observation_reply({"echoed_message": "hi"}),
        None,
    ]
    with TraceStore(tmp_path / "t.db") as store, fake_openenv(replies) as fake:
        env = OpenEnvEnv(fake.url, timeout=5)
        rollout = run_agent_episode(
            env=env,
            task_id="echo",
            model_fn=ScriptedModel(str(_script(tmp_path)), pace=0),
            store=store,
            max_turns=3,
        )
        env.close()
        kinds = [e.kind for e in store.iter_events(rollout.episode_id)]
        error = store.events(rollout.episode_id, kinds=["error"])[0].payload
        summary = store.episode(rollout.episode_id)
    assert summary.status == "interrupted" and kinds[-2:] == ["tool.call", "error"]
    assert error["type"] == "EnvironmentFailure" and "closed the connection" in error["message"]
