"""Workspace snapshots in the store: content-addressed file blobs and snapshot rows.

A blob is a file's bytes under the sha256 of the whole content, split into parts of at
most :data:`PART_SIZE` so that files of any size fit in SQLite; its parts are written in
one transaction, so a blob is present exactly when its part 0 is. A snapshot row holds its
changes against its parent (JSON, see ``agentrunner/envs/manifest.py``); reading one walks
back to the nearest snapshot without a parent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from agentrunner.store.dialect import Conn, Dialect
from agentrunner.values.errors import StoreError

PART_SIZE = 8 << 20
_TXN_BYTES = 64 << 20
"""Blob bytes written per transaction (a first snapshot of a big repository commits often)."""
_LOOKUP_BATCH = 500


def missing_blobs(conn: Conn, hashes: Collection[str]) -> set[str]:
    """Those of ``hashes`` the store does not hold yet."""
    wanted = sorted(set(hashes))
    have: set[str] = set()
    for i in range(0, len(wanted), _LOOKUP_BATCH):
        batch = wanted[i : i + _LOOKUP_BATCH]
        marks = ", ".join("?" for _ in batch)
        rows = conn.execute(
            f"SELECT hash FROM blobs WHERE part = 0 AND hash IN ({marks})", batch
        ).fetchall()
        have.update(r[0] for r in rows)
    return set(wanted) - have


def put_blobs(conn: Conn, sql: Dialect, blobs: Iterable[tuple[str, Iterable[bytes]]]) -> int:
    """Store each ``(sha256, parts)`` not already present; return the bytes written.

    A blob's parts go in one transaction; several small blobs share one.
    """
    written = 0
    pending = 0
    insert = sql.keep_existing("INSERT INTO blobs (hash, part, data) VALUES (?, ?, ?)")
    conn.execute(sql.begin_write)
    try:
        for digest, parts in blobs:
            for index, data in enumerate(parts):
                conn.execute(insert, (digest, index, data))
                written += len(data)
                pending += len(data)
            if pending >= _TXN_BYTES:
                conn.execute("COMMIT")
                conn.execute(sql.begin_write)
                pending = 0
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return written


def read_blob(conn: Conn, digest: str) -> bytes:
    """A blob's bytes (StoreError when it is missing)."""
    rows = conn.execute("SELECT data FROM blobs WHERE hash = ? ORDER BY part", (digest,)).fetchall()
    if not rows:
        raise StoreError(f"workspace blob {digest[:12]} is missing from the store")
    return b"".join(bytes(r[0]) for r in rows)


def put_snapshot(
    conn: Conn,
    sql: Dialect,
    snapshot_id: str,
    parent_id: str | None,
    depth: int,
    changes: str,
    files: int,
    size: int,
    created_at: str,
) -> None:
    """Record a snapshot once (equal ids hold equal changes on equal parents)."""
    conn.execute(
        sql.keep_existing(
            "INSERT INTO snapshots (id, parent_id, depth, created_at, files, bytes, changes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)"
        ),
        (snapshot_id, parent_id, depth, created_at, files, size, changes),
    )


def snapshot_changes(conn: Conn, snapshot_id: str) -> list[str] | None:
    """The changes (JSON) from the snapshot's base to it, oldest first; None when unknown."""
    rows = conn.execute(
        "WITH RECURSIVE chain(id, parent_id, depth, changes) AS ("
        " SELECT id, parent_id, depth, changes FROM snapshots WHERE id = ?"
        " UNION ALL SELECT s.id, s.parent_id, s.depth, s.changes"
        " FROM snapshots s JOIN chain c ON s.id = c.parent_id)"
        " SELECT depth, changes FROM chain ORDER BY depth",
        (snapshot_id,),
    ).fetchall()
    if not rows:
        return None
    if rows[0][0] != 0 or len(rows) != rows[-1][0] + 1:
        raise StoreError(f"workspace snapshot {snapshot_id[:12]} has a broken parent chain")
    return [r[1] for r in rows]
