"""The turn-based runner: drives one episode of a model against an environment.

Model turns and environment steps are separate: each turn is one model call; each tool call
the model makes is one environment step. Everything is recorded before it is acted on
(``model.request`` before the call, ``tool.call`` before the step) and as it happens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentrunner import __version__
from agentrunner.readers.state import PendingCall
from agentrunner.runtime import interrupts
from agentrunner.runtime.context import EpisodeContext, PolicySetting, Prepared
from agentrunner.runtime.liveness import Heartbeat
from agentrunner.runtime.recorder import Observer, Recorder
from agentrunner.values.branching import Branching
from agentrunner.values.environment import Environment, ResetResult, ToolAction, UsesStore
from agentrunner.values.errors import (
    Cancelled,
    ContextOverflowError,
    EnvironmentFailure,
    IncompleteStreamError,
    ModelError,
    StoreError,
    UsageError,
)
from agentrunner.values.events import EpisodeStart, Status, StopReason, status_for
from agentrunner.values.model import AgentContext, Model, as_model
from agentrunner.values.redaction import Redactor, known_secrets, scrub
from agentrunner.values.types import AgentTurn, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

MAX_TURNS_LIMIT = 500
OVERFLOW_HINT = (
    "The history no longer fits the model's context window: fork the episode at an earlier "
    "turn (agentrunner fork EP --turn K) or resume it with a shorter history."
)
CONTINUE_PROMPT = (
    "You did not call a tool. Continue working on the task: call one of the tools, "
    "or call submit() when you are done."
)

DecideFn = Callable[["EpisodeLoop", int], Message | None]
"""(the main line's loop, the turn about to begin) -> the action a decision point adopted
(None: the model takes this turn). It may record a note on the loop (``branching_stopped``)
and must stop when the loop's ``cancel_reason()`` says so."""
DecisionsFactory = Callable[["StoreBackend", str, Branching, Model], DecideFn]
_decisions: list[DecisionsFactory] = []


def register_decisions(factory: DecisionsFactory) -> None:
    """Let ``branching=`` reach the decision engine (:mod:`agentrunner.lifecycle.decisions`:
    a layer above, registered when the entry points that take ``branching`` import it)."""
    _decisions[:] = [factory]


def decisions_for(
    store: StoreBackend, episode_id: str, branching: Branching | None, model: Model
) -> DecideFn | None:
    """The decision hook of an episode run with ``branching`` (None without)."""
    if branching is None:
        return None
    if not _decisions:
        raise UsageError(
            "branching needs the decision engine, which is not loaded: call"
            " agentrunner.run_agent_episode (or import agentrunner.lifecycle.decisions first)",
            param="branching",
        )
    return _decisions[0](store, episode_id, branching, model)


class RunConfig(BaseModel):
    """Runner settings recorded in ``episode.start``. ``max_turns`` is the only limit."""

    model_config = ConfigDict(frozen=True)

    max_turns: int = Field(default=100, ge=1, le=MAX_TURNS_LIMIT)
    continue_prompt: str = CONTINUE_PROMPT
    snapshot_secrets: Literal["redacted"] = "redacted"
    """What workspace snapshots do with a file holding a known secret: store it redacted."""
    context: PolicySetting = Field(default="none", validate_default=True)
    """The context policy (:mod:`agentrunner.runtime.context`): none, mask:K, summarize or an
    object."""
    context_window: int | None = Field(default=None, ge=1)
    """The model's context window in tokens (None: the model table's, when it knows it)."""


@dataclass
class Rollout:
    """The outcome of one episode run."""

    episode_id: str
    stop_reason: StopReason
    status: Status
    turns_completed: int
    total_reward: float | None  # None: nothing judged the episode
    tokens: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "turns": self.turns_completed,
            "total_reward": self.total_reward,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
        }


class EpisodeLoop:
    """The turn loop for an episode whose start and history are already recorded."""

    def __init__(
        self,
        env: Environment,
        model: Model,
        rec: Recorder,
        reset: ResetResult,
        config: RunConfig,
        task_id: str,
        seed: int,
        *,
        last_turn: int = 0,
        env_steps: int = 0,
    ) -> None:
        self.env, self.model, self.rec, self.config = env, model, rec, config
        self.reset, self.task_id, self.seed = reset, task_id, seed
        self.turn = last_turn
        self.env_steps = env_steps
        self.tools_hash = rec.store.put_tools(reset.tools)
        self.tool_names = {t.name for t in reset.tools}
        self.phase = "between_turns"
        self.cancel_reason: Callable[[], str | None] = lambda: None
        self.observation: str | None = None
        self.opening: list[tuple[Message, str]] = []
        """Messages to record before the first turn (the system prompt and the task)."""
        self.decide: DecideFn | None = None
        """Branching: at a decision turn, the adopted action instead of one model call."""
        self.sample: int | None = None
        """Which of several samples at one input this run's model calls are (a proposal)."""
        self.context = EpisodeContext.configured(config.context, config.context_window, model)
        self.exhausted: str | None = None
        """Why the episode stopped with ``context_exhausted`` (None: it did not)."""

    def loop(
        self,
        pending: list[PendingCall] | None = None,
        needs_continue: bool = False,
        stopped: StopReason | None = None,
    ) -> StopReason:
        """Finish what a previous attempt left (``pending`` calls, a missing continuation, an
        ending it reached but did not record: ``stopped``), then run turns until a stop
        reason; return it."""
        self.rec.turn = self.turn
        for message, reason in self.opening:  # inside the loop: a Ctrl-C here is a cancel
            self.rec.message(message, reason)
        self.opening = []
        if pending:
            stop = self._run_tools(pending, stopped)
            if stop is not None:
                return stop
        elif stopped is not None:
            return stopped
        elif needs_continue:
            self._continue()
        while self.turn < self.config.max_turns:
            self._check_cancel("between_turns")
            # A decision point runs before the turn begins: what it records on the main line
            # (a cancel, an error) is of the turn before, so a resume makes it again.
            adopted = self.decide(self, self.turn + 1) if self.decide is not None else None
            prepared = self.context.prepare(self, self.turn + 1)
            problem = self.context.over_budget(prepared, self.rec.episode_id, self.turn)
            if adopted is None and problem is not None:
                self.exhausted = problem
                return StopReason.CONTEXT_EXHAUSTED
            self.turn += 1
            self.rec.turn = self.turn
            if adopted is not None:  # a decision point chose this turn's action
                self.rec.message(adopted, "adopted")
                calls = adopted.tool_calls
            else:
                calls = self._generate(prepared).tool_calls
            if calls:
                stop = self._run_tools([PendingCall(c, recorded=False) for c in calls])
                if stop is not None:
                    return stop
            else:
                self._continue()
        return StopReason.MAX_TURNS

    def branching_stopped(self, reason: str) -> None:
        """Record why branching stops (the episode goes on)."""
        self.rec.cancel("between_turns", reason)

    def _continue(self) -> None:
        self.rec.message(Message(role="user", content=self.config.continue_prompt), "continue")

    def _check_cancel(self, where: str) -> None:
        self.phase = where
        reason = self.cancel_reason()
        if reason is not None:
            raise Cancelled(reason)

    def _generate(self, prepared: Prepared) -> AgentTurn:
        self.phase = "generate"
        call_id = f"call-{self.turn}-{self.rec.writer.attempt}"
        params = dict(getattr(self.model, "params", {}) or {})
        self.context.record_request(
            self.rec, call_id, prepared, self.tools_hash, self.model, params
        )
        context = AgentContext(
            messages=list(prepared.messages),
            tools=list(self.reset.tools),
            turn=self.turn,
            task_id=self.task_id,
            seed=self.seed,
            observation=self.observation,
            params=params,
            on_chunk=lambda chunk: self.rec.chunk(call_id, chunk),
            on_error=lambda exc, attempt: self.rec.error(
                "generate", exc, retryable=exc.retryable, attempt=attempt
            ),
            cancel_reason=self.cancel_reason,
            sample=self.sample,
        )
        started = time.monotonic()
        try:
            turn = self.model(context)
        except IncompleteStreamError as exc:
            if isinstance(exc.partial, AgentTurn):
                partial = exc.partial.model_copy(update={"stop_reason": StopReason.INCOMPLETE})
                self.rec.response(call_id, partial, time.monotonic() - started)
            raise
        if not isinstance(turn, AgentTurn):
            raise TypeError(f"model_fn must return an AgentTurn, got {type(turn).__name__}")
        self.context.budget.calibrate(prepared.messages, turn.usage)
        return self.rec.response(call_id, turn, time.monotonic() - started)  # as recorded

    def _run_tools(
        self, calls: list[PendingCall], stop: StopReason | None = None
    ) -> StopReason | None:
        for pending in calls:
            if stop is None:
                self._check_cancel("tool")
            stop = self._run_tool(pending, skip=stop is not None) or stop
        return stop

    def _run_tool(self, pending: PendingCall, *, skip: bool) -> StopReason | None:
        call = pending.call
        parsed, problem = call.checked_arguments()
        if not pending.recorded:
            self.rec.tool_call(call, parsed, problem)
        if skip:
            self.rec.tool_result(call, "not run: the episode already ended", error="not run")
            return None
        if call.name not in self.tool_names:
            known = ", ".join(sorted(self.tool_names))
            problem = f"unknown tool {call.name!r}; available tools: {known}"
        if problem is not None or parsed is None:
            self.observation = self.rec.tool_result(call, f"error: {problem}", error=problem)
            return None
        started = time.monotonic()
        result = self.env.step(ToolAction(name=call.name, arguments=parsed))
        self.env_steps += 1
        self.observation = self.rec.tool_result(
            call,
            result.observation,
            reward=result.reward,
            done=result.done,
            error=result.error,
            duration_s=time.monotonic() - started,
            snapshot=result.snapshot,
            step=self.env_steps,
            truncated=result.truncated,
        )
        test = result.info.get("test")
        if isinstance(test, dict):  # a test command scored the submission: keep it as a verdict
            details = {**test, "seq": self.rec.writer.next_seq - 1, "source": "submit"}
            self.rec.store.add_verification(
                self.rec.episode_id, "test", result.reward, bool(test.get("passed_all")), details
            )
        if result.truncated:
            return StopReason.MAX_STEPS
        return StopReason.DONE if result.done else None


def _model_spec(model: Model) -> dict[str, Any]:
    """The model's spec as it may be recorded: it can carry content (a scripted model's
    script), so lone surrogates are replaced and known secrets redacted, as in every payload."""
    spec = getattr(model, "spec", None)
    raw = dict(spec()) if callable(spec) else {"spec": f"{model.provider}:{model.model}"}
    clean, _ = scrub(raw, Redactor(known_secrets()))
    return dict(clean)


def run_agent_episode(
    *,
    env: Environment,
    task_id: str,
    model_fn: Callable[[AgentContext], AgentTurn],
    store: StoreBackend,
    seed: int = 0,
    max_turns: int = 100,
    cancel_check: Callable[[], bool] | None = None,
    observer: Observer | None = None,
    config: RunConfig | None = None,
    episode_id: str | None = None,
    branching: Branching | None = None,
) -> Rollout:
    """Run one episode to its end (or cancel), recording everything in ``store``.

    ``model_fn(context) -> AgentTurn`` may be a plain function or a streaming adapter from
    ``providers``. ``max_turns`` (at most 500) is the only runner limit. ``cancel_check``
    is polled between turns, between tool calls and on every streamed chunk; Ctrl-C cancels
    too. Both record a ``cancel`` event and end the episode as ``cancelled``.
    ``episode_id`` runs an episode created beforehand (with no events yet), e.g. by a batch.
    ``branching`` makes decision points as it runs (see :mod:`agentrunner.values.branching`).
    """
    if not 1 <= max_turns <= MAX_TURNS_LIMIT:
        raise UsageError(f"max_turns must be between 1 and {MAX_TURNS_LIMIT}, got {max_turns}")
    cfg = config or RunConfig(max_turns=max_turns)
    model = as_model(model_fn)
    model_spec = _model_spec(model)
    if isinstance(env, UsesStore):
        env.bind_store(store)
    reset = env.reset(task_id, seed)
    start = EpisodeStart(
        task_id=task_id,
        seed=seed,
        env=env.spec(),
        model=model_spec,
        config={**cfg.model_dump(), **({"branching": branching.record()} if branching else {})},
        version=__version__,
        max_steps=reset.max_steps,
    )
    started = episode_id is None
    if episode_id is None:  # created, claimed and started in one transaction: never half-made
        episode_id = store.create_episode(
            task_id=task_id,
            seed=seed,
            env=start.env,
            model=model_spec,
            claim=True,
            first_event=(0, start),
        )
    with store.lease(episode_id, claimed=started):
        if not started and store.episode(episode_id).last_seq:  # checked as its one writer
            raise UsageError(f"episode {episode_id} already has events; resume it instead")
        rec = Recorder(store, store.writer(episode_id), secrets=known_secrets(), observer=observer)
        if started:
            rec.announce(1, start)
        else:
            rec.record(start)
        run = EpisodeLoop(env, model, rec, reset, cfg, task_id, seed)
        run.decide = decisions_for(store, episode_id, branching, model)
        if reset.system:
            run.opening.append((Message(role="system", content=reset.system), "system"))
        run.opening.append((Message(role="user", content=reset.prompt), "prompt"))
        return drive(run, store, episode_id, cancel_check)


def outcome(exc: ModelError | EnvironmentFailure) -> tuple[StopReason | None, bool, str]:
    """The one table of how a failure ends an attempt: the stop reason recorded (None: no
    end, the episode stays resumable as interrupted), whether retrying may help, and what
    the user is told."""
    match exc:
        case ContextOverflowError():
            return StopReason.CONTEXT_OVERFLOW, False, f"{exc} {OVERFLOW_HINT}"
        case IncompleteStreamError():
            return StopReason.INCOMPLETE, True, str(exc)
        case ModelError():
            return StopReason.ERROR, exc.retryable, str(exc)
        case EnvironmentFailure() if exc.retryable:  # resumable once the environment is back
            return None, True, str(exc)
        case _:  # an environment that cannot run this task as configured
            return StopReason.ERROR, False, str(exc)


def drive(
    run: EpisodeLoop,
    store: StoreBackend,
    episode_id: str,
    cancel_check: Callable[[], bool] | None,
    *,
    pending: list[PendingCall] | None = None,
    needs_continue: bool = False,
    stopped: StopReason | None = None,
) -> Rollout:
    """Run the loop with heartbeat and Ctrl-C handling, and record how the attempt ended.

    The caller holds the episode's writer lease (``with store.lease(...)``)."""
    rec = run.rec
    error: str | None = None
    stop: StopReason
    with interrupts.sigint_guard() as on_main:
        heartbeat = Heartbeat(
            store,
            episode_id,
            cancel_check,
            interrupt_main=on_main,
            checkpoint=lambda: rec.checkpoint,
            on_store_lost=lambda problem: setattr(rec.writer, "lost", problem),
        )
        run.cancel_reason = lambda: rec.halt or heartbeat.reason()
        with heartbeat:
            try:
                stop = run.loop(pending, needs_continue, stopped)
            except (KeyboardInterrupt, Cancelled) as exc:
                with interrupts.suppressed:
                    rec.cancel(run.phase, str(exc.args[0]) if exc.args else "SIGINT")
                stop = StopReason.CANCELLED
            except (ModelError, EnvironmentFailure) as exc:
                reason, retryable, error = outcome(exc)
                with interrupts.suppressed:
                    attempt = exc.attempt if isinstance(exc, ModelError) else 1
                    rec.error(run.phase, exc, retryable=retryable, attempt=attempt)
                if reason is None:
                    return _rollout(run, StopReason.INTERRUPTED, Status.INTERRUPTED, error)
                stop = reason
            except Exception as exc:  # record the crash, leave the episode resumable
                with interrupts.suppressed:
                    rec.error(run.phase, exc, retryable=False)
                raise
            with interrupts.suppressed:
                rec.end(stop, run.turn)
    problem = store.identity_problem()
    if problem is not None:
        raise StoreError(problem)
    return _rollout(run, stop, status_for(stop), error or run.exhausted)


def _rollout(run: EpisodeLoop, stop: StopReason, status: Status, error: str | None) -> Rollout:
    totals = run.rec.totals
    return Rollout(
        episode_id=run.rec.episode_id,
        stop_reason=stop,
        status=status,
        turns_completed=run.turn,
        total_reward=totals.reward,
        tokens=dict(totals.tokens),
        cost_usd=totals.cost_usd,
        error=error,
    )


async def arun_agent_episode(**kwargs: Any) -> Rollout:
    """Async twin of :func:`run_agent_episode`; ``model_fn`` may be a coroutine function.

    The episode runs in a worker thread; an async ``model_fn`` runs on the caller's loop.
    Cancelling the awaiting task cancels the episode cooperatively.
    """
    loop = asyncio.get_running_loop()
    model_fn = kwargs["model_fn"]
    if inspect.iscoroutinefunction(model_fn) or inspect.iscoroutinefunction(
        getattr(model_fn, "__call__", None)  # noqa: B004
    ):
        async_fn = model_fn

        def sync_fn(context: AgentContext) -> AgentTurn:
            future = asyncio.run_coroutine_threadsafe(async_fn(context), loop)
            try:
                while True:
                    try:
                        result: AgentTurn = future.result(timeout=0.1)
                        return result
                    except concurrent.futures.TimeoutError:
                        context.check_cancel()  # the awaiting task was cancelled
            except concurrent.futures.CancelledError:
                raise Cancelled("task cancelled") from None
            finally:
                future.cancel()

        sync_fn.__name__ = getattr(model_fn, "__name__", "async_model")
        kwargs["model_fn"] = sync_fn
    stop = threading.Event()
    user_check = kwargs.get("cancel_check")
    kwargs["cancel_check"] = lambda: stop.is_set() or bool(user_check and user_check())
    episode = asyncio.ensure_future(asyncio.to_thread(lambda: run_agent_episode(**kwargs)))
    try:
        return await asyncio.shield(episode)
    except asyncio.CancelledError:
        stop.set()  # the episode records its cancel and end; wait for it before going on
        await asyncio.wait([episode])
        raise
