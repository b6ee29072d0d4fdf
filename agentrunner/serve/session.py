"""One OpenEnv session: a sandboxed workspace of its own, driven through reset and step, its
episodes recorded (:mod:`agentrunner.serve.episode`).

Every environment and store call of a session runs on the session's own thread (one worker),
in order, off the server's event loop: a slow test run blocks nobody else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from agentrunner.serve.catalog import Catalog
from agentrunner.serve.episode import Peer, ServedEpisode
from agentrunner.serve.schema import (
    ResetObservation,
    SessionState,
    StepObservation,
    WorkspaceAction,
    wire,
)
from agentrunner.store.records import EpisodeFilter
from agentrunner.values.errors import EnvironmentFailure
from agentrunner.values.events import StopReason

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

T = TypeVar("T")


class SessionProblem(Exception):
    """A request this session cannot serve (no episode, the episode is over); the session
    stays usable. ``code`` is the OpenEnv error code."""

    def __init__(self, message: str, code: str = "EXECUTION_ERROR") -> None:
        super().__init__(message)
        self.code = code


class UnknownSession(SessionProblem):
    """A reconnect naming a session that served no episode in this store."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no episode was served in session {session_id} (in this store): reset without"
            " a session_id to start one",
            "SESSION_ERROR",
        )


class Session:
    """One client's session: at most one open episode at a time."""

    def __init__(
        self, store: StoreBackend, catalog: Catalog, peer: Peer, recording: threading.Lock
    ) -> None:
        self.store = store
        self.recording = recording
        self.catalog = catalog
        self.peer = peer
        self.id = peer.session_id
        self.last_active = time.monotonic()
        self.busy = False
        self.episode: ServedEpisode | None = None
        self.closed = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"serve-{self.id}")

    async def _call(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the session's thread; the session counts as active throughout."""
        if self.closed:
            raise SessionProblem("this session is closed: open a new one", "SESSION_ERROR")
        self.busy = True
        try:
            return await asyncio.get_running_loop().run_in_executor(self._thread, work)
        finally:
            self.busy = False
            self.last_active = time.monotonic()

    async def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        """Start a new episode (ending an open one) and return the reset's wire observation."""
        task_id = data.get("task_id") or self.catalog.default_task
        seed = data.get("seed")
        if not isinstance(task_id, str):
            raise SessionProblem(f"task_id must be a string, not {task_id!r}", "VALIDATION_ERROR")
        if seed is not None and (
            not isinstance(seed, int) or isinstance(seed, bool) or not -(2**63) <= seed < 2**63
        ):
            raise SessionProblem(f"seed must be a 64-bit integer, not {seed!r}", "VALIDATION_ERROR")
        return await self._call(lambda: self._reset(task_id, seed or 0))

    async def rejoin(self, session_id: str) -> dict[str, Any]:
        """Continue session ``session_id``'s last episode in this session, which takes the
        id (a client reconnecting after its connection or the server went away); the reset's
        wire observation, its ``step`` the number of steps the episode has taken."""
        if self.episode is not None:
            raise SessionProblem(
                f"this connection already serves session {self.id}: continue session"
                f" {session_id} on a new connection",
                "SESSION_ERROR",
            )
        was = self.peer
        self.id, self.peer = session_id, dataclasses.replace(was, session_id=session_id)
        try:
            return await self._call(self._rejoin)
        except BaseException:
            self.id, self.peer = was.session_id, was
            raise

    def _rejoin(self) -> dict[str, Any]:
        found = self.store.list_episodes(where=EpisodeFilter(served_session=self.id), limit=1)
        if not found:
            raise UnknownSession(self.id)
        summary = found[0]
        env = self.catalog.environment(summary.task_id)
        episode = ServedEpisode(self.store, env, self.peer, self.recording)
        try:
            reset, how = episode.rejoin(summary.episode_id)
        except BaseException:
            env.close()
            raise
        self.episode = episode
        observation = ResetObservation(
            task_id=episode.task_id,
            prompt=reset.prompt,
            instructions=reset.system,
            max_steps=reset.max_steps,
            episode_id=episode.episode_id,
            session_id=self.id,
            step=episode.steps,
            metadata={
                "session_id": self.id,
                "episode_id": episode.episode_id,
                "continued": how,
            },
        )
        return wire(observation, None, False)

    def _reset(self, task_id: str, seed: int) -> dict[str, Any]:
        self._end(StopReason.CANCELLED, "the client reset the session")
        env = self.catalog.environment(task_id)
        episode = ServedEpisode(self.store, env, self.peer, self.recording)
        try:
            prompt, system, max_steps = episode.start(task_id, seed)
        except BaseException:
            env.close()
            raise
        self.episode = episode
        observation = ResetObservation(
            task_id=task_id,
            prompt=prompt,
            instructions=system,
            max_steps=max_steps,
            episode_id=episode.episode_id,
            session_id=self.id,
            metadata={"session_id": self.id, "episode_id": episode.episode_id},
        )
        return wire(observation, None, False)

    async def step(self, action: WorkspaceAction) -> dict[str, Any]:
        """Run one step of the open episode and return its wire observation."""
        return await self._call(lambda: self._step(action))

    def _step(self, action: WorkspaceAction) -> dict[str, Any]:
        episode = self.episode
        if episode is None:
            raise SessionProblem(
                "no open episode in this session: send a reset first (an episode ends at"
                " submit or its step limit)"
            )
        requested = episode.cancel_request()
        if requested is not None:
            self._end(StopReason.CANCELLED, requested)
            raise SessionProblem(f"the episode was cancelled: {requested}", "SESSION_ERROR")
        try:
            result, text = episode.step(action.tool, action.arguments())
        except EnvironmentFailure as exc:
            self.episode = None
            episode.failed(exc)
            episode.env.close()
            raise SessionProblem(f"the environment failed: {exc}") from None
        observation = StepObservation(
            output=text,
            error=result.error,
            truncated=result.truncated,
            step=episode.steps,
        )
        if result.done:
            self._end(StopReason.MAX_STEPS if result.truncated else StopReason.DONE)
        return wire(observation, result.reward, result.done)

    def state(self) -> dict[str, Any]:
        """The session's state (OpenEnv's ``State``)."""
        episode = self.episode
        state = SessionState(
            episode_id=episode.episode_id if episode else None,
            step_count=episode.steps if episode else 0,
            task_id=episode.task_id if episode else None,
            session_id=self.id,
        )
        return state.model_dump()

    async def close(self, why: str | None) -> None:
        """End the open episode (``why``: its cancel reason; None: the client closed it) and
        free the sandbox and the thread; idempotent."""
        if self.closed:
            return
        self.closed = True
        reason = why or "the client closed the session"
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._close, reason)
        finally:
            self._thread.shutdown(wait=False)

    def _close(self, reason: str) -> None:
        try:
            self._end(StopReason.CANCELLED, reason)
        finally:
            self.store.done_in_this_thread()

    def _end(self, stop: StopReason, why: str | None = None) -> None:
        episode, self.episode = self.episode, None
        if episode is None:
            return
        try:
            episode.finish(stop, None if stop != StopReason.CANCELLED else why)
        finally:
            episode.env.close()
