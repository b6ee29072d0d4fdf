"""Crash safety end to end: SIGKILL a scripted episode at drawn points of its run (on its
N-th acknowledged event, N spread over the whole episode, mid-stream and mid-tool included),
resume it, and compare with an uninterrupted run of the same seed.

Each kill uses the harness of ``test_kill`` (a child process acknowledging every committed
event). After the kill the episode is resumed in this process, and must end completed with
the same final message history and reward as an uninterrupted run of the same seed, with
dense seqs, every acknowledged event still in place, and each dangling call handled once.
"""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_kill import (
    PARALLEL,
    PHASES,
    Run,
    _calibrate,
    _check_store,
    _run_child,
    store_location,
)

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.readers.state import rebuild
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.slow

SPREAD_KILLS = 28
CALL_KILLS = 4
EVENT_KILLS = 8
RANDOM_SEED = 7


def _reference(db: str, seed: int, snapshots: Path) -> tuple[list[object], float]:
    with TraceStore(db) as store, WorkspaceEnv(snapshot_dir=snapshots) as env:
        rollout = run_agent_episode(
            env=env,
            task_id="demo-mean",
            seed=seed,
            model_fn=ScriptedModel("demo", pace=0),
            store=store,
        )
        return list(rebuild(store, rollout.episode_id).messages), rollout.total_reward


def _resume_and_check(db: str, run: Run, episode_id: str, reference_db: Path, tmp: Path) -> None:
    expected_messages, expected_reward = _reference(reference_db, run.seed, tmp / "ref-snaps")
    with TraceStore(db) as store:
        rollout = resume_episode(store, episode_id, model_fn=ScriptedModel("demo", pace=0))
        rows = list(store.iter_events(episode_id))
        state = rebuild(store, episode_id)
        (resume,) = [r.payload for r in rows if r.kind == "resume"]
    assert (rollout.status, rollout.total_reward) == ("completed", expected_reward)
    assert state.messages == expected_messages
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert [(r.seq, r.kind) for r in rows][: len(run.acked)] == run.acked
    calls = Counter(r.payload["call_id"] for r in rows if r.kind == "tool.call")
    results = Counter(r.payload["call_id"] for r in rows if r.kind == "tool.result")
    assert set(calls.values()) <= {1} and set(results.values()) == {1}, (calls, results)
    for dangling in resume["dangling"]:
        if dangling["kind"] == "tool.call":
            assert results[dangling["call_id"]] == 1
        if dangling["kind"] == "model.request":
            reissued = [r for r in rows if r.kind == "model.request" and r.turn == dangling["turn"]]
            assert len(reissued) == 2 and reissued[-1].attempt == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_resume_after_sigkill_at_random_instants_matches_an_uninterrupted_run(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    (tmp_path / "tmp").mkdir()
    db = store_location(backend, tmp_path / "traces.db", request)
    reference_db = tmp_path / "reference.db"
    _, events = _calibrate(db, tmp_path)
    rng = random.Random(RANDOM_SEED)
    # Where the kills land is drawn over the episode's events, not its duration: a kill at a
    # drawn instant of a calibrated run lands later on a busy machine (or after the end),
    # while a kill on the N-th acknowledged event lands there whatever the load, and the
    # child, which goes on writing until the signal arrives, is still cut at an arbitrary
    # point of what follows.
    last = len(events) - 2  # leave the end alone: a kill there resumes nothing
    spread = [1 + int((i + rng.random()) / SPREAD_KILLS * last) for i in range(SPREAD_KILLS)]
    calls = [i for i, (_, kind) in enumerate(events[:last], 1) if kind == "tool.call"]
    boundaries = [i for i, (_, kind) in enumerate(events[:last], 1) if kind != "model.chunk"]
    at = spread + calls[:CALL_KILLS] + [rng.choice(boundaries) for _ in range(EVENT_KILLS)]
    jobs = [(200 + i, position) for i, position in enumerate(at)]

    def kill_and_resume(job: tuple[int, int]) -> str:
        seed, at_ack = job
        run = _run_child(db, seed, tmp_path, kill_at_ack=at_ack)
        episode_id, phase = _check_store(db, run)
        if episode_id is not None and phase != "after the end":
            _resume_and_check(db, run, episode_id, reference_db, tmp_path)
        return phase

    with ThreadPoolExecutor(PARALLEL) as pool:
        phases = Counter(pool.map(kill_and_resume, jobs))
    resumed = sum(phases[p] for p in set(PHASES.values()))
    print(f"\n{len(jobs)} SIGKILLs, then resume; where they landed: {dict(phases)}")
    assert resumed >= 30, phases
    assert phases["model streaming"] and phases["tool execution"], phases
