"""SIGKILL at random instants of a scripted episode loses no acknowledged event.

A child process runs ``run_agent_episode`` with an observer that, after each committed event,
writes ``seq kind`` to its stdout and flushes: a line in the pipe is an acknowledged event.
The parent kills the child with SIGKILL at instants drawn uniformly (stratified, fixed seed)
over the episode's measured duration (one that lands after the end is redrawn over that run's
own duration), plus a few kills right on the acknowledgement of a chosen non-chunk event
(event boundaries: the runner's between-turns bookkeeping and the next append).
After each kill it opens the store and checks: integrity, dense seqs, the acknowledged events
as a prefix, every stored payload and message reference readable, status ``interrupted``.

The test runs on a SQLite file and on a real Postgres server (``tests/pg.py``). All kills
share one store, as in real use (many runs, one ``traces.db``): every run opens
a store whose previous writers died mid-transaction, kills run four at a time against it, and
at the end every earlier episode is checked again, so damage done by a later kill to an earlier
episode would show. Each kill is told apart by its episode's seed.
"""

from __future__ import annotations

import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.verifiers import verify_episode
from agentrunner.verifiers.reward import RewardVerifier

pytestmark = pytest.mark.slow

PACE_S = 0.01  # scripted model pacing: an episode lasts about 2-3 s
PARALLEL = 4  # children alive at once (they mostly sleep in the model's pacing)
TIMED_KILLS = 40
EVENT_KILLS = 8
MIN_MID_EPISODE_KILLS = 30
RANDOM_SEED = 20240611

CHILD = r"""
import os, sys, time
ack = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # stray prints go to stderr; stdout carries acknowledgements only
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

db, seed, pace, snapshots = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]


def observer(seq, turn, payload):  # called after the event is committed
    ack.write(f"{seq} {payload.kind}\n")
    ack.flush()


store = TraceStore(db)
env = WorkspaceEnv(snapshot_dir=snapshots)
model = ScriptedModel("demo", pace=pace)
ack.write("ready\n")
ack.flush()
started = time.monotonic()
rollout = run_agent_episode(
    env=env, task_id="demo-mean", seed=seed, model_fn=model, store=store, observer=observer
)
env.close()
ack.write(f"end {rollout.status} {rollout.total_reward} {time.monotonic() - started}\n")
ack.flush()
"""

PHASES = {
    "model.request": "model streaming",
    "model.chunk": "model streaming",
    "tool.call": "tool execution",
    "episode.start": "between turns",
    "message": "between turns",
    "model.response": "between turns",
    "usage": "between turns",
    "tool.result": "between turns",
}


@dataclass(frozen=True)
class Plan:
    """When to kill: at fractions of the episode's duration (a redraw after each miss), or
    right on the acknowledgement of event number ``at_ack``."""

    fractions: tuple[float, ...] = (0.0,)
    at_ack: int = 0


@dataclass
class Run:
    """One child run: what it acknowledged, and how it ended."""

    seed: int
    stderr: Path
    acked: list[tuple[int, str]] = field(default_factory=list)
    end: str | None = None  # "STATUS REWARD" from the child's end line, if it finished
    duration_s: float = 0.0  # the episode's duration, if it finished

    def ingest(self, line: str) -> None:
        if not line.endswith("\n"):
            return  # a torn line cannot be an acknowledgement
        head, _, rest = line.strip().partition(" ")
        if head == "end":
            status, reward, seconds = rest.split()
            self.end, self.duration_s = f"{status} {reward}", float(seconds)
        else:
            self.acked.append((int(head), rest))


def store_location(backend: str, sqlite_path: Path, request: pytest.FixtureRequest) -> str:
    """The store a test's children share: the SQLite file, or a Postgres schema's URL."""
    if backend == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(sqlite_path)


def _spawn(db: str, seed: int, tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    stderr = tmp / f"child-{seed}.stderr"
    env = {**os.environ, "TMPDIR": str(tmp / "tmp")}  # killed workspaces stay in tmp_path
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db), str(seed), str(PACE_S), str(tmp / "snapshots")],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
    return proc, stderr


def _run_child(
    db: str, seed: int, tmp: Path, *, kill_after_s: float | None = None, kill_at_ack: int = 0
) -> Run:
    """Run a child; SIGKILL it ``kill_after_s`` after it is ready or on ack ``kill_at_ack``."""
    proc, stderr = _spawn(db, seed, tmp)
    run = Run(seed=seed, stderr=stderr)
    assert proc.stdout is not None
    try:
        ready = proc.stdout.readline()
        assert ready == "ready\n", f"child {seed} did not start: {stderr.read_text()}"
        if kill_after_s is not None:
            time.sleep(kill_after_s)
        elif kill_at_ack:
            while len(run.acked) < kill_at_ack and run.end is None:
                line = proc.stdout.readline()
                if not line:
                    break
                run.ingest(line)
        if kill_after_s is not None or kill_at_ack:
            proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # everything already in the pipe was acknowledged too
            run.ingest(line)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return run


def _check_store(db: str, run: Run) -> tuple[str | None, str]:
    """Check the store after ``run``; return its episode id and where the kill landed."""
    with TraceStore(db) as store:  # opens: validation, WAL recovery, migrations check
        if not store.sql.postgres:
            assert store.raw_connection().execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = (
            store.raw_connection()
            .execute("SELECT id FROM episodes WHERE seed = ?", (run.seed,))
            .fetchall()
        )
        if not rows:
            assert not run.acked, f"seed {run.seed}: acknowledged events but no episode"
            return None, "before the episode"
        assert len(rows) == 1
        episode_id = rows[0][0]
        events = list(store.iter_events(episode_id))
        stored = [(e.seq, e.kind) for e in events]
        assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1)), "seqs not dense"
        assert stored[: len(run.acked)] == run.acked, "an acknowledged event is missing"
        # the observer runs right after each commit: at most one commit is not acknowledged
        # yet, one event or a response with its usage (committed together)
        unacked = [kind for _, kind in stored[len(run.acked) :]]
        assert len(unacked) <= 1 or unacked == ["model.response", "usage"], (
            stored[-3:],
            run.acked[-3:],
        )
        for event in events:  # every payload is whole and names messages that exist
            payload = event.typed()
            if event.kind == "model.request":
                assert store.message_chain(payload.tip_hash)  # type: ignore[union-attr]
                store.tools(payload.tools_hash)  # type: ignore[union-attr]
            elif event.kind in ("model.response", "tool.result", "message"):
                store.message(payload.message_hash)  # type: ignore[union-attr]
        status = store.episode(episode_id).status
        if stored and stored[-1][1] == "episode.end":
            assert status == "completed"
            return episode_id, "after the end"
        assert status == "interrupted", f"seed {run.seed}: status {status}"
        return episode_id, PHASES[stored[-1][1]] if stored else "before the first event"


def _calibrate(db: str, tmp: Path) -> tuple[float, list[tuple[int, str]]]:
    """Run PARALLEL episodes to their end at once: the episode's duration and its events."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        runs = list(pool.map(lambda s: _run_child(db, s, tmp), range(1, PARALLEL + 1)))
    for run in runs:
        assert run.end == "completed 1.0", f"calibration run failed: {run.stderr.read_text()}"
        assert _check_store(db, run)[1] == "after the end"
    return statistics.median(r.duration_s for r in runs), runs[0].acked


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkill_at_random_instants_loses_no_acknowledged_event(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "tmp").mkdir()
    db = tmp_path / "traces.db"
    began = time.monotonic()
    duration, events = _calibrate(db, tmp_path)

    rng = random.Random(RANDOM_SEED)
    plans: list[Plan] = [
        Plan(fractions=((i + rng.random()) / TIMED_KILLS, rng.random(), rng.random()))
        for i in range(TIMED_KILLS)
    ]
    boundaries = [i for i, (_, kind) in enumerate(events[:-1], 1) if kind != "model.chunk"]
    plans += [Plan(at_ack=rng.choice(boundaries)) for _ in range(EVENT_KILLS)]
    rng.shuffle(plans)

    latest = [duration]  # the last episode duration seen (load on the machine changes)

    def kill(job: tuple[int, Plan]) -> list[tuple[Run, str | None, str]]:
        """One planned kill; a timed kill that lands after the end is redrawn (twice at most)
        over the duration that missed run actually had."""
        number, plan = job
        outcomes: list[tuple[Run, str | None, str]] = []
        estimate = latest[0]
        for attempt, fraction in enumerate(plan.fractions):
            seed = 100 + 10 * number + attempt
            if plan.at_ack:
                run = _run_child(db, seed, tmp_path, kill_at_ack=plan.at_ack)
            else:
                run = _run_child(db, seed, tmp_path, kill_after_s=fraction * estimate)
            episode_id, phase = _check_store(db, run)
            outcomes.append((run, episode_id, phase))
            if phase != "after the end" or plan.at_ack:
                break
            estimate = latest[0] = run.duration_s or estimate  # the machine got faster
        return outcomes

    with ThreadPoolExecutor(PARALLEL) as pool:
        results = [o for outcomes in pool.map(kill, enumerate(plans)) for o in outcomes]

    # every killed episode is still whole and interrupted after all the later kills
    for run, _, phase in results:
        assert _check_store(db, run)[1] == phase
    with TraceStore(db) as store:
        assert len(store.list_episodes()) == len([r for r in results if r[1]]) + PARALLEL

    phases = Counter(phase for _, _, phase in results)
    mid_episode = sum(phases[p] for p in ("model streaming", "tool execution", "between turns"))
    print(
        f"\nSIGKILL sent to {len(results)} runs in {time.monotonic() - began:.1f} s (episode"
        f" {duration:.2f} s, {len(events)} events); where they landed: {dict(phases)}"
    )
    assert mid_episode >= MIN_MID_EPISODE_KILLS, phases
    assert phases["model streaming"] and phases["tool execution"], phases
    with TraceStore(db) as store:  # a completed episode's reward follows from its change alone
        done = next(e for e in store.list_episodes() if e.status == "completed")
        check = verify_episode(store, done.episode_id, RewardVerifier(), save=False)
    assert (check.passed, check.score) == (True, 1.0), check.details
