"""Units of work on a Ray cluster: the executor behind ``batch --ray`` and ``fanout --ray``.

The driver hands :class:`RayExecutor` a list of units (one episode each, already recorded in
the store) and a picklable ``work(unit, stopped)`` function. A few long-lived actors (worker
processes, one CPU each, spread over the nodes) run ``work`` on several units at once, as
threads; the driver keeps each actor's threads busy and reports every unit as it finishes.

What makes it safe is the store, not Ray: ``work`` opens the store by its location, claims
the episode's writer lease, and runs or resumes it from the log. When a worker process or
its node dies, Ray restarts the actor (on another node if need be) and the driver submits
the units it held again (each resumes its episode from the store, whose lease is dead with
the old process), up to :data:`UNIT_LOSSES` times per unit; an actor gone for good is
replaced by a new one.

Ray is imported here only, and only when asked for: without it, :func:`require_ray` says
how to install it.
"""

from __future__ import annotations

import math
import os
import re
import socket
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agentrunner.values.errors import UsageError

U = TypeVar("U")
R = TypeVar("R")

RAY_MISSING = "Ray is not installed: pip install 'agentrunner[ray]'"
EPISODES_PER_WORKER = 4  # threads per actor when the concurrency allows it
UNIT_LOSSES = 8  # a unit whose worker dies this often while running it is given up
ACTOR_REPLACEMENTS = 8  # actors gone for good (not restarting) that a run replaces, at most
CONNECT_TIMEOUT_S = 10.0  # how long the driver waits for a cluster's address to answer
POLL_S = 0.25  # how often the driver looks at cancel_check (and takes Ctrl-C)
STOP_WAIT_S = 60.0  # after a stop, how long the driver waits for units to record their cancel
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


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
    its worker died too often while running it, or it raised what ``work`` does not catch."""

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

    def pid(self) -> int:
        return os.getpid()


def _actor_class(ray: Any) -> Any:
    """``_Worker`` as a Ray actor whose ``stop`` and ``pid`` are heard while every thread is
    busy; ``pid`` waits out a restart (it answers once the actor is back, or fails when the
    actor is gone for good)."""

    class AgentrunnerWorker(_Worker):
        @ray.method(concurrency_group="control")
        def stop(self) -> None:
            super().stop()

        @ray.method(concurrency_group="control", max_task_retries=-1)
        def pid(self) -> int:
            return super().pid()

    return ray.remote(concurrency_groups={"control": 1})(AgentrunnerWorker)


def connect(ray: Any, address: str | None) -> bool:
    """Connect this driver to the cluster at ``address`` (None: start a local one), unless
    it is connected already; True when this call connected it (then disconnect after). An
    address where nothing answers within :data:`CONNECT_TIMEOUT_S` is a UsageError."""
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        options["include_dashboard"] = False
    try:
        if address is not None:
            _answering(address)
        # None is "local": a new cluster for this command. Ray's own None would join the
        # cluster named in /tmp/ray/ray_current_cluster, which outlives a head stopped by
        # its PID and then hangs the driver on a dead address.
        ray.init(address=address or "local", **options)
    except (ConnectionError, ValueError) as exc:
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {exc}") from None
    return True


def _answering(address: str) -> None:
    """Raise ConnectionError unless the cluster at ``address`` (``auto``, ``HOST:PORT``)
    takes a connection: Ray itself retries a dead address for many minutes. A Ray Client
    address (``ray://``) is left to Ray, whose client gives up by itself."""
    if address.startswith("ray://"):
        return
    from ray._private.services import canonicalize_bootstrap_address

    resolved = canonicalize_bootstrap_address(address)  # "auto": the running cluster's
    if resolved is None:
        return
    host, _, port = resolved.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConnectionError(f"nothing answers at {resolved} ({reason})") from None


def plan(ray: Any, concurrency: int, units: int) -> tuple[int, int]:
    """How many actors, and threads each, for ``units`` units at most ``concurrency`` at a
    time: a few episodes per actor, at most one actor per CPU of the cluster."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    running = max(1, min(concurrency, units))
    actors = max(1, min(math.ceil(running / EPISODES_PER_WORKER), cpus))
    return actors, math.ceil(running / actors)


class _Run(Generic[U, R]):
    """One :meth:`_Pool.map`: the units waiting, those held by an actor (by object ref), the
    actors answering (an actor whose worker died takes no unit until its ``pid`` answers),
    and how often each unit's worker died under it."""

    def __init__(
        self, pool: _Pool[U, R], units: Sequence[U], on_done: Callable[[U, R | Lost], None]
    ) -> None:
        self.pool, self.units, self.on_done = pool, units, on_done
        self.results: list[R | Lost | None] = [None] * len(units)
        self.waiting = deque(range(len(units)))
        self.held: dict[Any, tuple[int, int]] = {}  # object ref -> (actor, unit)
        self.pings: dict[Any, int] = {}  # object ref of a ``pid`` call -> actor
        self.free = [pool.threads] * len(pool.actors)
        self.answering = [True] * len(pool.actors)
        self.losses = [0] * len(units)
        self.stopping = False

    def finish(self, i: int, result: R | Lost) -> None:
        self.results[i] = result
        self.on_done(self.units[i], result)

    def dispatch(self) -> None:
        for a, actor in enumerate(self.pool.actors):
            while self.answering[a] and self.free[a] > 0 and self.waiting:
                i = self.waiting.popleft()
                self.held[actor.run.remote(self.units[i])] = (a, i)
                self.free[a] -= 1

    def stop(self) -> None:
        self.stopping = True
        self.pool.stop()
        while self.waiting:
            self.finish(self.waiting.popleft(), Lost("cancelled before it started", cancelled=True))

    def step(self) -> None:
        """Wait a little for a unit to come back or an actor to answer, and take it."""
        refs = [*self.held, *self.pings]
        ready, _ = self.pool.ray.wait(refs, num_returns=1, timeout=POLL_S)
        for ref in ready:
            if ref in self.pings:
                self.answered(ref, self.pings.pop(ref))
            else:
                self.returned(ref, *self.held.pop(ref))

    def returned(self, ref: Any, a: int, i: int) -> None:
        ray = self.pool.ray
        self.free[a] += 1
        try:
            self.finish(i, ray.get(ref))
        except ray.exceptions.RayActorError as exc:
            self.worker_died(a, i, exc)
        except ray.exceptions.RayError as exc:
            self.finish(i, Lost(f"it failed on its Ray worker: {cause(exc)}"))

    def worker_died(self, a: int, i: int, exc: BaseException) -> None:
        """Unit ``i``'s worker died (or is out of reach): submit it again, unless the run
        is stopping or the unit has lost :data:`UNIT_LOSSES` workers; and wait for actor
        ``a`` to answer before it takes another unit."""
        self.losses[i] += 1
        if self.stopping:
            self.finish(i, Lost("its Ray worker died while the run was stopping", cancelled=True))
        elif self.losses[i] >= UNIT_LOSSES:
            self.finish(
                i,
                Lost(
                    f"its Ray worker died {self.losses[i]} times while running it (at most "
                    f"{UNIT_LOSSES}), so it was given up; the last time: {_first_line(exc)}"
                ),
            )
        else:
            self.waiting.appendleft(i)
        if self.answering[a]:
            self.answering[a] = False
            self.pings[self.pool.actors[a].pid.remote()] = a

    def answered(self, ref: Any, a: int) -> None:
        """Actor ``a`` is back (it takes units again), or gone for good (replaced)."""
        ray = self.pool.ray
        try:
            ray.get(ref)
        except ray.exceptions.ActorUnavailableError:  # still restarting: ask again
            self.pings[self.pool.actors[a].pid.remote()] = a
            return
        except ray.exceptions.RayError:
            if self.pool.replace(a):
                self.pings[self.pool.actors[a].pid.remote()] = a
            return
        self.answering[a] = True

    def run(self, cancel_check: Callable[[], bool] | None) -> list[R | Lost]:
        while self.waiting or self.held:
            if not self.stopping and cancel_check is not None and cancel_check():
                self.stop()
            self.dispatch()
            if not self.held and not self.pings:  # every actor is gone, none replaced
                while self.waiting:
                    self.finish(self.waiting.popleft(), Lost("no Ray worker is left"))
                break
            self.step()
        return [r if r is not None else Lost("no result") for r in self.results]


class _Pool(Generic[U, R]):
    """The driver's side: the actors, started once and kept across runs."""

    def __init__(self, ray: Any, work: Callable[[U, Callable[[], bool]], R], concurrency: int):
        self.ray = ray
        self._work = work
        self._concurrency = concurrency
        self._actor: Any = None
        self.actors: list[Any] = []
        self.threads = 1
        self._replaced = 0

    def start(self, units: int) -> None:
        if self.actors:
            return
        count, self.threads = plan(self.ray, self._concurrency, units)
        self._actor = _actor_class(self.ray).options(
            num_cpus=1,
            max_concurrency=self.threads,
            max_restarts=-1,  # a worker or node that dies is replaced while the cluster can
            max_task_retries=0,  # the driver submits a lost unit again, and counts
            scheduling_strategy="SPREAD",
        )
        self.actors = [self._actor.remote(self._work) for _ in range(count)]

    def replace(self, a: int) -> bool:
        """Put a new actor in the place of actor ``a``, gone for good; False when this
        pool has replaced :data:`ACTOR_REPLACEMENTS` already."""
        if self._replaced >= ACTOR_REPLACEMENTS:
            return False
        self._replaced += 1
        self.actors[a] = self._actor.remote(self._work)
        return True

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
        run = _Run(self, units, on_done)
        try:
            return run.run(cancel_check)
        except KeyboardInterrupt:
            self.stop()
            if run.held:
                self.ray.wait(list(run.held), num_returns=len(run.held), timeout=STOP_WAIT_S)
            raise

    def stop(self) -> None:
        """Ask every actor's units to cancel (they record it) and take no new ones."""
        for a in self.actors:
            a.stop.remote()

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a, no_restart=True)
        self.actors = []


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


def cause(exc: BaseException) -> str:
    """What a unit raised on its worker, in one line without colours: ``Type: message`` of
    the exception Ray carried back, else the last line of Ray's report (the cause; the
    lines above it are Ray's wrapper and the remote traceback)."""
    carried = getattr(exc, "cause", None)
    if isinstance(carried, BaseException) and carried is not exc:
        message = _first_line(carried, default="")
        return f"{type(carried).__name__}: {message}" if message else type(carried).__name__
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _first_line(exc: BaseException, default: str | None = None) -> str:
    """An error's first line, without colours (for Ray's errors, the rest is detail)."""
    text = _ANSI.sub("", str(exc)).strip()
    if text:
        return text.splitlines()[0]
    return type(exc).__name__ if default is None else default
