"""Units of work on a Ray cluster: the executor behind ``batch --ray`` and ``fanout --ray``.

The driver hands :func:`run_on_ray` a list of units (one episode each, already recorded in
the store) and a picklable ``work(unit, stopped)`` function. A few long-lived actors (worker
processes, one CPU each, spread over the nodes) run ``work`` on several units at once, as
threads; the driver keeps each actor's threads busy and reports every unit as it finishes.

What makes it safe is the store, not Ray: ``work`` opens the store by its location, claims
the episode's writer lease, and runs or resumes it from the log. When a worker process or
its node dies, Ray restarts the actor (on another node if need be) and retries the units it
held; each resumes its episode from the store, whose lease is dead with the old process.

Ray is imported here only, and only when asked for: without it, :func:`require_ray` says
how to install it.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentrunner.errors import UsageError

U = TypeVar("U")
R = TypeVar("R")

RAY_MISSING = "Ray is not installed: pip install 'agentrunner[ray]'"
EPISODES_PER_WORKER = 4  # threads per actor when the concurrency allows it
WORKER_RESTARTS = 8  # an actor restarts this often after its process or node died
UNIT_RETRIES = 4  # and retries a unit it held this often
POLL_S = 0.25  # how often the driver looks at cancel_check (and takes Ctrl-C)
STOP_WAIT_S = 60.0  # after a stop, how long the driver waits for units to record their cancel


def require_ray() -> Any:
    """The ``ray`` module, or a UsageError with the install hint."""
    try:
        import ray
    except ImportError:
        raise UsageError(RAY_MISSING) from None
    return ray


@dataclass(frozen=True)
class Lost:
    """A unit with no result: not started because the run was stopped (``cancelled``), or
    its worker is gone for good, or it raised what ``work`` does not catch."""

    reason: str
    cancelled: bool = False


class _Worker:
    """One actor: runs ``work`` on units in its threads until told to stop."""

    def __init__(self, work: Callable[[Any, Callable[[], bool]], Any]) -> None:
        self._work = work
        self._stop = threading.Event()

    def run(self, unit: Any) -> Any:
        return self._work(unit, self._stop.is_set)

    def stop(self) -> None:
        self._stop.set()


def _actor_class(ray: Any) -> Any:
    """``_Worker`` as a Ray actor whose ``stop`` is heard while every thread is busy."""

    class AgentrunnerWorker(_Worker):
        @ray.method(concurrency_group="control")
        def stop(self) -> None:
            super().stop()

    return ray.remote(concurrency_groups={"control": 1})(AgentrunnerWorker)


def connect(ray: Any, address: str | None) -> bool:
    """Connect this driver to the cluster at ``address`` (None: start a local one), unless
    it is connected already; True when this call connected it (then disconnect after)."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        options["include_dashboard"] = False
    try:
        ray.init(address=address, **options)
    except (ConnectionError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return True


def plan(ray: Any, concurrency: int, units: int) -> tuple[int, int]:
    """How many actors, and threads each, for ``units`` units at most ``concurrency`` at a
    time: a few episodes per actor, at most one actor per CPU of the cluster."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    running = max(1, min(concurrency, units))
    actors = max(1, min(math.ceil(running / EPISODES_PER_WORKER), cpus))
    return actors, math.ceil(running / actors)


class _Pool(Generic[U, R]):
    """The driver's side: actors, the units each holds, and what came back."""

    def __init__(self, ray: Any, work: Callable[[U, Callable[[], bool]], R], concurrency: int):
        self._ray = ray
        self._work = work
        self._concurrency = concurrency
        self._actors: list[Any] = []
        self._threads = 1
        self._dead: set[int] = set()

    def start(self, units: int) -> None:
        if self._actors:
            return
        count, self._threads = plan(self._ray, self._concurrency, units)
        actor = _actor_class(self._ray).options(
            num_cpus=1,
            max_concurrency=self._threads,
            max_restarts=WORKER_RESTARTS,
            max_task_retries=UNIT_RETRIES,
            scheduling_strategy="SPREAD",
        )
        self._actors = [actor.remote(self._work) for _ in range(count)]

    def map(
        self,
        units: Sequence[U],
        on_done: Callable[[U, R | Lost], None],
        cancel_check: Callable[[], bool] | None,
    ) -> list[R | Lost]:
        """Run every unit; ``on_done`` as each finishes. A stop (``cancel_check``) leaves
        the units not yet started :class:`Lost`; Ctrl-C stops, waits for the running units
        to record their cancel, and is raised again."""
        self.start(len(units))
        results: list[R | Lost | None] = [None] * len(units)
        waiting = deque(range(len(units)))
        held: dict[Any, tuple[int, int]] = {}  # object ref -> (actor, unit)
        free = [0 if i in self._dead else self._threads for i in range(len(self._actors))]

        def finish(i: int, result: R | Lost) -> None:
            results[i] = result
            on_done(units[i], result)

        try:
            stopping = False
            while waiting or held:
                if not stopping and cancel_check is not None and cancel_check():
                    stopping = True
                    self.stop()
                while stopping and waiting:
                    finish(waiting.popleft(), Lost("cancelled before it started", cancelled=True))
                for a in range(len(self._actors)):
                    while free[a] > 0 and waiting:
                        i = waiting.popleft()
                        held[self._actors[a].run.remote(units[i])] = (a, i)
                        free[a] -= 1
                if not held:  # every actor is dead
                    while waiting:
                        finish(waiting.popleft(), Lost("no Ray worker is left"))
                    break
                ready, _ = self._ray.wait(list(held), num_returns=1, timeout=POLL_S)
                for ref in ready:
                    a, i = held.pop(ref)
                    result = self._result(ref, a)
                    if a not in self._dead:
                        free[a] += 1
                    finish(i, result)
        except KeyboardInterrupt:
            self.stop()
            if held:
                self._ray.wait(list(held), num_returns=len(held), timeout=STOP_WAIT_S)
            raise
        return [r if r is not None else Lost("no result") for r in results]

    def _result(self, ref: Any, actor: int) -> R | Lost:
        exceptions = self._ray.exceptions
        try:
            result: R = self._ray.get(ref)
            return result
        except exceptions.RayActorError as exc:
            self._dead.add(actor)
            return Lost(f"its Ray worker died and was not restarted: {_first_line(exc)}")
        except exceptions.RayError as exc:
            return Lost(f"it failed on its Ray worker: {_first_line(exc)}")

    def stop(self) -> None:
        """Ask every actor's units to cancel (they record it) and take no new ones."""
        for a in self._actors:
            a.stop.remote()

    def close(self) -> None:
        for a in self._actors:
            self._ray.kill(a, no_restart=True)
        self._actors = []


class RayExecutor(Generic[U, R]):
    """Runs units of work on Ray actors (a context manager: connects, then disconnects).

    ``work(unit, stopped)`` must be picklable (cloudpickle: closures are fine) and return a
    picklable result; it runs in a worker process, in a thread, possibly again after its
    worker died (it must then continue from the store, not start over). ``address`` is a
    Ray address (``auto``, ``ray://HOST:10001``, ``HOST:6379``); None starts a local
    cluster. A driver already connected (``ray.init()`` done by the caller) stays so.
    """

    def __init__(
        self,
        work: Callable[[U, Callable[[], bool]], R],
        *,
        address: str | None = None,
        concurrency: int = 4,
    ) -> None:
        self._ray = require_ray()
        self._address = address
        self._pool: _Pool[U, R] = _Pool(self._ray, work, concurrency)
        self._connected = False

    def __enter__(self) -> RayExecutor[U, R]:
        self._connected = connect(self._ray, self._address)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._pool.close()
        finally:
            if self._connected:
                self._ray.shutdown()

    def map(
        self,
        units: Sequence[U],
        on_done: Callable[[U, R | Lost], None] = lambda unit, result: None,
        cancel_check: Callable[[], bool] | None = None,
    ) -> list[R | Lost]:
        """Run ``units``, returning their results in order (see :class:`Lost`)."""
        if not units:
            return []
        return self._pool.map(units, on_done, cancel_check)


def _first_line(exc: BaseException) -> str:
    """A Ray error's first line (the rest is the remote traceback)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
