"""Fixtures for the TUI tests: a deterministic store and helpers to drive the app.

The store is built once per session from real scripted runs (a completed episode, a fork of
it that was run, a fork that was not, a cancelled and a failed episode) and then copied
into a new store with fixed ids, timestamps and timings, so screenshots are stable. Each
test gets its own copy of the file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rawstore import insert_event
from textual.pilot import Pilot

from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.values.errors import ProviderServerError
from providers import get_model
from providers.scripted import ScriptedModel

DONE = "01JAAA00000000000000000000"  # demo-mean, completed
FORK = "01JBBB00000000000000000000"  # fork of DONE at turn 3 (injected message), run
IDLE = "01JCCC00000000000000000000"  # fork of DONE at turn 5 (edited action), never run
CANCELLED = "01JDDD00000000000000000000"  # paginate-off-by-one, cancelled mid-stream
FAILED = "01JEEE00000000000000000000"  # demo-mean, failed on a provider error at turn 2
BASE_TIME = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
# two forks of DONE made in the same millisecond: their first 10 characters are the same
SAME_MS = ("01JFFF0000AAAAAAAAAAAAAAAA", "01JFFF0000BBBBBBBBBBBBBBBB")


def _cancel_after(n: int) -> Callable[[], bool]:
    count = [0]

    def check() -> bool:
        count[0] += 1
        return count[0] > n

    return check


def _failing_model() -> Callable[[AgentContext], AgentTurn]:
    demo = get_model("scripted:demo")
    calls = [0]

    def model(context: AgentContext) -> AgentTurn:
        calls[0] += 1
        if calls[0] == 2:
            raise ProviderServerError("upstream returned 502 Bad Gateway", retryable=False)
        turn: AgentTurn = demo(context)  # type: ignore[operator]
        return turn

    return model


def _record(scratch: Path, snapshots: Path) -> list[str]:
    """Real scripted runs into ``scratch``; returns the episode ids in creation order."""
    with TraceStore(scratch) as store:

        def run(task: str, **kw: Any) -> str:
            with WorkspaceEnv(snapshot_dir=snapshots) as env:
                model = kw.pop("model_fn", None) or get_model("scripted:demo")
                return str(
                    run_agent_episode(
                        env=env, task_id=task, model_fn=model, store=store, **kw
                    ).episode_id
                )

        done = run("demo-mean")
        (fork,) = fork_episode(store, done, turn=3, message="Check the edge cases too.")
        resume_episode(store, fork)
        (idle,) = fork_episode(store, done, turn=5, action={"name": "submit", "arguments": {}})
        cancelled = run("paginate-off-by-one", cancel_check=_cancel_after(45))
        failed = run("demo-mean", model_fn=_failing_model())
    return [done, fork, idle, cancelled, failed]


def _normalize(payload: dict[str, Any]) -> dict[str, Any]:
    """Fix the timings (the only values that differ between two runs)."""
    if "latency_s" in payload:
        payload["latency_s"] = 0.5
    if "duration_s" in payload:
        payload["duration_s"] = 0.25
    return payload


def _copy_fixed(scratch: Path, dest: Path, order: list[str]) -> None:
    """Copy ``scratch`` into ``dest`` with fixed ids, times and timings."""
    ids = dict(zip(order, (DONE, FORK, IDLE, CANCELLED, FAILED), strict=True))
    TraceStore(dest).close()
    src = sqlite3.connect(scratch)
    dst = sqlite3.connect(dest, isolation_level=None)
    dst.execute("BEGIN")
    created: dict[str, datetime] = {}
    for n, old in enumerate(order):
        row = src.execute(
            "SELECT parent_episode_id, fork_seq, task_id, seed, env, model FROM episodes"
            " WHERE id = ?",
            (old,),
        ).fetchone()
        created[ids[old]] = BASE_TIME + timedelta(minutes=7 * n)
        dst.execute(
            "INSERT INTO episodes (id, parent_episode_id, fork_seq, task_id, seed, created_at,"
            " env, model, key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ids[old],
                ids.get(row[0]) if row[0] else None,
                row[1],
                row[2],
                row[3],
                created[ids[old]].isoformat(timespec="microseconds"),
                row[4],  # env spec: its snapshot folder is the template's
                row[5],
                n + 1,
            ),
        )
    for ep, seq, attempt, turn, kind, payload in src.execute(
        "SELECT episode_id, seq, attempt, turn, kind, payload FROM events ORDER BY episode_id, seq"
    ):
        new = ids[ep]
        ts = created[new] + timedelta(milliseconds=250 * seq)
        body = json.dumps(
            _normalize(json.loads(payload)), ensure_ascii=False, separators=(",", ":")
        )
        stamp = round(ts.timestamp() * 1_000_000)
        insert_event(dst, new, seq, kind, body, attempt=attempt, turn=turn, ts_us=stamp)
    dst.executemany(
        "INSERT OR IGNORE INTO messages VALUES (?, ?, ?)",
        src.execute("SELECT hash, parent_hash, message FROM messages"),
    )
    dst.executemany(
        "INSERT OR IGNORE INTO tools VALUES (?, ?)", src.execute("SELECT hash, tools FROM tools")
    )
    dst.executemany(
        "INSERT OR IGNORE INTO blobs VALUES (?, ?, ?)",
        src.execute("SELECT hash, part, data FROM blobs"),
    )
    dst.executemany(
        "INSERT OR IGNORE INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?)",
        src.execute(
            "SELECT id, parent_id, depth, ?, files, bytes, changes FROM snapshots ORDER BY depth",
            (BASE_TIME.isoformat(),),
        ),
    )
    dst.execute("COMMIT")
    dst.close()
    src.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tui-template")
    mp = pytest.MonkeyPatch()
    mp.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
    try:
        order = _record(root / "scratch.db", root / "snapshots")
    finally:
        mp.undo()
    dest = root / "fixed.db"
    _copy_fixed(root / "scratch.db", dest, order)
    return dest


@pytest.fixture
def tui_db(template_db: Path, tmp_path: Path) -> Path:
    """A private copy of the deterministic store."""
    path = tmp_path / "traces.db"
    shutil.copy(template_db, path)
    return path


@pytest.fixture
def same_ms_forks(tui_db: Path) -> tuple[str, str]:
    """Adds two (never run) forks of DONE at its seq 37 whose ids share 10 characters."""
    with sqlite3.connect(tui_db) as conn:
        for fork_id in SAME_MS:
            conn.execute(
                "INSERT INTO episodes (id, parent_episode_id, fork_seq, task_id, seed,"
                " created_at, env, model) SELECT ?, id, 37, task_id, seed, created_at, env,"
                " model FROM episodes WHERE id = ?",
                (fork_id, DONE),
            )
    conn.close()
    return SAME_MS


@pytest.fixture
def make_app(tui_db: Path) -> Callable[..., AgentRunnerApp]:
    def make(episode: str | None = None, **kw: Any) -> AgentRunnerApp:
        return AgentRunnerApp(tui_db, episode, **kw)

    return make


async def wait_for(pilot: Pilot[Any], condition: Callable[[], bool], timeout: float = 120) -> None:
    """Let the app run until ``condition()`` holds; ``timeout`` only bounds a failing test (a
    passing one returns as soon as the condition holds, however loaded the machine is)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {condition}")
        await pilot.pause(0.02)


class GatedModel:
    """The demo script, one turn per ``release()``: the test decides when events appear
    (waits poll the episode's cancel, so a cancel request still lands)."""

    provider = "scripted"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.model = inner.model
        self.params = inner.params
        self.gate = threading.Semaphore(0)

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def __call__(self, context: AgentContext) -> AgentTurn:
        while not self.gate.acquire(timeout=0.02):
            context.check_cancel()
        return self.inner(context)


class BackgroundWriter:
    """Runs a scripted episode in a thread (a writer other than the TUI); gated, it takes a
    model turn only when the test releases one."""

    def __init__(
        self, db: str | Path, snapshots: Path, pace: float = 0.01, gated: bool = False
    ) -> None:
        self.db = db
        self.snapshots = snapshots
        self.pace = pace
        self.model: GatedModel | None = None
        self.gated = gated
        self.episode_id: str | None = None
        self.started = threading.Event()
        self.stop = threading.Event()
        self.rollout: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def release(self, turns: int = 1) -> None:
        assert self.model is not None
        for _ in range(turns):
            self.model.gate.release()

    def _run(self) -> None:
        with TraceStore(self.db) as store, WorkspaceEnv(snapshot_dir=self.snapshots) as env:
            inner = ScriptedModel("demo", pace=self.pace)
            model: Any = GatedModel(inner) if self.gated else inner
            self.model = model if self.gated else None
            episode_id = store.create_episode(
                task_id="demo-mean", seed=0, env=env.spec(), model=model.spec()
            )
            self.episode_id = episode_id
            self.started.set()
            self.rollout = run_agent_episode(
                env=env,
                task_id="demo-mean",
                model_fn=model,
                store=store,
                episode_id=episode_id,
                cancel_check=self.stop.is_set,
            )

    def __enter__(self) -> BackgroundWriter:
        self.thread.start()
        assert self.started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # a test that needs the whole episode joins the thread itself
        self.thread.join(timeout=60)


@pytest.fixture
def writer(tui_db: Path, tmp_path: Path) -> Iterator[BackgroundWriter]:
    """An episode being written by another thread (about 3 s long)."""
    with BackgroundWriter(tui_db, tmp_path / "live-snapshots") as w:
        yield w


@pytest.fixture
def gated_writer(tui_db: Path, tmp_path: Path) -> Iterator[BackgroundWriter]:
    """An episode being written by another thread, a turn at a time as the test releases."""
    with BackgroundWriter(tui_db, tmp_path / "live-snapshots", gated=True) as w:
        yield w
