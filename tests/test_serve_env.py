"""``serve-env`` driven by the real ``openenv`` client library (over WebSocket and over HTTP)
and by agentrunner's own OpenEnv client: the bundled task's fix earns reward 1, no fix 0, and
every served episode records the same steps, observations and rewards as a native run of the
same actions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from serve_support import (
    RUN_TESTS,
    SUBMIT,
    TASK,
    WRITE_FIX,
    ServeEnv,
    run_openenv_script,
    serve_env,
    served_episodes,
    tool_steps,
)

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.openenv_client import render_observation
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.openenv

OVER_WEBSOCKET = """
import json, sys
from openenv.core.generic_client import GenericEnvClient
url, task, actions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {"steps": []}
with GenericEnvClient(base_url=url).sync() as env:
    reset = env.reset(task_id=task, seed=7)
    out["reset"] = reset.observation
    out["state"] = env.state()
    for action in actions:
        result = env.step(action)
        out["steps"].append(
            {"observation": result.observation, "reward": result.reward, "done": result.done}
        )
print(json.dumps(out))
"""

OVER_HTTP = """
import json, sys
import httpx
from openenv.core.env_server.types import (
    EnvironmentMetadata, HealthResponse, ResetRequest, ResetResponse, SchemaResponse,
    StepRequest, StepResponse,
)
url, task, actions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with httpx.Client(base_url=url, timeout=300) as http:
    HealthResponse.model_validate(http.get("/health").json())
    EnvironmentMetadata.model_validate(http.get("/metadata").json())
    SchemaResponse.model_validate(http.get("/schema").json())
    body = ResetRequest(seed=7, task_id=task).model_dump(exclude_none=True)
    reset = ResetResponse.model_validate(http.post("/reset", json=body).json())
    session = reset.metadata["session_id"]
    out = {"reset": reset.observation, "steps": []}
    for action in actions:
        body = StepRequest(action=action, session_id=session).model_dump(exclude_none=True)
        result = StepResponse.model_validate(http.post("/step", json=body).json())
        out["steps"].append(
            {"observation": result.observation, "reward": result.reward, "done": result.done}
        )
print(json.dumps(out))
"""

FIXED = [RUN_TESTS, WRITE_FIX, RUN_TESTS, SUBMIT]
UNFIXED = [RUN_TESTS, {"tool": "read_file", "path": "stats.py", "end_line": 3}, SUBMIT]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeEnv]:
    with serve_env(tmp_path_factory.mktemp("serve")) as running:
        yield running


def _native_steps(tmp_path: Path, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same actions as tool calls of a native run (the runner, the workspace env)."""
    turns = [
        {
            "tool_calls": [
                {"name": a["tool"], "arguments": {k: v for k, v in a.items() if k != "tool"}}
            ]
        }
        for a in actions
    ]
    script = tmp_path / "native.json"
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": turns}]}))
    db = tmp_path / "native.db"
    with TraceStore(db) as store, WorkspaceEnv() as env:
        rollout = run_agent_episode(
            env=env, task_id=TASK, seed=7, model_fn=ScriptedModel(str(script), pace=0), store=store
        )
    return tool_steps(db, rollout.episode_id)


def _episode_of(server: ServeEnv, reply: dict[str, Any]) -> str:
    episode_id = reply["reset"]["episode_id"]
    assert episode_id in served_episodes(server.db)
    return str(episode_id)


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_the_real_openenv_client_earns_reward_1_for_the_fix_recorded_like_a_native_run(
    server: ServeEnv, tmp_path: Path, transport: str
) -> None:
    script = OVER_WEBSOCKET if transport == "websocket" else OVER_HTTP
    reply = run_openenv_script(script, server.url, TASK, json.dumps(FIXED))
    steps = reply["steps"]
    assert [s["reward"] for s in steps] == [None, None, None, 1.0]
    assert [s["done"] for s in steps] == [False, False, False, True]
    assert steps[0]["observation"]["output"].startswith("FAILED")
    assert steps[2]["observation"]["output"].startswith("OK")
    assert reply["reset"]["task_id"] == TASK and "mean()" in reply["reset"]["prompt"]
    episode = _episode_of(server, reply)
    served = tool_steps(server.db, episode)
    assert served == _native_steps(tmp_path, FIXED)
    assert [s["observation"] for s in served] == [s["observation"]["output"] for s in steps]
    with TraceStore(server.db) as store:
        summary = store.episode(episode)
    assert summary.status == "completed" and summary.total_reward == 1.0


@pytest.mark.parametrize("transport", ["websocket", "http"])
def test_the_real_openenv_client_earns_reward_0_without_the_fix(
    server: ServeEnv, tmp_path: Path, transport: str
) -> None:
    script = OVER_WEBSOCKET if transport == "websocket" else OVER_HTTP
    reply = run_openenv_script(script, server.url, TASK, json.dumps(UNFIXED))
    assert [s["reward"] for s in reply["steps"]] == [None, None, 0.0]
    assert reply["steps"][-1]["done"] is True
    episode = _episode_of(server, reply)
    assert tool_steps(server.db, episode) == _native_steps(tmp_path, UNFIXED)


def test_agentrunner_run_against_serve_env_records_both_sides_alike(
    server: ServeEnv, tmp_path: Path
) -> None:
    turns = [{"tool_calls": [{"name": "workspace", "arguments": action}]} for action in FIXED]
    script = tmp_path / "through.json"
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": turns}]}))
    client_db = tmp_path / "client.db"
    before = set(served_episodes(server.db))
    proc = run_cli(
        "run", "--env", server.url, "--task", TASK, "--model", f"scripted:{script}",
        "--db", str(client_db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["stop_reason"] == "done" and result["total_reward"] == 1.0
    (episode,) = set(served_episodes(server.db)) - before
    served = tool_steps(server.db, episode)
    assert served == _native_steps(tmp_path, FIXED)
    client_side = tool_steps(client_db, result["episode_id"])
    assert [s["arguments"] for s in client_side] == FIXED
    assert [s["reward"] for s in client_side] == [s["reward"] for s in served]
    shown = [
        {"output": s["observation"], "error": s["error"], "step": n, "truncated": False}
        for n, s in enumerate(served, 1)
    ]
    assert [s["observation"] for s in client_side] == [
        render_observation({**fields, "metadata": {}}) for fields in shown
    ]
    with TraceStore(server.db) as store:
        start = store.events(episode, kinds=["episode.start"])[0].payload
    assert start["env"]["served"]["server"] == server.url
    assert start["env"]["served"]["transport"] == "websocket"
    assert start["model"]["provider"] == "openenv-client"
