"""Counterfactual fan-out: fork K candidate actions x N continuations at one turn, score each.

Candidates are given (actions, as for ``fork --action``) or sampled from the model: K
proposal forks re-sample the turn and run just that turn; each proposal's assistant message
becomes a candidate. Every candidate is then run N times from the fork point (to the end or
for ``horizon`` more turns) and the candidates are ranked by mean reward, with the spread.
All of it is recorded as one fork group, so it can be re-read (:func:`read_group`) and
exported as DPO pairs and GRPO groups. The forks are made here, by the caller; they run in
threads (the default) or on a Ray cluster (``executor="ray"``), one unit of work per fork.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.lifecycle.fork import fork_episode, fork_point, message_action, parse_action
from agentrunner.lifecycle.members import BatchEpisode, Member, run_member, shared
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.runtime.distributed import Lost, RayExecutor, require_ray
from agentrunner.runtime.runner import MAX_TURNS_LIMIT, Rollout
from agentrunner.store import TraceStore
from agentrunner.store.groups import GroupMember
from agentrunner.values.environment import Environment
from agentrunner.values.errors import AgentRunnerError, UsageError
from agentrunner.values.events import ModelResponse
from agentrunner.values.model import AgentContext, Model, as_model
from agentrunner.values.types import AgentTurn, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

PROPOSAL = -1  # the sample index of the fork that proposed a sampled candidate
RunForks = Callable[[Sequence[str], int | None], list[float]]  # fork ids, turn limit -> rewards


@dataclass(frozen=True)
class CandidateScore:
    """One candidate action and how its continuations scored."""

    candidate: int
    action: Any
    episodes: list[str]
    rewards: list[float]
    mean: float
    spread: float  # population standard deviation of the rewards

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "action": self.action,
            "episodes": self.episodes,
            "rewards": self.rewards,
            "mean": self.mean,
            "spread": self.spread,
        }


@dataclass(frozen=True)
class FanoutResult:
    group_id: str
    parent_episode_id: str
    turn: int
    ranked: list[CandidateScore]

    def to_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "parent_episode_id": self.parent_episode_id,
            "turn": self.turn,
            "ranked": [c.to_dict() for c in self.ranked],
        }


def score_actions(
    store: StoreBackend,
    episode_id: str,
    *,
    turn: int,
    actions: Sequence[Any] | None = None,
    k: int | None = None,
    n: int = 1,
    horizon: int | None = None,
    concurrency: int = 4,
    model: str | None = None,
    model_fn: Callable[[AgentContext], AgentTurn] | None = None,
    env_factory: Callable[[], Environment] | None = None,
    model_factory: Callable[[], Model] | None = None,
    executor: Literal["threads", "ray"] = "threads",
    ray_address: str | None = None,
) -> FanoutResult:
    """Fork ``episode_id`` at ``turn`` K candidates x ``n`` ways, run them, rank candidates.

    Give ``actions`` (each as for ``fork --action``) or ``k`` to sample K candidates from the
    model. ``horizon`` limits each continuation to that many turns after the fork point.
    Returns the candidates ranked by mean reward (best first). The forks run with
    ``model_fn`` (or a model from ``model_factory``; neither: the recorded model) in
    environments from ``env_factory`` (or the recorded one). ``executor="ray"`` runs them
    on a Ray cluster, as :func:`agentrunner.lifecycle.batch.run_batch` does (``ray_address``).
    """
    both = model_fn is not None and model_factory is not None
    _check(executor, both, actions, k=k, n=n, concurrency=concurrency, turn=turn, horizon=horizon)
    if model_factory is not None and executor == "threads":
        model_fn, model_factory = model_factory(), None  # one model for all the threads
    elif model_fn is not None and executor == "ray":
        model_factory = shared(as_model(model_fn))  # pickled: one model per worker
    parent = store.episode(episode_id)
    seq = fork_point(store, parent.episode_id, turn)
    config = {"actions": list(actions or []), "k": k, "n": n, "horizon": horizon, "model": model}
    max_turns = turn + horizon if horizon is not None else None
    runner = (
        _on_ray(store, parent.task_id, parent.seed, env_factory, model_factory, ray_address)
        if executor == "ray"
        else _in_threads(store, env_factory, model_fn)
    )
    with runner(concurrency) as run:  # connected first: a cluster that does not answer
        with store.atomic():  # records nothing; the group and the forks it knows: all or none
            group = store.create_fork_group(parent.episode_id, seq, turn, config)
            if actions is not None:
                candidates: list[Any] = list(actions)
                members = _continuations(
                    store, group, parent.episode_id, turn, model, n, candidates
                )
            else:
                proposals = [
                    fork_episode(store, parent.episode_id, turn=turn, model=model)[0]
                    for _ in range(k or 0)
                ]
        if actions is None:
            run(proposals, turn)
            candidates = [message_action(_assistant_at(store, f, turn)) for f in proposals]
            with store.atomic():
                for i, fork_id in enumerate(proposals):
                    member = GroupMember(fork_id, i, PROPOSAL, candidates[i])
                    store.add_group_member(group, member)
                members = _continuations(
                    store, group, parent.episode_id, turn, model, n, candidates
                )
        rewards = run([m.episode_id for m in members], max_turns)
    by_candidate: dict[int, list[tuple[str, float]]] = {}
    for member, reward in zip(members, rewards, strict=True):
        by_candidate.setdefault(member.candidate, []).append((member.episode_id, reward))
    return FanoutResult(group, parent.episode_id, turn, _rank(candidates, by_candidate))


def _check(
    executor: str,
    both_models: bool,
    actions: Sequence[Any] | None,
    *,
    k: int | None,
    n: int,
    concurrency: int,
    turn: int,
    horizon: int | None,
) -> None:
    """Refuse a fan-out that cannot run, before anything is recorded."""
    if executor not in ("threads", "ray"):
        raise UsageError(f"executor must be 'threads' or 'ray', not {executor!r}")
    if executor == "ray":
        require_ray()
    if both_models:
        raise UsageError("give model_fn or model_factory, not both")
    if (actions is None) == (k is None):
        raise UsageError("give candidate actions or k (sample that many from the model)")
    if n < 1 or (k is not None and k < 1) or concurrency < 1:
        raise UsageError("k, n and concurrency must be at least 1")
    if horizon is not None and not 1 <= turn + horizon <= MAX_TURNS_LIMIT:
        raise UsageError(
            f"--horizon must be at least 1 and turn + horizon at most {MAX_TURNS_LIMIT}"
        )
    for action in actions or []:
        parse_action(action, turn)  # refuse a malformed candidate before anything is recorded


def _continuations(
    store: StoreBackend,
    group: str,
    parent_id: str,
    turn: int,
    model: str | None,
    n: int,
    candidates: list[Any],
) -> list[GroupMember]:
    """N forks per candidate, each a member of the group (inside the caller's transaction)."""
    members: list[GroupMember] = []
    for i, action in enumerate(candidates):
        edit = parse_action(action, turn)
        for j, fork_id in enumerate(
            fork_episode(store, parent_id, turn=turn, action=edit, model=model, n=n)
        ):
            member = GroupMember(fork_id, i, j, action)
            store.add_group_member(group, member)
            members.append(member)
    return members


def _in_threads(
    store: StoreBackend,
    env_factory: Callable[[], Environment] | None,
    model_fn: Callable[[AgentContext], AgentTurn] | None,
) -> Callable[[int], AbstractContextManager[RunForks]]:
    """Forks run in a pool of this process's threads, each with its own store connection."""

    def run(fork_id: str, limit: int | None) -> Rollout:
        env = env_factory() if env_factory is not None else None
        try:
            with TraceStore(store.location) as own:
                return resume_episode(own, fork_id, env=env, model_fn=model_fn, max_turns=limit)
        finally:
            if env is not None:
                env.close()

    @contextmanager
    def pool(concurrency: int) -> Iterator[RunForks]:
        with ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="agentrunner-fanout"
        ) as threads:
            yield lambda forks, limit: [  # an unjudged fork (no test) ranks as 0
                r.total_reward or 0.0 for r in threads.map(lambda f: run(f, limit), forks)
            ]

    return pool


def _on_ray(
    store: StoreBackend,
    task_id: str,
    seed: int,
    env_factory: Callable[[], Environment] | None,
    model_factory: Callable[[], Model] | None,
    address: str | None,
) -> Callable[[int], AbstractContextManager[RunForks]]:
    """Forks run on Ray workers, one unit of work each (see
    :mod:`agentrunner.runtime.distributed`)."""
    work = functools.partial(run_member, store.location, env_factory, model_factory)

    @contextmanager
    def cluster(concurrency: int) -> Iterator[RunForks]:
        with RayExecutor(work, address=address, concurrency=concurrency) as ray:

            def run(forks: Sequence[str], limit: int | None) -> list[float]:
                units = [Member(f, task_id, seed, limit) for f in forks]
                return [_reward(r) for r in ray.map(units)]

            yield run

    return cluster


def _reward(result: BatchEpisode | Lost) -> float:
    """A fork's reward, or the error that kept it from running (as the threads raise it)."""
    if isinstance(result, Lost):
        raise AgentRunnerError(f"a fork did not run: {result.reason}")
    if result.action == "error":
        raise AgentRunnerError(f"fork {result.episode_id} did not run: {result.error}")
    return result.total_reward or 0.0  # an unjudged fork (no test) ranks as 0


def _assistant_at(store: StoreBackend, episode_id: str, turn: int) -> Message:
    row = store.last_at_turn(episode_id, "model.response", turn)
    if row is None:
        raise UsageError(f"proposal fork {episode_id} produced no turn {turn}")
    match row.typed():
        case ModelResponse(message_hash=message_hash):
            return store.message(message_hash)
        case _:
            raise UsageError(f"proposal fork {episode_id} has a malformed turn {turn}")


def _rank(
    candidates: Sequence[Any], runs: dict[int, list[tuple[str, float]]]
) -> list[CandidateScore]:
    scores = []
    for i, action in enumerate(candidates):
        results = runs.get(i, [])
        rewards = [r for _, r in results]
        scores.append(
            CandidateScore(
                candidate=i,
                action=action,
                episodes=[e for e, _ in results],
                rewards=rewards,
                mean=statistics.fmean(rewards) if rewards else 0.0,
                spread=statistics.pstdev(rewards) if len(rewards) > 1 else 0.0,
            )
        )
    return sorted(scores, key=lambda c: (-c.mean, c.spread, c.candidate))


def read_group(store: StoreBackend, group_id: str) -> FanoutResult:
    """Re-read a recorded fork group and rank it again from the episodes' rewards."""
    for group in store.fork_groups():
        if group.group_id == group_id:
            members = [m for m in group.members if m.sample != PROPOSAL]
            actions: dict[int, Any] = {m.candidate: m.action for m in group.members}
            runs: dict[int, list[tuple[str, float]]] = {}
            for m in members:
                runs.setdefault(m.candidate, []).append(
                    (m.episode_id, store.episode(m.episode_id).total_reward or 0.0)
                )
            candidates = [actions[i] for i in sorted(actions)]
            return FanoutResult(
                group_id, group.parent_episode_id, group.turn, _rank(candidates, runs)
            )
    raise UsageError(f"no fork group {group_id!r}")
