"""Episodes the TUI runs in the background: forks it created and episodes it resumes.

Each run is a thread worker calling :func:`~agentrunner.resume.resume_episode` with its own
``TraceStore`` (so its writes never share a connection with the UI's reads). Closing the
TUI cancels the runs it started, cooperatively: they record a ``cancel`` event and can be
resumed later (``R``, or ``agentrunner resume``).
"""

from __future__ import annotations

import threading

from textual.app import App
from textual.message import Message

from agentrunner.errors import AgentRunnerError
from agentrunner.resume import resume_episode
from agentrunner.store import TraceStore


class RunFinished(Message):
    """A background run ended (``error`` set when it could not run)."""

    def __init__(
        self, episode_id: str, status: str, total_reward: float | None, error: str | None
    ) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.status = status
        self.total_reward = total_reward
        self.error = error


class BackgroundRuns:
    """Starts and tracks the app's background runs."""

    def __init__(self, app: App[None], db_path: str) -> None:
        self._app = app
        self._db_path = db_path
        self._stop = threading.Event()
        self.active: set[str] = set()
        self.started: list[str] = []

    def start(self, episode_id: str) -> None:
        """Run (or continue) ``episode_id`` in a thread worker until it ends."""
        self.active.add(episode_id)
        self.started.append(episode_id)

        def work() -> None:
            try:
                with TraceStore(self._db_path) as store:
                    rollout = resume_episode(store, episode_id, cancel_check=self._stop.is_set)
                message = RunFinished(
                    episode_id, rollout.status, rollout.total_reward, rollout.error
                )
            except AgentRunnerError as exc:
                message = RunFinished(episode_id, "not run", None, str(exc))
            finally:
                self.active.discard(episode_id)
            self._app.post_message(message)

        self._app.run_worker(work, thread=True, group="runs", name=f"run {episode_id}")

    def stop_all(self) -> None:
        """Cancel every run this app started (they stop at their next poll)."""
        self._stop.set()
