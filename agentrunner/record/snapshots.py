"""The working folder of a recorded agent, snapshotted as its requests arrive
(``record --snapshots``).

The folder is snapshotted with the native runs' incremental :class:`Snapshotter` into the
trace store (a step costs what it changed), in the journal's thread, when a request arrives:
the request carries the results of the tools the agent ran, so the folder then holds their
effects. The snapshot is named by the last ``tool.result`` the request adds (or, for an agent
that acts on the model's words, by the last ``message`` it adds), and those events come before
the request's ``model.request``, which is committed before the request is forwarded: so the
snapshot is taken before forwarding, and adds its own time to the first byte (an incremental
snapshot reads only what changed; see ``tests/benchmarks/test_bench_record_snapshots.py``).
Taken after forwarding, it would also race the agent: a fast answer (a replay) could let the
agent's next tool run first. The first snapshot (``Journal.prime``) is taken before the agent
starts, so even the first request's snapshot is incremental.

Files are stored cleared of known secrets, as native snapshots are: those of the environment
and those the proxy learns from request headers (a newly learned one has every file read
again at the next snapshot). A folder over a native workspace's size limit (1 GiB of
files) is refused before the agent starts; one that grows past it mid-run is recorded
without snapshots from then on, each request saying so on stderr. The folder's ``.git`` is
not snapshotted: the agent's commits are not part of its change (``diff`` leaves ``.git``
out as it does for native runs). Every
conversation of the run (a sub-agent's too) snapshots the one folder: each snapshot goes to
the episode whose request it was taken for."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentrunner.envs.jail import Limits
from agentrunner.envs.snapshotter import SKIP_DIRS, Snapshotter
from agentrunner.values.environment import SnapshotBackend
from agentrunner.values.errors import AgentRunnerError, EnvironmentFailure
from agentrunner.values.redaction import Redactor

SKIP = SKIP_DIRS | {".git"}
LIMIT = Limits().workspace_mb << 20
"""The most bytes of files a snapshot of the folder may hold: a native workspace's default."""
SOURCE = "recorded folder"
"""The ``source`` of a recorded episode's ``env.base``."""


class FolderSnapshots:
    """One agent's working folder, snapshotted into one store (from the journal's thread)."""

    def __init__(
        self, folder: Path, backend: SnapshotBackend, problem: Callable[[str], None]
    ) -> None:
        self.folder = folder
        self.backend = backend
        self.problem = problem
        self._secrets: dict[str, str] = {}
        self._snap = Snapshotter(folder, backend, skip=SKIP, limit=LIMIT)

    def take(self, secrets: Mapping[str, str], *, strict: bool = False) -> str | None:
        """Snapshot the folder now, cleared of ``secrets``; the snapshot's id. One that
        cannot be taken is reported and None (the request is recorded all the same), or
        raised with ``strict``."""
        if dict(secrets) != self._secrets:  # a new secret: every file is read again
            self._secrets = dict(secrets)
            self._snap = Snapshotter(self.folder, self.backend, skip=SKIP, limit=LIMIT)
            self._snap.redactor = Redactor(self._secrets)
        try:
            return self._snap.save()
        except (AgentRunnerError, OSError) as exc:
            if strict:
                raise EnvironmentFailure(f"cannot snapshot {self.folder}: {exc}") from exc
            self.problem(f"snapshot of {self.folder}: {exc}")
            return None


def base(task_id: str, snapshot: str, folder: str) -> dict[str, Any]:
    """What a recorded episode's ``env.base`` says (the fields a native run's base has):
    where the change ``diff`` shows starts, and the folder whose ignore rules it follows."""
    return {"task_id": task_id, "snapshot": snapshot, "source": SOURCE, "repo": folder}
