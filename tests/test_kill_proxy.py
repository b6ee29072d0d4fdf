"""SIGKILL of the recording proxy at random instants while agents call through it.

A test client plays an agent that retries (as Claude Code and the SDKs do): each session is
a conversation of several streamed Messages calls, each answered by a loopback upstream with
a tool call until the last; when the proxy dies under it, the client waits for the restarted
proxy and sends the same request again. The proxy is killed with SIGKILL at random instants
(drawn with a fixed seed; they only choose where to kill, nothing is asserted about time) and
restarted on the same port. After each kill the store is read: every event then in it must
still be there, unchanged, at the end. At the end: each session is one completed episode,
every request the upstream received was recorded before it was forwarded, no call id is
recorded twice, no tool result twice.
"""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from record_support import anthropic_text, anthropic_tool
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

KILLS = 20
CALLS = 5  # per session: four tool calls, then an answer
SEED = 2026_12_02


class ToolLoopUpstream(SSEReplayServer):
    """Answers a conversation with n tool results by tool call n (slowly streamed), and the
    one with CALLS - 1 results by text: the same request always gets the same answer."""

    def next_reply(self) -> Reply:
        body = self.requests[-1].json
        n = sum(
            1
            for m in body["messages"]
            if isinstance(m["content"], list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        )
        if n >= CALLS - 1:
            return Reply(events=anthropic_text("all done"), delay=0.05)
        return Reply(
            events=anthropic_tool(f"toolu_{n}", "Bash", {"command": f"echo {n}"}), delay=0.1
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ProxyProcess:
    """``agentrunner proxy`` on a fixed port, killed and restarted by the test."""

    def __init__(self, db: Path, upstream: str, log: Path) -> None:
        self.args = [
            sys.executable, "-m", "agentrunner.cli.main", "proxy", "--db", str(db),
            "--port", str(_free_port()), "--upstream-anthropic", upstream,
        ]  # fmt: skip
        self.port = int(self.args[self.args.index("--port") + 1])
        self.log = log.open("a")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 120  # only bounds a proxy that never comes up
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise AssertionError("the proxy did not start listening")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=120) == 0


def _session(base: str, session: str) -> int:
    """One agent session; retries each call until it gets a whole answer. Returns retries."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Session {session}: go."}]
    headers = {"x-api-key": "sk-ant-test-kill-0123456789", "x-claude-code-session-id": session}
    retries = 0
    for n in range(CALLS):
        body = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 50,
            "stream": True,
            "messages": messages,
        }
        while True:
            try:
                with httpx.stream("POST", f"{base}/v1/messages", json=body, headers=headers,
                                  timeout=60) as answer:  # fmt: skip
                    text = b"".join(answer.iter_raw()).decode()
                if answer.status_code == 200 and "message_stop" in text:
                    break
            except httpx.HTTPError:
                pass
            retries += 1
            time.sleep(0.05)  # the proxy is being restarted: try again
        if n < CALLS - 1:
            call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
                    "input": {"command": f"echo {n}"}}  # fmt: skip
            result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"step {n}"}
            messages = [*messages, {"role": "assistant", "content": [call]},
                        {"role": "user", "content": [result]}]  # fmt: skip
    return retries


def _snapshot(db: Path) -> dict[tuple[str, int], tuple[str, str]]:
    with TraceStore(db) as store:
        return {
            (ep.episode_id, row.seq): (row.kind, json.dumps(row.payload, sort_keys=True))
            for ep in store.list_episodes()
            for row in store.iter_events(ep.episode_id)
        }


def test_proxy_killed_at_random_instants_loses_no_committed_event_and_sessions_go_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    rng = random.Random(SEED)
    seen: list[dict[tuple[str, int], tuple[str, str]]] = []
    sessions: list[str] = []
    with ToolLoopUpstream() as upstream:
        proxy = ProxyProcess(db, upstream.url, tmp_path / "proxy.log")
        proxy.start()
        base = f"http://127.0.0.1:{proxy.port}/anthropic"
        stop = threading.Event()

        def agents() -> None:
            while not stop.is_set():
                sessions.append(f"session-{len(sessions)}")
                _session(base, sessions[-1])

        agent = threading.Thread(target=agents)
        agent.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.05, 1.5))
            proxy.kill()
            seen.append(_snapshot(db))
            proxy.start()
        stop.set()
        agent.join(timeout=600)
        proxy.stop()
        received = [r for r in upstream.requests if r.method == "POST"]
    final = _snapshot(db)
    for earlier in seen:
        assert {k: v for k, v in final.items() if k in earlier} == earlier
    with TraceStore(db) as store:
        episodes = store.list_episodes()
        by_session: dict[str, list[str]] = {}
        for ep in episodes:
            by_session.setdefault(ep.env.get("session_id") or "", []).append(ep.episode_id)
        requests = 0
        for session in sessions:
            recorded = [
                e for e in by_session.get(session, []) if store.last_of_kind(e, "model.request")
            ]
            assert len(recorded) == 1, (session, by_session.get(session))
            (episode,) = recorded
            calls = [r.payload["call_id"] for r in store.events(episode, kinds=["model.request"])]
            answered = [
                r.payload["call_id"] for r in store.events(episode, kinds=["model.response"])
            ]
            # Completed, or interrupted: a proxy was killed after the session's last call
            # went out, and the agent, done, never called again (its answer's recording may
            # be lost with the proxy: the client already held it).
            assert store.episode(episode).status in ("completed", "interrupted")
            results = [r.payload["call_id"] for r in store.events(episode, kinds=["tool.result"])]
            assert len(set(calls)) == len(calls) and len(set(answered)) == len(answered)
            assert sorted(results) == [f"toolu_{n}" for n in range(CALLS - 1)]
            requests += len(calls)
        # The session the last proxy (stopped, not killed) saw through to its end is complete.
        (last,) = [e for e in by_session[sessions[-1]] if store.last_of_kind(e, "model.request")]
        assert store.episode(last).status == "completed"
        woken = sum(1 for ep in episodes for r in store.events(ep.episode_id, kinds=["resume"]))
    assert len(received) <= requests <= len(received) + KILLS
    assert woken >= KILLS // 2  # most kills landed inside a session, which then went on
