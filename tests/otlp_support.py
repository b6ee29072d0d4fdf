"""The OTLP export tests' parts: episodes made through the CLI (a native run, a fork, a fan-out,
an imported session), the store's own counts read with plain SQL, and a real Arize Phoenix
server started on loopback.

Phoenix is heavy and its dependencies are not the project's, so it lives in a venv of its own
outside the repository, ``$AGENTRUNNER_PHOENIX_VENV`` (default
``~/.cache/agentrunner-phoenix/venv``), built when missing (``.ci/run`` builds it first); a
test that needs it is skipped with the reason when it cannot be had (no package index).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import last_json, run_cli

from agentrunner.store import TraceStore

TRACES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "foreign-traces"
CLAUDE = TRACES / "claude-code" / "short.jsonl"

PHOENIX_VENV = Path(
    os.environ.get("AGENTRUNNER_PHOENIX_VENV")
    or Path.home() / ".cache" / "agentrunner-phoenix" / "venv"
)
PHOENIX = "arize-phoenix==20.26.1"
STARTUP_S = 180.0
"""How long Phoenix may take to answer its health check (its first start migrates a new
database); a bound on a wait for a condition, not a timing assumption."""


# ------------------------------------------------------------------ episodes


def native_episode(db: Path) -> str:
    """A scripted demo run (the model's pace: none); its episode id."""
    done = run_cli("run", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    return str(last_json(done.stdout)["episode_id"])


def fork_episode(db: Path, parent: str) -> str:
    """``fork PARENT --turn 3 --message ... --run``; the fork's id."""
    done = run_cli(
        "fork", parent, "--turn", "3", "--message", "Check the tests first.", "--run",
        "--json", "--db", str(db),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (fork,) = last_json(done.stdout)["forks"]
    return str(fork)


def fanout_episodes(db: Path, parent: str) -> list[str]:
    """``fanout PARENT --turn 3 -k 2``; every fork it made (proposals included)."""
    done = run_cli("fanout", parent, "--turn", "3", "-k", "2", "--json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    group = last_json(done.stdout)["group_id"]
    return [
        e["episode_id"] for e in listing(db) if (e.get("fork_group") or {}).get("group_id") == group
    ]


def imported_episode(db: Path) -> str:
    """A real Claude Code session from the shared fixtures, imported (skip when absent)."""
    if not CLAUDE.is_file():
        pytest.skip(f"the shared foreign-trace fixtures are absent ({TRACES})")
    done = run_cli("import", "--db", str(db), str(CLAUDE), "--json")
    assert done.returncode == 0, done.stderr
    kinds = {e["episode_id"]: e for e in listing(db)}
    imported = [i for i, e in kinds.items() if e.get("env") == "import"]
    assert imported, kinds
    return imported[0]


def imported_subagent(db: Path) -> tuple[str, str]:
    """A real Claude Code session that started a sub-agent (its Task tool), imported: the
    session's and the sub-agent's episode ids (skip when absent)."""
    session = TRACES / "claude-code" / "subagent.jsonl"
    if not session.is_file():
        pytest.skip(f"the shared foreign-trace fixtures are absent ({TRACES})")
    done = run_cli("import", "--db", str(db), str(session))
    assert done.returncode == 0, done.stderr
    with TraceStore(db) as store:
        (child,) = [e for e in store.list_episodes() if e.env.get("parent_episode")]
        return str(child.env["parent_episode"]), child.episode_id


def failed_episode(db: Path) -> str:
    """A run whose model server is not there (a closed loopback port): every attempt of its
    first call fails and the episode fails."""
    done = run_cli(
        "run", "--db", str(db), "--model", "openai:gpt-5", "--base-url",
        f"http://127.0.0.1:{_free_port()}/v1", "--json",
        env={"OPENAI_API_KEY": "sk-test-otlp-0123456789"},
    )  # fmt: skip
    found = last_json(done.stdout)
    assert found["status"] == "failed", done.stderr
    return str(found["episode_id"])


def listing(db: Path) -> list[dict[str, Any]]:
    done = run_cli("ls", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = last_json(done.stdout)
    return found


# ------------------------------------------------------------------ the store, read with SQL


def own_usage(db: Path, episode_id: str) -> dict[str, tuple[int | None, int | None]]:
    """The episode's own ``usage`` events (what it inherits left out): call id -> (input,
    output) tokens, read with plain SQL from the public ``events`` view."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT payload FROM events WHERE episode_id = ? AND kind = 'usage' ORDER BY seq",
            (episode_id,),
        ).fetchall()
    usage = [json.loads(r[0]) for r in rows]
    return {u["call_id"]: (u.get("input_tokens"), u.get("output_tokens")) for u in usage}


def own_tool_calls(db: Path, episode_id: str) -> list[tuple[str, str]]:
    """The episode's own ``tool.call`` events: (call id, name), in order."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT payload FROM events WHERE episode_id = ? AND kind = 'tool.call' ORDER BY seq",
            (episode_id,),
        ).fetchall()
    calls = [json.loads(r[0]) for r in rows]
    return [(c["call_id"], c["name"]) for c in calls]


# ------------------------------------------------------------------ a real Phoenix server


@functools.cache  # one build attempt per run: a failed install is not retried for every test
def prepare_phoenix() -> str | None:
    """Builds Phoenix's venv when it is missing; why it cannot be had, or None."""
    path = str(PHOENIX_VENV)
    python = PHOENIX_VENV / "bin" / "python"
    if not (PHOENIX_VENV / "bin" / "phoenix").exists():
        try:
            for command in (
                [sys.executable, "-m", "venv", path],
                [str(python), "-m", "pip", "install", "-q", PHOENIX],
            ):
                subprocess.run(command, capture_output=True, text=True, check=True, timeout=1800)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build Phoenix's venv at {path}: {exc.stderr.strip()[-300:]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build Phoenix's venv at {path}: {exc}"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def phoenix_server(folder: Path) -> Iterator[str]:
    """``phoenix serve`` on 127.0.0.1 (free ports, a working folder in ``folder``, telemetry
    off); yields its base URL, stops it after."""
    problem = prepare_phoenix()
    if problem is not None:
        pytest.skip(problem)
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (folder / "phoenix.log").open("w")
    server = subprocess.Popen(
        [str(PHOENIX_VENV / "bin" / "phoenix"), "serve"], env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(server, url, folder / "phoenix.log")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _wait_healthy(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"phoenix serve exited {server.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"phoenix serve did not answer within {STARTUP_S:.0f} s: {log.read_text()[-2000:]}")


def phoenix_spans(url: str, project: str = "default") -> list[dict[str, Any]]:
    """Every span of a Phoenix project, through its REST API (all pages)."""
    spans: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if cursor:
            params["cursor"] = cursor
        answer = httpx.get(f"{url}/v1/projects/{project}/spans", params=params, timeout=30)
        answer.raise_for_status()
        page = answer.json()
        spans.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return spans


def wait_for_spans(url: str, count: int) -> list[dict[str, Any]]:
    """Phoenix's spans once it has stored ``count`` of them (it inserts in the background,
    after answering the export)."""
    deadline = time.monotonic() + 120
    spans = phoenix_spans(url)
    while len(spans) < count and time.monotonic() < deadline:
        time.sleep(0.5)
        spans = phoenix_spans(url)
    return spans
