"""Episodes the TUI runs in the background: forks it created and episodes it resumes.

Each run is its own process, ``agentrunner resume EP --json`` (the store named by
``AGENTRUNNER_DB`` in its environment, never on its command line), watched by a thread
worker that reports how it ended. A process of its own, rather than a thread of the TUI,
because a run's writer stops a blocking model call or tool step at once only from its main
thread: a cancel request (``x``) then ends the run within a second, not when its current
step is done. Closing the TUI cancels the runs it started, cooperatively (SIGTERM): they
record a ``cancel`` event and can be resumed later (``R``, or ``agentrunner resume``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from textual.app import App
from textual.message import Message

RESUME = (sys.executable, "-m", "agentrunner.cli.entry", "resume")


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
        self._processes: dict[str, subprocess.Popen[str]] = {}
        self._stopping = False
        self.active: set[str] = set()
        self.started: list[str] = []

    def start(self, episode_id: str) -> None:
        """Run (or continue) ``episode_id`` in a process of its own until it ends."""
        self.active.add(episode_id)
        self.started.append(episode_id)

        def work() -> None:
            try:
                message = self._run(episode_id)
            finally:
                self.active.discard(episode_id)
                self._processes.pop(episode_id, None)
            self._app.post_message(message)

        self._app.run_worker(work, thread=True, group="runs", name=f"run {episode_id}")

    def _run(self, episode_id: str) -> RunFinished:
        if self._stopping:
            return RunFinished(episode_id, "not run", None, "the TUI is closing")
        try:
            process = subprocess.Popen(
                [*RESUME, episode_id, "--json"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # never onto the TUI's screen
                text=True,
                env={**os.environ, "AGENTRUNNER_DB": self._db_path},
                start_new_session=True,  # the terminal's signals are the TUI's, not the run's
            )
        except OSError as exc:
            return RunFinished(episode_id, "not run", None, f"could not start the run: {exc}")
        self._processes[episode_id] = process
        if self._stopping:  # the TUI began closing while this one started
            process.send_signal(signal.SIGTERM)
        out, err = process.communicate()
        return _finished(episode_id, out, err)

    def stop_all(self) -> None:
        """Cancel every run this app started (each records its cancel and ends)."""
        self._stopping = True
        for process in list(self._processes.values()):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)


def _finished(episode_id: str, out: str, err: str) -> RunFinished:
    """How the run ended, from the JSON object ``resume --json`` prints last (an error
    prints one too); its last line on stderr when it printed none."""
    lines = out.strip().splitlines()
    try:
        report: Any = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        report = None
    if isinstance(report, dict) and "status" in report:
        reward = report.get("total_reward")
        return RunFinished(episode_id, str(report["status"]), reward, None)
    if isinstance(report, dict) and "error" in report:
        return RunFinished(episode_id, "not run", None, str(report["error"]))
    said = err.strip().splitlines()
    return RunFinished(episode_id, "not run", None, said[-1] if said else "the run failed")
