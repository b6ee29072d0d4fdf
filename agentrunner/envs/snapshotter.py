"""Incremental workspace snapshots: a step's snapshot costs what the step changed.

Like git's index, the :class:`Snapshotter` remembers each path's ``lstat`` (size, mtime,
ctime, inode, mode) with its entry; a scan hashes only the files whose stat changed (and
the "racily clean" ones whose timestamps are too close to the scan that read them to be
trusted). Each file content is stored once in the backend (the trace store: blobs by
sha256, shared across steps, episodes and forks), and a snapshot records only its changes
against its parent; every :data:`CHECKPOINT_DEPTH` snapshots a full one bounds the chain.

A snapshot's id is the sha256 of its parent's id and its changes, so the same change on
the same parent is stored once. Restoring writes only what differs from the workspace.

The walk is iterative (a folder chain of any depth), and a scan reads no file before it has
seen every path: a workspace over its size limit or with a path too long to restore is
refused first (see ``snapshot_limits.py``). Entries hold permission bits only, so a restore
never recreates setuid, setgid or sticky bits; what it writes belongs to the runner.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from agentrunner.envs.manifest import (
    Changes,
    DirEntry,
    Entry,
    FileEntry,
    LinkEntry,
    Manifest,
    changes_among,
    changes_since,
    changes_to_json,
    file_totals,
    load_manifest,
    moved_totals,
)
from agentrunner.envs.memory_snapshots import MemorySnapshots as MemorySnapshots
from agentrunner.envs.snapshot_limits import (
    LARGE,
    MAX_PATH_BYTES,
    NAME_MAX,
    refusal,
)
from agentrunner.envs.trees import accessible, remove_tree, unlock
from agentrunner.values.environment import SnapshotBackend
from agentrunner.values.errors import AgentRunnerError, EnvironmentFailure, StoreUnreachableError
from agentrunner.values.redaction import Redactor

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
_BLOB_TRIES = 10
"""How often a step's blobs are put again after the store's server was lost in the middle
(each try waits for it first, up to the store's patience)."""
_SPECIAL = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
_UID = os.geteuid()

StatKey = tuple[int, int, int, int, int]


_Known = tuple[Entry, StatKey, bool]
"""A path's entry, the lstat it was read under, and whether that stat is too recent to trust."""
S_ISDIR, S_ISREG, S_ISLNK = stat.S_ISDIR, stat.S_ISREG, stat.S_ISLNK


def _key(st: os.stat_result) -> StatKey:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


class _Changed(Exception):
    """A file changed while it was being stored; the scan starts again."""


_UNKNOWN = FileEntry(0, "", 0)
"""A path a restore scan cannot describe (past the path limit): it equals no snapshot's
entry, so the restore removes it."""


class _Scan:
    """What one scan gathers: the manifest, and what it needs to hash or refuse."""

    __slots__ = ("fresh", "kept", "known", "large", "manifest", "started", "target", "todo",
                 "too_long", "total")  # fmt: skip

    def __init__(self, started: int, target: Manifest | None) -> None:
        self.started = started
        self.target = target
        self.manifest: Manifest = {}
        self.known: dict[str, _Known] = {}
        self.kept: dict[str, bytes] = {}
        self.todo: list[tuple[str, os.stat_result, bool]] = []
        self.total = 0
        self.large: list[tuple[str, int, int]] = []
        self.too_long: list[str] = []
        self.fresh: list[str] = []
        """The paths whose entry was not taken from the previous scan's stat cache."""


class Snapshotter:
    """Snapshots and restores one workspace folder against a backend."""

    def __init__(
        self,
        root: Path,
        backend: SnapshotBackend,
        *,
        skip: frozenset[str] = SKIP_DIRS,
        limit: int | None = None,
    ) -> None:
        self.root = root
        self.backend = backend
        self.skip = skip
        self.limit = limit
        """The most bytes of files a snapshot may hold (None: no limit)."""
        self.current: str | None = None
        self.manifest: Manifest = {}
        self._depth = 0
        self._known: dict[str, _Known] = {}
        self._cache: dict[str, tuple[Manifest, int]] = {}
        self._synced = False
        """Whether every path in the stat cache has its entry in :attr:`manifest` (true after
        a save or a restore): a save then compares only the paths the scan read afresh."""
        self._totals: tuple[int, int] | None = None
        """The files and bytes of files in :attr:`manifest` (None: not counted yet)."""
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
        synced = self._synced
        found = self._scan(None)
        manifest, parent = found.manifest, self.current
        if parent is None:
            delta: Changes = {}
        elif synced:
            delta = changes_among(self.manifest, manifest, found.fresh)
        else:
            delta = changes_since(self.manifest, manifest)
        if parent is not None and not delta:
            self._synced = True
            return parent
        full = parent is None or self._depth + 1 >= CHECKPOINT_DEPTH
        changes: Changes = dict(manifest) if full else delta
        text = json.dumps(changes_to_json(changes), separators=(",", ":"))
        parent_id = None if full else parent
        depth = 0 if full else self._depth + 1
        snapshot_id = hashlib.sha256(f"{parent_id or ''}\n{text}".encode()).hexdigest()
        for tries in range(1, _BLOB_TRIES + 1):
            try:
                self._store_blobs(changes, found.kept)
                break
            except StoreUnreachableError:  # the blobs committed so far stay; the rest again
                if tries == _BLOB_TRIES:
                    raise
        totals = (
            file_totals(manifest)
            if full or self._totals is None
            else moved_totals(self._totals, self.manifest, delta)
        )
        self.backend.put_snapshot(snapshot_id, parent_id, depth, text, *totals)
        self.current, self.manifest, self._depth = snapshot_id, manifest, depth
        self._totals, self._synced = totals, True
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

    def scan(self, target: Manifest | None = None) -> tuple[Manifest, dict[str, bytes]]:
        """The workspace's manifest now, hashing only what changed; small files' bytes too."""
        found = self._scan(target)
        return found.manifest, found.kept

    def _scan(self, target: Manifest | None) -> _Scan:
        """The workspace's manifest now, hashing only what changed; small files' bytes too.

        The walk is iterative (a folder chain of any depth is fine) and hashes nothing until
        it has seen every path: a workspace over :attr:`limit`, or with a path longer than
        :data:`MAX_PATH_BYTES`, raises :class:`WorkspaceOverLimit` before any file is read.
        For a restore to ``target`` (no limits), a changed file is hashed only when it may
        equal its entry there; one that cannot (another size, no entry), that has setuid,
        setgid or sticky bits, or that another user owns gets an entry with no digest, which
        equals no snapshot's; so does a path past the limits, which the restore removes.
        """
        found = _Scan(time.time_ns(), target)
        undo: list[tuple[str, int]] = []
        try:
            self._walk(found, undo)
            if target is None:
                self._check(found)
            for path, st, racy in found.todo:
                entry = self._hash(path, st, found.kept)
                found.manifest[path] = entry
                found.known[path] = (entry, _key(st), racy)
        except FileNotFoundError as exc:
            if not self.root.is_dir():
                raise EnvironmentFailure(f"the workspace {self.root} is gone") from exc
            raise _Changed(str(exc)) from exc
        except OSError as exc:
            raise EnvironmentFailure(f"cannot read the workspace: {exc}") from exc
        finally:
            for folder, mode in reversed(undo):  # folders the agent locked: locked again
                with contextlib.suppress(OSError):
                    os.chmod(folder, mode)
        self._known, self._synced = found.known, False
        return found

    def _walk(self, found: _Scan, undo: list[tuple[str, int]]) -> None:
        """Every path under the root into ``found``, folder by folder (no recursion), each
        folder in the order the file system lists it (a manifest is a mapping: no sorting)."""
        root = str(self.root)
        pending = [""]
        while pending:
            rel = pending.pop()
            folder = f"{root}/{rel}" if rel else root
            unlock(folder, stat.S_IRUSR | stat.S_IXUSR, undo)
            with os.scandir(folder) as it:
                self._entries(it, f"{rel}/" if rel else "", found, pending)

    def _entries(
        self, entries: Iterator[os.DirEntry[str]], prefix: str, found: _Scan, pending: list[str]
    ) -> None:
        # The hot loop of every snapshot (one pass over every path): kept lean on purpose. A
        # path whose lstat equals the one its entry was read under, and that was not too
        # recent to trust then (git's racy rule), keeps its entry unread.
        previous = self._known
        recent = found.started - _RACY_NS
        manifest, known, todo, target = found.manifest, found.known, found.todo, found.target
        fresh = found.fresh
        room = MAX_PATH_BYTES - len(os.fsencode(prefix))
        tight = room < NAME_MAX
        total = 0
        for item in entries:
            st = item.stat(follow_symlinks=False)
            name = item.name
            path = prefix + name
            mode = st.st_mode
            if tight and len(os.fsencode(name)) > room:
                found.too_long.append(path)
                manifest[path] = _UNKNOWN
                fresh.append(path)
                continue
            if S_ISREG(mode):
                size = st.st_size
                total += size
                if size >= LARGE:
                    found.large.append((path, size, st.st_blocks * 512))
                if target is not None and (mode & _SPECIAL or st.st_uid != _UID):
                    manifest[path] = FileEntry(mode & 0o777, "", size)
                    fresh.append(path)
                    continue
                old = previous.get(path)
                if old is not None and not old[2]:
                    k = old[1]
                    if (k[1] == st.st_mtime_ns and k[2] == st.st_ctime_ns and k[0] == size
                            and k[3] == st.st_ino and k[4] == mode):  # fmt: skip
                        manifest[path] = old[0]
                        known[path] = old
                        continue
                fresh.append(path)
                racy = st.st_mtime_ns >= recent or st.st_ctime_ns >= recent
                want = target.get(path) if target is not None else None
                if target is None or (isinstance(want, FileEntry) and want.size == size):
                    todo.append((path, st, racy))
                else:
                    manifest[path] = FileEntry(mode & 0o777, "", size)
            elif S_ISDIR(mode):
                if name not in self.skip:
                    manifest[path] = DirEntry(mode & 0o777)
                    fresh.append(path)
                    pending.append(path)
            elif S_ISLNK(mode):  # sockets, fifos and devices are not workspace content
                entry = LinkEntry(os.readlink(item.path))
                manifest[path] = entry
                fresh.append(path)
        found.total += total

    def _check(self, found: _Scan) -> None:
        problem = refusal(found.total, self.limit, found.large, found.too_long)
        if problem is not None:
            raise problem

    def _hash(self, path: str, st: os.stat_result, kept: dict[str, bytes]) -> FileEntry:
        sha = hashlib.sha256()
        size = 0
        small: list[bytes] = []
        with self._open(path) as fh:
            for block in iter(lambda: fh.read(PART_SIZE), b""):
                sha.update(block)
                size += len(block)
                if size > st.st_size:  # it grew after the limit was checked
                    raise _Changed(path)
                if size <= _KEEP_BYTES:
                    small.append(block)
        digest = sha.hexdigest()
        if size <= _KEEP_BYTES:
            kept[digest] = b"".join(small)
        if self.redactor:  # the store never holds a known secret: the file's redacted bytes
            digest, size = self._redacted(path, digest, size, kept)
        return FileEntry(st.st_mode & 0o777, digest, size)

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
        with accessible(target, stat.S_IRUSR):
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
                current, _ = self.scan(target)
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
        self._totals, self._synced = None, True

    def _apply(self, current: Manifest, target: Manifest) -> None:
        """Write what differs between the scanned workspace and the target, and nothing else
        (as ``git read-tree -m -u``: the paths that are equal are not touched, not even
        joined into a path)."""
        root, wanted, have_now = self.root, target.get, current.get
        opened: set[str] = set()  # folders open for writing until the end: their final mode
        doomed: set[str] = set()  # what is in the way: another kind of entry, or none
        for path, entry in current.items():  # an entry the stat cache kept is the very object
            want = wanted(path)
            if want is entry:
                continue
            if type(entry) is DirEntry and entry.mode & stat.S_IRWXU != stat.S_IRWXU:
                os.chmod(root / path, entry.mode | stat.S_IRWXU)  # locked by the agent: open
                opened.add(path)
            if type(want) is not type(entry):
                doomed.add(path)
        for path in sorted(doomed):  # a folder goes with all it holds, however deep
            if path.rpartition("/")[0] not in doomed:
                remove_tree(root / path)
            current.pop(path)
            self._known.pop(path, None)
            opened.discard(path)
        differs = [p for p, e in target.items() if (h := have_now(p)) is not e and h != e]
        written: list[tuple[str, Entry]] = []
        for path in sorted(differs):  # folders before their children
            entry, have = target[path], current.get(path)
            dest = root / path
            if have is None:
                remove_tree(dest)  # what a scan does not track (a fifo, a socket) is in the way
            if isinstance(entry, DirEntry):
                if have is None:
                    dest.mkdir()
                os.chmod(dest, entry.mode & 0o777 | stat.S_IRWXU)
                opened.add(path)
                continue
            if isinstance(entry, LinkEntry):
                remove_tree(dest)
                os.symlink(entry.target, dest)
            else:
                self._write(dest, entry, have)
            written.append((path, entry))
        # Nothing runs in the workspace while it is restored, so a later change gets a
        # timestamp after the restore's end: only files stamped that late are racy.
        ended = time.time_ns()
        for path, entry in written:
            st = (root / path).lstat()
            racy = max(st.st_mtime_ns, st.st_ctime_ns) >= ended - _RACY_NS
            self._known[path] = (entry, _key(st), racy)
        for path in sorted(opened, reverse=True):  # children before their folders
            folder = target[path]
            assert isinstance(folder, DirEntry)
            os.chmod(root / path, folder.mode & 0o777)

    def _write(self, dest: Path, entry: FileEntry, have: Entry | None) -> None:
        mode = entry.mode & 0o777  # never setuid, setgid or sticky (older snapshots kept them)
        if isinstance(have, FileEntry) and have.sha256 == entry.sha256:
            os.chmod(dest, mode)
            return
        data = self.backend.read_blob(entry.sha256)
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise EnvironmentFailure(f"workspace blob {entry.sha256[:12]} is corrupt")
        tmp = dest.with_name(f".ar-{secrets.token_hex(8)}")  # short: any name fits beside it
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
