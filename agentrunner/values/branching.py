"""Branching while running: what a running episode's decision points are (the settings).

``run_agent_episode(..., branching=Branching(every=2, actions=3, samples=4))`` (and ``run
--branch-every 2 --actions 3 --samples 4``) makes a decision point at model turns 2, 4, ...:
K candidate actions sampled at the exact input of that turn, M recorded continuations of
each, each candidate valued by its continuations' mean reward, and the main line continued
with the best one (``adopt="best"``) or with its own sample (``"measure"``). The decision
engine is :mod:`agentrunner.lifecycle.decisions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentrunner.values.environment import Environment
from agentrunner.values.errors import UsageError

KIND: Literal["decision"] = "decision"
"""``fork_groups.config.kind`` of a decision point (a fan-out's group has none)."""
Adopt = Literal["best", "measure"]
MAX_HORIZON = 500  # the runner's turn limit


class DecisionConfig(BaseModel):
    """The settings a decision point's fork group records (:meth:`Branching.config`)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: Literal["decision"] = KIND
    actions: int
    """K: candidate actions sampled."""
    samples: int
    """M: continuations run for each candidate."""
    adopt: Adopt = "best"
    horizon: int | None = None
    """Continuations ran this many turns past the decision (None: to their end)."""


@dataclass(frozen=True)
class Branching:
    """Where and how a running episode branches."""

    every: int
    """Branch at model turns ``every``, ``2 * every``, ..."""
    actions: int
    """K: candidate actions sampled at each decision point."""
    samples: int
    """M: continuations run for each candidate."""
    adopt: Adopt = "best"
    horizon: int | None = None
    """Continuations run this many turns past the decision (None: to their end)."""
    concurrency: int = 4
    """Forks run at once."""
    max_cost: float | None = None
    """Stop branching (not the episode) once branching has cost this many USD."""
    env_factory: Callable[[], Environment] | None = field(default=None, compare=False)
    """Makes a fork's environment (default: rebuilt from the recorded spec, which the
    bundled workspace and OpenEnv environments are; a custom Python one needs this)."""

    def __post_init__(self) -> None:
        if min(self.every, self.actions, self.samples, self.concurrency) < 1:
            raise UsageError(
                "`branch_every`, `actions`, `samples` and `concurrency` must be at least 1",
                param="branching",
            )
        if self.adopt not in ("best", "measure"):
            raise UsageError(f"`adopt` must be best or measure, not {self.adopt!r}")
        if self.horizon is not None and not 1 <= self.horizon <= MAX_HORIZON:
            raise UsageError(f"`horizon` must be between 1 and {MAX_HORIZON}", param="horizon")
        if self.max_cost is not None and self.max_cost < 0:
            raise UsageError("`max_cost` must not be negative", param="max_cost")

    def at(self, turn: int) -> bool:
        """Whether model turn ``turn`` is a decision point."""
        return turn % self.every == 0

    def record(self) -> dict[str, Any]:
        """The settings as ``episode.start.config.branching`` records them (a resume of the
        episode goes on branching with them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.compare}

    @classmethod
    def recorded(cls, config: dict[str, Any]) -> Branching | None:
        """The settings an ``episode.start`` config recorded, if any."""
        value = config.get("branching")
        return cls(**value) if isinstance(value, dict) else None

    def config(self) -> dict[str, Any]:
        """What the decision point's fork group records of these settings."""
        settings = DecisionConfig(
            actions=self.actions, samples=self.samples, adopt=self.adopt, horizon=self.horizon
        )
        return settings.model_dump()
