"""What decision points recorded, read back: candidates, values, the adopted one, and what
branching cost (for ``show``, the TUI, the PRM export and the engine itself).

A decision point is a fork group (``config.kind == "decision"``) at the main line's seq:
proposals ``(i, PROPOSAL)`` whose response at the decision turn is candidate ``i``, and
continuations ``(i, j)``. Once the engine (:mod:`agentrunner.lifecycle.decisions`) decided, its
outcome (values over the completed continuations, the adopted candidate) is a row of
``decision_outcomes``, and readers take it as recorded.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.store.groups import DecisionOutcome, ForkGroup
from agentrunner.values.branching import Adopt
from agentrunner.values.events import MessageEvent, ModelResponse, Status
from agentrunner.values.types import Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

PROPOSAL = -1  # the sample index of a member that proposed a candidate
STOPPED = "branching stopped"


@dataclass
class Candidate:
    """One candidate action of a decision point and what its continuations returned."""

    index: int
    proposal: str
    message: Message
    message_hash: str
    duplicate_of: int | None = None
    continuations: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0

    @property
    def spread(self) -> float:
        return statistics.pstdev(self.rewards) if len(self.rewards) > 1 else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "candidate": self.index,
            "proposal": self.proposal,
            "value": self.mean,
            "spread": self.spread,
            "n": len(self.rewards),
            "duplicate_of": self.duplicate_of,
            "continuations": self.continuations,
        }


@dataclass
class Decision:
    """A decision point: its group, where it branched, its candidates, which was adopted."""

    group_id: str
    turn: int
    seq: int
    adopt: Adopt
    candidates: list[Candidate]
    adopted: int
    pending: list[str] = field(default_factory=list)
    """Read back (:func:`read_decisions`) while the engine has not decided: members not
    finished yet (proposals that have not answered, continuations not completed);
    ``adopted`` is then only what the values so far would choose."""
    adopted_seq: int | None = None
    """Read back: the seq of the main line's ``adopted`` message (None: not recorded yet)."""


def action_key(message: Message) -> str:
    """Two candidates are the same action when their text and tool calls (names and parsed
    arguments) are."""
    calls = []
    for call in message.tool_calls:
        try:
            args: Any = json.loads(call.arguments)
        except (TypeError, ValueError):
            args = call.arguments
        calls.append([call.name, args])
    return json.dumps([message.content.strip(), calls], sort_keys=True, ensure_ascii=False)


def choose(candidates: Sequence[Candidate], adopt: Adopt) -> int:
    """The adopted candidate (``measure``: the main line's own, the lowest index; ``best``:
    the highest value, ties to the lowest index), among those with a completed continuation
    (when none has one: among all)."""
    valued = {c.index: c.mean for c in candidates if c.rewards}
    return choose_index(valued or {c.index: 0.0 for c in candidates}, adopt)


def choose_index(values: dict[int, float], adopt: str) -> int:
    """:func:`choose` over ``candidate index -> value`` (measure: the main line's own sample,
    the lowest index there is)."""
    if not values:
        return 0
    if adopt == "measure":
        return min(values)
    return min(values, key=lambda i: (-values[i], i))


def decided(store: StoreBackend, group: ForkGroup) -> Decision | None:
    """A decision point's decision as the engine recorded it (None: not decided yet)."""
    outcome = store.decision_outcomes([group.group_id]).get(group.group_id)
    if outcome is None or group.decision is None:
        return None
    return as_decided(
        store, group.group_id, group.turn, group.fork_seq, group.decision.adopt, outcome
    )


def as_decided(
    store: StoreBackend,
    group_id: str,
    turn: int,
    seq: int,
    adopt: Adopt,
    outcome: DecisionOutcome,
) -> Decision:
    """A decision as its outcome recorded it (values, the adopted candidate)."""
    candidates = []
    for entry in outcome.candidates:
        row = store.last_at_turn(entry.proposal, "model.response", turn)
        digest = row.typed().message_hash if row is not None else ""  # type: ignore[union-attr]
        candidates.append(
            Candidate(
                entry.candidate,
                entry.proposal,
                store.message(digest),
                digest,
                duplicate_of=entry.duplicate_of,
                continuations=list(entry.continuations),
                rewards=list(entry.rewards),
            )
        )
    adopted = outcome.adopted
    return Decision(group_id, turn, seq, adopt, candidates, -1 if adopted is None else adopted)


def decisions(store: StoreBackend, episode_id: str) -> Iterator[ForkGroup]:
    """The decision groups made on an episode (oldest first), as fork groups."""
    for group in store.fork_groups(episode_id):
        if group.decision is not None:
            yield group


def read_decisions(store: StoreBackend, episode_id: str) -> list[Decision]:
    """The decision points made on an episode (oldest first), without running anything: a
    decided one as its recorded outcome says (values, the adopted candidate); one not
    decided yet rebuilt from the store as the engine would build it (a candidate per
    proposal that answered, duplicates marked, valued by its completed continuations,
    ``adopted`` what :func:`choose` would pick), with what is not finished in ``pending``."""
    out = []
    groups = list(decisions(store, episode_id))
    decided = store.decision_outcomes([g.group_id for g in groups])
    for group in groups:
        turn = group.turn
        adopt: Adopt = group.decision.adopt if group.decision is not None else "best"
        if group.group_id in decided:  # as the engine decided it, whatever changed since
            made = as_decided(
                store, group.group_id, turn, group.fork_seq, adopt, decided[group.group_id]
            )
            made.adopted_seq = _adopted_seq(store, episode_id, made)
            out.append(made)
            continue
        candidates: dict[int, Candidate] = {}
        pending: list[str] = []
        seen: dict[str, int] = {}
        for member in group.members:  # by (candidate, sample): proposals first
            if member.sample == PROPOSAL:
                row = store.last_at_turn(member.episode_id, "model.response", turn)
                match row.typed() if row is not None else None:
                    case ModelResponse(message_hash=digest):
                        message = store.message(digest)
                    case _:
                        pending.append(member.episode_id)
                        continue
                key = action_key(message)
                candidates[member.candidate] = Candidate(
                    member.candidate,
                    member.episode_id,
                    message,
                    digest,
                    duplicate_of=seen.get(key),
                )
                seen.setdefault(key, member.candidate)
                continue
            fork = store.episode(member.episode_id)
            candidate = candidates.get(member.candidate)
            if candidate is None or fork.status not in _FINISHED:
                pending.append(member.episode_id)
                continue
            candidate.continuations.append(member.episode_id)
            candidate.rewards.append(fork.total_reward or 0.0)  # unjudged ranks as 0
        listed = [candidates[i] for i in sorted(candidates)]
        decision = Decision(
            group.group_id,
            turn,
            group.fork_seq,
            adopt,
            listed,
            choose(listed, adopt) if listed else 0,
            pending,
        )
        decision.adopted_seq = _adopted_seq(store, episode_id, decision)
        out.append(decision)
    return out


_FINISHED = (Status.COMPLETED,)  # until the engine decides, only these are valued


def _adopted_seq(store: StoreBackend, episode_id: str, decision: Decision) -> int | None:
    """Where the main line recorded the decision's adopted message (its first ``adopted``
    message at the decision turn after the group's seq)."""
    rows = store.events(episode_id, after_seq=decision.seq, limit=8, kinds=("message",))
    for row in rows:
        match row.typed():
            case MessageEvent(reason="adopted") if row.turn == decision.turn:
                return row.seq
    return None


def spend(store: StoreBackend, episode_id: str) -> dict[str, Any]:
    """What branching cost an episode: its decision points, and the tokens and cost of every
    proposal and continuation (each fork's own calls), apart from the main line's."""
    tokens = dict.fromkeys(("input", "output", "cache_read", "cache_write", "reasoning"), 0)
    cost: float | None = None
    count = 0
    for group in decisions(store, episode_id):
        count += 1
        for member in group.members:
            fork = store.episode(member.episode_id)
            for key, value in fork.tokens.items():
                tokens[key] = tokens.get(key, 0) + int(value)
            if fork.cost_usd is not None:
                cost = (cost or 0.0) + fork.cost_usd
    return {"decisions": count, "tokens": tokens, "cost_usd": cost}
