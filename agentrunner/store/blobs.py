"""Workspace snapshots in the store: content-addressed file blobs and snapshot rows.

A blob is a file's bytes under the sha256 of the whole content, split into parts of at
most :data:`PART_SIZE` so that files of any size fit in SQLite; its parts are written in
one transaction, so a blob is present exactly when its part 0 is. A snapshot row holds its
changes against its parent (JSON, see ``agentrunner/envs/manifest.py``); reading one walks
back to the nearest snapshot without a parent.

A store may keep the bytes of its new blobs in an S3-compatible bucket instead, and only
their index (:mod:`agentrunner.store.blob_bucket`); a blob is then read from whichever of
the two holds it. A store without a bucket reads and writes exactly as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator

from agentrunner.store import blob_bucket
from agentrunner.store.dialect import Conn, Dialect
from agentrunner.values.errors import StoreError

PART_SIZE = 8 << 20
_TXN_BYTES = 64 << 20
"""Blob bytes written per transaction (a first snapshot of a big repository commits often)."""
_LOOKUP_BATCH = 500


def missing_blobs(conn: Conn, hashes: Collection[str]) -> set[str]:
    """Those of ``hashes`` the store does not hold yet (in its table or its bucket)."""
    wanted = sorted(set(hashes))
    have = _present(conn, "SELECT hash FROM blobs WHERE part = 0 AND hash IN", wanted)
    rest = [h for h in wanted if h not in have]
    if rest:
        have |= _present(conn, "SELECT hash FROM blob_objects WHERE hash IN", rest)
    return set(wanted) - have


def _present(conn: Conn, query: str, hashes: list[str]) -> set[str]:
    have: set[str] = set()
    for i in range(0, len(hashes), _LOOKUP_BATCH):
        batch = hashes[i : i + _LOOKUP_BATCH]
        marks = ", ".join("?" for _ in batch)
        have.update(r[0] for r in conn.execute(f"{query} ({marks})", batch).fetchall())
    return have


def put_blobs(conn: Conn, sql: Dialect, blobs: Iterable[tuple[str, Iterable[bytes]]]) -> int:
    """Store each ``(sha256, parts)`` not already present; return the bytes written.

    A blob's parts go in one transaction; several small blobs share one. A store with a
    bucket puts them there instead (:func:`agentrunner.store.blob_bucket.put_blobs`).
    """
    bucket = blob_bucket.bucket_of(conn)
    if bucket is not None:
        return blob_bucket.put_blobs(conn, sql, bucket, blobs)
    written = 0
    pending = 0
    insert = sql.keep_existing("INSERT INTO blobs (hash, part, data) VALUES (?, ?, ?)")
    flush = sql.flush_on_commit  # a snapshot naming them outlives a crash of the server
    conn.execute(sql.begin_write)
    try:
        if flush is not None:
            conn.execute(flush)
        for digest, parts in blobs:
            for index, data in enumerate(parts):
                conn.execute(insert, (digest, index, data))
                written += len(data)
                pending += len(data)
            if pending >= _TXN_BYTES:
                conn.execute("COMMIT")
                conn.execute(sql.begin_write)
                if flush is not None:
                    conn.execute(flush)
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
    if rows:
        return b"".join(bytes(r[0]) for r in rows)
    bucket = blob_bucket.bucket_of(conn) if blob_bucket.indexed(conn, digest) else None
    if bucket is None:
        raise StoreError(f"workspace blob {digest[:12]} is missing from the store")
    return bucket.get(digest)


def blob_parts(conn: Conn, digest: str) -> Iterator[bytes]:
    """A blob's bytes in parts, read one at a time (nothing when the store lacks it)."""
    part = 0
    while True:
        row = conn.execute(
            "SELECT data FROM blobs WHERE hash = ? AND part = ?", (digest, part)
        ).fetchone()
        if row is None:
            break
        yield bytes(row[0])
        part += 1
    if part == 0 and blob_bucket.indexed(conn, digest):
        bucket = blob_bucket.bucket_of(conn)
        if bucket is not None:
            yield from bucket.get_parts(digest, PART_SIZE)


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
        sql.keep_flushed(
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
