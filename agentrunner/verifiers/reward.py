"""The reward check: does the store reproduce an episode's recorded reward?

:class:`RewardVerifier` runs the episode's own check again (its task's hidden verifier or its
test command) on a clean copy of the recorded change, restored from the store alone, and
compares the reward with the one its ``submit`` recorded. Its results are stored under the
name :data:`REWARD_VERIFIER`; a result that did not pass means the recorded reward did not
follow from the recorded change, and ``ls``, ``show`` and ``report`` flag the episode.
"""

from __future__ import annotations

from typing import Any

from agentrunner.envs.factory import env_from_spec
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.readers.changes import episode_change
from agentrunner.store.verifications import REWARD_VERIFIER
from agentrunner.values.errors import UsageError
from agentrunner.values.events import EpisodeStart, ToolResult
from agentrunner.values.specs import WorkspaceSpec
from agentrunner.verifiers.base import Trajectory, Verdict

_TOLERANCE = 1e-9


class RewardVerifier:
    """Re-scores an episode's final recorded change with its own check, from the store."""

    def __init__(self, name: str = REWARD_VERIFIER) -> None:
        self.name = name

    def spec(self) -> dict[str, Any]:
        return {"kind": "reward"}

    def verify(self, trajectory: Trajectory) -> Verdict:
        store = trajectory.store
        episode_id = trajectory.episode.episode_id
        rows = store.events(episode_id, kinds=["episode.start"], limit=1)
        start = rows[0].typed() if rows else None
        if not isinstance(start, EpisodeStart):
            raise UsageError(f"episode {episode_id} has no start event")
        recorded = _submitted_reward(trajectory)
        if not isinstance(start.env_spec, WorkspaceSpec) or recorded is None:
            why = "it never submitted" if recorded is None else "it did not run in a workspace"
            return self._nothing(f"nothing to reproduce: {why}")
        change = episode_change(store, episode_id)
        env = env_from_spec(start.env, store)
        assert isinstance(env, WorkspaceEnv)
        try:
            env.reset(start.task_id, start.seed)
            env.restore(change.after)
            result = env.check()
        finally:
            env.close()
        reproduced = float(result.reward or 0.0)
        agrees = abs(reproduced - recorded) <= _TOLERANCE
        details = {
            "spec": self.spec(),
            "recorded": recorded,
            "reproduced": reproduced,
            "agrees": agrees,
            "snapshot": change.after,
            "observation": result.observation[:2000],
        }
        return Verdict(score=reproduced, passed=agrees, details=details)

    def _nothing(self, note: str) -> Verdict:
        return Verdict(score=None, passed=True, details={"spec": self.spec(), "note": note})


def _submitted_reward(trajectory: Trajectory) -> float | None:
    """The reward the episode's last ``submit`` recorded (None: it never submitted)."""
    store, episode_id = trajectory.store, trajectory.episode.episode_id
    reward: float | None = None
    for row in store.iter_events(episode_id, kinds=["tool.result"]):
        result = row.typed()
        ran = isinstance(result, ToolResult) and (result.step is not None or result.done)
        if ran and isinstance(result, ToolResult) and result.name == "submit":
            reward = float(result.reward or 0.0)
    return reward
