"""Reclaiming space: what the store holds by part, and deleting content no episode names.

Content is stored once by hash and shared: workspace blobs (file contents, and the answers
the recording proxy kept), snapshot rows, messages and tool sets. ``rm`` deletes an
episode's events and rows but leaves its content, since other episodes may share it. ``gc``
deletes the content nothing names any more, then gives the space back (SQLite: ``VACUUM``,
or ``PRAGMA incremental_vacuum`` on a store made with ``auto_vacuum=INCREMENTAL``, then a
WAL checkpoint that truncates; Postgres: deleting the rows, then plain ``VACUUM``, which
makes their space reusable). No event is ever deleted, so the log's removal permits (see
``TraceStore.remove_episode``) are not involved: content tables have no refusing triggers.

What is named (mark): every 64-hex-digit string in a non-chunk event's payload (a
``tip_hash``, ``message_hash``, ``tools_hash``, ``snapshot``, the kept answer's ``body``,
``env.base.snapshot`` of ``episode.start``, and any field a later version adds) or in any
text column of any other table (episodes, fork groups, decisions, batches, verifications,
control, and tables later versions add);
then, from those, whole message chains (``parent_hash``), snapshot chains (``parent_id``)
and the files of every named snapshot. Everything else is collected (sweep).

A store that keeps its blobs in a bucket (:mod:`agentrunner.store.blob_bucket`) holds only
their index: gc deletes the index rows nothing names, commits, and then, holding the store
to itself again, deletes every object under the store's prefix that no index row names (those
just unindexed, and any a writer killed between putting an object and indexing it left).
Objects go only after their rows, so no row ever names a missing object.

Why this is safe while other processes use the store. Writers put content first and the
event naming it after, and content is deduplicated: a writer that finds a blob, snapshot or
message already present does not write it again. So content that is unnamed *now* may be
named by an event a live process writes next: not only content it just wrote (a snapshot
whose ``tool.result`` has not landed yet), but also old unnamed content it found present
(a new run of the repository an ``rm``-ed episode ran on reuses all of its blobs, before
its episode or lease even exists). No rule on leases or ages can tell those apart, so gc
deletes only when no other process has the store open, and makes sure none can start
reading it until the deletion is committed:

- SQLite: in WAL mode every connection holds a shared lock on the store file for as
  long as it is open (and a read lock on its ``-shm``). gc first looks at the POSIX locks
  (``/proc/locks``) to name the processes that have the store open, and stops if there
  are any; then it takes the file's exclusive lock with its own connection in
  ``locking_mode=EXCLUSIVE`` (trying for a second), which SQLite grants only while no
  other connection is open, and which keeps every other connection from opening until gc
  is done. A process that opens the store after sees it as gc committed it.
- Postgres: gc locks the content tables and the log ``ACCESS EXCLUSIVE`` (no other session
  can read them until gc commits) and then requires that no other client session is
  connected to the database (``pg_stat_activity``); otherwise it rolls back.
- In both, an episode with a live writer lease also stops the deletion (belt and braces).

What this assumes: a process keeps the store open from the moment it looks for content to
the event that names it (agentrunner's processes hold it open for their whole run). With
``wait``, gc retries each second until the store is free; without, it raises
:class:`StoreInUseError` naming who uses it. ``dry_run`` never deletes and needs nothing.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.store import blob_bucket, eventlog
from agentrunner.store.dialect import Conn
from agentrunner.store.exclusive import (
    StoreInUseError,
    live_leases,
    postgres_exclusive,
    sqlite_exclusive,
)

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase

Progress = Callable[[str], None]
HASH = re.compile(r"[0-9a-f]{64}")
PARTS = ("events", "messages", "tools", "blobs", "snapshots", "other")
_TABLE_PART = {
    "event_log": "events",
    "messages": "messages",
    "tools": "tools",
    "blobs": "blobs",
    "blob_objects": "blobs",
    "snapshots": "snapshots",
}
_CONTENT = frozenset(
    {"blobs", "blob_objects", "blob_bucket", "messages", "tools", "snapshots", "event_log"}
)
"""Tables read by the mark itself; every other table's text columns are searched."""
_PAGE = 2000
_BATCH = 500


@dataclass
class Part:
    rows: int = 0
    bytes: int = 0


@dataclass
class Garbage:
    """Content nothing names, by kind: keys and bytes."""

    blobs: dict[str, int] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    """Blobs in the store's bucket (their index rows)."""
    messages: dict[str, int] = field(default_factory=dict)
    tools: dict[str, int] = field(default_factory=dict)
    snapshots: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Part]:
        return {
            kind: Part(len(keys), sum(keys.values()))
            for kind, keys in (
                ("blobs", {**self.objects, **self.blobs}),
                ("messages", self.messages),
                ("tools", self.tools),
                ("snapshots", self.snapshots),
            )
        }


@dataclass
class Report:
    """What gc found (and, unless ``dry_run``, did)."""

    dry_run: bool
    parts: dict[str, Part]
    garbage: dict[str, Part]
    size_before: int
    size_after: int | None = None


# ---------------------------------------------------------------- sizes


def space(store: StoreBase) -> tuple[dict[str, Part], int]:
    """The store's rows and bytes by part (indexes included), and its total size in bytes
    (SQLite: the file and its WAL; Postgres: the schema's tables)."""
    conn = store._conn
    parts = {name: Part() for name in PARTS}
    if store.sql.postgres:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchall()
        sizes = [(str(r[0]), int(r[1])) for r in rows]
        total = sum(size for _, size in sizes)
    else:
        owner = {
            str(r[0]): str(r[1])
            for r in conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall()
        }
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        sizes = [(owner.get(str(r[0]), str(r[0])), int(r[1])) for r in rows]
        total = _file_bytes(store.path)
    for table, size in sizes:
        parts[_TABLE_PART.get(table, "other")].bytes += size
    for table, part in _TABLE_PART.items():
        what = "DISTINCT hash" if table == "blobs" else "*"
        parts[part].rows += int(conn.execute(f"SELECT count({what}) FROM {table}").fetchone()[0])
    return parts, total


def _file_bytes(path: Path) -> int:
    return sum(os.stat(f).st_size for f in (path, Path(f"{path}-wal")) if os.path.exists(f))


# ---------------------------------------------------------------- mark


def _names(texts: Iterable[str | None]) -> set[str]:
    found: set[str] = set()
    for text in texts:
        if text:
            found.update(HASH.findall(text))
    return found


def _payloads(conn: Conn) -> Iterator[str]:
    """Every non-chunk event's payload, paged by id."""
    after = -1
    while True:
        rows = conn.execute(
            f"SELECT id, payload FROM event_log WHERE id > ? AND {eventlog.NOT_CHUNK}"
            " ORDER BY id LIMIT ?",
            (after, _PAGE),
        ).fetchall()
        for row in rows:
            yield str(row[1])
        if len(rows) < _PAGE:
            return
        after = int(rows[-1][0])


def _closure(roots: set[str], parent: dict[str, str | None]) -> set[str]:
    """The keys of ``parent`` reachable from ``roots`` by following parents."""
    seen: set[str] = set()
    for root in roots:
        key: str | None = root
        while key is not None and key in parent and key not in seen:
            seen.add(key)
            key = parent[key]
    return seen


def _text_columns(conn: Conn, postgres: bool) -> list[tuple[str, str]]:
    """``(table, column)`` of every text column outside the content tables and the log:
    the side tables (episodes, fork groups, decisions, batches, verifications, control...),
    a table a later version adds included."""
    if postgres:
        rows = conn.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c"
            " JOIN information_schema.tables t ON t.table_schema = c.table_schema"
            " AND t.table_name = c.table_name WHERE c.table_schema = current_schema()"
            " AND t.table_type = 'BASE TABLE' AND c.data_type IN ('text', 'json', 'jsonb')"
        ).fetchall()
        found = [(str(r[0]), str(r[1])) for r in rows]
    else:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
        ]
        found = [
            (table, str(col[1]))
            for table in tables
            for col in conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            if str(col[2]).upper() in ("TEXT", "")
        ]
    return sorted((t, c) for t, c in found if t not in _CONTENT)


def find_garbage(conn: Conn, progress: Progress, *, postgres: bool) -> Garbage:
    """Content no event or side row names (see the module docstring), read through ``conn``
    (inside one transaction, for one state of the store)."""
    progress("reading what the events name")
    named = _names(_payloads(conn))
    for table, column in _text_columns(conn, postgres):
        named |= _names(str(r[0]) for r in conn.execute(f'SELECT "{column}" FROM "{table}"'))
    progress("following message and snapshot chains")
    messages = {
        str(r[0]): (r[1], int(r[2]))
        for r in conn.execute("SELECT hash, parent_hash, length(message) FROM messages")
    }
    kept_messages = _closure(named, {k: v[0] for k, v in messages.items()})
    snapshots = {
        str(r[0]): (r[1], int(r[2]))
        for r in conn.execute("SELECT id, parent_id, length(changes) FROM snapshots")
    }
    kept_snapshots = _closure(named, {k: v[0] for k, v in snapshots.items()})
    files: set[str] = set()
    for snapshot_id in sorted(kept_snapshots):
        row = conn.execute("SELECT changes FROM snapshots WHERE id = ?", (snapshot_id,))
        for entry in json.loads(str(row.fetchone()[0])).values():
            if isinstance(entry, list) and entry and entry[0] == "f":
                files.add(str(entry[2]))
    progress("sizing unnamed content")
    garbage = Garbage()
    garbage.messages = {k: v[1] for k, v in messages.items() if k not in kept_messages}
    garbage.snapshots = {k: v[1] for k, v in snapshots.items() if k not in kept_snapshots}
    for key, size in conn.execute("SELECT hash, length(tools) FROM tools"):
        if key not in named:
            garbage.tools[str(key)] = int(size)
    for key, size in conn.execute("SELECT hash, sum(length(data)) FROM blobs GROUP BY hash"):
        if key not in named and key not in files:
            garbage.blobs[str(key)] = int(size)
    for key, size in conn.execute("SELECT hash, bytes FROM blob_objects"):
        if key not in named and key not in files:
            garbage.objects[str(key)] = int(size)
    return garbage


# ---------------------------------------------------------------- sweep


def _delete(conn: Conn, table: str, column: str, keys: list[str], progress: Progress) -> None:
    for i in range(0, len(keys), _BATCH):
        batch = keys[i : i + _BATCH]
        marks = ", ".join("?" for _ in batch)
        conn.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", batch)
        progress(f"deleted {min(i + _BATCH, len(keys))}/{len(keys)} from {table}")


def sweep(conn: Conn, garbage: Garbage, progress: Progress) -> None:
    """Delete the garbage, inside the caller's transaction (snapshots children first)."""
    depth = {str(r[0]): int(r[1]) for r in conn.execute("SELECT id, depth FROM snapshots")}
    order = sorted(garbage.snapshots, key=lambda k: -depth.get(k, 0))  # children first
    _delete(conn, "snapshots", "id", order, progress)
    _delete(conn, "blobs", "hash", sorted(garbage.blobs), progress)
    _delete(conn, "blob_objects", "hash", sorted(garbage.objects), progress)
    _delete(conn, "messages", "hash", sorted(garbage.messages), progress)
    _delete(conn, "tools", "hash", sorted(garbage.tools), progress)


# ---------------------------------------------------------------- the whole


def collect(
    store: StoreBase, *, dry_run: bool = False, wait: bool = False, progress: Progress
) -> Report:
    """Measure the store; unless ``dry_run``, delete the content nothing names and reclaim
    the space (see the module docstring for when that is refused)."""
    progress("measuring the store")
    parts, before = space(store)
    if dry_run:
        conn = store._conn
        conn.execute(store.sql.begin_read)
        try:
            garbage = find_garbage(conn, progress, postgres=store.sql.postgres)
        finally:
            conn.execute("ROLLBACK")
        return Report(True, parts, garbage.summary(), before)
    said = ""
    while True:
        try:
            garbage = _delete_garbage(store, progress)
            break
        except StoreInUseError as exc:
            if not wait:
                raise StoreInUseError(
                    f"{exc}; nothing was deleted: run gc again when they are done, or with --wait"
                ) from None
            if str(exc) != said:  # once, and again when who uses it changes
                progress(f"waiting: {exc}")
                said = str(exc)
            time.sleep(1.0)
    _sweep_bucket(store, progress)
    progress("reclaiming the space")
    _reclaim(store)
    return Report(False, parts, garbage.summary(), before, space(store)[1])


def _exclusive(store: StoreBase) -> AbstractContextManager[Conn]:
    store.close()  # this process's own connections (a Postgres pool's idle ones) would count
    if store.sql.postgres:
        return postgres_exclusive(store._conn)
    return sqlite_exclusive(store.path)


def _delete_garbage(store: StoreBase, progress: Progress) -> Garbage:
    with _exclusive(store) as conn:
        running = live_leases(conn)
        if running:
            raise StoreInUseError(f"{len(running)} episode(s) are running ({running[0]}, ...)")
        garbage = find_garbage(conn, progress, postgres=store.sql.postgres)
        sweep(conn, garbage, progress)
    return garbage


def _sweep_bucket(store: StoreBase, progress: Progress) -> None:
    """Delete the objects under the store's prefix that no index row names, holding the
    store to itself (a writer may have put an object it has not indexed yet); when another
    process has opened it meanwhile, they are left for the next gc."""
    if store._conn.execute("SELECT 1 FROM blob_bucket").fetchone() is None:
        return  # a store without a bucket: nothing more to do
    try:
        with _exclusive(store) as conn:
            bucket = blob_bucket.bucket_of(conn)
            if bucket is None:
                return
            indexed = {str(r[0]) for r in conn.execute("SELECT hash FROM blob_objects")}
            unnamed = sorted(d for d in bucket.digests() if d not in indexed)
            if unnamed:
                progress(f"deleting {len(unnamed)} unnamed object(s) from {bucket.url}")
                bucket.delete(unnamed)
    except StoreInUseError as exc:
        progress(f"the bucket's unnamed objects are left for the next gc: {exc}")


def _reclaim(store: StoreBase) -> None:
    conn = store._conn
    if store.sql.postgres:
        for table in ("blobs", "snapshots", "messages", "tools"):
            conn.execute(f"VACUUM {table}")
        return
    if int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2:
        conn.execute("PRAGMA incremental_vacuum")
    else:
        conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
