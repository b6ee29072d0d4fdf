"""Workspace manifests: what a snapshot holds, path by path.

A manifest maps each path under the workspace root (posix, relative, no ``./``; names that
are not UTF-8 carry their bytes as lone surrogates, Python's ``surrogateescape``) to an
entry: a regular file (permission bits, the sha256 of its content, its size), a symlink
(its target, never followed) or a folder (permission bits; listed so that empty folders
and folder modes survive a restore). File contents live elsewhere, addressed by sha256.

Entries serialise to short JSON lists (``["f", 420, "<sha256>", 12]``, ``["l", "target"]``,
``["d", 493]``); a snapshot stores the changes against its parent as ``{path: entry|null}``,
and :func:`load_manifest` folds a snapshot's chain of changes back into its manifest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentrunner.values.environment import SnapshotBackend
from agentrunner.values.errors import AgentRunnerError, EnvironmentFailure

PERMISSIONS = 0o777
"""The mode bits an entry holds: never setuid, setgid or sticky (snapshots of earlier
versions that kept them are read without them), so no restore can recreate them."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    mode: int  # permission bits (st_mode & PERMISSIONS)
    sha256: str
    size: int

    def to_json(self) -> list[Any]:
        return ["f", self.mode, self.sha256, self.size]

    @property
    def git_mode(self) -> str:
        return "100755" if self.mode & 0o111 else "100644"


@dataclass(frozen=True, slots=True)
class LinkEntry:
    target: str

    def to_json(self) -> list[Any]:
        return ["l", self.target]

    @property
    def git_mode(self) -> str:
        return "120000"


@dataclass(frozen=True, slots=True)
class DirEntry:
    mode: int

    def to_json(self) -> list[Any]:
        return ["d", self.mode]


Entry = FileEntry | LinkEntry | DirEntry
Manifest = dict[str, Entry]
Changes = dict[str, Entry | None]
"""Path -> new entry, or ``None`` where the path was removed."""


def entry_from_json(value: list[Any]) -> Entry:
    """The entry a JSON list stands for (ValueError when it is not one)."""
    tag = value[0] if isinstance(value, list) and value else None
    if tag == "f" and len(value) == 4:
        return FileEntry(int(value[1]) & PERMISSIONS, str(value[2]), int(value[3]))
    if tag == "l" and len(value) == 2:
        return LinkEntry(str(value[1]))
    if tag == "d" and len(value) == 2:
        return DirEntry(int(value[1]) & PERMISSIONS)
    raise ValueError(f"not a manifest entry: {value!r}")


def changes_between(old: Mapping[str, Entry], new: Mapping[str, Entry]) -> Changes:
    """What turns ``old`` into ``new``: changed or added entries, and ``None`` for removals."""
    out: Changes = {path: entry for path, entry in new.items() if old.get(path) != entry}
    out.update((path, None) for path in old if path not in new)
    return out


def apply_changes(base: Mapping[str, Entry], changes: Mapping[str, Entry | None]) -> Manifest:
    """``base`` with ``changes`` applied (a new dict; ``base`` is not modified)."""
    out = dict(base)
    for path, entry in changes.items():
        if entry is None:
            out.pop(path, None)
        else:
            out[path] = entry
    return out


def changes_to_json(changes: Mapping[str, Entry | None]) -> dict[str, list[Any] | None]:
    return {p: (e.to_json() if e is not None else None) for p, e in sorted(changes.items())}


def changes_from_json(value: Mapping[str, Any]) -> Changes:
    return {p: (entry_from_json(e) if e is not None else None) for p, e in value.items()}


def changes_since(old: Manifest, new: Manifest) -> Changes:
    """``changes_between`` for the usual case where most entries are the very same objects."""
    out: Changes = {}
    get = old.get
    for path, entry in new.items():
        before = get(path)
        if before is not entry and before != entry:
            out[path] = entry
    out.update((path, None) for path in old.keys() - new.keys())
    return out


def changes_among(old: Manifest, new: Manifest, fresh: list[str]) -> Changes:
    """What turns ``old`` into ``new`` when only the ``fresh`` paths of ``new`` can differ
    from ``old`` (every other path of ``new`` holds its entry in ``old``)."""
    out: Changes = {}
    get = old.get
    present = len(new)
    for path in fresh:
        before = get(path)
        if before is None:
            present -= 1
        if before != new[path]:
            out[path] = new[path]
    if present != len(old):  # some paths of ``old`` are gone
        out.update((path, None) for path in old.keys() - new.keys())
    return out


def file_totals(manifest: Manifest) -> tuple[int, int]:
    """How many files ``manifest`` holds, and their bytes."""
    files = [e.size for e in manifest.values() if type(e) is FileEntry]
    return len(files), sum(files)


def moved_totals(totals: tuple[int, int], old: Manifest, changes: Changes) -> tuple[int, int]:
    """``totals`` of ``old`` moved by ``changes``."""
    files, size = totals
    for path, entry in changes.items():
        before = old.get(path)
        if type(before) is FileEntry:
            files, size = files - 1, size - before.size
        if type(entry) is FileEntry:
            files, size = files + 1, size + entry.size
    return files, size


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
