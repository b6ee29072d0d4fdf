"""Where exported rows come from: decision points read from the store.

A *decision* is one assistant message in an episode's history: a model response (the
output of a ``model.request`` whose input is the chain ending at the message's parent) or an
edited assistant message a fork put in its place. Its parent hash is the exact input the
model saw, so prompts are rebuilt with :meth:`TraceStore.message_chain`, the same
reconstruction the runner and :meth:`TraceStore.reconstruct_request` use.

- :func:`last_decision`: an episode's last assistant message (SFT, KTO, GRPO completions).
- :func:`first_request`: an episode's first model request (its initial prompt).
- :func:`fork_points`: sibling branches at one fork point (a parent and its forks at the
  same ``fork_seq``, fan-out groups included) that answered the same prompt (DPO, GRPO).
- :func:`task_groups`: root episodes of one task that started from the same prompt (GRPO).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.types import Message, ToolSpec

_DECISION_KINDS = ("model.response", "message")


@dataclass(frozen=True)
class Decision:
    """An assistant message in ``episode_id``'s history, at ``seq`` (a dense history seq)."""

    episode_id: str
    seq: int
    turn: int
    message_hash: str

    def source(self) -> dict[str, object]:
        return {"episode_id": self.episode_id, "seq": self.seq, "turn": self.turn}


def _decision(
    episode_id: str, seq: int, turn: int, kind: str, payload: dict[str, Any]
) -> Decision | None:
    if kind == "model.response" and payload.get("stop_reason") != "incomplete":
        return Decision(episode_id, seq, turn, payload["message_hash"])
    if kind == "message" and payload.get("role") == "assistant":
        return Decision(episode_id, seq, turn, payload["message_hash"])
    return None


def last_decision(store: TraceStore, episode_id: str) -> Decision | None:
    """The episode's last assistant message (model response or edit), or None."""
    for seg in reversed(store.segments(episode_id)):
        hi = seg.end if seg.end is not None else 2**62
        rows = store.conn.execute(
            "SELECT seq, turn, kind, payload FROM events WHERE episode_id = ? AND kind IN"
            " ('model.response', 'message') AND seq >= ? AND seq <= ? ORDER BY seq DESC",
            (seg.episode_id, seg.start, hi),
        )
        for seq, turn, kind, payload in rows:
            found = _decision(episode_id, seq, turn, kind, json.loads(payload))
            if found is not None:
                return found
    return None


def first_decision_after(store: TraceStore, episode_id: str, after_seq: int) -> Decision | None:
    """The first assistant message after ``after_seq`` in the episode's history."""
    after = after_seq
    while True:
        rows = store.events(episode_id, after_seq=after, limit=64, kinds=_DECISION_KINDS)
        for row in rows:
            found = _decision(episode_id, row.seq, row.turn, row.kind, row.payload)
            if found is not None:
                return found
        if len(rows) < 64:
            return None
        after = rows[-1].seq


def first_request(store: TraceStore, episode_id: str) -> tuple[int, str, str] | None:
    """``(seq, tip_hash, tools_hash)`` of the episode's first model request."""
    rows = store.events(episode_id, limit=1, kinds=("model.request",))
    if not rows:
        return None
    p = rows[0].payload
    return rows[0].seq, p["tip_hash"], p["tools_hash"]


def tools_at(store: TraceStore, episode_id: str, seq: int) -> list[ToolSpec]:
    """The tools offered by the last model request at or before ``seq`` (else the first)."""
    tools_hash = None
    for row in store.iter_events(episode_id, kinds=("model.request",)):
        if row.seq > seq and tools_hash is not None:
            break
        tools_hash = row.payload["tools_hash"]
    return store.tools(tools_hash) if tools_hash is not None else []


def parent_hash(store: TraceStore, message_hash: str) -> str | None:
    row = store.conn.execute(
        "SELECT parent_hash FROM messages WHERE hash = ?", (message_hash,)
    ).fetchone()
    return None if row is None else row[0]


def after_prefix(full: list[Message], prefix: list[Message]) -> list[Message] | None:
    """``full`` without its leading ``prefix``; None if it does not start with it."""
    if full[: len(prefix)] != prefix:
        return None
    return full[len(prefix) :]


@dataclass(frozen=True)
class Branch:
    """One branch at a fork point: its episode and its decision at that point."""

    episode: EpisodeSummary
    decision: Decision


@dataclass
class ForkPoint:
    """Sibling branches of ``parent_episode_id`` at ``fork_seq`` that answered one prompt."""

    parent_episode_id: str
    fork_seq: int
    prompt_tip: str
    branches: list[Branch] = field(default_factory=list)
    group_ids: list[str] = field(default_factory=list)

    @property
    def turn(self) -> int:
        return self.branches[0].decision.turn

    def source(self) -> dict[str, object]:
        return {
            "episode_id": self.parent_episode_id,
            "seq": self.fork_seq,
            "turn": self.turn,
            "fork_groups": self.group_ids,
        }


def fork_points(store: TraceStore, selected: dict[str, EpisodeSummary]) -> list[ForkPoint]:
    """Fork points with at least two selected branches that answered the same prompt.

    The branches of a fork point are the parent (its own continuation) and its forks at that
    ``fork_seq``; forks that injected a different message answered a different prompt and
    form their own set.
    """
    children: dict[tuple[str, int], list[str]] = {}
    for eid, parent, fork_seq in store.conn.execute(
        "SELECT id, parent_episode_id, fork_seq FROM episodes"
        " WHERE parent_episode_id IS NOT NULL ORDER BY id"
    ):
        if eid in selected:
            children.setdefault((parent, fork_seq), []).append(eid)
    groups: dict[tuple[str, int], list[str]] = {}
    for gid, parent, fork_seq in store.conn.execute(
        "SELECT id, parent_episode_id, fork_seq FROM fork_groups ORDER BY id"
    ):
        groups.setdefault((parent, fork_seq), []).append(gid)
    points: list[ForkPoint] = []
    for (parent, fork_seq), kids in sorted(children.items()):
        members = ([parent] if parent in selected else []) + kids
        by_prompt: dict[str, ForkPoint] = {}
        for eid in members:
            decision = first_decision_after(store, eid, fork_seq)
            tip = parent_hash(store, decision.message_hash) if decision else None
            if decision is None or tip is None:
                continue
            point = by_prompt.setdefault(
                tip, ForkPoint(parent, fork_seq, tip, group_ids=groups.get((parent, fork_seq), []))
            )
            point.branches.append(Branch(selected[eid], decision))
        points.extend(p for p in by_prompt.values() if len(p.branches) >= 2)
    return points


def task_groups(
    store: TraceStore, episodes: Iterable[EpisodeSummary]
) -> list[tuple[str, str, list[EpisodeSummary]]]:
    """``(task_id, prompt_tip, episodes)``: root episodes of one task with the same first
    prompt (same task and seed, or any seeds when the seed does not change the prompt),
    two or more each."""
    by_key: dict[tuple[str, str], list[EpisodeSummary]] = {}
    for episode in episodes:
        if episode.parent_episode_id is not None:
            continue
        first = first_request(store, episode.episode_id)
        if first is not None:
            by_key.setdefault((episode.task_id, first[1]), []).append(episode)
    return [(task, tip, eps) for (task, tip), eps in by_key.items() if len(eps) >= 2]


def batch_ids(store: TraceStore, episode_ids: Iterable[str]) -> list[str]:
    """The batches these episodes belong to."""
    ids = list(episode_ids)
    marks = ", ".join("?" for _ in ids)
    rows = store.conn.execute(
        f"SELECT DISTINCT batch_id FROM batch_members WHERE episode_id IN ({marks})"
        " ORDER BY batch_id",
        ids,
    )
    return [r[0] for r in rows]
