"""Read-side records the store returns (they carry identity: ids, seqs, hashes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentrunner.values.errors import StoreCorruptError
from agentrunner.values.spec_text import env_kind, model_text

if TYPE_CHECKING:  # the event and spec models load pydantic: imported where they are read
    from agentrunner.values.events import EventPayload
    from agentrunner.values.specs import EnvSpec, ModelSpec
    from agentrunner.values.statuses import Status, StopReason
    from agentrunner.values.types import Message, ToolSpec


def iso(ts_us: int) -> str:
    """Microseconds since the epoch as the contract's ISO 8601 UTC text."""
    return datetime.fromtimestamp(ts_us / 1_000_000, UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the event log. ``episode_id`` is the episode that physically owns it
    (an ancestor's id for events a fork inherits)."""

    episode_id: str
    seq: int
    attempt: int
    turn: int
    kind: str
    ts_us: int
    """When it was written: microseconds since the epoch (UTC)."""
    payload_json: str

    @property
    def ts(self) -> str:
        """When it was written, as the contract's ISO 8601 UTC text (made when asked: a
        transcript of 100,000 events never shows it)."""
        return iso(self.ts_us)

    @property
    def payload(self) -> dict[str, Any]:
        try:
            value = json.loads(self.payload_json)
        except json.JSONDecodeError as exc:
            raise StoreCorruptError(
                f"event {self.episode_id}:{self.seq} has a payload that is not JSON ({exc.msg})"
            ) from None
        if not isinstance(value, dict):
            raise StoreCorruptError(f"event {self.episode_id}:{self.seq} payload is not an object")
        return value

    def typed(self) -> EventPayload:
        from agentrunner.values.events import parse_payload

        return parse_payload(self.kind, self.payload)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "seq": self.seq,
            "attempt": self.attempt,
            "turn": self.turn,
            "kind": self.kind,
            "ts": self.ts,
            "payload": self.payload,
        }


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of an episode's history stored under one episode id: seqs in [start, end]."""

    episode_id: str
    start: int
    end: int | None  # None: open-ended (the episode's own rows)
    key: int = 0  # the episode's integer key in the event log


PROPOSAL_SAMPLE = -1
"""The ``sample`` of a fan-out proposal fork (``agentrunner.lifecycle.fanout.PROPOSAL``): a fork
that re-sampled the turn once to propose a candidate, not a continuation of one."""


@dataclass(frozen=True, slots=True)
class ForkGroupRole:
    """An episode's place in a fan-out fork group: candidate ``candidate``, continuation
    ``sample`` (``PROPOSAL_SAMPLE``: the fork that proposed the candidate)."""

    group_id: str
    candidate: int
    sample: int

    @property
    def proposal(self) -> bool:
        return self.sample == PROPOSAL_SAMPLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "candidate": self.candidate,
            "sample": self.sample,
            "proposal": self.proposal,
        }


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """An episode with its derived status and totals (what ``ls`` shows).

    ``tokens`` and ``cost_usd`` are the episode's own spend: for a fork, the model calls it
    made after its fork point. What a fork's history inherits from its ancestors is in
    ``inherited_tokens`` and ``inherited_cost_usd`` (zero and None for a root), so summing
    ``tokens`` over a family counts every call once. ``total_reward`` is the return of the
    episode's whole history (inherited steps included), as ``episode.end`` records it; None
    when no step of it carries a reward (nothing judged it: unknown, never 0)."""

    episode_id: str
    parent_episode_id: str | None
    fork_seq: int | None
    task_id: str
    seed: int
    created_at: str
    env: dict[str, Any]
    model: dict[str, Any]
    status: Status
    stop_reason: StopReason | str | None
    """As the episode's last ``episode.end`` recorded it (an imported trace may give one of
    its own); ``imported`` for an imported session that recorded no end; None: not ended."""
    turns: int
    last_seq: int
    attempt: int
    total_reward: float | None
    tokens: dict[str, int]
    cost_usd: float | None
    writer_pid: int | None = None
    inherited_tokens: dict[str, int] = field(default_factory=dict)
    inherited_cost_usd: float | None = None
    fork_group: ForkGroupRole | None = None

    @property
    def model_spec(self) -> ModelSpec:
        """The recorded ``model``, typed."""
        from agentrunner.values.specs import model_spec

        return model_spec(self.model)

    @property
    def env_spec(self) -> EnvSpec:
        """The recorded ``env``, typed by its kind."""
        from agentrunner.values.specs import env_spec

        return env_spec(self.env)

    @property
    def model_text(self) -> str:
        """The recorded model's spec (``model_spec.spec``, read without validating)."""
        return model_text(self.model)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "parent_episode_id": self.parent_episode_id,
            "fork_seq": self.fork_seq,
            "task_id": self.task_id,
            "seed": self.seed,
            "model": self.model_text,
            "env": env_kind(self.env),
            "status": self.status,
            "stop_reason": self.stop_reason,
            "turns": self.turns,
            "last_seq": self.last_seq,
            "attempt": self.attempt,
            "total_reward": self.total_reward,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "inherited_tokens": self.inherited_tokens,
            "inherited_cost_usd": self.inherited_cost_usd,
            "fork_group": self.fork_group.to_dict() if self.fork_group else None,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class EpisodeFilter:
    """Which episodes a listing keeps. ``task_id`` and ``model`` (the model spec) take
    shell-style wildcards (``openai:*``); ``batch_id`` and ``parent_episode_id`` are full
    ids; ``status`` is the derived status. None: no filter."""

    task_id: str | None = None
    model: str | None = None
    batch_id: str | None = None
    parent_episode_id: str | None = None
    status: str | None = None
    roots_only: bool = False
    """Leave forks out (before their summaries are computed)."""
    served_session: str | None = None
    """Only episodes ``agentrunner serve-env`` served in this session (its ``env.served``)."""


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """A batch run and how its episodes stand (what ``ls --batches`` shows). ``pairs`` is the
    number of (task, seed) pairs it was started with, ``episodes`` how many have an episode
    so far; ``mean_reward`` is over the completed ones, ``cost_usd`` over all of them."""

    batch_id: str
    name: str | None
    model: str | None
    created_at: str
    pairs: int
    episodes: int
    completed: int
    mean_reward: float | None
    cost_usd: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "name": self.name,
            "model": self.model,
            "created_at": self.created_at,
            "pairs": self.pairs,
            "episodes": self.episodes,
            "completed": self.completed,
            "mean_reward": self.mean_reward,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True, slots=True)
class ModelInput:
    """The exact input of one model call, rebuilt from the store."""

    messages: list[Message]
    tools: list[ToolSpec]
    params: dict[str, Any] = field(default_factory=dict)
    provider: str = ""
    model: str = ""
    tip_hash: str = ""
