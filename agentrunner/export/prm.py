"""PRM rows: one per (decision point, candidate action), valued by its recorded continuations.

A decision point is a fork group on a selected episode: one made while the episode ran
(``config.kind == "decision"``, :mod:`agentrunner.lifecycle.decisions`) or one ``fanout`` made on a
finished episode. Each candidate action gives one (state, action, value) row, process-reward
/ Q(s, a) training data::

    {"state": {"messages": [...], "tools": [...]},  # the exact model input at that point
     "action": {"role": "assistant", "content": ..., "reasoning_content": ...,
                "tool_calls": [...]},
     "value": 0.5, "spread": 0.5, "n": 4,  # mean reward of its continuations, their
                                           # population standard deviation and count
     "adopted": true,                      # the candidate the main line went on with
     "mode": "best" | "measure" | "fanout",
     "duplicate_of": null | 0,             # the first candidate that is the same action
     "source": {"episode_id": main line or fan-out parent, "seq": the group's fork_seq,
                "turn": T, "fork_group": id, "candidate": i, "proposal": fork id or null,
                "continuations": [...], "rewards": [...]}}  # rewards parallel

``state`` is :meth:`TraceStore.reconstruct_request` of the candidate's proposal fork at the
decision turn (a proposal re-sampled that turn from the main line's own prefix), or of the
parent at that turn for a fan-out given its candidates, rendered as the other formats render
chats (:mod:`.chat`, the row options apply). ``action`` is the proposal's response (or, for a
given candidate, the edited message its continuations start with) and always carries the
model's reasoning, under ``--reasoning KEY`` (default ``reasoning_content``).

A decision point made while running is exported once the engine decided it, with the values
and the adopted candidate it recorded (each candidate valued over its completed
continuations; those that failed for good are not counted); one still running, or
interrupted midway, gives no rows until it is decided. A fan-out's candidates are valued over
its finished continuations, as ``fanout`` ranks them, and nothing is adopted. A value is of
rewards: a fan-out's unjudged continuation (no reward: a run with no test, a horizon that
stopped it before anything judged it) is left out of its candidate's value and ``n``, and a
fan-out with a candidate no continuation judged gives no rows; a note counts both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.export.chat import ExportOptions, chat, chat_message, tool_schemas
from agentrunner.export.select import Selected, known_reward
from agentrunner.export.sources import first_decision_after
from agentrunner.lifecycle.decisions import PROPOSAL, Candidate, action_key, decided
from agentrunner.store.groups import ForkGroup
from agentrunner.values.events import ModelResponse, Status

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

REASONING_KEY = "reasoning_content"
"""Where the action's reasoning goes when no ``--reasoning KEY`` is given."""
FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


@dataclass
class _Found:
    """What a group's members say of one candidate so far."""

    proposal: str = ""
    message_hash: str | None = None
    continuations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)


def _proposed(store: StoreBackend, fork_id: str, turn: int) -> str | None:
    """The hash of the proposal's response at the decision turn (None: no answer yet)."""
    row = store.last_at_turn(fork_id, "model.response", turn)
    match row.typed() if row is not None else None:
        case ModelResponse(message_hash=digest):
            return digest
        case _:
            return None


@dataclass
class _Unjudged:
    """What the fan-outs' unjudged continuations cost the export."""

    continuations: int = 0
    groups: int = 0

    def notes(self) -> list[str]:
        out = []
        if self.continuations:
            out.append(
                f"prm: {self.continuations} unjudged continuation(s) (no reward) left out of"
                " their candidates' values"
            )
        if self.groups:
            out.append(
                f"prm: {self.groups} fan-out(s) with a candidate no continuation judged skipped"
            )
        return out


def _candidates(
    store: StoreBackend, group: ForkGroup, judged: set[str], unjudged: _Unjudged
) -> list[Candidate] | None:
    """The group's candidates in index order, valued as the decision engine values them
    over their judged continuations, or None while the group is not complete."""
    turn, fork_seq = group.turn, group.fork_seq
    found: dict[int, _Found] = {}
    ran: set[int] = set()  # the candidates with a finished continuation
    for member in group.members:
        f = found.setdefault(member.candidate, _Found())
        if member.sample == PROPOSAL:
            f.proposal = member.episode_id
            f.message_hash = _proposed(store, member.episode_id, turn)
            if f.message_hash is None:
                return None
            continue
        episode = store.episode(member.episode_id)
        if episode.status not in FINISHED:
            return None
        ran.add(member.candidate)
        reward = known_reward(episode, judged)
        if reward is None:  # an unjudged continuation: it values nothing
            unjudged.continuations += 1
            continue
        f.continuations.append(member.episode_id)
        f.rewards.append(reward)
    if any(i in ran and not f.continuations for i, f in found.items()):
        unjudged.groups += 1
        return None
    out: list[Candidate] = []
    seen: dict[str, int] = {}
    for index in sorted(found):
        f = found[index]
        if f.message_hash is None and f.continuations:  # a candidate given to fanout
            edit = first_decision_after(store, f.continuations[0], fork_seq)
            f.message_hash = edit.message_hash if edit is not None else None
        if f.message_hash is None or not f.continuations:
            return None
        message = store.message(f.message_hash)
        key = action_key(message)
        out.append(
            Candidate(
                index,
                f.proposal,
                message,
                f.message_hash,
                duplicate_of=seen.get(key),
                continuations=f.continuations,
                rewards=f.rewards,
            )
        )
        seen.setdefault(key, index)
    return out or None


def _state(
    store: StoreBackend, group: ForkGroup, candidate: Candidate, options: ExportOptions
) -> dict[str, Any]:
    """The exact input at the decision point: the proposal's request at that turn, or the
    parent's (a fan-out given its candidates)."""
    source = candidate.proposal or group.parent_episode_id
    request = store.reconstruct_request(source, group.turn)
    return {"messages": chat(request.messages, options), "tools": tool_schemas(request.tools)}


def _group_rows(
    store: StoreBackend,
    group: ForkGroup,
    options: ExportOptions,
    judged: set[str],
    unjudged: _Unjudged,
) -> Iterator[dict[str, Any]]:
    decision = group.decision
    mode = decision.adopt if decision is not None else "fanout"
    adopted: int | None = None
    if decision is not None:  # as the engine decided it (values over completed continuations)
        made = decided(store, group)
        if made is None:
            return
        candidates: list[Candidate] | None = made.candidates
        adopted = made.adopted
    else:
        candidates = _candidates(store, group, judged, unjudged)
    if not candidates:
        return
    with_reasoning = dataclasses.replace(
        options, reasoning_key=options.reasoning_key or REASONING_KEY
    )
    for candidate in candidates:
        yield {
            "state": _state(store, group, candidate, options),
            "action": chat_message(candidate.message, with_reasoning),
            "value": candidate.mean,
            "spread": candidate.spread,
            "n": len(candidate.rewards),
            "adopted": candidate.index == adopted,
            "mode": mode,
            "duplicate_of": candidate.duplicate_of,
            "source": {
                "episode_id": group.parent_episode_id,
                "seq": group.fork_seq,
                "turn": group.turn,
                "fork_group": group.group_id,
                "candidate": candidate.index,
                "proposal": candidate.proposal or None,
                "continuations": candidate.continuations,
                "rewards": candidate.rewards,
            },
        }


def prm_rows(
    store: StoreBackend, selected: Selected, options: ExportOptions
) -> Iterator[dict[str, Any]]:
    """The rows of the decision points on the selected episodes (oldest episode first, then
    each episode's groups in the order they were made)."""
    by_parent: dict[str, list[ForkGroup]] = {}
    for group in store.fork_groups():
        by_parent.setdefault(group.parent_episode_id, []).append(group)
    judged, unjudged = store.rewarded_episodes(), _Unjudged()
    for episode in selected.episodes:
        for group in by_parent.get(episode.episode_id, []):
            yield from _group_rows(store, group, options, judged, unjudged)
    selected.notes.extend(unjudged.notes())
