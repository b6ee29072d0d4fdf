"""A pids cgroup per sandboxed command: a process limit root cannot dodge, and a kill switch.

``RLIMIT_NPROC`` does not bind root, so where the runner may create cgroups (root on a
cgroup v1 ``pids`` hierarchy, or on cgroup v2 with the ``pids`` controller) each command
runs in its own cgroup under ``agentrunner/`` with ``pids.max`` set, and every process
left in it is killed when the command ends. Where no cgroup can be made, callers fall back
to rlimits and say so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/pids")
_V2 = Path("/sys/fs/cgroup")
_GROUP = "agentrunner"
_DRAIN_S = 2.0


@functools.cache
def _parent() -> Path | None:
    """The folder step cgroups are made in, made ready once per process (None: unusable)."""
    if (_V1 / "cgroup.procs").exists():
        parent = _V1 / _GROUP
        try:
            parent.mkdir(exist_ok=True)
        except OSError:
            return None
        return parent if _probe(parent) else None
    controllers = _V2 / "cgroup.controllers"
    try:
        if "pids" not in controllers.read_text().split():
            return None
        parent = _V2 / _GROUP
        parent.mkdir(exist_ok=True)
        for folder in (_V2, parent):
            enabled = (folder / "cgroup.subtree_control").read_text().split()
            if "pids" not in enabled:
                (folder / "cgroup.subtree_control").write_text("+pids")
    except OSError:
        return None
    return parent if _probe(parent) else None


def _probe(parent: Path) -> bool:
    """Whether a child cgroup with a pids limit can be made here; clears stale children."""
    for stale in parent.iterdir() if parent.is_dir() else ():
        owner = stale.name.split("-")[1] if stale.name.count("-") >= 2 else ""
        if stale.is_dir() and owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):  # its runner died; empty, it can go
                if not (stale / "cgroup.procs").read_text().strip():
                    stale.rmdir()
    probe = parent / f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        (probe / "pids.max").write_text("8")
        probe.rmdir()
    except OSError:
        with contextlib.suppress(OSError):
            probe.rmdir()
        return False
    return True


class StepCgroup:
    """One command's cgroup: made with its pids limit, joined by the child, emptied after."""

    def __init__(self, max_pids: int) -> None:
        parent = _parent()
        if parent is None:
            raise OSError("no pids cgroup can be made here")
        self.path = parent / f"step-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(max_pids))
        except OSError:
            self.path.rmdir()
            raise
        self._procs = str(self.path / "cgroup.procs")

    @staticmethod
    def available() -> bool:
        return _parent() is not None

    @classmethod
    def create(cls, max_pids: int) -> StepCgroup | None:
        """A new step cgroup, or None where cgroups are unavailable."""
        if not cls.available():
            return None
        try:
            return cls(max_pids)
        except OSError:
            return None

    def join(self) -> None:
        """Move the calling process into the cgroup (run in the child, before exec)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    def pids(self) -> list[int]:
        try:
            text = Path(self._procs).read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def close(self) -> None:
        """Kill every process still in the cgroup and remove it."""
        kill_file = self.path / "cgroup.kill"
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        deadline = time.monotonic() + _DRAIN_S
        while True:
            pids = self.pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left for the next start's clean-up of stale cgroups
                time.sleep(0.01)
