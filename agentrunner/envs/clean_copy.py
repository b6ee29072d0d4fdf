"""The clean copy a verification runs on: the base with the recorded change applied.

Verification never runs on the agent's workspace. :func:`materialize` writes, into a new
empty folder, exactly what the store records: the base snapshot's files with the change to
the final snapshot applied, the way ``diff`` shows it. Nothing the snapshots leave out
(``__pycache__`` folders, so no bytecode the agent compiled) and nothing ``diff`` leaves out
(untracked files git ignores) can reach it, and the agent's private ``.git`` stays as the
base had it (``diff`` leaves it out too). Blobs are checked
against their sha256 as they are written.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from agentrunner.envs import ignores
from agentrunner.envs.manifest import DirEntry, FileEntry, LinkEntry, Manifest
from agentrunner.envs.patch import changed_paths
from agentrunner.envs.snapshotter import load_manifest
from agentrunner.values.environment import SnapshotBackend
from agentrunner.values.errors import EnvironmentFailure


def hides_git(path: str) -> bool:
    """The agent's private ``.git`` (``--with-git``) is never part of its change."""
    return path == ".git" or path.startswith(".git/")


def recorded_tree(
    backend: SnapshotBackend, base: str, after: str, *, repo: str | None = None
) -> Manifest:
    """The manifest of ``base`` with the change from ``base`` to ``after`` applied as a patch
    applies it: no ``.git`` change (the agent's history is not part of what it changed), no
    file the change leaves out (an untracked file git ignores: the repository's
    ``.gitignore`` files, ``repo``'s ``.git/info/exclude``, the user's excludes; see
    :mod:`agentrunner.envs.ignores`), and no folder the agent made that holds no file (a
    patch cannot carry an empty folder)."""
    old, _ = load_manifest(backend, base)
    new, _ = load_manifest(backend, after)
    tree = {path: entry for path, entry in new.items() if not hides_git(path)}
    tree.update((path, entry) for path, entry in old.items() if hides_git(path))
    skipped = ignores.left_out(
        changed_paths(old, new, hides_git),
        tracked=frozenset(old),
        new=new,
        read_blob=backend.read_blob,
        repo=repo,
    )
    for path in skipped:
        if path in old:
            tree[path] = old[path]
        else:
            tree.pop(path, None)
    holding = {p.rsplit("/", 1)[0] for p, e in tree.items() if not isinstance(e, DirEntry)}
    for path in list(holding):
        while "/" in path:
            path = path.rsplit("/", 1)[0]
            holding.add(path)
    return {
        path: entry
        for path, entry in tree.items()
        if not isinstance(entry, DirEntry) or path in old or path in holding
    }


def materialize(
    backend: SnapshotBackend, base: str, after: str, dest: Path, *, repo: str | None = None
) -> None:
    """Write the recorded tree (see :func:`recorded_tree`) into the empty folder ``dest``."""
    tree = recorded_tree(backend, base, after, repo=repo)
    try:
        _write_tree(backend, tree, dest)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot write the verification copy: {exc}") from exc


def _write_tree(backend: SnapshotBackend, tree: Manifest, dest: Path) -> None:
    if any(os.scandir(dest)):
        raise EnvironmentFailure(f"the verification folder {dest} is not empty")
    for path in sorted(tree):  # folders before their children
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise EnvironmentFailure(f"a snapshot holds an unsafe path: {path!r}")
        target = dest.joinpath(*parts)
        entry = tree[path]
        if isinstance(entry, DirEntry):
            target.mkdir(mode=0o700)
        elif isinstance(entry, LinkEntry):
            os.symlink(entry.target, target)
        elif isinstance(entry, FileEntry):
            _write_file(backend, entry, target)
    for path in sorted(tree, reverse=True):  # children before their folders
        entry = tree[path]
        if isinstance(entry, DirEntry):
            os.chmod(dest.joinpath(*path.split("/")), entry.mode | stat.S_IRWXU)


def _write_file(backend: SnapshotBackend, entry: FileEntry, target: Path) -> None:
    data = backend.read_blob(entry.sha256)
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        raise EnvironmentFailure(f"workspace blob {entry.sha256[:12]} is corrupt")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(target, entry.mode)
