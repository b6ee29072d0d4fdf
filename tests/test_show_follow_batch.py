"""``show --follow`` of a batch member follows it through its batch resuming it: an
interruption (a Ray worker killed) is not the end while the batch may still submit it again.
It stays on while another member of the batch runs (or for a grace period after the
interruption), says so on stderr, and ends when the episode ends or the batch stops."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from cli_process import AGENTRUNNER

from agentrunner import TraceStore
from agentrunner.cli import show_cmd
from agentrunner.cli.main import main
from agentrunner.values.events import EpisodeEnd, EpisodeStart, Resume

FOLLOWING_ON = "its batch may resume it"


def _batch_of_two(db_path: Path) -> tuple[TraceStore, str, str]:
    """A batch whose first member's writer died after its start (interrupted)."""
    store = TraceStore(db_path)
    members = store.add_batch("b1", {"x": 1}, [("t", 0, {}, {}), ("t", 1, {}, {})])
    first, second = members[("t", 0)], members[("t", 1)]
    with store.lease(first):
        start = EpisodeStart(task_id="t", seed=0, env={}, model={}, config={}, version="0")
        store.writer(first).append(0, start)
    assert store.episode(first).status == "interrupted"
    return store, first, second


def test_follow_stays_on_an_interrupted_member_while_its_batch_runs_and_sees_it_resumed(
    db_path: Path,
) -> None:
    store, first, second = _batch_of_two(db_path)
    with store.lease(second):  # the other member runs (this process is its writer)
        follower = subprocess.Popen(
            [*AGENTRUNNER, "show", first, "--follow", "--db", str(db_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follower.stderr is not None
        said: list[str] = []
        reading = threading.Thread(target=lambda: said.append(follower.stderr.readline()))
        reading.start()
        reading.join(120)
        assert said and FOLLOWING_ON in said[0], (said, follower.poll())
        assert follower.poll() is None  # still following
        with store.lease(first):  # the batch submits it again: it resumes and ends
            writer = store.writer(first)
            writer.append(0, Resume(from_seq=1, env_restore="replayed"))
            end = EpisodeEnd(stop_reason="done", turns=0, total_reward=1.0)
            writer.append(0, end)
        out, err = follower.communicate(timeout=120)
    store.close()
    assert follower.returncode == 0, err
    assert "resume" in out and "completed" in out.splitlines()[-1]


def test_follow_ends_on_an_interrupted_member_once_nothing_of_its_batch_runs(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, first, _ = _batch_of_two(db_path)
    store.close()
    monkeypatch.setattr(show_cmd, "RESUME_GRACE_S", 0.0)
    assert main(["show", first, "--follow", "--db", str(db_path)]) == 0
    assert "interrupted" in capsys.readouterr().out.splitlines()[-1]


def test_follow_of_an_interrupted_episode_outside_any_batch_ends_at_once(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with TraceStore(db_path) as store:
        episode_id = store.create_episode(task_id="t", seed=0, env={}, model={}, claim=True)
        start = EpisodeStart(task_id="t", seed=0, env={}, model={}, config={}, version="0")
        store.writer(episode_id).append(0, start)
        store.release_writer(episode_id)
    assert main(["show", episode_id, "--follow", "--db", str(db_path)]) == 0
    captured = capsys.readouterr()
    assert "interrupted" in captured.out.splitlines()[-1] and FOLLOWING_ON not in captured.err
