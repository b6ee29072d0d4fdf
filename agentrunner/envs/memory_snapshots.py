"""Workspace snapshots kept in memory: the backend of an environment run without a store."""

from __future__ import annotations

from collections.abc import Collection, Iterable


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
