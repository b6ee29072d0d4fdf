"""Read-side records the store returns (they carry identity: ids, seqs, hashes)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentrunner.errors import StoreCorruptError
from agentrunner.events import EventPayload, parse_payload
from agentrunner.types import Message, ToolSpec


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the event log. ``episode_id`` is the episode that physically owns it
    (an ancestor's id for events a fork inherits)."""

    episode_id: str
    seq: int
    attempt: int
    turn: int
    kind: str
    ts: str
    payload_json: str

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


@dataclass(frozen=True, slots=True)
class EpisodeSummary:
    """An episode with its derived status and totals (what ``ls`` shows)."""

    episode_id: str
    parent_episode_id: str | None
    fork_seq: int | None
    task_id: str
    seed: int
    created_at: str
    env: dict[str, Any]
    model: dict[str, Any]
    status: str
    stop_reason: str | None
    turns: int
    last_seq: int
    attempt: int
    total_reward: float
    tokens: dict[str, int]
    cost_usd: float | None
    writer_pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "parent_episode_id": self.parent_episode_id,
            "fork_seq": self.fork_seq,
            "task_id": self.task_id,
            "seed": self.seed,
            "model": self.model.get("spec"),
            "env": self.env.get("kind"),
            "status": self.status,
            "stop_reason": self.stop_reason,
            "turns": self.turns,
            "last_seq": self.last_seq,
            "attempt": self.attempt,
            "total_reward": self.total_reward,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "created_at": self.created_at,
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
