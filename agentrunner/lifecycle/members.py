"""One unit of a batch or a fan-out: an episode recorded beforehand, run wherever it lands.

A :class:`Member` names an episode that the driver created (a batch pair's, or a fork).
:func:`run_member` runs it in a worker (a thread here, or a Ray worker on another machine),
reopening the store by its location: from the start when it has no events, else resumed
from its log, so a unit run again after its worker died continues the same episode and no
pair runs twice. :class:`BatchEpisode` says what happened to it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import agentrunner.lifecycle.decisions  # noqa: F401  (the engine plugs into the runner as it loads)
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.runtime.recorder import Observer
from agentrunner.runtime.runner import Rollout, RunConfig, run_agent_episode
from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.values.branching import Branching
from agentrunner.values.environment import Environment
from agentrunner.values.errors import AgentRunnerError, UsageError
from agentrunner.values.events import Status, StopReason
from agentrunner.values.model import Model

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

T = TypeVar("T")


@dataclass(frozen=True)
class BatchEpisode:
    """What happened to one (task, seed) pair in this run of the batch."""

    task_id: str
    seed: int
    episode_id: str | None
    action: str  # ran | resumed | skipped | error
    status: Status | Literal["skipped"]
    stop_reason: StopReason | str | None
    total_reward: float | None
    turns: int
    cost_usd: float | None
    error: str | None = None


@dataclass(frozen=True)
class Member:
    """One unit of work: an episode recorded beforehand (a batch pair's, or a fork)."""

    episode_id: str
    task_id: str
    seed: int
    max_turns: int | None = None  # None: a resume keeps the recorded limit
    branching: Branching | None = None  # a resume keeps the recorded settings
    context: dict[str, Any] | None = None  # a first run's context settings (a resume: recorded)


def run_member(
    location: str,
    env_factory: Callable[[], Environment] | None,
    model_factory: Callable[[], Model] | None,
    member: Member,
    stopped: Callable[[], bool],
) -> BatchEpisode:
    """Run ``member``'s episode to its end in the store at ``location`` (reopened here, in a
    worker): from the start if it has no events, else resumed from its log (as after a
    worker that ran it died); skipped when completed. While a live writer holds it (a unit
    submitted again while the worker that had it still runs it, or before a lost node's
    heartbeat went stale) it waits for that writer to end. Without a factory the episode's
    recorded env or model is used."""
    with TraceStore(location, create=False) as store:  # never a stray new store
        return run_member_in(store, env_factory, model_factory, member, stopped)


def run_member_in(
    store: StoreBackend,
    env_factory: Callable[[], Environment] | None,
    model_factory: Callable[[], Model] | None,
    member: Member,
    stopped: Callable[[], bool],
    observer: Observer | None = None,
) -> BatchEpisode:
    """:func:`run_member` in an open store (a batch's threads share one). Another driver of
    the same batch (the command started twice) may claim the episode between this one's
    look and its claim: then this one waits for that run to end and reports it."""
    while True:
        summary = _unwritten(store, member.episode_id, stopped)
        if stopped():
            return outcome(
                member.task_id, member.seed, member.episode_id, "skipped", None, "batch cancelled"
            )
        if summary.status in (Status.COMPLETED, Status.RUNNING):
            return summary_outcome(store, member.task_id, member.seed, member.episode_id, "skipped")
        try:
            return _run(store, env_factory, model_factory, member, stopped, summary, observer)
        except UsageError as exc:
            now = store.episode(member.episode_id).status
            if now not in (Status.RUNNING, Status.COMPLETED):  # this run's own refusal
                return outcome(
                    member.task_id, member.seed, member.episode_id, "error", None, str(exc), now
                )
        # another writer claimed it first: wait for its end, then report what it did


def _run(
    store: StoreBackend,
    env_factory: Callable[[], Environment] | None,
    model_factory: Callable[[], Model] | None,
    member: Member,
    stopped: Callable[[], bool],
    summary: EpisodeSummary,
    observer: Observer | None,
) -> BatchEpisode:
    """Run or resume the member's episode; a refused claim raises ``UsageError``, any other
    failure is the outcome's error."""
    fresh = summary.parent_episode_id is None and summary.last_seq == 0
    env = env_factory() if env_factory is not None else None
    try:
        model = model_factory() if model_factory is not None else None
        if fresh and env is not None and model is not None:
            rollout = run_agent_episode(
                env=env,
                task_id=member.task_id,
                seed=member.seed,
                model_fn=model,
                store=store,
                max_turns=member.max_turns or RunConfig().max_turns,
                config=RunConfig(
                    max_turns=member.max_turns or RunConfig().max_turns, **(member.context or {})
                ),
                cancel_check=stopped,
                episode_id=member.episode_id,
                branching=member.branching,
                observer=observer,
            )
        else:
            rollout = resume_episode(
                store,
                member.episode_id,
                env=env,
                model_fn=model,
                max_turns=member.max_turns,
                cancel_check=stopped,
                observer=observer,
            )
        action = "ran" if fresh else "resumed"
        return outcome(member.task_id, member.seed, member.episode_id, action, rollout)
    except UsageError:
        raise
    except AgentRunnerError as exc:
        status = stored_status(store, member.episode_id)
        return outcome(
            member.task_id, member.seed, member.episode_id, "error", None, str(exc), status
        )
    finally:
        if env is not None:
            env.close()


def _unwritten(store: StoreBackend, episode_id: str, stopped: Callable[[], bool]) -> EpisodeSummary:
    """The episode once no live writer holds it (a writer whose process is gone stops
    holding it when its heartbeat goes stale) or the batch stops."""
    summary = store.episode(episode_id)
    while summary.status == Status.RUNNING and not stopped():
        time.sleep(0.25)
        summary = store.episode(episode_id)
    return summary


def outcome(
    task_id: str,
    seed: int,
    episode_id: str | None,
    action: str,
    rollout: Rollout | None,
    error: str | None = None,
    status: Status | None = None,
) -> BatchEpisode:
    """What a member's unit did: its rollout's outcome, else its ``action`` (``error``,
    ``skipped``) with ``status``, the episode's status as the store has it (default: failed
    for an error, skipped for a skip), so that a summary agrees with the store."""
    if rollout is None:
        return BatchEpisode(
            task_id,
            seed,
            episode_id,
            action,
            status or (Status.FAILED if action == "error" else "skipped"),
            None,
            0.0,
            0,
            None,
            error,
        )
    return BatchEpisode(
        task_id,
        seed,
        rollout.episode_id,
        action,
        rollout.status,
        rollout.stop_reason,
        rollout.total_reward,
        rollout.turns_completed,
        rollout.cost_usd,
        rollout.error,
    )


def stored_status(store: StoreBackend, episode_id: str) -> Status | None:
    """The episode's status in the store (None when the store cannot say: it failed too)."""
    try:
        return store.episode(episode_id).status
    except AgentRunnerError:
        return None


def summary_outcome(
    store: StoreBackend, task_id: str, seed: int, episode_id: str, action: str
) -> BatchEpisode:
    e = store.episode(episode_id)
    return BatchEpisode(
        task_id,
        seed,
        episode_id,
        action,
        e.status,
        e.stop_reason,
        e.total_reward,
        e.turns,
        e.cost_usd,
    )


def shared(value: T) -> Callable[[], T]:
    """A factory (picklable, unlike a lambda of a local) that gives ``value`` itself: one
    model for all the units a worker runs."""
    return functools.partial(_itself, value)


def _itself(value: T) -> T:
    return value
