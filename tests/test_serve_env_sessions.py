"""``serve-env`` sessions: each in its own sandbox, bounded, ended and recorded however they
end (close, disconnect, idle, the server stopping or killed), and the store's commands
working on what was served. Driven by agentrunner's own OpenEnv client and raw sockets."""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_cli
from serve_support import SUBMIT, TASK, WRITE_FIX, serve_env, serve_env_command, served_episodes
from thirdparty_repo import BUGGY, FIXED, PROMPT, TEST_CMD, make_repo
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from agentrunner import TraceStore
from agentrunner.envs.openenv_client import OpenEnvEnv
from agentrunner.values.environment import ToolAction
from agentrunner.values.errors import EnvironmentFailure


def _step(env: OpenEnvEnv, action: dict[str, Any]) -> Any:
    return env.step(ToolAction(name="workspace", arguments=action))


def _kinds(db: Path, episode_id: str) -> list[str]:
    with TraceStore(db) as store:
        return [e.kind for e in store.iter_events(episode_id)]


def _cancel_reason(db: Path, episode_id: str) -> str:
    with TraceStore(db) as store:
        return str(store.events(episode_id, kinds=["cancel"])[0].payload["reason"])


def _wait_for_end(db: Path, episode_id: str) -> None:
    """Until the server has recorded the episode's end (it does so on its own time)."""
    with TraceStore(db) as store:
        for _ in range(1200):  # only bounds a failure
            if store.events(episode_id, kinds=["episode.end"]):
                return
            time.sleep(0.05)
    pytest.fail(f"episode {episode_id} never ended")


def _reset(ws: Any) -> str:
    ws.send(json.dumps({"type": "reset", "data": {"task_id": TASK}}))
    return str(json.loads(ws.recv())["data"]["observation"]["episode_id"])


def test_four_sessions_at_once_each_work_in_a_sandbox_of_their_own(tmp_path: Path) -> None:
    def session(n: int) -> tuple[str, float | None]:
        env = OpenEnvEnv(server.url, timeout=300)
        try:
            env.reset(TASK, n)
            _step(env, {"tool": "write_file", "path": "mine.txt", "content": f"session {n}"})
            seen = _step(env, {"tool": "bash", "command": "cat mine.txt; ls"}).observation
            if n % 2 == 0:
                _step(env, WRITE_FIX)
            return seen, _step(env, SUBMIT).reward
        finally:
            env.close()

    with serve_env(tmp_path, "--max-sessions", "4") as server, ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(session, range(4)))
    for n, (seen, reward) in enumerate(outcomes):
        assert f"session {n}" in seen and "session" not in seen.replace(f"session {n}", "")
        assert reward == (1.0 if n % 2 == 0 else 0.0)
    episodes = served_episodes(server.db)
    with TraceStore(server.db) as store:
        summaries = [store.episode(e) for e in episodes]
        seqs = [[e.seq for e in store.iter_events(ep)] for ep in episodes]
    assert len(episodes) == 4 and all(s.status == "completed" for s in summaries)
    assert all(seq == list(range(1, len(seq) + 1)) for seq in seqs)


def test_a_session_past_max_sessions_is_refused_with_the_reason(tmp_path: Path) -> None:
    with serve_env(tmp_path, "--max-sessions", "1") as server:
        first = OpenEnvEnv(server.url)
        first.reset(TASK, 0)
        second = OpenEnvEnv(server.url)
        with pytest.raises(EnvironmentFailure, match="CAPACITY_REACHED") as refused:
            second.reset(TASK, 0)
        over_http = httpx.post(f"{server.url}/reset", json={"task_id": TASK})
        first.close()
        after = OpenEnvEnv(server.url)
        after.reset(TASK, 0)
        after.close()
    assert "--max-sessions 1" in str(refused.value)
    assert over_http.status_code == 503 and "--max-sessions" in over_http.json()["detail"]


def test_closing_disconnecting_and_idling_each_end_the_episode_as_such(tmp_path: Path) -> None:
    with serve_env(tmp_path, "--idle-timeout", "1") as server:
        ws_url = server.url.replace("http", "ws") + "/ws"
        with connect(ws_url) as ws:
            closed = _reset(ws)
            ws.send(json.dumps({"type": "close"}))
            with pytest.raises(ConnectionClosed):
                ws.recv()  # the server closes the socket once the session is ended
        with connect(ws_url) as ws:
            dropped = _reset(ws)
            ws.send(json.dumps({"type": "step", "data": {"tool": "list_files"}}))
            ws.recv()
            ws.socket.close()  # gone without a close frame
        with connect(ws_url) as ws:
            idle = _reset(ws)
            with pytest.raises(ConnectionClosed):
                ws.recv()  # the server hangs up once the session is idle
        for episode in (closed, dropped, idle):
            _wait_for_end(server.db, episode)
    assert _cancel_reason(server.db, closed) == "the client closed the session"
    assert _cancel_reason(server.db, dropped) == "the client disconnected"
    assert "idle for 1 s (--idle-timeout)" in _cancel_reason(server.db, idle)
    assert _kinds(server.db, dropped)[-4:] == ["tool.call", "tool.result", "cancel", "episode.end"]


def test_a_killed_server_loses_no_acknowledged_step_and_leaves_the_episode_interrupted(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server:
        env = OpenEnvEnv(server.url)
        env.reset(TASK, 0)
        acknowledged = [_step(env, WRITE_FIX).observation, _step(env, {"tool": "list_files"})]
        server.kill()
        (episode,) = served_episodes(server.db)
    with TraceStore(server.db) as store:
        results = store.events(episode, kinds=["tool.result"])
        summary = store.episode(episode)
    assert len(results) == len(acknowledged) and all(r.payload["snapshot"] for r in results)
    assert summary.status == "interrupted"
    diff = run_cli("diff", episode, "--db", str(server.db))
    assert diff.returncode == 0 and "+++ b/stats.py" in diff.stdout
    resumed = run_cli("resume", episode, "--db", str(server.db))  # the trainer's to continue
    assert resumed.returncode == 2 and "served to an OpenEnv client" in resumed.stderr


def test_a_stopped_server_ends_open_episodes_and_served_ones_read_like_runs(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server:
        done = OpenEnvEnv(server.url)
        done.reset(TASK, 0)
        _step(done, WRITE_FIX)
        assert _step(done, SUBMIT).reward == 1.0
        done.close()
        open_one = OpenEnvEnv(server.url)
        open_one.reset(TASK, 1)
        assert server.stop() == 0
        open_one.close()
    finished, stopped = served_episodes(server.db)
    assert _cancel_reason(server.db, stopped) == "the server stopped"
    db = str(server.db)
    shown = run_cli("show", finished, "--db", db, "--json")
    verified = run_cli("verify", finished, "--db", db, "--json")
    reported = run_cli("report", "--db", db, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout.splitlines()[-1])
    assert verified.returncode == 0, verified.stderr
    assert reported.returncode == 0, reported.stderr
    assert "openenv-client" in reported.stdout


def test_invalid_actions_and_unknown_tasks_are_errors_the_session_survives(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server, connect(server.url.replace("http", "ws") + "/ws") as ws:
        replies = []
        for message in (
            {"type": "step", "data": {"tool": "bash", "command": "true"}},
            {"type": "reset", "data": {"task_id": "no-such-task"}},
            {"type": "reset", "data": {"task_id": TASK}},
            {"type": "step", "data": {"tool": "rm_rf"}},
            {"type": "step", "data": {"tool": "read_file"}},
            {"type": "state"},
        ):
            ws.send(json.dumps(message))
            replies.append(json.loads(ws.recv()))
    codes = [r["data"].get("code") for r in replies]
    assert codes == ["EXECUTION_ERROR", "EXECUTION_ERROR", None, "VALIDATION_ERROR", None, None]
    assert "no-such-task" in replies[1]["data"]["message"]
    assert (
        replies[4]["data"]["observation"]["error"] == "read_file: missing required parameter 'path'"
    )
    assert replies[5] == {
        "type": "state",
        "data": {
            "episode_id": replies[2]["data"]["observation"]["episode_id"],
            "step_count": 1,
            "task_id": TASK,
            "session_id": replies[2]["data"]["observation"]["session_id"],
        },
    }


def test_a_host_other_machines_reach_needs_a_token(tmp_path: Path) -> None:
    refused = subprocess.run(
        serve_env_command("--host", "0.0.0.0", "--db", str(tmp_path / "t.db")),
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "AGENTRUNNER_SERVE_TOKEN"},
    )
    assert refused.returncode == 2 and "--token" in refused.stderr
    with serve_env(tmp_path, "--token", "s3cret-token") as server:
        without = httpx.get(f"{server.url}/schema")
        with_token = httpx.get(
            f"{server.url}/schema", headers={"Authorization": "Bearer s3cret-token"}
        )
        health = httpx.get(f"{server.url}/health")
    assert without.status_code == 401 and with_token.status_code == 200
    assert health.status_code == 200


def test_a_client_gone_while_its_step_runs_gets_the_step_recorded_then_the_end(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server, connect(server.url.replace("http", "ws") + "/ws") as ws:
        episode = _reset(ws)
        slow = {"tool": "bash", "command": "sleep 1; echo slept"}
        ws.send(json.dumps({"type": "step", "data": slow}))
        ws.socket.close()
        _wait_for_end(server.db, episode)
    assert _kinds(server.db, episode)[-4:] == ["tool.call", "tool.result", "cancel", "episode.end"]
    assert _cancel_reason(server.db, episode) == "the client disconnected"


def test_a_repository_is_served_as_a_task_its_test_command_scoring_submit(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    args = ("--repo", str(repo), "--prompt", PROMPT, "--test", TEST_CMD)
    with serve_env(tmp_path, *args) as server:
        tasks = httpx.get(f"{server.url}/metadata").json()["readme_content"]
        env = OpenEnvEnv(server.url, timeout=300)
        reset = env.reset("repo:repo", 0)
        fix = {"tool": "str_replace", "path": "pygments/util.py", "old_str": BUGGY}
        _step(env, {**fix, "new_str": FIXED})
        reward = _step(env, SUBMIT).reward
        env.close()
        (episode,) = served_episodes(server.db)
    assert "- repo:repo" in tasks and PROMPT in reset.prompt and reward == 1.0
    diff = run_cli("diff", episode, "--db", str(server.db))
    assert diff.returncode == 0 and f"+    {FIXED}" in diff.stdout


def test_what_a_web_page_could_send_is_refused_and_a_bad_reset_frees_its_slot(
    tmp_path: Path,
) -> None:
    """Without a token, a page in the user's browser must not drive a sandbox: a request
    naming an Origin, a DNS-rebound host name and a non-JSON body are refused before any
    session opens; a reset that fails on a seed the store cannot hold frees its slot."""
    with serve_env(tmp_path, "--max-sessions", "1") as server:
        reset = f"{server.url}/reset"
        page = httpx.post(reset, json={}, headers={"Origin": "http://evil.example"})
        rebound = httpx.post(reset, json={}, headers={"Host": "attacker.example"})
        form = httpx.post(reset, content=b"{}", headers={"Content-Type": "text/plain"})
        with pytest.raises(InvalidStatus) as handshake:  # the WebSocket's handshake too
            connect(server.url.replace("http", "ws") + "/ws", origin="http://evil.example")
        huge = httpx.post(reset, json={"seed": 2**70})
        fine = httpx.post(reset, json={"seed": 1})
    assert [page.status_code, rebound.status_code, form.status_code] == [403, 403, 415]
    assert handshake.value.response.status_code == 403
    assert huge.status_code == 422 and "64-bit" in huge.text
    assert fine.status_code == 200  # the one slot was not kept by the failed reset
    assert served_episodes(server.db) == [fine.json()["observation"]["metadata"]["episode_id"]]
