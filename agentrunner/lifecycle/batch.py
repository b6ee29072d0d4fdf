"""Batch runs: many episodes (task x seed) with bounded concurrency into one store.

A batch is identified by its configuration (model, environment, pairs, turn limit), so
running the same batch again resumes it: finished episodes are skipped, interrupted or
cancelled ones resumed, missing ones run. The driver records every (task, seed) pair's
episode up front with its batch membership, in one transaction, so no pair is ever run
twice; each :class:`Member` is one unit of work that :func:`run_member_in` runs or resumes
from the store. A second driver of the same batch (the command started twice) finds the
same episodes: it runs the ones nobody has started, waits for the ones the first runs, and
reports every pair as the store has it.

The units run in threads of this process (``executor="threads"``, the default) or on a
Ray cluster (``executor="ray"``, see :mod:`agentrunner.runtime.distributed`), on whichever worker
gets them (:func:`run_member` reopens the store there).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from agentrunner.lifecycle.members import (
    BatchEpisode,
    Member,
    outcome,
    run_member,
    run_member_in,
    shared,
    stored_status,
)
from agentrunner.runtime.distributed import Lost, RayExecutor, require_ray
from agentrunner.runtime.recorder import Observer
from agentrunner.runtime.runner import RunConfig
from agentrunner.values.branching import Branching
from agentrunner.values.environment import Environment
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status
from agentrunner.values.hashing import canonical_json
from agentrunner.values.model import AgentContext, Model, as_model
from agentrunner.values.system_prompt import with_system_prompt
from agentrunner.values.types import AgentToolCall, AgentTurn

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

ModelFn = Callable[[AgentContext], AgentTurn]
PolicyFn = Callable[[str | None, dict[str, Any]], Any]
Executor = Literal["threads", "ray"]


@dataclass
class BatchResult:
    batch_id: str
    episodes: list[BatchEpisode]

    def summary(self) -> dict[str, Any]:
        done = [e for e in self.episodes if e.status == Status.COMPLETED]
        rewards = [e.total_reward for e in done if e.total_reward is not None]  # judged ones
        costs = [e.cost_usd for e in self.episodes if e.cost_usd is not None]
        return {
            "episodes": len(self.episodes),
            "completed": len(done),
            "ran": sum(e.action == "ran" for e in self.episodes),
            "resumed": sum(e.action == "resumed" for e in self.episodes),
            "skipped": sum(e.action == "skipped" for e in self.episodes),
            "errors": sum(e.action == "error" for e in self.episodes),
            "mean_reward": (sum(rewards) / len(rewards)) if rewards else None,
            "cost_usd": sum(costs) if costs else None,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "summary": self.summary(),
            "episodes": [asdict(e) for e in self.episodes],
        }


class PolicyModel:
    """Adapts ``policy_fn(observation, info) -> action`` to a model.

    The action is a tool call ``{"name": ..., "arguments": {...}}`` (or an AgentToolCall),
    a list of them, or a string (a message with no tool call).
    """

    provider = "policy"

    def __init__(self, policy_fn: PolicyFn) -> None:
        self._fn = policy_fn
        self.model = getattr(policy_fn, "__name__", "policy_fn")
        self.params: dict[str, Any] = {}

    def spec(self) -> dict[str, Any]:
        return {"spec": f"policy:{self.model}", "provider": "policy"}

    def __call__(self, context: AgentContext) -> AgentTurn:
        observation = context.observation
        if observation is None:
            observation = next((m.content for m in context.messages if m.role == "user"), None)
        info = {
            "turn": context.turn,
            "task_id": context.task_id,
            "seed": context.seed,
            "tools": [t.name for t in context.tools],
        }
        action = self._fn(observation, info)
        if isinstance(action, str):
            return AgentTurn(message=action, provider="policy", model=self.model)
        actions = action if isinstance(action, list) else [action]
        calls = tuple(
            a
            if isinstance(a, AgentToolCall)
            else AgentToolCall(
                call_id=f"policy_{context.turn:03d}_{i}",
                name=a["name"],
                arguments=a.get("arguments", {}),
            )
            for i, a in enumerate(actions)
        )
        return AgentTurn(tool_calls=calls, provider="policy", model=self.model)


SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1  # what the store keeps (a signed 64-bit integer)


def batch_id_for(config: dict[str, Any]) -> str:
    return "batch-" + hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


def run_batch(
    store: StoreBackend,
    *,
    task_seed_pairs: Iterable[tuple[str, int] | dict[str, Any]],
    env_factory: Callable[[], Environment],
    model_fn: ModelFn | None = None,
    model_factory: Callable[[], Model] | None = None,
    policy_fn: PolicyFn | None = None,
    concurrency: int = 4,
    max_turns: int = 100,
    name: str | None = None,
    on_episode: Callable[[BatchEpisode], None] | None = None,
    cancel_check: Callable[[], bool] | None = None,
    system_prompt: str | None = None,
    executor: Executor = "threads",
    ray_address: str | None = None,
    branching: Branching | None = None,
    context: dict[str, Any] | None = None,
    observer_factory: Callable[[], Observer] | None = None,
) -> BatchResult:
    """Run (or continue) a batch; one episode per (task, seed), ``concurrency`` at a time.

    The model is ``model_fn`` (shared by all workers), ``model_factory`` (one per worker) or
    ``policy_fn(observation, info) -> action``. ``cancel_check`` stops the batch: running
    episodes are cancelled cooperatively (and resumed by the next run of the batch).
    ``system_prompt`` is added to each environment's own (see
    :mod:`agentrunner.values.system_prompt`) and is part of the batch's identity. ``context``
    holds the context settings every episode runs with (``context``: the policy,
    ``context_window``), part of it too.
    ``observer_factory`` gives each episode run in this process an observer of its events
    (live OpenTelemetry export, :mod:`agentrunner.export.otlp_live`); not with Ray.

    ``executor="ray"`` runs the episodes on a Ray cluster: the one at ``ray_address``
    (``"auto"``, ``"HOST:PORT"``, ``"ray://HOST:10001"``), a local one started for the batch
    when None, or the one this process is connected to already. The factories (or
    ``model_fn``/``policy_fn``) are pickled to the workers, and the store is reopened there
    by its :attr:`~agentrunner.store.TraceStore.location`.
    """
    if executor not in ("threads", "ray"):
        raise UsageError(f"executor must be 'threads' or 'ray', not {executor!r}")
    if executor == "ray":
        require_ray()
        if observer_factory is not None:
            raise UsageError(
                "a live observer (--otlp-endpoint) sees episodes run in this process only, not"
                " on Ray workers: export the batch afterwards (export --format otlp --endpoint)"
            )
    pairs = _pairs(task_seed_pairs)
    if system_prompt is not None:
        env_factory = _adding_system_prompt(env_factory, system_prompt)

    if sum(x is not None for x in (model_fn, model_factory, policy_fn)) != 1:
        raise UsageError("give exactly one of model_fn, model_factory or policy_fn")
    if concurrency < 1:
        raise UsageError("concurrency must be at least 1")
    if policy_fn is not None:
        model_fn = PolicyModel(policy_fn)
    probe = model_factory() if model_factory else as_model(model_fn)  # type: ignore[arg-type]
    env_spec = _env_spec(env_factory)
    model_spec: dict[str, Any] = probe.spec()
    config = _batch_config(name, model_spec, env_spec, pairs, max_turns, system_prompt, branching)
    if context:  # only then: the ids of batches without context settings stay the same
        config["context"] = RunConfig(**context).model_dump(include=set(context))
    batch_id = batch_id_for(config)
    members = [(t, s, env_spec, model_spec) for t, s in pairs]
    if executor == "ray":
        make_model = model_factory or shared(probe)
        work = functools.partial(run_member, store.location, env_factory, make_model)
        # connected first: a cluster that does not answer records nothing
        with RayExecutor(work, address=ray_address, concurrency=concurrency) as cluster:
            episodes = store.add_batch(batch_id, config, members)
            units = [Member(episodes[p], p[0], p[1], max_turns, branching, context) for p in pairs]
            ran = _run_on_ray(store, units, cluster, on_episode, cancel_check)
            return BatchResult(batch_id, ran)
    episodes = store.add_batch(batch_id, config, members)
    units = [Member(episodes[p], p[0], p[1], max_turns, branching, context) for p in pairs]
    threads = _ThreadBatch(store, env_factory, probe, model_factory, cancel_check, observer_factory)
    return BatchResult(batch_id, threads.run(units, concurrency, on_episode))


def _env_spec(env_factory: Callable[[], Environment]) -> dict[str, Any]:
    """The spec of the batch's environment, from one made (and closed) for the purpose."""
    probe_env = env_factory()
    env_spec = probe_env.spec()
    probe_env.close()
    return env_spec


def _batch_config(
    name: str | None,
    model_spec: dict[str, Any],
    env_spec: dict[str, Any],
    pairs: list[tuple[str, int]],
    max_turns: int,
    system_prompt: str | None,
    branching: Branching | None,
) -> dict[str, Any]:
    """What identifies a batch (its id is this configuration's hash)."""
    config: dict[str, Any] = {
        "name": name,
        "model": model_spec,
        "env": {k: env_spec.get(k) for k in ("kind", "tasks", "url")},
        "pairs": sorted([list(p) for p in pairs]),
        "max_turns": max_turns,
    }
    if system_prompt is not None:  # only then: the ids of batches without one stay the same
        config["system_prompt"] = system_prompt
    if branching is not None:  # likewise
        config["branching"] = branching.record()
    return config


class _ThreadBatch:
    """The batch's units run in threads of this process, sharing its store: each thread
    keeps one model (``model_factory``'s, else the probe), and a cancel stops the queue
    and cancels the running ones cooperatively."""

    def __init__(
        self,
        store: StoreBackend,
        env_factory: Callable[[], Environment],
        probe: Model,
        model_factory: Callable[[], Model] | None,
        cancel_check: Callable[[], bool] | None,
        observer_factory: Callable[[], Observer] | None = None,
    ) -> None:
        self.store, self.env_factory = store, env_factory
        self.probe, self.model_factory = probe, model_factory
        self.cancel_check = cancel_check
        self.observer_factory = observer_factory
        self.stop = threading.Event()
        self.local = threading.local()

    def worker_model(self) -> Model:
        if self.model_factory is None:
            return self.probe
        if not hasattr(self.local, "model"):
            self.local.model = self.model_factory()
        model: Model = self.local.model
        return model

    def stopped(self) -> bool:
        if not self.stop.is_set() and self.cancel_check is not None and self.cancel_check():
            self.stop.set()
        return self.stop.is_set()

    def one(self, member: Member) -> BatchEpisode:
        """Run, resume or skip one member's episode."""
        if self.stopped():
            return outcome(
                member.task_id, member.seed, member.episode_id, "skipped", None, "batch cancelled"
            )
        observer = self.observer_factory() if self.observer_factory is not None else None
        return run_member_in(
            self.store, self.env_factory, self.worker_model, member, self.stopped, observer
        )

    def run(
        self,
        units: list[Member],
        concurrency: int,
        on_episode: Callable[[BatchEpisode], None] | None,
    ) -> list[BatchEpisode]:
        """Every unit's outcome, in the units' order (``on_episode`` told as each ends)."""
        results: dict[str, BatchEpisode] = {}
        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="agentrunner-batch")
        try:
            futures = {pool.submit(self.one, unit): unit for unit in units}
            for future in as_completed(futures):
                result = future.result()
                results[futures[future].episode_id] = result
                if on_episode is not None:
                    on_episode(result)
        except BaseException:
            self.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return [results[unit.episode_id] for unit in units]


def _run_on_ray(
    store: StoreBackend,
    units: list[Member],
    cluster: RayExecutor[Member, BatchEpisode],
    on_episode: Callable[[BatchEpisode], None] | None,
    cancel_check: Callable[[], bool] | None,
) -> list[BatchEpisode]:
    found: dict[str, BatchEpisode] = {}

    def done(member: Member, result: BatchEpisode | Lost) -> None:
        found[member.episode_id] = _found(store, member, result)
        if on_episode is not None:
            on_episode(found[member.episode_id])

    results = cluster.map(units, done, cancel_check)
    return [
        found.get(m.episode_id) or _found(store, m, r) for m, r in zip(units, results, strict=True)
    ]


def _found(store: StoreBackend, member: Member, result: BatchEpisode | Lost) -> BatchEpisode:
    """What happened to ``member``, also when its unit gave no result (then with the status
    the store has for its episode)."""
    if not isinstance(result, Lost):
        return result
    action = "skipped" if result.cancelled else "error"
    reason = "batch cancelled" if result.cancelled else result.reason
    status = stored_status(store, member.episode_id)
    return outcome(member.task_id, member.seed, member.episode_id, action, None, reason, status)


def _adding_system_prompt(
    env_factory: Callable[[], Environment], system_prompt: str
) -> Callable[[], Environment]:
    return functools.partial(_prompted, env_factory, system_prompt)


def _prompted(env_factory: Callable[[], Environment], system_prompt: str) -> Environment:
    return with_system_prompt(env_factory(), system_prompt)


def _pairs(raw: Iterable[tuple[str, int] | dict[str, Any]]) -> list[tuple[str, int]]:
    pairs: list[tuple[str, int]] = []
    for item in raw:
        if isinstance(item, dict):
            pairs.append((str(item["task_id"]), int(item.get("seed", 0))))
        else:
            pairs.append((str(item[0]), int(item[1])))
    if not pairs:
        raise UsageError("the batch selects no (task, seed) pair")
    for _, seed in pairs:
        if not SEED_MIN <= seed <= SEED_MAX:
            raise UsageError(f"seed {seed} is not between {SEED_MIN} and {SEED_MAX}")
    return list(dict.fromkeys(pairs))


def select_pairs(task_ids: Sequence[str], seeds: Sequence[int]) -> list[tuple[str, int]]:
    return [(t, s) for t in task_ids for s in seeds]
