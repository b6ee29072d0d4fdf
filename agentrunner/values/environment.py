"""The ``Environment`` protocol the runner drives, and the values it exchanges with it."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agentrunner.values.types import ToolSpec


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResetResult(_Value):
    """What an environment shows the model at the start of an episode."""

    prompt: str
    system: str | None = None
    tools: tuple[ToolSpec, ...]
    max_steps: int | None = None


class ToolAction(_Value):
    """One environment step: a tool name and its parsed arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class StepResult(_Value):
    """The outcome of one environment step.

    ``observation`` is exactly what the model will see. ``error`` marks a tool-level
    failure the model should read and recover from (bad path, missing match); a broken
    environment raises :class:`agentrunner.values.errors.EnvironmentFailure` instead.
    ``truncated`` says the environment's horizon (``max_steps``) ended the episode.
    """

    observation: str
    reward: float | None = None
    done: bool = False
    truncated: bool = False
    error: str | None = None
    snapshot: str | None = None
    info: dict[str, Any] = Field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    """An environment the runner can drive: reset with a task and seed, then step."""

    def spec(self) -> dict[str, Any]:
        """A JSON description (kind, tasks source, ...) recorded in ``episode.start``."""
        ...

    def reset(self, task_id: str, seed: int) -> ResetResult: ...

    def step(self, action: ToolAction) -> StepResult: ...

    def close(self) -> None: ...


@runtime_checkable
class Restorable(Protocol):
    """An environment that can return to a snapshot a step produced (``StepResult.snapshot``)."""

    def restore(self, snapshot_id: str, *, steps: int | None = None) -> None: ...


class SnapshotBackend(Protocol):
    """Where an environment keeps workspace snapshots (the trace store implements it)."""

    def missing_blobs(self, hashes: Collection[str]) -> set[str]: ...

    def put_blobs(self, items: Iterable[tuple[str, Iterable[bytes]]]) -> int: ...

    def read_blob(self, digest: str) -> bytes: ...

    def put_snapshot(
        self,
        snapshot_id: str,
        parent_id: str | None,
        depth: int,
        changes: str,
        files: int,
        size: int,
    ) -> None: ...

    def snapshot_changes(self, snapshot_id: str) -> list[str] | None: ...


@runtime_checkable
class UsesStore(Protocol):
    """An environment that keeps its snapshots in the trace store it is run against."""

    def bind_store(self, store: SnapshotBackend) -> None: ...
