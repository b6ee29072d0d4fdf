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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentrunner.readers.history import History
from agentrunner.store import EpisodeSummary, EventRow
from agentrunner.values.events import ModelRequest
from agentrunner.values.types import Message, ToolSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

_DECISION_KINDS = ("model.response", "message")  # the events that make assistant messages


@dataclass(frozen=True)
class Decision:
    """An assistant message in ``episode_id``'s history, at ``seq`` (a dense history seq)."""

    episode_id: str
    seq: int
    turn: int
    message_hash: str

    def source(self) -> dict[str, object]:
        return {"episode_id": self.episode_id, "seq": self.seq, "turn": self.turn}


def _decisions(episode_id: str, rows: Iterable[EventRow]) -> Iterator[Decision]:
    """The assistant messages of these events, in order, as the one fold of the log sees
    them (a complete model response, or an edited assistant message)."""
    history = History()
    for row in rows:
        before = history.last_assistant
        history.add(row)
        if history.last_assistant is not None and history.last_assistant != before:
            yield Decision(episode_id, row.seq, row.turn, history.last_assistant)


def last_decision(store: StoreBackend, episode_id: str) -> Decision | None:
    """The episode's last assistant message (model response or edit), or None."""
    last = None
    for decision in _decisions(episode_id, store.iter_events(episode_id, kinds=_DECISION_KINDS)):
        last = decision
    return last


def first_decision_after(store: StoreBackend, episode_id: str, after_seq: int) -> Decision | None:
    """The first assistant message after ``after_seq`` in the episode's history."""
    rows = _events_after(store, episode_id, after_seq, _DECISION_KINDS)
    return next(_decisions(episode_id, rows), None)


def _events_after(
    store: StoreBackend, episode_id: str, after_seq: int, kinds: tuple[str, ...]
) -> Iterator[EventRow]:
    """The history's events of ``kinds`` after ``after_seq``, read a page at a time."""
    while True:
        rows = store.events(episode_id, after_seq=after_seq, limit=64, kinds=kinds)
        yield from rows
        if len(rows) < 64:
            return
        after_seq = rows[-1].seq


def _requests(store: StoreBackend, episode_id: str) -> Iterator[tuple[int, ModelRequest]]:
    for row in store.iter_events(episode_id, kinds=("model.request",)):
        request = row.typed()
        if isinstance(request, ModelRequest):
            yield row.seq, request


def first_request(store: StoreBackend, episode_id: str) -> tuple[int, str, str] | None:
    """``(seq, tip_hash, tools_hash)`` of the episode's first model request."""
    rows = store.events(episode_id, limit=1, kinds=("model.request",))
    request = rows[0].typed() if rows else None
    if not isinstance(request, ModelRequest):
        return None
    return rows[0].seq, request.tip_hash, request.tools_hash


def tools_at(store: StoreBackend, episode_id: str, seq: int) -> list[ToolSpec]:
    """The tools offered by the last model request at or before ``seq`` (else the first)."""
    tools_hash = None
    for request_seq, request in _requests(store, episode_id):
        if request_seq > seq and tools_hash is not None:
            break
        tools_hash = request.tools_hash
    return store.tools(tools_hash) if tools_hash is not None else []


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


def fork_points(store: StoreBackend, selected: dict[str, EpisodeSummary]) -> list[ForkPoint]:
    """Fork points with at least two selected branches that answered the same prompt.

    The branches of a fork point are the parent (its own continuation) and its forks at that
    ``fork_seq``; forks that injected a different message answered a different prompt and
    form their own set.
    """
    children: dict[tuple[str, int], list[str]] = {}
    for eid, parent, fork_seq in store.forks():
        if eid in selected:
            children.setdefault((parent, fork_seq), []).append(eid)
    groups: dict[tuple[str, int], list[str]] = {}
    for group in store.fork_groups():
        key = (group.parent_episode_id, group.fork_seq)
        groups.setdefault(key, []).append(group.group_id)
    points: list[ForkPoint] = []
    for (parent, fork_seq), kids in sorted(children.items()):
        members = ([parent] if parent in selected else []) + kids
        by_prompt: dict[str, ForkPoint] = {}
        for eid in members:
            decision = first_decision_after(store, eid, fork_seq)
            tip = store.message_parent(decision.message_hash) if decision else None
            if decision is None or tip is None:
                continue
            point = by_prompt.setdefault(
                tip, ForkPoint(parent, fork_seq, tip, group_ids=groups.get((parent, fork_seq), []))
            )
            point.branches.append(Branch(selected[eid], decision))
        points.extend(p for p in by_prompt.values() if len(p.branches) >= 2)
    return points


def task_groups(
    store: StoreBackend, episodes: Iterable[EpisodeSummary]
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
