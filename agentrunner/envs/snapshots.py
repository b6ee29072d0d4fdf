"""A content-addressed store of workspace snapshots (canonical tar archives).

A snapshot's id is the sha256 of a canonical tar of the workspace: entries sorted by path
(depth first), permission bits kept, owners and mtimes zeroed, ``__pycache__`` skipped. Equal
workspaces therefore get equal ids, and each archive is stored once, at
``<root>/<id[:2]>/<id>.tar``, written to a temp file, fsynced and moved into place with
``os.replace`` so a crash never leaves a half-written snapshot under its id.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO

from agentrunner.envs.sandbox import force_rmtree
from agentrunner.values.errors import EnvironmentFailure

SKIP_DIRS = frozenset({"__pycache__"})
_ID = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


class _HashingWriter:
    """A write-only file object that hashes what passes through it."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sha = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.out.write(data)


@contextlib.contextmanager
def _readable(path: Path, st: os.stat_result, need: int) -> Iterator[None]:
    """Temporarily grant the owner ``need`` bits on ``path`` when the agent removed them."""
    mode = stat.S_IMODE(st.st_mode)
    if mode & need == need:
        yield
        return
    os.chmod(path, mode | need)
    try:
        yield
    finally:
        os.chmod(path, mode)


def _walk(root: Path, rel: str = "") -> Iterator[tuple[str, Path, os.stat_result]]:
    """Every folder, file and symlink under ``root``, depth first, names sorted in each folder.

    A folder stays readable while its subtree is consumed, so the caller can read files
    inside folders the agent locked (``chmod 000``); modes are put back afterwards.
    """
    folder = root / rel if rel else root
    with _readable(folder, folder.lstat(), stat.S_IRUSR | stat.S_IXUSR):
        for name in sorted(os.listdir(folder)):
            path = folder / name
            st = path.lstat()
            if stat.S_ISDIR(st.st_mode) and name in SKIP_DIRS:
                continue
            child = f"{rel}/{name}" if rel else name
            yield child, path, st
            if stat.S_ISDIR(st.st_mode):
                yield from _walk(root, child)


def _info(name: str, st: os.stat_result) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mode = stat.S_IMODE(st.st_mode) & 0o777
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_archive(root: Path, out: IO[bytes]) -> str:
    """Write the canonical archive of ``root`` to ``out``; return its sha256 hex."""
    writer = _HashingWriter(out)
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for name, path, st in _walk(root):
            info = _info(name, st)
            if stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                info.mode = 0o777
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with _readable(path, st, stat.S_IRUSR), path.open("rb") as fh:
                    tar.addfile(info, fh)
            # sockets, fifos and devices are not workspace content: skipped
    return writer.sha.hexdigest()


class SnapshotStore:
    """Snapshots of workspaces under one folder, addressed by content."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path(self, snapshot_id: str) -> Path:
        return self.root / snapshot_id[:2] / f"{snapshot_id}.tar"

    def save(self, workspace: Path) -> str:
        """Archive ``workspace``; store it once under its id; return the id."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".tar")
            tmp = Path(tmp_name)
            try:
                with os.fdopen(fd, "wb") as fh:
                    snapshot_id = write_archive(workspace, fh)
                    fh.flush()
                    os.fsync(fh.fileno())
                target = self.path(snapshot_id)
                if target.exists():
                    tmp.unlink()
                else:
                    target.parent.mkdir(exist_ok=True)
                    os.replace(tmp, target)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        except OSError as exc:
            raise EnvironmentFailure(
                f"cannot snapshot the workspace into {self.root}: {exc}"
            ) from exc
        return snapshot_id

    def restore(self, snapshot_id: str, workspace: Path) -> None:
        """Replace the contents of ``workspace`` with snapshot ``snapshot_id``."""
        target = self.path(snapshot_id) if _ID.fullmatch(snapshot_id) else None
        if target is None or not target.is_file():
            raise EnvironmentFailure(f"unknown snapshot {snapshot_id!r} (not in {self.root})")
        try:
            sha = hashlib.sha256()
            with target.open("rb") as fh:
                for block in iter(lambda: fh.read(_CHUNK), b""):
                    sha.update(block)
            if sha.hexdigest() != snapshot_id:
                raise EnvironmentFailure(f"snapshot {snapshot_id} is corrupt: {target}")
            for child in sorted(workspace.iterdir()):
                force_rmtree(child)
            with tarfile.open(target, mode="r:") as tar:
                _extract(tar, workspace)
        except (OSError, tarfile.TarError) as exc:
            raise EnvironmentFailure(f"cannot restore snapshot {snapshot_id}: {exc}") from exc


def _extract(tar: tarfile.TarFile, workspace: Path) -> None:
    """Extract members by hand: only files, dirs and symlinks, never outside ``workspace``,
    with permission bits only (owned by the runner, never setuid, setgid or sticky)."""
    real = os.path.realpath(workspace)
    dir_modes: list[tuple[Path, int]] = []
    for member in tar:
        parts = PurePosixPath(member.name).parts
        if not parts or member.name.startswith("/") or ".." in parts:
            raise EnvironmentFailure(f"snapshot member has an unsafe path: {member.name!r}")
        dest = workspace.joinpath(*parts)
        parent = os.path.realpath(dest.parent)
        if parent != real and not parent.startswith(real + os.sep):
            raise EnvironmentFailure(f"snapshot member escapes the workspace: {member.name!r}")
        if member.isdir():
            dest.mkdir(exist_ok=True)
            dir_modes.append((dest, member.mode & 0o777))
        elif member.issym():
            os.symlink(member.linkname, dest)
        elif member.isfile():
            src = tar.extractfile(member)
            assert src is not None
            with src, dest.open("wb") as out:
                shutil.copyfileobj(src, out, _CHUNK)
            os.chmod(dest, member.mode & 0o777)  # never setuid, setgid or sticky
    for path, mode in reversed(dir_modes):
        os.chmod(path, mode)
