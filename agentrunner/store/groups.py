"""Side tables that group episodes: fork groups (fan-outs and decision points) and the outcomes
decision points recorded, read back typed (batches are the store's own: ``ensure_batch``,
``batch_members``, ``batch_config``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter
from ulid import ULID

from agentrunner.store.eventlog import now_us
from agentrunner.store.records import iso
from agentrunner.values.branching import KIND, DecisionConfig
from agentrunner.values.critical import critical

if TYPE_CHECKING:
    from agentrunner.store.core import StoreCore


@dataclass(frozen=True)
class GroupMember:
    """One fork of a fan-out: candidate ``candidate``, continuation ``sample``."""

    episode_id: str
    candidate: int
    sample: int
    action: Any


class FanOutConfig(BaseModel):
    """What a fan-out (``agentrunner.lifecycle.fanout.score_actions``) recorded of how it was asked:
    the given candidate ``actions`` or ``k`` to sample, ``n`` continuations of each."""

    model_config = ConfigDict(extra="allow", frozen=True)
    actions: list[Any] = Field(default_factory=list)
    k: int | None = None
    n: int = 1
    horizon: int | None = None
    model: str | None = None


def _config_tag(config: Any) -> str:
    """A decision point's config names its kind; a fan-out's has none."""
    kind = config.get("kind") if isinstance(config, dict) else getattr(config, "kind", None)
    return KIND if kind == KIND else "fanout"


GroupConfig = Annotated[
    Annotated[FanOutConfig, Tag("fanout")] | Annotated[DecisionConfig, Tag(KIND)],
    Discriminator(_config_tag),
]
_CONFIG: TypeAdapter[GroupConfig] = TypeAdapter(GroupConfig)


@dataclass(frozen=True)
class ForkGroup:
    """A fork group: forks of ``parent_episode_id`` at ``fork_seq`` (model turn ``turn``)."""

    group_id: str
    parent_episode_id: str
    fork_seq: int
    turn: int
    created_at: str
    config: GroupConfig
    members: list[GroupMember]
    """By (candidate, sample): a decision point's proposals first."""

    @property
    def decision(self) -> DecisionConfig | None:
        """The decision point's settings (None: a fan-out's group)."""
        return self.config if isinstance(self.config, DecisionConfig) else None


class OutcomeCandidate(BaseModel):
    """One candidate as a decision's outcome valued it (over its completed continuations)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    candidate: int
    proposal: str
    value: float
    spread: float
    n: int
    duplicate_of: int | None = None
    continuations: list[str] = Field(default_factory=list)
    rewards: list[float] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    """Continuations that failed for good: listed, not valued."""


class DecisionOutcome(BaseModel):
    """What a decision point decided: its candidates' values and the adopted one (None: it
    had no candidate)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    adopted: int | None
    candidates: list[OutcomeCandidate]


def create_fork_group(
    store: StoreCore, parent_episode_id: str, fork_seq: int, turn: int, config: dict[str, Any]
) -> str:
    group_id = str(ULID())
    with critical:
        store._conn.execute(
            "INSERT INTO fork_groups (id, parent_episode_id, fork_seq, turn, created_at, config)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (group_id, parent_episode_id, fork_seq, turn, iso(now_us()), json.dumps(config)),
        )
    return group_id


def add_group_member(store: StoreCore, group_id: str, member: GroupMember) -> None:
    with critical:
        store._conn.execute(
            "INSERT INTO fork_group_members (group_id, episode_id, candidate, sample, action)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                group_id,
                member.episode_id,
                member.candidate,
                member.sample,
                json.dumps(member.action) if member.action is not None else None,
            ),
        )


def fork_groups(store: StoreCore, parent_episode_id: str | None = None) -> list[ForkGroup]:
    """Fork groups (optionally of one parent), each with its members."""
    where, args = (
        ("WHERE parent_episode_id = ?", (parent_episode_id,)) if parent_episode_id else ("", ())
    )
    groups = []
    for gid, parent, fork_seq, turn, created, config in store._conn.execute(
        f"SELECT id, parent_episode_id, fork_seq, turn, created_at, config FROM fork_groups"
        f" {where} ORDER BY id",
        args,
    ).fetchall():
        members = [
            GroupMember(r[0], r[1], r[2], json.loads(r[3]) if r[3] else None)
            for r in store._conn.execute(
                "SELECT episode_id, candidate, sample, action FROM fork_group_members"
                " WHERE group_id = ? ORDER BY candidate, sample",
                (gid,),
            )
        ]
        groups.append(
            ForkGroup(gid, parent, fork_seq, turn, created, _CONFIG.validate_json(config), members)
        )
    return groups


def record_outcome(store: StoreCore, group_id: str, outcome: DecisionOutcome) -> None:
    """Keep what a decision point decided (the first record stands: a resumed decision
    decides the same)."""
    with critical:
        store._conn.execute(
            store.sql.keep_existing(
                "INSERT INTO decision_outcomes (group_id, outcome, created_at) VALUES (?, ?, ?)"
            ),
            (group_id, json.dumps(outcome.model_dump(), sort_keys=True), iso(now_us())),
        )


def outcomes(store: StoreCore, group_ids: list[str]) -> dict[str, DecisionOutcome]:
    """The recorded outcomes of these decision points, by group id (undecided ones absent)."""
    out: dict[str, DecisionOutcome] = {}
    for i in range(0, len(group_ids), 500):
        part = group_ids[i : i + 500]
        marks = ", ".join("?" for _ in part)
        for group_id, text in store._conn.execute(
            f"SELECT group_id, outcome FROM decision_outcomes WHERE group_id IN ({marks})", part
        ).fetchall():
            out[group_id] = DecisionOutcome.model_validate_json(text)
    return out


def memberships(store: StoreCore) -> dict[str, list[str]]:
    """The batches each episode belongs to (one query)."""
    out: dict[str, list[str]] = {}
    for batch_id, episode_id in store._conn.execute(
        "SELECT batch_id, episode_id FROM batch_members ORDER BY batch_id"
    ).fetchall():
        out.setdefault(episode_id, []).append(batch_id)
    return out
