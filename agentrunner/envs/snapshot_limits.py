"""What a workspace snapshot may hold, and the error when a workspace holds more.

A snapshot holds at most the workspace size limit in bytes of files (``--workspace-size``;
a file counts at its apparent size, so a sparse file is refused at the size it would be
stored at, not the few blocks it uses on disk) and no path longer than
:data:`MAX_PATH_BYTES`. A workspace past either is refused before anything is read or stored.
"""

from __future__ import annotations

from agentrunner.values.errors import EnvironmentFailure

MAX_PATH_BYTES = 3072
"""The longest path a snapshot holds (bytes, relative to the workspace root): a longer one
could not be restored under ``PATH_MAX`` (4096) beside the root's own path."""
NAME_MAX = 256
LARGE = 1 << 20
"""Files at least this big are named when the workspace is over its size limit."""


class WorkspaceOverLimit(EnvironmentFailure):
    """The workspace holds more than a snapshot may store: more bytes of files than the size
    limit (a sparse file counts at its apparent size), or a path too long to restore.
    Nothing was stored; the environment undoes the step that caused it."""

    retryable = False


def refusal(
    total: int, limit: int | None, large: list[tuple[str, int, int]], too_long: list[str]
) -> WorkspaceOverLimit | None:
    """Why a workspace holding ``total`` bytes of files (the ``large`` ones as (path, apparent
    size, bytes on disk)) and the ``too_long`` paths cannot be snapshotted; None when it can."""
    problems = []
    if too_long:
        shown = ", ".join(f"{p[:60]}..." for p in sorted(too_long)[:3])
        problems.append(f"{len(too_long)} path(s) longer than {MAX_PATH_BYTES} bytes ({shown})")
    if limit is not None and total > limit:
        largest = sorted(large, key=lambda f: (-f[1], f[0]))[:3]
        shown = ", ".join(_describe(p, size, used) for p, size, used in largest)
        held = _mib(total) if _mib(total) != _mib(limit) else f"{total:,} bytes"
        problems.append(
            f"{held} of files, over the limit of {_mib(limit)}"
            + (f"; largest: {shown}" if shown else "")
        )
    if not problems:
        return None
    return WorkspaceOverLimit("the workspace holds " + "; and ".join(problems))


def _mib(size: int) -> str:
    return f"{size / (1 << 20):,.0f} MiB" if size >= 1 << 20 else f"{size:,} bytes"


def _describe(path: str, size: int, used: int) -> str:
    sparse = f", sparse: {_mib(used)} on disk" if used < size // 2 else ""
    return f"{path} ({_mib(size)}{sparse})"
