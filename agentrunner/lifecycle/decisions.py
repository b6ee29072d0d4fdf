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
4. It records the outcome (values over the completed continuations, the adopted one), then
   the main line records the adopted message (a ``message`` event, role ``assistant``,
   reason ``adopted``) and runs its tool calls. Readers take the outcome as recorded
   (:mod:`agentrunner.lifecycle.decision_log`).

Everything is read back from the store: a main line resumed after a crash mid-decision
finds its group, runs only the proposals and continuations that have not finished (a
continuation that was interrupted resumes; one that completed is never run again), and
makes the same choice from the same recorded rewards.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from agentrunner.envs.factory import env_from_spec
from agentrunner.lifecycle.decision_log import (
    PROPOSAL,
    STOPPED,
    Candidate,
    Decision,
    action_key,
    as_decided,
    choose,
    choose_index,
    decided,
    decisions,
    read_decisions,
    spend,
)
from agentrunner.lifecycle.fork import message_action
from agentrunner.lifecycle.resume import can_resume, resume_episode
from agentrunner.runtime.runner import DecideFn, EpisodeLoop, register_decisions
from agentrunner.store import TraceStore
from agentrunner.store.groups import (
    DecisionOutcome,
    GroupMember,
    OutcomeCandidate,
)
from agentrunner.values.branching import Branching
from agentrunner.values.errors import AgentRunnerError, Cancelled, UsageError
from agentrunner.values.events import Cancel, MessageEvent, ModelResponse, Status
from agentrunner.values.model import AgentContext, Model
from agentrunner.values.types import AgentTurn, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

ATTEMPTS = 2  # runs of a fork that has not finished: a retryable failure, a cancel
ModelFn = Callable[[AgentContext], AgentTurn]


class Brancher:
    """Makes the decision points of one main-line episode (see the module docstring)."""

    def __init__(
        self,
        store: StoreBackend,
        episode_id: str,
        branching: Branching,
        model_fn: ModelFn,
    ) -> None:
        self.store = store
        self.episode_id = episode_id
        self.branching = branching
        self.model_fn = model_fn
        self.stopped = any(
            isinstance(event := row.typed(), Cancel) and event.reason.startswith(STOPPED)
            for row in store.iter_events(episode_id, kinds=["cancel"])
        )
        """Branching stopped (at ``max_cost``), in this attempt or an earlier one."""
        if branching.env_factory is None:
            _check_rebuildable(store, episode_id)

    def hook(self, loop: EpisodeLoop, turn: int) -> Message | None:
        """The runner's decision hook: at a decision turn, the adopted action (None: the
        model takes the turn)."""
        if not self.branching.at(turn) or self.stopped:
            return None
        limit = self.branching.max_cost
        if limit is not None:
            spent = spend(self.store, self.episode_id)["cost_usd"] or 0.0
            if spent >= limit:
                self.stopped = True
                loop.branching_stopped(
                    f"{STOPPED}: --max-cost ${limit:.4f} reached (${spent:.4f} spent on"
                    f" branching); the episode goes on without decision points"
                )
                return None
        decision = self.decide(turn, loop.rec.writer.next_seq - 1, loop.cancel_reason)
        chosen = [c for c in decision.candidates if c.index == decision.adopted]
        return chosen[0].message if chosen else None

    # -- the decision point
    def decide(
        self, turn: int, seq: int, cancel: Callable[[], str | None] = lambda: None
    ) -> Decision:
        """The decision at ``turn`` (the main line's last seq is ``seq``): made now, or
        finished from what an earlier attempt recorded. ``cancel`` stops it (and its forks,
        which record their cancel and resume with it)."""
        group_id, fork_seq, proposals = self._group(turn, seq)
        recorded = self.store.decision_outcomes([group_id]).get(group_id)
        if recorded is None:
            # A fork runs in its role (a proposal as its sample, for the decision turn; a
            # continuation to the horizon): resume_episode reads it from the group.
            for _ in range(ATTEMPTS):  # a fork that did not finish runs again once
                self._run(
                    [p for p in proposals if not self._proposed(p, turn) and self._can(p)], cancel
                )
            candidates = self._candidates(proposals, turn)
            members = self._continuations(group_id, fork_seq, turn, candidates)
            for _ in range(ATTEMPTS):
                self._run(
                    [m.episode_id for m in members if not self._done(m) and self._can(m)], cancel
                )
            recorded = self._outcome(candidates, members)
            self.store.record_outcome(group_id, recorded)
        decision = as_decided(self.store, group_id, turn, fork_seq, self.branching.adopt, recorded)
        return decision

    def _outcome(
        self, candidates: Sequence[Candidate], members: Sequence[GroupMember]
    ) -> DecisionOutcome:
        """What the decision point decided: each candidate's value over its completed
        continuations (those that failed for good are listed, not valued), the adopted one."""
        by_index = {c.index: c for c in candidates}
        failed: dict[int, list[str]] = {}
        for member in members:
            candidate = by_index[member.candidate]
            fork = self.store.episode(member.episode_id)
            if fork.status == Status.COMPLETED:
                candidate.continuations.append(member.episode_id)
                candidate.rewards.append(fork.total_reward or 0.0)  # unjudged ranks as 0
            else:
                failed.setdefault(member.candidate, []).append(member.episode_id)
        adopted = choose(candidates, self.branching.adopt)
        return DecisionOutcome(
            adopted=adopted if candidates else None,
            candidates=[
                OutcomeCandidate(**c.summary(), rewards=c.rewards, failed=failed.get(c.index, []))
                for c in candidates
            ],
        )

    def _group(self, turn: int, seq: int) -> tuple[str, int, list[str]]:
        """This turn's decision group and its proposal forks (created if it has none)."""
        for group in self.store.fork_groups(self.episode_id):
            if group.turn == turn and group.decision is not None:
                members = sorted(
                    (m for m in group.members if m.sample == PROPOSAL),
                    key=lambda m: m.candidate,
                )
                return group.group_id, group.fork_seq, [m.episode_id for m in members]
        with self.store.atomic():  # the group and its proposals: all or none
            group_id = self.store.create_fork_group(
                self.episode_id, seq, turn, self.branching.config()
            )
            proposals = []
            for i in range(self.branching.actions):
                fork = self._fork(seq)
                self.store.add_group_member(group_id, GroupMember(fork, i, PROPOSAL, None))
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

    def _done(self, member: GroupMember) -> bool:
        return self.store.episode(member.episode_id).status == Status.COMPLETED

    def _can(self, fork: str | GroupMember) -> bool:
        """Whether running the fork (again) can finish it: not a failure retrying cannot fix."""
        fork_id = fork if isinstance(fork, str) else fork.episode_id
        return can_resume(self.store, self.store.episode(fork_id)) is None

    def _candidates(self, proposals: Sequence[str], turn: int) -> list[Candidate]:
        """A candidate per proposal that answered (one whose model call failed for good
        proposes nothing), duplicates marked."""
        out: list[Candidate] = []
        seen: dict[str, int] = {}
        for i, fork_id in enumerate(proposals):
            row = self.store.last_at_turn(fork_id, "model.response", turn)
            match row.typed() if row is not None else None:
                case ModelResponse(message_hash=digest):
                    message = self.store.message(digest)
                case _:
                    continue
            key = action_key(message)
            out.append(Candidate(i, fork_id, message, digest, duplicate_of=seen.get(key)))
            seen.setdefault(key, i)
        return out

    def _continuations(
        self, group_id: str, seq: int, turn: int, candidates: Sequence[Candidate]
    ) -> list[GroupMember]:
        """The M continuations of every candidate (those missing are created, in one
        transaction), in (candidate, sample) order."""
        (group,) = [g for g in self.store.fork_groups(self.episode_id) if g.group_id == group_id]
        have = {(m.candidate, m.sample): m for m in group.members if m.sample != PROPOSAL}
        with self.store.atomic():
            for candidate in candidates:
                for j in range(self.branching.samples):
                    if (candidate.index, j) in have:
                        continue
                    edit = MessageEvent(
                        role="assistant", message_hash=candidate.message_hash, reason="edit"
                    )
                    fork = self._fork(seq, (turn, edit))
                    member = GroupMember(
                        fork, candidate.index, j, message_action(candidate.message)
                    )
                    self.store.add_group_member(group_id, member)
                    have[(candidate.index, j)] = member
        return [have[key] for key in sorted(have)]

    # -- running forks
    def _run(self, forks: Sequence[str], cancel: Callable[[], str | None]) -> None:
        """Run (or finish) forks in threads with store connections of their own. A cancel
        of the main line cancels them (each records it and resumes later); a fork that fails
        is left as it ended."""
        if not forks:
            return
        stop = threading.Event()

        def stopped() -> bool:
            return stop.is_set() or cancel() is not None

        pool = ThreadPoolExecutor(
            max_workers=self.branching.concurrency, thread_name_prefix="agentrunner-branch"
        )
        try:
            futures = [pool.submit(self._run_one, fork, stopped) for fork in forks]
            for future in futures:
                future.result()
        except BaseException:
            stop.set()  # Ctrl-C: the forks stop too, before the main line records its cancel
            raise
        finally:
            pool.shutdown(wait=True)
        reason = cancel()
        if reason is not None:
            raise Cancelled(reason)

    def _run_one(self, fork_id: str, stopped: Callable[[], bool]) -> None:
        factory = self.branching.env_factory
        env = factory() if factory is not None else None
        try:
            with TraceStore(self.store.location) as own:  # a connection of this thread's own
                resume_episode(
                    own,
                    fork_id,
                    env=env,
                    model_fn=self.model_fn,
                    cancel_check=stopped,
                )
        except AgentRunnerError:
            pass  # the fork's log says how it ended; the decision values what completed
        finally:
            if env is not None:
                env.close()


def _check_rebuildable(store: StoreBackend, episode_id: str) -> None:
    """Refuse, before anything branches, an episode whose environment forks cannot rebuild."""
    spec = store.episode(episode_id).env
    try:
        env_from_spec(spec, store).close()
    except AgentRunnerError as exc:
        raise UsageError(
            f"branching runs its forks in fresh environments, and this one cannot be rebuilt"
            f" from its recorded spec ({exc}); give Branching(env_factory=...)"
        ) from None


def _hook_factory(
    store: StoreBackend, episode_id: str, branching: Branching, model: Model
) -> DecideFn:
    return Brancher(store, episode_id, branching, model).hook


register_decisions(_hook_factory)

__all__ = [
    "PROPOSAL",
    "STOPPED",
    "Brancher",
    "Candidate",
    "Decision",
    "action_key",
    "choose",
    "choose_index",
    "decided",
    "decisions",
    "read_decisions",
    "spend",
]
