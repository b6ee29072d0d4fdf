"""SIGKILL while a decision point's continuations run, then resume: the decision finishes
with exactly K x M continuations, none run twice (each ends once; one that had ended
before the kill is not touched), and adopts what an uninterrupted run adopts."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_branching import SUBMIT, _adopted, _script

from agentrunner import Branching, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.decisions import PROPOSAL, decisions
from agentrunner.lifecycle.resume import resume_episode
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.slow

K, M = 2, 3
KILLS = 16
PACE_S = 0.004
RANDOM_SEED = 20261201
BRANCHING = Branching(every=4, actions=K, samples=M, concurrency=2)

CHILD = r"""
import sys
from agentrunner import Branching, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

db, script, snaps = sys.argv[1], sys.argv[2], sys.argv[5]
seed, pace = int(sys.argv[3]), float(sys.argv[4])
with TraceStore(db) as store, WorkspaceEnv(snapshot_dir=snaps) as env:
    run_agent_episode(
        env=env, task_id="demo-mean", seed=seed, model_fn=ScriptedModel(script, pace=pace),
        store=store, branching=Branching(every=4, actions=2, samples=3, concurrency=2),
    )
"""


def _main_of(store: TraceStore, seed: int) -> str | None:
    roots = [e for e in store.list_episodes() if e.parent_episode_id is None and e.seed == seed]
    return roots[0].episode_id if roots else None


def _continuations(store: TraceStore, main: str) -> list[str]:
    groups = list(decisions(store, main))
    if not groups:
        return []
    return [m.episode_id for m in groups[0].members if m.sample != PROPOSAL]


def _ends(store: TraceStore, fork: str) -> int:
    return sum(1 for e in store.last_events(fork, 10_000) if e.kind == "episode.end")


def test_a_decision_point_killed_mid_continuations_resumes_to_the_same_choice(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, [SUBMIT, "fix"])
    db = tmp_path / "traces.db"
    with TraceStore(tmp_path / "reference.db") as ref, WorkspaceEnv() as env:
        started = time.monotonic()
        reference = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=ScriptedModel(script.model, pace=PACE_S),
            store=ref,
            branching=BRANCHING,
        )
        window = time.monotonic() - started  # the kills land within the whole decision
        expected = ref.message(_adopted(ref, reference.episode_id, 4).message_hash)
    rng = random.Random(RANDOM_SEED)
    during = 0
    with TraceStore(db) as store:
        for seed in range(KILLS):
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    CHILD,
                    str(db),
                    script.model,
                    str(seed),
                    str(PACE_S),
                    str(tmp_path / f"snaps-{seed}"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            main = None
            while main is None or len(_continuations(store, main)) < K * M:
                assert child.poll() is None, "the run ended before its continuations began"
                time.sleep(0.005)
                main = main or _main_of(store, seed)
            time.sleep(rng.uniform(0, window / 4))
            child.send_signal(signal.SIGKILL)
            child.wait()
            ended_before = {c: _ends(store, c) for c in _continuations(store, main)}
            events_before = {
                c: store.episode(c).last_seq for c, n in ended_before.items() if n == 1
            }
            during += any(n == 0 for n in ended_before.values())
            resumed = resume_episode(store, main, model_fn=ScriptedModel(script.model, pace=0))
            (group,) = decisions(store, main)
            members = group.members
            assert sorted((m.candidate, m.sample) for m in members) == sorted(
                [(i, PROPOSAL) for i in range(K)] + [(i, j) for i in range(K) for j in range(M)]
            )
            assert len(store.children(main)) == K + K * M  # no fork made twice
            for fork in _continuations(store, main):
                assert store.episode(fork).status == "completed"
                assert _ends(store, fork) == 1, f"continuation {fork} ran twice"
            for fork, last in events_before.items():
                assert store.episode(fork).last_seq == last, f"{fork} was run again"
            adopted = store.message(_adopted(store, main, 4).message_hash)
            assert adopted == expected
            assert (resumed.status, resumed.total_reward) == ("completed", reference.total_reward)
    print(f"\n{KILLS} SIGKILLs during a decision point; {during} with continuations unfinished")
    assert during >= 10
