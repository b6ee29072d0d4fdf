"""Incremental workspace snapshots: a step's snapshot costs what the step changed.

Like git's index, the :class:`Snapshotter` remembers each path's ``lstat`` (size, mtime,
ctime, inode, mode) with its entry; a scan hashes only the files whose stat changed (and
the "racily clean" ones whose timestamps are too close to the scan that read them to be
trusted). Each file content is stored once in the backend (the trace store: blobs by
sha256, shared across steps, episodes and forks), and a snapshot records only its changes
against its parent; every :data:`CHECKPOINT_DEPTH` snapshots a full one bounds the chain.

A snapshot's id is the sha256 of its parent's id and its changes, so the same change on
the same parent is stored once. Restoring writes only what differs from the workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from agentrunner.environment import SnapshotBackend
from agentrunner.envs.manifest import (
    Changes,
    DirEntry,
    Entry,
    FileEntry,
    LinkEntry,
    Manifest,
    apply_changes,
    changes_from_json,
    changes_to_json,
    file_bytes,
)
from agentrunner.envs.sandbox import force_rmtree
from agentrunner.errors import AgentRunnerError, EnvironmentFailure
from agentrunner.redaction import Redactor

SKIP_DIRS = frozenset({"__pycache__"})
CHECKPOINT_DEPTH = 256
"""A snapshot this many changes away from a full one is stored full again."""
PART_SIZE = 8 << 20
_KEEP_BYTES = 1 << 20
"""Files up to this size keep their bytes from the hashing read (no second read to store)."""
_RACY_NS = 50_000_000
"""A file whose mtime or ctime is this close to the scan that read it is hashed again
(Linux stamps files from a clock that may lag by a scheduler tick, up to 10 ms)."""
_ATTEMPTS = 3

StatKey = tuple[int, int, int, int, int]


_Known = tuple[Entry, StatKey, bool]
"""A path's entry, the lstat it was read under, and whether that stat is too recent to trust."""
S_ISDIR, S_ISREG, S_ISLNK = stat.S_ISDIR, stat.S_ISREG, stat.S_ISLNK


def _key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


class _Changed(Exception):
    """A file changed while it was being stored; the scan starts again."""


class MemorySnapshots:
    """A :class:`SnapshotBackend` in memory: for an environment run without a store."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.snapshots: dict[str, tuple[str | None, int, str]] = {}

    def missing_blobs(self, hashes: Collection[str]) -> set[str]:
        return {h for h in hashes if h not in self.blobs}

    def put_blobs(self, items: Iterable[tuple[str, Iterable[bytes]]]) -> int:
        written = 0
        for digest, parts in items:
            data = b"".join(parts)
            self.blobs.setdefault(digest, data)
            written += len(data)
        return written

    def read_blob(self, digest: str) -> bytes:
        return self.blobs[digest]

    def put_snapshot(
        self,
        snapshot_id: str,
        parent_id: str | None,
        depth: int,
        changes: str,
        files: int,
        size: int,
    ) -> None:
        self.snapshots.setdefault(snapshot_id, (parent_id, depth, changes))

    def snapshot_changes(self, snapshot_id: str) -> list[str] | None:
        chain: list[str] = []
        current: str | None = snapshot_id
        while current is not None:
            if current not in self.snapshots:
                return None
            current, _, changes = self.snapshots[current]
            chain.append(changes)
        return list(reversed(chain))


class Snapshotter:
    """Snapshots and restores one workspace folder against a backend."""

    def __init__(
        self, root: Path, backend: SnapshotBackend, *, skip: frozenset[str] = SKIP_DIRS
    ) -> None:
        self.root = root
        self.backend = backend
        self.skip = skip
        self.current: str | None = None
        self.manifest: Manifest = {}
        self._depth = 0
        self._known: dict[str, _Known] = {}
        self._cache: dict[str, tuple[Manifest, int]] = {}
        self.redactor = Redactor()
        """Known secrets (of this process's environment) are redacted in what is stored."""

    # -- saving ------------------------------------------------------------------------------

    def save(self) -> str:
        """Snapshot the workspace; return its id (the current one when nothing changed)."""
        for _ in range(_ATTEMPTS):
            try:
                return self._save()
            except _Changed:
                continue
        raise EnvironmentFailure(
            f"cannot snapshot the workspace: files kept changing during {_ATTEMPTS} attempts"
        )

    def _save(self) -> str:
        manifest, kept = self.scan()
        parent = self.current
        delta = _delta(self.manifest, manifest) if parent is not None else {}
        if parent is not None and not delta:
            return parent
        full = parent is None or self._depth + 1 >= CHECKPOINT_DEPTH
        changes: Changes = dict(manifest) if full else delta
        text = json.dumps(changes_to_json(changes), separators=(",", ":"))
        parent_id = None if full else parent
        depth = 0 if full else self._depth + 1
        snapshot_id = hashlib.sha256(f"{parent_id or ''}\n{text}".encode()).hexdigest()
        self._store_blobs(changes, kept)
        files = sum(isinstance(e, FileEntry) for e in manifest.values())
        self.backend.put_snapshot(snapshot_id, parent_id, depth, text, files, file_bytes(manifest))
        self.current, self.manifest, self._depth = snapshot_id, manifest, depth
        self._cache[snapshot_id] = (manifest, depth)
        return snapshot_id

    def _store_blobs(self, changes: Changes, kept: dict[str, bytes]) -> None:
        wanted = {e.sha256: p for p, e in changes.items() if isinstance(e, FileEntry)}
        missing = self.backend.missing_blobs(wanted)
        if missing:
            items = ((d, self._parts(wanted[d], d, kept)) for d in sorted(missing))
            self.backend.put_blobs(items)

    def _parts(self, path: str, digest: str, kept: dict[str, bytes]) -> Iterator[bytes]:
        """A file's bytes in parts (at least one), checked against the digest the scan gave it."""
        data = kept.get(digest)
        if data is not None:
            yield from (data[i : i + PART_SIZE] for i in range(0, max(len(data), 1), PART_SIZE))
            return
        sha = hashlib.sha256()
        with self._open(path) as fh:
            block = fh.read(PART_SIZE)
            yield block
            sha.update(block)
            while block := fh.read(PART_SIZE):
                sha.update(block)
                yield block
        if sha.hexdigest() != digest:
            raise _Changed(path)

    # -- scanning ------------------------------------------------------------------------------

    def scan(self) -> tuple[Manifest, dict[str, bytes]]:
        """The workspace's manifest now, hashing only what changed; small files' bytes too."""
        started = time.time_ns()
        manifest: Manifest = {}
        known: dict[str, _Known] = {}
        kept: dict[str, bytes] = {}
        try:
            self._walk("", manifest, known, kept, started)
        except FileNotFoundError as exc:
            if not self.root.is_dir():
                raise EnvironmentFailure(f"the workspace {self.root} is gone") from exc
            raise _Changed(str(exc)) from exc
        except OSError as exc:
            raise EnvironmentFailure(f"cannot read the workspace: {exc}") from exc
        self._known = known
        return manifest, kept

    def _walk(
        self,
        rel: str,
        manifest: Manifest,
        known: dict[str, _Known],
        kept: dict[str, bytes],
        started: int,
    ) -> None:
        folder = self.root / rel if rel else self.root
        prefix = f"{rel}/" if rel else ""
        with _accessible(folder, stat.S_IRUSR | stat.S_IXUSR):
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
            self._entries(entries, prefix, manifest, known, kept, started)

    def _entries(
        self,
        entries: list[os.DirEntry[str]],
        prefix: str,
        manifest: Manifest,
        known: dict[str, _Known],
        kept: dict[str, bytes],
        started: int,
    ) -> None:
        # The hot loop of every snapshot (one pass over every path): kept lean on purpose.
        previous = self._known
        recent = started - _RACY_NS
        for item in entries:
            st = item.stat(follow_symlinks=False)
            path = prefix + item.name
            mode = st.st_mode
            if S_ISDIR(mode):
                if item.name not in self.skip:
                    manifest[path] = DirEntry(mode & 0o7777)
                    self._walk(path, manifest, known, kept, started)
                continue
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, mode)
            old = previous.get(path)
            if old is not None and old[1] == key and not old[2]:
                entry = old[0]
            elif S_ISREG(mode):
                entry = self._hash(path, st, kept)
            elif S_ISLNK(mode):
                entry = LinkEntry(os.readlink(item.path))
            else:
                continue  # sockets, fifos and devices are not workspace content
            manifest[path] = entry
            known[path] = (entry, key, st.st_mtime_ns >= recent or st.st_ctime_ns >= recent)

    def _hash(self, path: str, st: os.stat_result, kept: dict[str, bytes]) -> FileEntry:
        sha = hashlib.sha256()
        size = 0
        small: list[bytes] = []
        with self._open(path) as fh:
            for block in iter(lambda: fh.read(PART_SIZE), b""):
                sha.update(block)
                size += len(block)
                if size <= _KEEP_BYTES:
                    small.append(block)
        digest = sha.hexdigest()
        if size <= _KEEP_BYTES:
            kept[digest] = b"".join(small)
        if self.redactor:  # the store never holds a known secret: the file's redacted bytes
            digest, size = self._redacted(path, digest, size, kept)
        return FileEntry(stat.S_IMODE(st.st_mode), digest, size)

    def _redacted(
        self, path: str, digest: str, size: int, kept: dict[str, bytes]
    ) -> tuple[str, int]:
        """What a file is stored as (digest, size): itself, or its bytes cleared of known
        secrets (a large file holding one: a marker) when it holds one."""
        data = kept.get(digest)
        if data is None:
            with self._open(path) as fh:
                clean = self.redactor.large(iter(lambda: fh.read(PART_SIZE), b""))
        else:
            clean = self.redactor.data(data)
        if clean is None or clean is data:
            return digest, size
        redacted = hashlib.sha256(clean).hexdigest()
        kept.pop(digest, None)
        kept[redacted] = clean
        return redacted, len(clean)

    @contextlib.contextmanager
    def _open(self, path: str) -> Iterator[BinaryIO]:
        target = self.root / path
        with _accessible(target, stat.S_IRUSR):
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                yield fh

    # -- restoring -----------------------------------------------------------------------------

    def load(self, snapshot_id: str) -> Manifest:
        """A snapshot's manifest (EnvironmentFailure when the backend does not hold it)."""
        return self._chain(snapshot_id)[0]

    def _chain(self, snapshot_id: str) -> tuple[Manifest, int]:
        cached = self._cache.get(snapshot_id)
        if cached is None:
            cached = self._cache[snapshot_id] = load_manifest(self.backend, snapshot_id)
        return cached

    def holds(self, snapshot_id: str) -> bool:
        """Whether the backend holds the snapshot."""
        try:
            self._chain(snapshot_id)
        except EnvironmentFailure:
            return False
        return True

    def restore(self, snapshot_id: str) -> None:
        """Make the workspace equal to the snapshot, writing only what differs."""
        target, depth = self._chain(snapshot_id)
        for attempt in range(_ATTEMPTS):
            try:
                current, _ = self.scan()
                break
            except _Changed:
                if attempt == _ATTEMPTS - 1:
                    raise EnvironmentFailure(
                        f"cannot restore snapshot {snapshot_id[:12]}: the workspace kept changing"
                    ) from None
        try:
            self._apply(current, target)
        except (OSError, AgentRunnerError) as exc:
            raise EnvironmentFailure(f"cannot restore snapshot {snapshot_id[:12]}: {exc}") from exc
        self.current, self.manifest, self._depth = snapshot_id, target, depth

    def _apply(self, current: Manifest, target: Manifest) -> None:
        for path, entry in current.items():  # folders the agent locked: open them for now
            if isinstance(entry, DirEntry) and entry.mode & stat.S_IRWXU != stat.S_IRWXU:
                os.chmod(self.root / path, entry.mode | stat.S_IRWXU)
        for path in sorted(current, reverse=True):  # children before their folders
            if type(target.get(path)) is not type(current[path]):
                _remove(self.root / path)
                current.pop(path)
                self._known.pop(path, None)
        written: list[tuple[str, Entry]] = []
        for path, entry in sorted(target.items()):  # folders before their children
            dest = self.root / path
            have = current.get(path)
            if have is None:
                _remove(dest)  # what a scan does not track (a fifo, a socket) stands in the way
            if isinstance(entry, DirEntry):
                if have is None:
                    dest.mkdir()
                os.chmod(dest, entry.mode | stat.S_IRWXU)
                continue
            if have == entry:
                continue
            if isinstance(entry, LinkEntry):
                _remove(dest)
                os.symlink(entry.target, dest)
            else:
                self._write(dest, entry, have)
            written.append((path, entry))
        # Nothing runs in the workspace while it is restored, so a later change gets a
        # timestamp after the restore's end: only files stamped that late are racy.
        ended = time.time_ns()
        for path, entry in written:
            st = (self.root / path).lstat()
            racy = max(st.st_mtime_ns, st.st_ctime_ns) >= ended - _RACY_NS
            self._known[path] = (entry, _key(st), racy)
        for path, entry in sorted(target.items(), reverse=True):
            if isinstance(entry, DirEntry):
                os.chmod(self.root / path, entry.mode)

    def _write(self, dest: Path, entry: FileEntry, have: Entry | None) -> None:
        if isinstance(have, FileEntry) and have.sha256 == entry.sha256:
            os.chmod(dest, entry.mode)
            return
        data = self.backend.read_blob(entry.sha256)
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise EnvironmentFailure(f"workspace blob {entry.sha256[:12]} is corrupt")
        tmp = dest.with_name(f".ar-{secrets.token_hex(8)}")  # short: any name fits beside it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, entry.mode)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def _delta(old: Manifest, new: Manifest) -> Changes:
    """``changes_between`` for the usual case where most entries are the very same objects."""
    out: Changes = {}
    get = old.get
    for path, entry in new.items():
        before = get(path)
        if before is not entry and before != entry:
            out[path] = entry
    out.update((path, None) for path in old.keys() - new.keys())
    return out


def load_manifest(backend: SnapshotBackend, snapshot_id: str) -> tuple[Manifest, int]:
    """A snapshot's manifest and its depth (EnvironmentFailure when the backend lacks it)."""
    try:
        chain = backend.snapshot_changes(snapshot_id)
    except AgentRunnerError as exc:
        raise EnvironmentFailure(f"cannot read snapshot {snapshot_id[:12]}: {exc}") from exc
    if chain is None:
        raise EnvironmentFailure(f"unknown snapshot {snapshot_id!r}")
    manifest: Manifest = {}
    for text in chain:
        manifest = apply_changes(manifest, changes_from_json(json.loads(text)))
    return manifest, len(chain) - 1


@contextlib.contextmanager
def _accessible(path: Path, need: int) -> Iterator[None]:
    """Grant the owner ``need`` bits on ``path`` while it is read, when the agent removed them."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        yield
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & need == need or stat.S_ISLNK(st.st_mode) or os.geteuid() == 0:
        yield
        return
    os.chmod(path, mode | need)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.chmod(path, mode)


def _remove(path: Path) -> None:
    if os.path.lexists(path):
        force_rmtree(path)
