"""Resume, fork, replay and rm on real scripted episodes in a real store file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, AgentToolCall, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.readers.state import rebuild
from agentrunner.values.errors import DivergenceError, EpisodeNotFoundError, UsageError
from providers import get_model


def _cancel_after(n: int):  # type: ignore[no-untyped-def]
    """A cancel_check that fires on its n-th poll (polls happen per chunk and per step)."""
    count = [0]

    def check() -> bool:
        count[0] += 1
        return count[0] > n

    return check


def _run(store: TraceStore, tmp_path: Path, **kw: Any):  # type: ignore[no-untyped-def]
    with WorkspaceEnv(snapshot_dir=tmp_path / "snapshots") as env:
        return run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store, **kw
        )


@pytest.fixture
def reference(store: TraceStore, tmp_path: Path) -> str:
    return str(_run(store, tmp_path).episode_id)


@pytest.mark.parametrize("polls", [2, 30, 45, 80, 120])
def test_resumed_cancelled_episode_ends_like_an_uninterrupted_one(
    store: TraceStore, tmp_path: Path, reference: str, polls: int
) -> None:
    cancelled = _run(store, tmp_path, cancel_check=_cancel_after(polls))
    assert cancelled.status == "cancelled"
    resumed = resume_episode(store, cancelled.episode_id)
    assert (resumed.status, resumed.total_reward) == ("completed", 1.0)
    assert rebuild(store, cancelled.episode_id).messages == rebuild(store, reference).messages


def test_resume_appends_attempt_two_with_a_resume_event(store: TraceStore, tmp_path: Path) -> None:
    ep = _run(store, tmp_path, cancel_check=_cancel_after(40)).episode_id
    resume_episode(store, ep)
    rows = list(store.iter_events(ep))
    resume = next(r for r in rows if r.kind == "resume")
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert resume.attempt == 2 and all(r.attempt == 2 for r in rows if r.seq > resume.seq)


def test_dangling_model_request_is_reissued_and_named_in_the_resume_event(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _run(store, tmp_path, cancel_check=_cancel_after(5)).episode_id
    resume_episode(store, ep)
    resume = store.events(ep, kinds=["resume"])[0].payload
    (dangling,) = resume["dangling"]
    assert dangling["kind"] == "model.request" and dangling["partial_chunks"] > 0
    turn1 = [e.payload["call_id"] for e in store.events(ep, kinds=["model.request"]) if e.turn == 1]
    assert turn1 == ["call-1-1", "call-1-2"]


def test_dangling_tool_call_is_rerun_once_without_a_second_tool_call(
    store: TraceStore, tmp_path: Path, script: Any
) -> None:
    stop = threading.Event()
    inner = script(
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "n.txt", "content": "1"}}
                ]
            },
            {"tool_calls": [{"name": "submit"}]},
        ]
    )

    def model(context: AgentContext) -> AgentTurn:
        turn = inner(context)
        stop.set()  # cancel right before the tool step: the tool.call is recorded, not run
        return turn

    with WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        ep = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store, cancel_check=stop.is_set
        ).episode_id
    rows = list(store.iter_events(ep))
    assert [r.kind for r in rows].count("tool.call") == 0  # cancelled before recording it
    resume_episode(store, ep, model_fn=inner)
    calls = [e.payload["call_id"] for e in store.events(ep, kinds=["tool.call"])]
    results = [e.payload["call_id"] for e in store.events(ep, kinds=["tool.result"])]
    assert calls == results == ["call_001_0", "call_002_0"]


def test_resuming_a_completed_episode_is_refused(store: TraceStore, reference: str) -> None:
    with pytest.raises(UsageError, match="is completed"):
        resume_episode(store, reference)


def test_resuming_an_unknown_episode_is_refused(store: TraceStore) -> None:
    with pytest.raises(EpisodeNotFoundError, match="no episode"):
        resume_episode(store, "NOPE")


def test_resuming_an_episode_another_process_writes_is_refused(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _run(store, tmp_path, cancel_check=_cancel_after(10)).episode_id
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom agentrunner import TraceStore\n"
            f"TraceStore({str(store.path)!r}).claim_writer({ep!r})\n"
            "print('ok', flush=True)\ntime.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        with pytest.raises(UsageError, match="being written by another run"):
            resume_episode(store, ep)
    finally:
        holder.kill()
        holder.wait()


def test_resume_restores_the_workspace_from_its_snapshot(store: TraceStore, tmp_path: Path) -> None:
    ep = _run(store, tmp_path, cancel_check=_cancel_after(110)).episode_id
    resume_episode(store, ep)
    resume = store.events(ep, kinds=["resume"])[0].payload
    assert resume["env_restore"].startswith("snapshot ")


def test_resume_without_snapshots_replays_the_recorded_actions(
    store: TraceStore, tmp_path: Path
) -> None:
    with WorkspaceEnv(snapshots=False) as env:
        ep = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=get_model("scripted:demo"),
            store=store,
            cancel_check=_cancel_after(110),
        ).episode_id
    with WorkspaceEnv(snapshots=False) as fresh:
        fresh_restore = resume_episode(store, ep, env=fresh)
    resume = store.events(ep, kinds=["resume"])[0].payload
    assert "replayed" in resume["env_restore"] and fresh_restore.total_reward == 1.0


def _clock_episode(store: TraceStore, script: Any) -> tuple[str, Any]:
    """An episode whose first step prints the clock, cancelled right after that step."""
    inner = script(
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "date +%s%N"}}]},
            {"tool_calls": [{"name": "submit"}]},
        ]
    )
    stop = threading.Event()

    def model(context: AgentContext) -> AgentTurn:
        if context.turn == 2:
            stop.set()
        return inner(context)

    with WorkspaceEnv(snapshots=False) as env:
        ep = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store, cancel_check=stop.is_set
        ).episode_id
    return ep, inner


def test_replay_divergence_stops_the_resume_with_a_report(store: TraceStore, script: Any) -> None:
    ep, model = _clock_episode(store, script)
    with WorkspaceEnv() as fresh, pytest.raises(DivergenceError, match="diverged at step 1"):
        resume_episode(store, ep, env=fresh, model_fn=model)


def test_accept_divergence_lets_the_resume_continue(store: TraceStore, script: Any) -> None:
    ep, model = _clock_episode(store, script)
    with WorkspaceEnv() as fresh:
        rollout = resume_episode(store, ep, env=fresh, model_fn=model, accept_divergence=True)
    assert rollout.status == "completed"


def test_fork_inherits_events_by_reference_and_numbers_its_own_after(
    store: TraceStore, reference: str
) -> None:
    (fork,) = fork_episode(store, reference, turn=3)
    resume_episode(store, fork)
    own = (
        store.raw_connection()
        .execute("SELECT min(seq) FROM events WHERE episode_id = ?", (fork,))
        .fetchone()
    )
    summary = store.episode(fork)
    assert own[0] == summary.fork_seq + 1
    assert [r.seq for r in store.iter_events(fork)] == list(range(1, summary.last_seq + 1))


def test_fork_never_changes_the_parent(store: TraceStore, reference: str) -> None:
    before = [r.to_dict() for r in store.iter_events(reference)]
    (fork,) = fork_episode(store, reference, turn=4, message="Check spread() as well.")
    resume_episode(store, fork)
    assert [r.to_dict() for r in store.iter_events(reference)] == before


def test_fork_history_is_what_the_model_saw_at_that_turn(store: TraceStore, reference: str) -> None:
    (fork,) = fork_episode(store, reference, turn=4)
    assert rebuild(store, fork).messages == store.reconstruct_request(reference, 4).messages


def test_fork_with_message_injects_it_before_the_resampled_turn(
    store: TraceStore, reference: str
) -> None:
    (fork,) = fork_episode(store, reference, turn=2, message="Read the tests first.")
    resume_episode(store, fork)
    request = store.reconstruct_request(fork, 2)
    assert request.messages[-1].content == "Read the tests first."


def test_fork_with_action_runs_the_edited_tool_call(store: TraceStore, reference: str) -> None:
    action = '{"name": "bash", "arguments": {"command": "echo edited"}}'
    (fork,) = fork_episode(store, reference, turn=4, action=action)
    resume_episode(store, fork)
    fork_seq = store.episode(fork).fork_seq
    results = [e.payload for e in store.events(fork, after_seq=fork_seq, kinds=["tool.result"])]
    assert results[0]["observation"].startswith("edited")


def test_fork_with_another_model_records_it(
    store: TraceStore, reference: str, tmp_path: Path
) -> None:
    (fork,) = fork_episode(store, reference, turn=2, model="scripted:demo")
    assert store.episode(fork).model["spec"] == "scripted:demo"


def test_n_forks_are_siblings(store: TraceStore, reference: str) -> None:
    forks = fork_episode(store, reference, turn=2, n=3)
    assert store.children(reference) == sorted(forks)


def test_lineage_tree_lists_parent_children_and_grandchildren(
    store: TraceStore, reference: str
) -> None:
    (child,) = fork_episode(store, reference, turn=5)
    resume_episode(store, child)
    (grandchild,) = fork_episode(store, child, turn=6)
    tree = store.tree(grandchild)
    assert [(node[0], node[3]) for node in tree] == [(reference, 0), (child, 1), (grandchild, 2)]
    assert store.ancestors(grandchild) == [child, reference]


def test_new_fork_is_pending_until_it_runs(store: TraceStore, reference: str) -> None:
    (fork,) = fork_episode(store, reference, turn=2)
    assert store.episode(fork).status == "pending"


def test_fork_at_a_turn_that_does_not_exist_is_refused(store: TraceStore, reference: str) -> None:
    with pytest.raises(UsageError, match="has no model turn 99"):
        fork_episode(store, reference, turn=99)


def test_rm_refuses_an_episode_a_fork_depends_on(store: TraceStore, reference: str) -> None:
    fork_episode(store, reference, turn=2)
    with pytest.raises(UsageError, match="depend on it"):
        store.remove_episode(reference)


def test_rm_removes_an_episode_and_its_events(store: TraceStore, reference: str) -> None:
    (fork,) = fork_episode(store, reference, turn=2)
    store.remove_episode(fork)
    store.remove_episode(reference)
    assert store.raw_connection().execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_delete_without_rm_is_still_refused_after_an_rm(store: TraceStore, reference: str) -> None:
    other = _run(store, Path(store.path).parent).episode_id
    store.remove_episode(reference)
    with pytest.raises(sqlite3.IntegrityError):
        store.raw_connection().execute("DELETE FROM events WHERE episode_id = ?", (other,))


def test_rebuilding_state_reads_the_exact_last_request(store: TraceStore, reference: str) -> None:
    state = rebuild(
        store, reference, upto_seq=store.events(reference, kinds=["model.request"])[-1].seq
    )
    assert state.open_request is not None
    assert (
        state.messages == store.reconstruct_request(reference, state.open_request["turn"]).messages
    )


class _Crash(BaseException):
    """Stands in for the process dying right after an event was committed."""


def _crashed_episode(store: TraceStore, tmp_path: Path, when: Callable[[int, Any], bool]) -> str:
    """Run the demo until ``when(turn, payload)`` holds for a committed event, then 'die'."""

    def observer(seq: int, turn: int, payload: Any) -> None:
        if when(turn, payload):
            raise _Crash

    with pytest.raises(_Crash), WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=get_model("scripted:demo"),
            store=store,
            observer=observer,
        )
    return store.list_episodes()[0].episode_id  # the newest


def test_episode_that_died_after_its_final_step_is_ended_without_running_more(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _crashed_episode(store, tmp_path, lambda t, p: p.kind == "tool.result" and p.done)
    requests = len(store.events(ep, kinds=["model.request"]))
    rollout = resume_episode(store, ep)
    assert (rollout.stop_reason, rollout.total_reward) == ("done", 1.0)
    assert len(store.events(ep, kinds=["model.request"])) == requests


def test_running_totals_from_the_writers_checkpoint_equal_a_full_scan(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _crashed_episode(store, tmp_path, lambda t, p: p.kind == "tool.result" and t == 5)
    episode = store.episode(ep)
    scanned = (episode.total_reward, episode.tokens, episode.cost_usd)
    middle = store.events(ep, kinds=["tool.result"])[2].seq
    partial = rebuild(store, ep, upto_seq=middle).totals
    store.claim_writer(ep)
    store.heartbeat(ep, (middle, partial.as_dict()))
    store.release_writer(ep)
    summary = store.episode(ep)
    assert (summary.total_reward, summary.tokens, summary.cost_usd) == scanned


def test_summary_reads_the_checkpoint_instead_of_rescanning_the_history(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _crashed_episode(store, tmp_path, lambda t, p: p.kind == "tool.result" and t == 4)
    first = store.events(ep, kinds=["tool.result"])[0].seq
    store.claim_writer(ep)
    store.heartbeat(ep, (first, {"reward": 100.0, "tokens": {"input": 7}, "cost_usd": None}))
    store.release_writer(ep)
    after = store.events(ep, after_seq=first, kinds=["usage"])
    summary = store.episode(ep)
    assert summary.status == "interrupted" and summary.total_reward == 100.0
    assert summary.tokens["input"] == 7 + sum(e.payload["input_tokens"] for e in after)


def test_resume_runs_a_pending_call_whose_id_an_earlier_turn_also_used(
    store: TraceStore, tmp_path: Path
) -> None:
    stop = threading.Event()

    def same_ids(context: AgentContext) -> AgentTurn:
        if context.turn == 3:
            stop.set()  # cancelled before turn 3's tool step runs
        name = "submit" if context.turn >= 3 else "list_files"
        return AgentTurn(tool_calls=(AgentToolCall(call_id="call_0", name=name),))

    with WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        ep = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=same_ids, store=store, cancel_check=stop.is_set
        ).episode_id
    (pending,) = rebuild(store, ep).pending
    rollout = resume_episode(store, ep, model_fn=same_ids)
    assert pending.call.name == "submit" and rollout.stop_reason == "done"


def test_a_fork_can_be_forked_again_at_its_edited_turn(store: TraceStore, reference: str) -> None:
    (edited,) = fork_episode(store, reference, turn=3, action='{"message": "thinking it over"}')
    (again,) = fork_episode(store, edited, turn=3)
    assert store.episode(again).fork_seq == store.episode(edited).fork_seq


def test_resumed_model_sees_the_last_observation_again(store: TraceStore, tmp_path: Path) -> None:
    seen: list[tuple[int, str | None]] = []
    stop = threading.Event()

    def model(context: AgentContext) -> AgentTurn:
        seen.append((context.turn, context.observation))
        call = ("read_file", '{"path": "stats.py"}') if context.turn == 2 else ("list_files", "{}")
        return AgentTurn(
            tool_calls=(AgentToolCall(call_id=f"c{context.turn}", name=call[0], arguments=call[1]),)
        )

    def observer(seq: int, turn: int, payload: Any) -> None:
        if payload.kind == "tool.result" and turn == 2:
            stop.set()  # cancelled between turns 2 and 3

    with WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        ep = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=model,
            store=store,
            cancel_check=stop.is_set,
            observer=observer,
            max_turns=3,
        ).episode_id
    read = store.events(ep, kinds=["tool.result"])[-1].payload["observation"]
    resume_episode(store, ep, model_fn=model)
    assert seen[-1] == (3, read) and "def mean" in read


def test_episode_that_died_before_its_first_event_runs_from_the_start(
    store: TraceStore, tmp_path: Path
) -> None:
    with WorkspaceEnv(snapshot_dir=tmp_path / "s") as env:
        ep = store.create_episode(
            task_id="demo-mean", seed=0, env=env.spec(), model={"spec": "scripted:demo"}
        )
    rollout = resume_episode(store, ep)
    assert (rollout.episode_id, rollout.status, rollout.total_reward) == (ep, "completed", 1.0)


@pytest.mark.parametrize("last", ["episode.start", "message"])
def test_episode_that_died_before_its_prompt_gets_it_on_resume(
    store: TraceStore, tmp_path: Path, reference: str, last: str
) -> None:
    ep = _crashed_episode(store, tmp_path, lambda t, p: p.kind == last)
    rollout = resume_episode(store, ep)
    messages = rebuild(store, ep).messages
    assert (rollout.status, rollout.total_reward) == ("completed", 1.0)
    assert messages == rebuild(store, reference).messages


def test_a_second_run_in_the_same_process_cannot_write_the_same_episode(
    store: TraceStore, tmp_path: Path
) -> None:
    ep = _run(store, tmp_path, cancel_check=_cancel_after(40)).episode_id
    assert store.claim_writer(ep)  # a first resume of it, still running in this process
    with pytest.raises(UsageError, match="being written by another run"):
        resume_episode(store, ep)
