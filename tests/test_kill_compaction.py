"""SIGKILL inside a compaction call, then resume: the history ends as an uninterrupted run's
(issue 27's must-show).

A child process runs a ``summarize`` episode whose model, asked for the summary (a call with no
tools), says so on its stdout and then waits: the compaction's ``model.request`` is committed
and no answer to it is. The parent SIGKILLs it there, resumes the episode in this process, and
compares with the same episode run without a kill: the same message history, stop reason and
reward; the interrupted compaction is re-run once (one more compaction request at its turn),
and the log's seqs stay dense.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.readers.state import rebuild
from agentrunner.runtime.runner import RunConfig
from providers.scripted import ScriptedModel
from tests.test_context_policies import _printing_turns, _script

TURNS = 18
WINDOW = 4000

CHILD = r"""
import os, sys, time
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # stray prints go to stderr; stdout says where the child is
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.runtime.runner import RunConfig
from providers.scripted import ScriptedModel

db, script, snapshots = sys.argv[1], sys.argv[2], sys.argv[3]
turns, window = int(sys.argv[4]), int(sys.argv[5])
scripted = ScriptedModel(script, pace=0)


def model(context):
    if not context.tools:  # the summary's call: its request is committed; wait to be killed
        out.write("in compaction\n")
        out.flush()
        time.sleep(3600)
    return scripted(context)


config = RunConfig(max_turns=turns, context="summarize", context_window=window)
with TraceStore(db) as store, WorkspaceEnv(snapshot_dir=snapshots) as env:
    run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store, config=config)
out.write("finished without a compaction\n")
out.flush()
"""


def _config() -> RunConfig:
    return RunConfig(max_turns=TURNS, context="summarize", context_window=WINDOW)


def _compactions(store: TraceStore, episode_id: str) -> list[int]:
    return [
        e.turn
        for e in store.iter_events(episode_id, kinds=["model.request"])
        if e.payload["purpose"] == "compaction"
    ]


def test_a_kill_inside_a_compaction_call_resumes_to_the_uninterrupted_history(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path, _printing_turns(TURNS))
    with TraceStore(tmp_path / "reference.db") as store:
        with WorkspaceEnv(snapshot_dir=tmp_path / "ref-snaps") as env:
            reference = run_agent_episode(
                env=env,
                task_id="demo-mean",
                model_fn=ScriptedModel(str(script), pace=0),
                store=store,
                config=_config(),
            )
        expected = rebuild(store, reference.episode_id).messages
        expected_compactions = _compactions(store, reference.episode_id)
    assert expected_compactions, "the reference run made no compaction"

    db = tmp_path / "killed.db"
    argv = [str(db), str(script), str(tmp_path / "snaps"), str(TURNS), str(WINDOW)]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "in compaction\n"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

    with TraceStore(db) as store:
        (episode,) = store.list_episodes()
        rows = list(store.iter_events(episode.episode_id))
        assert rows[-1].kind == "model.request" and rows[-1].payload["purpose"] == "compaction"
        killed_at = rows[-1].turn
        with WorkspaceEnv(snapshot_dir=tmp_path / "resume-snaps") as env:
            resumed = resume_episode(
                store, episode.episode_id, env=env, model_fn=ScriptedModel(str(script), pace=0)
            )
        after = list(store.iter_events(episode.episode_id))
        (resume,) = [r.payload for r in after if r.kind == "resume"]
        assert (resumed.stop_reason, resumed.total_reward) == (
            reference.stop_reason,
            reference.total_reward,
        )
        assert rebuild(store, episode.episode_id).messages == expected
        assert _compactions(store, episode.episode_id) == [killed_at, *expected_compactions]
        assert killed_at == expected_compactions[0]
        assert [d["kind"] for d in resume["dangling"]] == ["model.request"]
        assert [r.seq for r in after] == list(range(1, len(after) + 1))
