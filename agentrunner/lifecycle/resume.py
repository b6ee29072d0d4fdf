"""Resuming an episode: rebuild its state from the store, restore the environment, finish
the work a previous attempt left open, and continue the same episode as ``attempt + 1``.

Forks use the same path for their first run: a fork is an episode whose own history is
empty (or holds only the edit that made it), continued from its parent's fork point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentrunner.envs import imported, recorded
from agentrunner.envs.factory import env_from_spec
from agentrunner.readers.restore import restore_env
from agentrunner.readers.state import EpisodeState, describe_dangling, rebuild
from agentrunner.runtime.recorder import Observer, Recorder
from agentrunner.runtime.runner import (
    MAX_TURNS_LIMIT,
    EpisodeLoop,
    Rollout,
    RunConfig,
    decisions_for,
    drive,
    run_agent_episode,
)
from agentrunner.store import EpisodeSummary
from agentrunner.values.branching import Branching
from agentrunner.values.environment import Environment, UsesStore
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Error, Resume, Status, StopReason, status_for
from agentrunner.values.model import AgentContext, Model, as_model
from agentrunner.values.redaction import known_secrets
from agentrunner.values.specs import ImportedSpec
from agentrunner.values.types import AgentTurn, Message
from providers import model_from_spec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

CONTEXT_SETTINGS = {"context", "context_window"}
"""The settings a resume or fork may change for the rest of an episode (then recorded)."""
RESUMABLE = (Status.PENDING, Status.CANCELLED, Status.INTERRUPTED, Status.FAILED)


def can_resume(
    store: StoreBackend,
    episode: EpisodeSummary,
    *,
    claimed: EpisodeState | None = None,
    served: bool = False,
    context_changed: bool = False,
) -> str | None:
    """Why ``episode`` cannot be resumed now, or None when it can (the one rule, for the
    CLI, the TUI, ``resume --all``, the decision engine, the resume itself and a reconnected
    ``serve-env`` session): not when completed or running, nor when it failed on an error
    that retrying cannot fix.

    ``claimed``: the episode's state, read by a caller that holds its writer lease (which
    makes its derived status ``running``): its status is then the one its log gives.
    ``served``: the caller is the ``serve-env`` session that served the episode, whose
    client continues it (no one else can: the model's side is the client's).
    ``context_changed``: the resume changes the context settings, so an episode that stopped
    with ``context_exhausted`` may go on (under a policy that keeps less)."""
    status, stop, error = episode.status, episode.stop_reason, None
    if claimed is not None:
        ended = claimed.ended
        status = status_for(ended.stop_reason) if ended is not None else Status.INTERRUPTED
        stop, error = (ended.stop_reason if ended else None), claimed.last_error
    env = episode.env_spec
    if episode.parent_episode_id is None and isinstance(env, ImportedSpec):
        return imported.why_not_runnable(episode.env)
    if env.kind == recorded.KIND:
        return recorded.why_not_runnable(episode.env)
    if "served" in episode.env and not served:
        return (
            "it was served to an OpenEnv client (agentrunner serve-env): only that client's"
            " trainer can continue it; fork or verify it instead"
        )
    if status == Status.COMPLETED:
        return f"it is completed ({stop}); fork it instead"
    if episode.parent_episode_id is None and episode.last_seq == 0:
        return "it has not started: it waits for its batch to run it (run the batch again)"
    if status == Status.RUNNING:
        return f"it is being written by process {episode.writer_pid}; cancel it first or wait"
    if stop == StopReason.CONTEXT_EXHAUSTED:
        if context_changed:
            return None
        return (
            "its next request would pass the model's context window (context_exhausted), "
            "under the same context policy again; fork it with one that keeps less: agentrunner"
            f" fork {episode.episode_id} --turn {max(episode.turns, 1)} --context mask:10 --run"
        )
    if status == Status.FAILED:
        if claimed is None:
            row = store.last_of_kind(episode.episode_id, "error")
            found = row.typed() if row is not None else None
            error = found if isinstance(found, Error) else None
        if not (error is not None and error.retryable):
            reason = error.message if error is not None else stop
            return f"it failed on a non-retryable error ({reason}); fork it at an earlier turn"
    return None


def check_resumable(
    store: StoreBackend, state: EpisodeState, *, context_changed: bool = False
) -> None:
    """Refuse, with a clear message, an episode this run has claimed that cannot be resumed
    (:func:`can_resume` on what its log says)."""
    why = can_resume(store, state.episode, claimed=state, context_changed=context_changed)
    if why is not None:
        raise UsageError(f"episode {state.episode.episode_id} cannot be resumed: {why}")


def _model_for(
    episode: EpisodeSummary, model_fn: Callable[[AgentContext], AgentTurn] | None
) -> Model:
    if model_fn is not None:
        return as_model(model_fn)
    spec = episode.model_spec
    if spec.provider == "custom" or not spec.named:
        raise UsageError(
            f"episode {episode.episode_id} was run with a Python model_fn "
            f"({spec.spec}); pass model_fn to continue it"
        )
    return model_from_spec(episode.model)  # the same model, base URL and options


def resume_episode(
    store: StoreBackend,
    episode_id: str,
    *,
    env: Environment | None = None,
    model_fn: Callable[[AgentContext], AgentTurn] | None = None,
    accept_divergence: bool = False,
    max_turns: int | None = None,
    cancel_check: Callable[[], bool] | None = None,
    observer: Observer | None = None,
    branching: Branching | None = None,
    sample: int | None = None,
    context: dict[str, Any] | None = None,
) -> Rollout:
    """Continue a cancelled, interrupted or (retryably) failed episode, or run a new fork.

    ``env`` and ``model_fn`` default to the ones the episode was recorded with. The
    environment is restored from a snapshot or by replaying the recorded actions; a replay
    whose observations differ stops with :class:`agentrunner.values.errors.DivergenceError` unless
    ``accept_divergence``. ``branching`` goes on making decision points (an unfinished
    one is finished); ``sample`` marks the model calls as that sample of a decision point.
    ``context`` changes the context settings (``context``: the policy, ``context_window``)
    from the ones the episode runs with (its ``episode.start``'s, or those of the last
    ``resume`` that changed them); this attempt's ``resume`` event then records them.
    """
    if max_turns is not None and not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"max_turns must be between 1 and {MAX_TURNS_LIMIT}, got {max_turns}")
    episode_id = store.resolve(episode_id)
    episode = store.episode(episode_id)
    role_sample, role_limit = _decision_role(store, episode)
    sample = role_sample if sample is None else sample
    max_turns = role_limit if max_turns is None else max_turns
    if episode.parent_episode_id is None and episode.last_seq == 0:
        return _run_fresh(
            store, episode, env, model_fn, max_turns, cancel_check, observer, branching, context
        )
    why = can_resume(store, episode, context_changed=bool(context))
    if why is not None:
        raise UsageError(f"episode {episode_id} cannot be resumed: {why}")
    # Claim first, then read: no other resumer can append between our read and our writes.
    own_env = env is None
    with store.lease(episode_id):
        try:
            state = rebuild(store, episode_id)
            check_resumable(store, state, context_changed=bool(context))
            if branching is None and episode.parent_episode_id is None:
                branching = Branching.recorded(state.start.config)  # as it was run (not forks)
            model = _model_for(state.episode, model_fn)
            if env is None:
                env = env_from_spec(state.start.env, store)
            elif isinstance(env, UsesStore):
                env.bind_store(store)
            settings = {
                **({} if max_turns is None else {"max_turns": max_turns}),
                **(context or {}),
            }
            loop = _continue(store, state, env, model, accept_divergence, settings, observer)
            loop.decide = decisions_for(store, episode_id, branching, model)
            loop.sample = sample
            return drive(
                loop,
                store,
                episode_id,
                cancel_check,
                pending=state.pending,
                needs_continue=state.needs_continue,
                stopped=state.finished,
            )
        finally:
            if own_env and env is not None:
                env.close()


def _decision_role(store: StoreBackend, episode: EpisodeSummary) -> tuple[int | None, int | None]:
    """A decision point's fork runs as the engine runs it, whoever resumes it: a proposal
    as sample ``candidate`` for the decision turn only, a continuation to the horizon."""
    role = episode.fork_group
    if role is None or episode.parent_episode_id is None:
        return None, None
    for group in store.fork_groups(episode.parent_episode_id):
        if group.group_id != role.group_id or group.decision is None:
            continue
        if role.sample < 0:
            return role.candidate, group.turn
        horizon = group.decision.horizon
        return None, None if horizon is None else min(group.turn + horizon, MAX_TURNS_LIMIT)
    return None, None


def _run_fresh(
    store: StoreBackend,
    episode: EpisodeSummary,
    env: Environment | None,
    model_fn: Callable[[AgentContext], AgentTurn] | None,
    max_turns: int | None,
    cancel_check: Callable[[], bool] | None,
    observer: Observer | None,
    branching: Branching | None,
    context: dict[str, Any] | None,
) -> Rollout:
    """An episode whose process died before its first event: run it from the start."""
    if episode.status == Status.RUNNING:
        raise UsageError(f"episode {episode.episode_id} is being written by another process")
    model = _model_for(episode, model_fn)
    own_env = env is None
    if env is None:
        env = env_from_spec(episode.env, store)
    max_turns = max_turns or _planned_max_turns(store, episode.episode_id)
    try:
        return run_agent_episode(
            env=env,
            task_id=episode.task_id,
            seed=episode.seed,
            model_fn=model,
            store=store,
            max_turns=max_turns,
            config=RunConfig.model_validate({"max_turns": max_turns, **(context or {})}),
            cancel_check=cancel_check,
            observer=observer,
            episode_id=episode.episode_id,
            branching=branching,
        )
    finally:
        if own_env:
            env.close()


def _planned_max_turns(store: StoreBackend, episode_id: str) -> int:
    """The turn limit an episode was made with (its batch's), when it died before starting."""
    config = store.batch_config(episode_id)
    value = (config or {}).get("max_turns")
    return int(value) if isinstance(value, int) else RunConfig().max_turns


def _continue(
    store: StoreBackend,
    state: EpisodeState,
    env: Environment,
    model: Model,
    accept_divergence: bool,
    settings: dict[str, Any],
    observer: Observer | None,
) -> EpisodeLoop:
    """The loop that continues the episode (its environment restored, its resume recorded)."""
    ep = state.episode
    start = state.start
    reset, how = restore_env(
        env, start.task_id, start.seed, state.env_steps, accept_divergence=accept_divergence
    )
    config_fields = {**_recorded_config(store, ep.episode_id, start.config), **settings}
    try:
        config = RunConfig.model_validate(config_fields)
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise UsageError(f"cannot continue with {problem['loc'][0]}: {problem['msg']}") from None
    first_fork_run = ep.parent_episode_id is not None and not store.has_own_event(
        ep.episode_id, "resume"
    )
    writer = store.writer(ep.episode_id, attempt=1 if first_fork_run else ep.attempt + 1)
    rec = Recorder(store, writer, secrets=known_secrets(), tip=state.tip, observer=observer)
    rec.messages = list(state.messages)
    rec.totals = state.totals
    rec.turn = state.turn
    rec.resume(
        from_seq=writer.next_seq - 1,  # the last event of any kind, trailing chunks included
        env_restore=how,
        dangling=describe_dangling(state, store),
        reason="fork" if first_fork_run else "resume",
        config=config.model_dump() if settings.keys() & CONTEXT_SETTINGS else None,
    )
    last_turn = state.turn - 1 if state.open_request is not None else state.turn
    if isinstance(env, imported.ImportedSession):  # no environment: re-sample one turn only
        config = config.model_copy(update={"max_turns": last_turn + 1})
    loop = EpisodeLoop(
        env,
        model,
        rec,
        reset,
        config,
        start.task_id,
        start.seed,
        last_turn=last_turn,
        env_steps=len(state.env_steps),
    )
    if not any(m.role == "user" for m in state.messages):  # died before the prompt was recorded
        if reset.system and not state.messages:
            loop.opening.append((Message(role="system", content=reset.system), "system"))
        loop.opening.append((Message(role="user", content=reset.prompt), "prompt"))
    loop.observation = state.observation
    return loop


def _recorded_config(
    store: StoreBackend, episode_id: str, started: dict[str, Any]
) -> dict[str, Any]:
    """The runner settings an episode last ran with: its history's last ``resume`` that
    recorded them (a fork's own, or an attempt's), else its ``episode.start``'s."""
    config, after = started, 0
    while page := store.events(episode_id, after_seq=after, kinds=["resume"]):
        for row in page:
            resume = row.typed()
            if isinstance(resume, Resume) and resume.config is not None:
                config = resume.config
        after = page[-1].seq
    return dict(config)
