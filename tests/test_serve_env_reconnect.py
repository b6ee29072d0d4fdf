"""``serve-env`` sessions continued by id: a client whose connection dropped, or whose server
was killed and started again on the same store, sends a reset naming its session and goes on
with the same episode, its workspace restored from the last acknowledged step. Driven by the
real ``openenv`` client library, raw WebSockets and plain HTTP."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
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
from test_serve_env import _native_steps
from websockets.sync.client import connect

from agentrunner import TraceStore
from agentrunner.values.events import ToolCall, ToolResult
from agentrunner.values.types import Message

pytestmark = pytest.mark.openenv

RECONNECT = """
import json, sys
from openenv.core.generic_client import GenericEnvClient
url, session, actions = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with GenericEnvClient(base_url=url).sync() as env:
    reset = env.reset(session_id=session)
    out = {"reset": reset.observation, "state": env.state(), "steps": []}
    for action in actions:
        result = env.step(action)
        out["steps"].append(
            {"observation": result.observation, "reward": result.reward, "done": result.done}
        )
print(json.dumps(out))
"""
LIST = {"tool": "list_files"}
SLOW = {"tool": "bash", "command": "sleep 600", "timeout": 900}


def _ws(server: ServeEnv) -> Any:
    return connect(server.url.replace("http", "ws") + "/ws", max_size=2**24)


def _send(ws: Any, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    ws.send(json.dumps({"type": kind, **({"data": data} if data is not None else {})}))
    return dict(json.loads(ws.recv()))


def _kinds(db: Path, episode_id: str) -> list[str]:
    with TraceStore(db) as store:
        return [e.kind for e in store.iter_events(episode_id)]


def _resumes(db: Path, episode_id: str) -> list[dict[str, Any]]:
    with TraceStore(db) as store:
        return [dict(e.payload) for e in store.events(episode_id, kinds=["resume"])]


def _wait_for(db: Path, episode_id: str, kind: str, count: int) -> None:
    """Until the server has recorded ``count`` events of ``kind`` (only bounds a failure)."""
    with TraceStore(db) as store:
        for _ in range(2400):
            if len(store.events(episode_id, kinds=[kind])) >= count:
                return
            time.sleep(0.05)
    pytest.fail(f"the server never recorded {count} {kind} events in {episode_id}")


def test_a_client_of_a_killed_server_reconnects_and_finishes_the_same_episode(
    tmp_path: Path,
) -> None:
    db = tmp_path / "served.db"
    with serve_env(tmp_path, db=db) as first, _ws(first) as ws:
        reset = _send(ws, "reset", {"task_id": TASK, "seed": 7})["data"]["observation"]
        session, episode = reset["session_id"], reset["episode_id"]
        acknowledged = [_send(ws, "step", WRITE_FIX), _send(ws, "step", LIST)]
        ws.send(json.dumps({"type": "step", "data": SLOW}))  # never answered
        _wait_for(db, episode, "tool.call", 3)
        first.kill()
    with serve_env(tmp_path, db=db) as second:
        out = run_openenv_script(
            RECONNECT, second.url, session, json.dumps([LIST, RUN_TESTS, SUBMIT])
        )
    assert all(a["type"] == "observation" for a in acknowledged)
    assert out["reset"]["episode_id"] == episode and out["reset"]["step"] == 2
    assert out["reset"]["task_id"] == TASK and out["state"]["step_count"] == 2
    assert "OK" in out["steps"][1]["observation"]["output"]  # the fix came back with it
    assert [s["reward"] for s in out["steps"]] == [None, None, 1.0]
    assert [s["observation"]["step"] for s in out["steps"]] == [3, 4, 5]
    assert served_episodes(db) == [episode]  # the same episode, not a new one
    with TraceStore(db) as store:
        summary = store.episode(episode)
        seqs = [e.seq for e in store.iter_events(episode)]
    assert summary.status == "completed" and summary.total_reward == 1.0
    assert summary.attempt == 2 and seqs == list(range(1, len(seqs) + 1))
    (resume,) = _resumes(db, episode)
    assert resume["env_restore"].startswith("snapshot ") and "after step 2" in resume["env_restore"]
    assert resume["dangling"] == [
        {"call_id": "step-3", "name": "bash", "action": "sent again by the client"}
    ]
    # Every acknowledged step is kept; the steps, as content, are those of a native run.
    native = _native_steps(tmp_path, [WRITE_FIX, LIST, LIST, RUN_TESTS, SUBMIT])
    assert tool_steps(db, episode) == native


def test_a_dropped_connection_is_continued_over_http_then_refused_once_over(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server:
        with _ws(server) as ws:
            reset = _send(ws, "reset", {"task_id": TASK})["data"]["observation"]
            session, episode = reset["session_id"], reset["episode_id"]
            _send(ws, "step", WRITE_FIX)
            ws.socket.close()  # gone without a close frame: the episode ends as cancelled
        _wait_for(server.db, episode, "episode.end", 1)
        again = httpx.post(f"{server.url}/reset", json={"session_id": session}, timeout=300)
        step = {"session_id": session, "action": SUBMIT}
        submitted = httpx.post(f"{server.url}/step", json=step, timeout=300)
        over = httpx.post(f"{server.url}/reset", json={"session_id": session}, timeout=300)
    assert again.status_code == 200, again.text
    assert again.json()["observation"]["step"] == 1
    assert again.json()["metadata"]["continued"].startswith("snapshot ")
    assert submitted.json()["reward"] == 1.0 and submitted.json()["done"] is True
    assert over.status_code == 409 and "completed" in over.json()["detail"]
    kinds = _kinds(server.db, episode)
    assert kinds.count("episode.end") == 2 and kinds.count("resume") == 1
    assert kinds[kinds.index("resume") - 2 :][:2] == ["cancel", "episode.end"]
    with TraceStore(server.db) as store:
        assert store.episode(episode).status == "completed"


def test_a_reconnect_is_refused_with_the_reason_and_the_connection_survives(
    tmp_path: Path,
) -> None:
    with serve_env(tmp_path) as server, _ws(server) as held, _ws(server) as other:
        session = _send(held, "reset", {"task_id": TASK})["data"]["observation"]["session_id"]
        still_open = _send(other, "reset", {"session_id": session})["data"]
        unknown = _send(other, "reset", {"session_id": "0123456789abcdef"})["data"]
        malformed = _send(other, "reset", {"session_id": "../etc"})["data"]
        with_task = _send(other, "reset", {"session_id": session, "task_id": TASK})["data"]
        fresh = _send(other, "reset", {"task_id": TASK})  # the connection still works
        over_http = httpx.post(
            f"{server.url}/reset", json={"session_id": "0123456789abcdef"}, timeout=60
        )
        malformed_http = httpx.post(f"{server.url}/reset", json={"session_id": 7}, timeout=60)
        live = httpx.get(f"{server.url}/state", params={"session_id": session}, timeout=60)
    assert still_open["code"] == "SESSION_ERROR" and "still open" in still_open["message"]
    assert unknown["code"] == "SESSION_ERROR" and "no episode was served" in unknown["message"]
    assert malformed["code"] == "VALIDATION_ERROR" and "16 hex digits" in malformed["message"]
    assert with_task["code"] == "VALIDATION_ERROR" and "leave out task_id" in with_task["message"]
    assert fresh["type"] == "observation"
    assert fresh["data"]["observation"]["session_id"] != session
    assert over_http.status_code == 404 and "no episode was served" in over_http.json()["detail"]
    assert malformed_http.status_code == 422
    assert live.status_code == 200 and live.json()["step_count"] == 0  # the held session


def test_a_session_whose_last_step_ended_the_episode_gets_its_end_recorded_not_continued(
    tmp_path: Path,
) -> None:
    """The server died between the submit's result and the episode's end: a reconnect
    records the end the submit decided, and says the episode is over."""
    db = tmp_path / "served.db"
    with serve_env(tmp_path, db=db) as first, _ws(first) as ws:
        reset = _send(ws, "reset", {"task_id": TASK})["data"]["observation"]
        session, episode = reset["session_id"], reset["episode_id"]
        _send(ws, "step", WRITE_FIX)
        first.kill()
    with TraceStore(db) as store, store.lease(episode):  # the submit, as the server wrote it
        writer = store.writer(episode, attempt=1)
        call = ToolCall(call_id="step-2", name="submit", arguments="{}", parsed={})
        writer.append(2, call)
        tip = store.last_of_kind(episode, "tool.result").payload["message_hash"]  # type: ignore[union-attr]
        said = Message(role="tool", content="all tests pass", tool_call_id="step-2")
        result = ToolResult(
            call_id="step-2", name="submit", observation="all tests pass", reward=1.0,
            done=True, message_hash=store.put_message(tip, said), step=2,
        )  # fmt: skip
        writer.append(2, result)
    with serve_env(tmp_path, db=db) as second, _ws(second) as ws:
        refused = _send(ws, "reset", {"session_id": session})["data"]
    assert refused["code"] == "EXECUTION_ERROR" and "was over (done)" in refused["message"]
    with TraceStore(db) as store:
        summary = store.episode(episode)
    assert summary.status == "completed" and summary.stop_reason == "done"
    assert _kinds(db, episode)[-3:] == ["tool.call", "tool.result", "episode.end"]
