"""One served episode: a workspace reset for a task, its steps run by the environment and
recorded as the runner records them (``tool.call`` before the step, ``tool.result`` with its
snapshot and reward after), and its end.

The environment side only: ``episode.start`` names the server and the client; no model
events are seen. The episode holds its writer lease with a heartbeat, so a server killed
mid-session leaves it ``interrupted`` (the store's lease rules), every acknowledged step
already committed. A client that reconnects with its session id continues the episode
(:meth:`ServedEpisode.rejoin`): the workspace comes back from the last step's snapshot and
the episode goes on as its next attempt, after a ``resume`` event. Everything here runs in
the session's own thread.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner import __version__
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import can_resume
from agentrunner.readers.history import EnvStep
from agentrunner.readers.restore import restore_env
from agentrunner.readers.state import rebuild
from agentrunner.runtime.liveness import Heartbeat
from agentrunner.runtime.recorder import Recorder
from agentrunner.store.leases import Lease
from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.errors import EnvironmentFailure, UsageError
from agentrunner.values.events import EpisodeStart, StopReason, ToolCall
from agentrunner.values.redaction import Redactor, known_secrets, scrub
from agentrunner.values.types import AgentToolCall, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


@dataclass(frozen=True)
class Peer:
    """Who serves and who is served: what ``episode.start`` records of a session."""

    server: str
    """The server's URL (``http://127.0.0.1:8000``)."""
    client: str
    """The client's own name (its ``User-Agent``), or ``unknown``."""
    address: str
    """Where the client connected from."""
    transport: str
    """``websocket`` or ``http``."""
    session_id: str


class ServedEpisode:
    """An episode being served: its environment, recorder, lease and heartbeat."""

    def __init__(
        self, store: StoreBackend, env: WorkspaceEnv, peer: Peer, recording: threading.Lock
    ) -> None:
        self.store = store
        self.recording = recording
        """Held for each write of the record: the server's sessions take turns at the store
        without the database's busy waits (a step's environment work runs outside it)."""
        self.env = env
        self.peer = peer
        self.steps = 0
        self.task_id = ""
        self._rec: Recorder | None = None
        self._lease: Lease | None = None
        self._heartbeat: Heartbeat | None = None

    @property
    def episode_id(self) -> str:
        return self._recorder().episode_id

    def start(self, task_id: str, seed: int) -> tuple[str, str | None, int | None]:
        """Reset the workspace and record the episode's start; (prompt, system, max_steps)."""
        self.env.bind_store(self.store)
        reset = self.env.reset(task_id, seed)
        self.task_id = task_id
        start = EpisodeStart(
            task_id=task_id,
            seed=seed,
            env={**self.env.spec(), "served": self._served()},
            model=self._client(),
            config={"served_by": f"agentrunner serve-env {__version__}"},
            version=__version__,
            max_steps=reset.max_steps,
        )
        with self.recording:
            rec = self._record_start(start)
            if reset.system:
                rec.message(Message(role="system", content=reset.system), "system")
            rec.message(Message(role="user", content=reset.prompt), "prompt")
        return reset.prompt, reset.system, reset.max_steps

    def _record_start(self, start: EpisodeStart) -> Recorder:
        """Create the episode with its start, claimed, and keep its lease alive."""
        episode_id = self.store.create_episode(
            task_id=start.task_id,
            seed=start.seed,
            env=start.env,
            model=start.model,
            claim=True,
            first_event=(0, start),
        )
        self._lease = self.store.lease(episode_id, claimed=True)
        rec = Recorder(self.store, self.store.writer(episode_id), secrets=known_secrets())
        self._hold(rec)
        return rec

    def rejoin(self, episode_id: str) -> tuple[ResetResult, str]:
        """Continue ``episode_id``, an episode this session served that was left
        interrupted (the server killed) or cancelled (the client gone, idle, the server
        stopped): claim it, bring the workspace back to its last recorded step and record
        the resume. (The task's reset, how the workspace came back.) A ``UsageError`` says
        why an episode cannot go on: it is over, or another connection serves it."""
        lease = self.store.lease(
            episode_id,
            refused=UsageError(
                f"episode {episode_id} of this session is being served by another connection"
                " or server: close that one first"
            ),
        )
        lease.claim()
        self._lease = lease
        try:
            return self._rejoin(episode_id)
        except BaseException:
            self._lease = None
            lease.release()
            raise

    def _rejoin(self, episode_id: str) -> tuple[ResetResult, str]:
        state = rebuild(self.store, episode_id)
        why = can_resume(self.store, state.episode, claimed=state, served=True)
        if why is not None:
            raise UsageError(f"episode {episode_id} of this session cannot go on: {why}")
        start = state.start
        self.task_id = start.task_id
        self.steps = state.env_steps[-1].step if state.env_steps else 0
        writer = self.store.writer(episode_id, attempt=state.episode.attempt + 1)
        rec = Recorder(self.store, writer, secrets=known_secrets(), tip=state.tip)
        rec.messages = list(state.messages)
        rec.totals = state.totals
        rec.turn = self.steps
        if state.finished is not None:  # its last step was recorded, its end was not
            self._rec = rec
            self.finish(state.finished)
            raise UsageError(
                f"episode {episode_id} of this session was over ({state.finished}) when the"
                " server stopped; its end is recorded now: reset for a new episode"
            )
        self.env.bind_store(self.store)
        reset, how = restore_env(self.env, start.task_id, start.seed, state.env_steps)
        with self.recording:
            rec.resume(
                from_seq=writer.next_seq - 1,
                env_restore=how,
                dangling=self._unanswered(episode_id, state.env_steps),
                reason="resume",
            )
        self._hold(rec)
        return reset, how

    def _unanswered(self, episode_id: str, steps: list[EnvStep]) -> list[dict[str, Any]]:
        """The step the client sent last, recorded but never answered (the server died
        while it ran): the workspace is back to before it, and the client sends it again."""
        row = self.store.last_of_kind(episode_id, "tool.call")
        if row is None or (steps and steps[-1].seq > row.seq):
            return []
        call = row.typed()
        if not isinstance(call, ToolCall):
            return []
        return [{"call_id": call.call_id, "name": call.name, "action": "sent again by the client"}]

    def _hold(self, rec: Recorder) -> None:
        """Keep the episode's lease alive while this session writes it."""
        episode_id = rec.episode_id
        self._rec = rec
        self._heartbeat = Heartbeat(
            self.store,
            episode_id,
            None,
            interrupt_main=False,
            checkpoint=lambda: rec.checkpoint,
            on_store_lost=lambda problem: setattr(rec.writer, "lost", problem),
        )
        self._heartbeat.__enter__()

    def cancel_request(self) -> str | None:
        """A cancel another process asked for (``agentrunner cancel EP``), if any."""
        return self._heartbeat.reason() if self._heartbeat is not None else None

    def step(self, tool: str, arguments: dict[str, Any]) -> tuple[StepResult, str]:
        """Run one step, recorded; (the result, the observation as recorded and served)."""
        rec = self._recorder()
        self.steps += 1
        rec.turn = self.steps
        raw = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        call = AgentToolCall(call_id=f"step-{self.steps}", name=tool, arguments=raw)
        with self.recording:
            rec.tool_call(call, arguments, None)
        started = time.monotonic()
        result = self.env.step(ToolAction(name=tool, arguments=arguments))
        with self.recording:
            return result, self._record_result(call, result, time.monotonic() - started)

    def _record_result(self, call: AgentToolCall, result: StepResult, duration_s: float) -> str:
        """The step's ``tool.result`` (and its test verdict); the observation as recorded."""
        rec = self._recorder()
        observation = rec.tool_result(
            call,
            result.observation,
            reward=result.reward,
            done=result.done,
            error=result.error,
            duration_s=duration_s,
            snapshot=result.snapshot,
            step=self.steps,
            truncated=result.truncated,
        )
        test = result.info.get("test")
        if isinstance(test, dict):  # as the runner keeps it: a verdict of the submission
            details = {**test, "seq": rec.writer.next_seq - 1, "source": "submit"}
            self.store.add_verification(
                rec.episode_id, "test", result.reward, bool(test.get("passed_all")), details
            )
        return observation

    def failed(self, exc: EnvironmentFailure) -> None:
        """Record an environment that broke during a step: a retryable failure leaves the
        episode ``interrupted`` (resumable), any other ends it as ``error``."""
        with self.recording:
            self._recorder().error("tool", exc, retryable=exc.retryable)
        if exc.retryable:
            self._let_go()
        else:
            self.finish(StopReason.ERROR)

    def finish(self, stop: StopReason, why: str | None = None) -> None:
        """End the episode (``why``: a cancel's reason, recorded before the end)."""
        rec = self._recorder()
        try:
            with self.recording:
                if why is not None:
                    rec.cancel("between_turns", why)
                rec.end(stop, self.steps)
        finally:
            self._let_go()

    def _let_go(self) -> None:
        heartbeat, self._heartbeat = self._heartbeat, None
        lease, self._lease = self._lease, None
        try:
            if heartbeat is not None:
                heartbeat.__exit__(None, None, None)
        finally:
            if lease is not None:
                lease.release()

    def _recorder(self) -> Recorder:
        if self._rec is None:
            raise EnvironmentFailure("no episode in this session: reset first")
        return self._rec

    def _served(self) -> dict[str, Any]:
        peer = self.peer
        served = {
            "server": peer.server,
            "transport": peer.transport,
            "session_id": peer.session_id,
            "client_address": peer.address,
        }
        return dict(scrub(served, Redactor(known_secrets()))[0])

    def _client(self) -> dict[str, Any]:
        client = self.peer.client or "unknown"
        spec = {"spec": f"openenv-client:{client}", "provider": "openenv-client", "model": client}
        return dict(scrub(spec, Redactor(known_secrets()))[0])
