"""The decision engine: best-of-N decision points of a running episode, crash-safe.

At every N-th model turn of a running episode (the *main line*) a :class:`Brancher` makes a
decision point instead of one model call:

1. It records a fork group at the main line's last seq (``config.kind == "decision"``) with K
   *proposal* forks (members ``(i, PROPOSAL)``), all in one transaction. Each proposal
   re-samples that one turn from the exact input the main line would have sent (sample
   ``i``: a scripted model plays its ``alternatives``; a real one samples again), so the K
   candidate actions are K model samples at one state. Equal ones are marked duplicates.
2. It records M *continuation* forks per candidate (members ``(i, j)``, the candidate's
   message as their edited turn) and runs them to the end, or ``horizon`` turns further.
3. A candidate's value is the mean reward of its continuations (with their spread and
   count). ``best`` adopts the highest (ties: the lowest candidate index); ``measure``
   adopts candidate 0, the main line's own sample, and only measures the others.
4. The main line records the adopted message (a ``message`` event, role ``assistant``,
   reason ``adopted``) and runs its tool calls. Readers rebuild the decision from the fork
   group (:func:`read_decisions`): values from the continuations, the adopted candidate by
   :func:`choose`, as the engine did.

Everything is read back from the store: a main line resumed after a crash mid-decision
finds its group, runs only the proposals and continuations that have not finished (a
continuation that was interrupted resumes; one that completed is never run again), and
makes the same choice from the same recorded rewards.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from agentrunner.branching import KIND, Adopt, Branching
from agentrunner.errors import UsageError
from agentrunner.events import MessageEvent, ModelResponse, Status
from agentrunner.model import AgentContext, Model
from agentrunner.resume import resume_episode
from agentrunner.runner import DecideFn, Rollout, register_decisions
from agentrunner.store import TraceStore
from agentrunner.store.groups import GroupMember, add_group_member, create_fork_group, fork_groups
from agentrunner.types import AgentTurn, Message

PROPOSAL = -1  # the sample index of a member that proposed a candidate
STOPPED = "branching stopped"
ModelFn = Callable[[AgentContext], AgentTurn]


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
    """Read back (:func:`read_decisions`): members not finished yet (proposals that have not
    answered, continuations not completed, failed or cancelled); while any is, ``adopted`` is
    only what the values so far would choose."""
    adopted_seq: int | None = None
    """Read back: the seq of the main line's ``adopted`` message (None: not recorded yet)."""

    def record(self) -> dict[str, Any]:
        """What the main line's ``adopted`` message carries."""
        return {
            "group_id": self.group_id,
            "seq": self.seq,
            "adopt": self.adopt,
            "adopted": self.adopted,
            "candidates": [c.summary() for c in self.candidates],
        }


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
    """The adopted candidate: the highest value (ties: the lowest index), or candidate 0."""
    return choose_index({c.index: c.mean for c in candidates}, adopt)


def choose_index(values: dict[int, float], adopt: str) -> int:
    """:func:`choose` over ``candidate index -> value``."""
    if adopt == "measure" or not values:
        return 0
    return min(values, key=lambda i: (-values[i], i))


class Brancher:
    """Makes the decision points of one main-line episode (see the module docstring)."""

    def __init__(
        self,
        store: TraceStore,
        episode_id: str,
        branching: Branching,
        model_fn: ModelFn,
        *,
        on_decision: Callable[[Decision], None] | None = None,
    ) -> None:
        self.store = store
        self.episode_id = episode_id
        self.branching = branching
        self.model_fn = model_fn
        self.on_decision = on_decision
        stop = store.last_of_kind(episode_id, "cancel")
        self.stopped = stop is not None and str(stop.payload.get("reason", "")).startswith(STOPPED)
        """Branching stopped (at ``max_cost``), in this attempt or an earlier one."""

    def hook(self, turn: int, seq: int, note: Callable[[str], None]) -> Message | None:
        """The runner's decision hook: at a decision turn, the adopted action (None: let the
        model take the turn). ``note`` records why branching stops, once."""
        if not self.branching.at(turn) or self.stopped:
            return None
        limit = self.branching.max_cost
        if limit is not None:
            spent = spend(self.store, self.episode_id)["cost_usd"] or 0.0
            if spent >= limit:
                self.stopped = True
                note(
                    f"{STOPPED}: --max-cost ${limit:.4f} reached (${spent:.4f} spent on"
                    f" branching); the episode goes on without decision points"
                )
                return None
        decision = self.decide(turn, seq)
        return decision.candidates[decision.adopted].message

    # -- the decision point
    def decide(self, turn: int, seq: int) -> Decision:
        """The decision at ``turn`` (the main line's last seq is ``seq``): made now, or
        finished from what an earlier attempt recorded."""
        group_id, fork_seq, proposals = self._group(turn, seq)
        self._run([p for p in proposals if not self._proposed(p, turn)], turn, samples=True)
        candidates = self._candidates(proposals, turn)
        members = self._continuations(group_id, fork_seq, turn, candidates)
        limit = turn + self.branching.horizon if self.branching.horizon is not None else None
        self._run([m for m in members if not self._finished(m)], limit, samples=False)
        for member in members:
            rollout = self.store.episode(member.episode_id)
            candidate = candidates[member.candidate]
            candidate.continuations.append(member.episode_id)
            candidate.rewards.append(rollout.total_reward)
        decision = Decision(
            group_id,
            turn,
            fork_seq,
            self.branching.adopt,
            candidates,
            choose(candidates, self.branching.adopt),
        )
        if self.on_decision is not None:
            self.on_decision(decision)
        return decision

    def _group(self, turn: int, seq: int) -> tuple[str, int, list[str]]:
        """This turn's decision group and its proposal forks (created if it has none)."""
        for group in fork_groups(self.store, self.episode_id):
            if group["turn"] == turn and group["config"].get("kind") == KIND:
                members = sorted(
                    (m for m in group["members"] if m.sample == PROPOSAL),
                    key=lambda m: m.candidate,
                )
                return group["group_id"], group["fork_seq"], [m.episode_id for m in members]
        with self.store.atomic():  # the group and its proposals: all or none
            group_id = create_fork_group(
                self.store, self.episode_id, seq, turn, self.branching.config()
            )
            proposals = []
            for i in range(self.branching.actions):
                fork = self._fork(seq)
                add_group_member(self.store, group_id, GroupMember(fork, i, PROPOSAL, None))
                proposals.append(fork)
        return group_id, seq, proposals

    def _fork(self, seq: int, edit: tuple[int, MessageEvent] | None = None) -> str:
        """A fork of the main line at ``seq`` (with an edited turn: a continuation)."""
        main = self.store.episode(self.episode_id)
        return self.store.create_episode(
            task_id=main.task_id,
            seed=main.seed,
            env=main.env,
            model=main.model,
            parent_episode_id=self.episode_id,
            fork_seq=seq,
            first_event=edit,
        )

    def _proposed(self, fork_id: str, turn: int) -> bool:
        return self.store.last_at_turn(fork_id, "model.response", turn) is not None

    def _finished(self, member: GroupMember) -> bool:
        return self.store.episode(member.episode_id).status in (
            Status.COMPLETED,
            Status.FAILED,
            Status.CANCELLED,
        )

    def _candidates(self, proposals: Sequence[str], turn: int) -> list[Candidate]:
        out: list[Candidate] = []
        seen: dict[str, int] = {}
        for i, fork_id in enumerate(proposals):
            row = self.store.last_at_turn(fork_id, "model.response", turn)
            match row.typed() if row is not None else None:
                case ModelResponse(message_hash=digest):
                    message = self.store.message(digest)
                case _:
                    raise UsageError(f"proposal fork {fork_id} produced no turn {turn}")
            key = action_key(message)
            out.append(Candidate(i, fork_id, message, digest, duplicate_of=seen.get(key)))
            seen.setdefault(key, i)
        return out

    def _continuations(
        self, group_id: str, seq: int, turn: int, candidates: Sequence[Candidate]
    ) -> list[GroupMember]:
        """The M continuations of every candidate (those missing are created, in one
        transaction), in (candidate, sample) order."""
        (group,) = [
            g for g in fork_groups(self.store, self.episode_id) if g["group_id"] == group_id
        ]
        have = {(m.candidate, m.sample): m for m in group["members"] if m.sample != PROPOSAL}
        with self.store.atomic():
            for candidate in candidates:
                for j in range(self.branching.samples):
                    if (candidate.index, j) in have:
                        continue
                    edit = MessageEvent(
                        role="assistant", message_hash=candidate.message_hash, reason="edit"
                    )
                    fork = self._fork(seq, (turn, edit))
                    member = GroupMember(fork, candidate.index, j, _action(candidate.message))
                    add_group_member(self.store, group_id, member)
                    have[(candidate.index, j)] = member
        return [have[key] for key in sorted(have)]

    # -- running forks
    def _run(self, forks: Sequence[Any], limit: int | None, *, samples: bool) -> None:
        """Run (or finish) forks in threads, each with its own store connection: proposals
        one turn with their sample index, continuations to ``limit``."""
        jobs = [
            (m if isinstance(m, str) else m.episode_id, i if samples else None)
            for i, m in enumerate(forks)
        ]
        if samples:  # a proposal's sample index is its candidate index
            jobs = [(fork, self._candidate_of(fork)) for fork, _ in jobs]
        if not jobs:
            return
        with ThreadPoolExecutor(
            max_workers=self.branching.concurrency, thread_name_prefix="agentrunner-branch"
        ) as pool:
            for _ in pool.map(lambda job: self._run_one(job[0], limit, job[1]), jobs):
                pass

    def _candidate_of(self, fork_id: str) -> int:
        summary = self.store.episode(fork_id)
        return summary.fork_group.candidate if summary.fork_group is not None else 0

    def _run_one(self, fork_id: str, limit: int | None, sample: int | None) -> Rollout:
        with TraceStore(self.store.location) as own:  # a connection of this thread's own
            return resume_episode(
                own, fork_id, model_fn=self.model_fn, max_turns=limit, sample=sample
            )


def _action(message: Message) -> dict[str, Any]:
    return {
        "message": message.content,
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "call_id": c.call_id}
            for c in message.tool_calls
        ],
    }


def decisions(store: TraceStore, episode_id: str) -> Iterator[dict[str, Any]]:
    """The decision groups made on an episode (oldest first), as fork groups."""
    for group in fork_groups(store, episode_id):
        if group["config"].get("kind") == KIND:
            yield group


def read_decisions(store: TraceStore, episode_id: str) -> list[Decision]:
    """The decision points made on an episode (oldest first), rebuilt from the store as the
    engine built them, without running anything: a candidate per proposal that answered
    (its message, duplicates marked), valued by its finished continuations, ``adopted`` as
    :func:`choose` picks it. What is not finished yet is listed in ``pending``."""
    out = []
    for group in decisions(store, episode_id):
        turn = group["turn"]
        candidates: dict[int, Candidate] = {}
        pending: list[str] = []
        seen: dict[str, int] = {}
        members: list[GroupMember] = group["members"]  # by (candidate, sample): proposals first
        for member in members:
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
            candidate.rewards.append(fork.total_reward)
        config = group["config"]
        listed = [candidates[i] for i in sorted(candidates)]
        adopt: Adopt = "measure" if config.get("adopt") == "measure" else "best"
        decision = Decision(
            group["group_id"],
            turn,
            group["fork_seq"],
            adopt,
            listed,
            choose(listed, adopt) if listed else 0,
            pending,
        )
        decision.adopted_seq = _adopted_seq(store, episode_id, decision)
        out.append(decision)
    return out


_FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


def _adopted_seq(store: TraceStore, episode_id: str, decision: Decision) -> int | None:
    """Where the main line recorded the decision's adopted message (its first ``adopted``
    message at the decision turn after the group's seq)."""
    rows = store.events(episode_id, after_seq=decision.seq, limit=8, kinds=("message",))
    for row in rows:
        match row.typed():
            case MessageEvent(reason="adopted") if row.turn == decision.turn:
                return row.seq
    return None


def spend(store: TraceStore, episode_id: str) -> dict[str, Any]:
    """What branching cost an episode: its decision points, and the tokens and cost of every
    proposal and continuation (each fork's own calls), apart from the main line's."""
    tokens = dict.fromkeys(("input", "output", "cache_read", "cache_write", "reasoning"), 0)
    cost: float | None = None
    count = 0
    for group in decisions(store, episode_id):
        count += 1
        for member in group["members"]:
            fork = store.episode(member.episode_id)
            for key, value in fork.tokens.items():
                tokens[key] = tokens.get(key, 0) + int(value)
            if fork.cost_usd is not None:
                cost = (cost or 0.0) + fork.cost_usd
    return {"decisions": count, "tokens": tokens, "cost_usd": cost}


def _hook_factory(
    store: TraceStore, episode_id: str, branching: Branching, model: Model
) -> DecideFn:
    return Brancher(store, episode_id, branching, model).hook


register_decisions(_hook_factory)
