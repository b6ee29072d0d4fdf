"""The test-command verifier: run a command against an episode's final workspace.

The episode's recorded change is applied to its base (from the store alone: what ``diff``
shows, no ``__pycache__``) in a fresh sandboxed copy, the command runs there (with the
task's hidden files laid over the copy for that run, as ``submit`` does), and it scores 1.0
on exit status 0, or the fraction of test cases that passed in a JUnit XML report taken
through a pipe as the command writes it.
"""

from __future__ import annotations

from typing import Any

from agentrunner.envs.factory import env_from_spec
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.readers.changes import episode_change, workspace_spec
from agentrunner.values.errors import UsageError
from agentrunner.values.events import EpisodeStart
from agentrunner.verifiers.base import Trajectory, Verdict


class TestVerifier:
    """Scores an episode by running a test command on its final workspace."""

    __test__ = False  # not a pytest test class

    def __init__(self, command: str, *, report: str | None = None, name: str = "test") -> None:
        if not command.strip():
            raise UsageError("--test needs a command")
        self.command = command
        self.report = report
        self.name = name

    def spec(self) -> dict[str, Any]:
        return {"kind": "test", "command": self.command, "report": self.report}

    def verify(self, trajectory: Trajectory) -> Verdict:
        store = trajectory.store
        episode_id = trajectory.episode.episode_id
        change = episode_change(store, episode_id)
        rows = store.events(episode_id, kinds=["episode.start"], limit=1)
        start = rows[0].typed() if rows else None
        if not isinstance(start, EpisodeStart):
            raise UsageError(f"episode {episode_id} has no start event")
        env = env_from_spec(workspace_spec(start.env), store)
        if not isinstance(env, WorkspaceEnv):
            raise UsageError(f"episode {episode_id} did not run in a workspace")
        try:
            env.reset(start.task_id, start.seed)
            env.restore(change.after)
            hidden = env.current_task.hidden_files
            outcome = env.run_test(self.command, report=self.report, hidden=hidden)
        finally:
            env.close()
        details = {**outcome.to_dict(), "snapshot": change.after}
        return Verdict(score=outcome.reward, passed=outcome.passed_all, details=details)
