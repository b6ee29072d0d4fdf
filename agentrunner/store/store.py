"""``TraceStore``: the append-only SQLite trace store (writes, reads, lineage, control).

Appends go through ``EpisodeWriter`` (store/writer.py), one autocommitted INSERT per
event; sqlite-utils serves schema and migrations. Readers page events by ``seq`` (keyset),
never loading a whole episode.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from agentrunner.critical import critical
from agentrunner.errors import (
    EpisodeNotFoundError,
    StoreCorruptError,
    StoreDriverError,
    StoreError,
    StoreFailedError,
    StoreRefusedError,
    UsageError,
)
from agentrunner.store import blobs, control, eventlog, lookups, reports, search, verifications
from agentrunner.store import gc as _gc
from agentrunner.store import summaries as _summaries
from agentrunner.store.connection import Connections, Synchronous, immediate, open_connections
from agentrunner.store.dialect import SQLITE, Conn, Dialect, Pool
from agentrunner.store.eventlog import KIND_CODE, now_us
from agentrunner.store.hashing import message_hash, message_json, tools_hash, tools_json
from agentrunner.store.ids import new_episode_id
from agentrunner.store.location import default_db_path
from agentrunner.store.records import (
    BatchSummary,
    EpisodeFilter,
    EpisodeSummary,
    EventRow,
    ModelInput,
    Segment,
)
from agentrunner.store.summaries import summaries
from agentrunner.store.verifications import StoredVerification
from agentrunner.store.writer import EpisodeWriter
from agentrunner.types import Message, ToolSpec

_T = TypeVar("_T")


def utc_now() -> str:
    """Now, as the contract's ISO 8601 UTC text."""
    return eventlog.iso(eventlog.now_us())


class _Depth(threading.local):
    depth = 0


_BACKENDS: list[tuple[Callable[[Any], bool], type[TraceStore]]] = []


def register_backend(matches: Callable[[Any], bool], backend: type[TraceStore]) -> None:
    """Let ``TraceStore(location)`` open ``backend`` for the locations ``matches`` accepts
    (how ``postgresql://`` URLs reach the Postgres store)."""
    _BACKENDS.append((matches, backend))


class TraceStore:
    """A trace store file. Safe to share between threads; many processes may open one file.

    ``TraceStore("postgresql://...")`` opens the Postgres store instead (a subclass with
    the same methods, see :mod:`agentrunner.store.postgres`)."""

    def __new__(cls, path: str | Path | None = None, **kwargs: Any) -> TraceStore:
        if cls is TraceStore:
            location = path if path is not None else os.environ.get("AGENTRUNNER_DB")
            for matches, backend in _BACKENDS:
                if matches(location):
                    return super().__new__(backend)
        return super().__new__(cls)

    sql: Dialect = SQLITE
    """How this store's database spells what SQLite and Postgres spell differently."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
    ):
        """Open (``create``: or make) the store at ``path`` (default: $AGENTRUNNER_DB or
        the per-user store, see :mod:`agentrunner.store.location`). Without ``create`` a
        missing, empty or foreign file is an error and nothing is written."""
        self.path = Path(path) if path is not None else default_db_path()
        self._leases: dict[str, str] = {}
        """The attempt tokens of the leases this store holds, by episode."""
        self._atomic = _Depth()
        self._files: Connections = open_connections(self.path, synchronous, create=create)
        self._conns: Pool = self._files
        self._identity = self._file_identity()

    @property
    def location(self) -> str:
        """What opens this store again (``TraceStore(store.location)``), in another thread,
        process or machine: the file's absolute path, or the database's URL. Never print it
        (a URL may hold a password); :attr:`where` is for messages."""
        return os.path.abspath(self.path)

    @property
    def identity(self) -> str:
        """Equal for two stores exactly when they are the same data (no secret in it)."""
        return os.path.realpath(self.path)

    @property
    def where(self) -> str:
        """The store's name for messages: its path, or its URL without credentials."""
        return str(self.path)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def identity_problem(self) -> str | None:
        """Why this store's file is no longer the one opened (deleted, or replaced), if so:
        SQLite would go on writing into the unlinked file, and everything would be lost."""
        now = self._file_identity()
        if now == self._identity:
            return None
        what = "deleted" if now is None else "replaced by another file"
        return (
            f"the trace store {self.path} was {what} while this run was writing to it; "
            "the events recorded since it was opened are lost with it"
        )

    @property
    def _conn(self) -> Conn:
        """This thread's connection (store-internal: only ``agentrunner/store/`` holds SQL)."""
        return self._conns.get()

    def raw_connection(self) -> Conn:
        """This thread's ``sqlite3`` connection, for tests and ad-hoc tools only: agentrunner
        itself reads and writes through the store's named methods."""
        return self._files.get().raw

    def close(self) -> None:
        self._conns.close()

    def done_in_this_thread(self) -> None:
        """Close the calling thread's connection (a thread that ends, such as a heartbeat,
        would otherwise keep it, on Postgres a server connection, until :meth:`close`)."""
        self._conns.close_current()

    def open_connections(self) -> int:
        """How many connections this store holds open (one per thread that used it)."""
        return self._conns.open_count()

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- writes

    def create_episode(
        self,
        *,
        task_id: str,
        seed: int,
        env: dict[str, Any],
        model: dict[str, Any],
        parent_episode_id: str | None = None,
        fork_seq: int | None = None,
        claim: bool = False,
        batch_id: str | None = None,
        first_event: tuple[int, BaseModel] | None = None,
        import_key: str | None = None,
    ) -> str:
        """Create an episode; with ``claim``, this process becomes its writer, with
        ``batch_id`` it joins that batch as its (task, seed), and ``first_event`` (turn,
        payload) is its first event (a fork's edit), all in one transaction: it is never seen
        unclaimed, a batch pair never gets two episodes, a fork never lacks its edit. An
        ``import_key`` names the foreign session it was imported from (one episode each)."""
        conn = self._conn
        with critical, self._writing():
            episode_id, key = self._insert_episode(
                task_id, seed, env, model, parent_episode_id, fork_seq
            )
            if batch_id is not None:
                conn.execute(
                    "INSERT INTO batch_members (batch_id, task_id, seed, episode_id)"
                    " VALUES (?, ?, ?, ?)",
                    (batch_id, task_id, seed, episode_id),
                )
            if import_key is not None:
                try:
                    conn.execute(
                        "INSERT INTO imports (source_key, episode_id) VALUES (?, ?)",
                        (import_key, episode_id),
                    )
                except StoreRefusedError:
                    raise StoreError(
                        f"{import_key} was imported by another process meanwhile;"
                        " import again to continue it"
                    ) from None
            if claim:
                token = control.write_lease(conn, episode_id)
            if first_event is not None:
                turn, payload = first_event
                conn.execute(
                    eventlog.INSERT,
                    (
                        eventlog.row_id(key, (fork_seq or 0) + 1),
                        1,
                        turn,
                        KIND_CODE[payload.kind],  # type: ignore[attr-defined]
                        now_us(),
                        payload.model_dump_json(exclude={"kind"}),
                    ),
                )
        if claim:
            self._leases[episode_id] = token
        return episode_id

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Make the store writes this thread does inside the block one transaction: all of
        them or none (a fan-out's fork group and its forks). Not for appends of events,
        which commit one by one."""
        if self._atomic.depth:
            yield
            return
        with self._begin_writing():
            self._atomic.depth = 1
            try:
                yield
            finally:
                self._atomic.depth = 0

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction that no other writer of the store interleaves with (inside
        :meth:`atomic`: part of that one)."""
        if self._atomic.depth:
            yield
        else:
            with self._begin_writing():
                yield

    def _begin_writing(self) -> contextlib.AbstractContextManager[None]:
        return immediate(self._conn)

    def _insert_episode(
        self,
        task_id: str,
        seed: int,
        env: dict[str, Any],
        model: dict[str, Any],
        parent_episode_id: str | None = None,
        fork_seq: int | None = None,
        *,
        episode_id: str | None = None,
        created_at: str | None = None,
    ) -> tuple[str, int]:
        """Inside :meth:`_writing`: a new episode row (a new id made now, or the ones of an
        episode copied from another store); its id and integer key in this store."""
        episode_id = episode_id or new_episode_id()
        conn = self._conn
        key = conn.execute("SELECT coalesce(max(key), 0) + 1 FROM episodes").fetchone()[0]
        conn.execute(
            "INSERT INTO episodes (id, key, parent_episode_id, fork_seq, task_id, seed,"
            " created_at, env, model) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                episode_id,
                key,
                parent_episode_id,
                fork_seq,
                task_id,
                seed,
                created_at or utc_now(),
                json.dumps(env, sort_keys=True),
                json.dumps(model, sort_keys=True),
            ),
        )
        return episode_id, int(key)

    def add_batch(
        self,
        batch_id: str,
        config: dict[str, Any],
        members: Sequence[tuple[str, int, dict[str, Any], dict[str, Any]]],
    ) -> dict[tuple[str, int], str]:
        """Record a batch and an episode for each of its ``(task_id, seed, env, model)``
        members that has none yet, in one transaction (a batch run again keeps its
        episodes); return ``(task_id, seed) -> episode_id`` for every member. The episodes
        are unclaimed: whoever runs one claims it."""
        conn = self._conn
        with critical, self._writing():
            conn.execute(
                self.sql.keep_existing(
                    "INSERT INTO batches (id, created_at, config) VALUES (?, ?, ?)"
                ),
                (batch_id, utc_now(), json.dumps(config, sort_keys=True)),
            )
            have = {
                (r[0], int(r[1])): str(r[2])
                for r in conn.execute(
                    "SELECT task_id, seed, episode_id FROM batch_members WHERE batch_id = ?",
                    (batch_id,),
                ).fetchall()
            }
            for task_id, seed, env, model in members:
                if (task_id, seed) in have:
                    continue
                episode_id, _ = self._insert_episode(task_id, seed, env, model)
                conn.execute(
                    "INSERT INTO batch_members (batch_id, task_id, seed, episode_id)"
                    " VALUES (?, ?, ?, ?)",
                    (batch_id, task_id, seed, episode_id),
                )
                have[(task_id, seed)] = episode_id
        return have

    def imported_episode(self, import_key: str) -> str | None:
        """The episode a foreign session (``format:session id``) was imported as, if any."""
        row = self._conn.execute(
            "SELECT episode_id FROM imports WHERE source_key = ?", (import_key,)
        ).fetchone()
        return None if row is None else str(row[0])

    def writer(self, episode_id: str, *, attempt: int | None = None) -> EpisodeWriter:
        """A writer appending after the episode's last event (its fork point when empty)."""
        episode = self.episode(episode_id)
        last_seq = episode.last_seq
        current = episode.attempt if attempt is None else attempt
        key = self._key(episode.episode_id)
        return EpisodeWriter(
            self._conn,
            episode.episode_id,
            key,
            last_seq + 1,
            max(current, 1),
            leases=self._leases,
            sql=self.sql,
        )

    def episode_key(self, episode_id: str) -> int:
        """The episode's integer key in the event log (store-internal)."""
        return self._key(episode_id)

    def _key(self, episode_id: str) -> int:
        row = self._conn.execute("SELECT key FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise EpisodeNotFoundError(f"no episode {episode_id!r} in {self.where}")
        return int(row[0])

    def put_message(self, parent_hash: str | None, message: Message) -> str:
        """Store a message once (content-addressed); return its hash, the chain's new tip."""
        text = message_json(message)
        digest = message_hash(parent_hash, text)
        with critical:
            self._conn.execute(
                self.sql.keep_existing(
                    "INSERT INTO messages (hash, parent_hash, message) VALUES (?, ?, ?)"
                ),
                (digest, parent_hash, text),
            )
        return digest

    def put_tools(self, tools: Sequence[ToolSpec]) -> str:
        text = tools_json(tools)
        digest = tools_hash(text)
        with critical:
            self._conn.execute(
                self.sql.keep_existing("INSERT INTO tools (hash, tools) VALUES (?, ?)"),
                (digest, text),
            )
        return digest

    # ---------------------------------------------------------------- workspace snapshots

    def missing_blobs(self, hashes: Collection[str]) -> set[str]:
        return self._translated(lambda: blobs.missing_blobs(self._conn, hashes))

    def put_blobs(self, items: Iterable[tuple[str, Iterable[bytes]]]) -> int:
        """Store workspace file contents by sha256 (skipping those already present)."""
        return self._translated(lambda: blobs.put_blobs(self._conn, self.sql, items))

    def read_blob(self, digest: str) -> bytes:
        return self._translated(lambda: blobs.read_blob(self._conn, digest))

    def put_snapshot(
        self,
        snapshot_id: str,
        parent_id: str | None,
        depth: int,
        changes: str,
        files: int,
        size: int,
    ) -> None:
        self._translated(
            lambda: blobs.put_snapshot(
                self._conn,
                self.sql,
                snapshot_id,
                parent_id,
                depth,
                changes,
                files,
                size,
                utc_now(),
            )
        )

    def snapshot_changes(self, snapshot_id: str) -> list[str] | None:
        return self._translated(lambda: blobs.snapshot_changes(self._conn, snapshot_id))

    def _translated(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StoreFailedError as exc:
            raise StoreError(f"{self.where}: workspace snapshot: {exc}") from None
        except StoreDriverError as exc:
            raise StoreCorruptError(f"{self.where}: workspace snapshot: {exc}") from None

    # ---------------------------------------------------------------- space (store/gc.py)

    def space(self) -> tuple[dict[str, _gc.Part], int]:
        """Rows and bytes by part (events, messages, tools, blobs, snapshots, other), and
        the store's whole size in bytes."""
        return self._gc_translated(lambda: _gc.space(self))

    def collect_garbage(
        self,
        *,
        dry_run: bool = False,
        wait: bool = False,
        progress: Callable[[str], None] = lambda _: None,
    ) -> _gc.Report:
        """Delete the content (blobs, snapshots, messages, tools) no episode names and
        reclaim the space; ``dry_run``: only measure. Refused with
        :class:`~agentrunner.store.gc.StoreInUseError` while other processes have the store
        open (``wait``: retried each second); see :mod:`agentrunner.store.gc`."""
        return self._gc_translated(
            lambda: _gc.collect(self, dry_run=dry_run, wait=wait, progress=progress)
        )

    def _gc_translated(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StoreFailedError as exc:
            raise StoreError(f"{self.where}: gc: {exc}") from None
        except StoreDriverError as exc:
            raise StoreCorruptError(f"{self.where}: gc: {exc}") from None

    # ---------------------------------------------------------------- verifications

    def add_verification(
        self,
        episode_id: str,
        verifier: str,
        score: float | None,
        passed: bool,
        details: dict[str, Any],
    ) -> tuple[int, str]:
        """Append a verifier's result for an episode; return its row id and time."""
        created = utc_now()
        with critical:
            cur = self._conn.execute(
                "INSERT INTO verifications (episode_id, verifier, score, passed, details,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    episode_id,
                    verifier,
                    score,
                    int(passed),
                    json.dumps(details, ensure_ascii=False, sort_keys=True),
                    created,
                ),
            )
            (row_id,) = cur.fetchone()
        return int(row_id), created

    # ---------------------------------------------------------------- control

    @contextlib.contextmanager
    def lease(self, episode_id: str, *, claimed: bool = False) -> Iterator[None]:
        """Be the episode's one writer for the block (``claimed``: this process already is,
        since it created the episode claimed); the lease is released once, on the way out.
        Refused with a UsageError while another live run holds it."""
        if not claimed and not self.claim_writer(episode_id):
            raise UsageError(f"episode {episode_id} is being written by another run")
        try:
            yield
        finally:
            self.release_writer(episode_id)

    def claim_writer(self, episode_id: str) -> bool:
        """Become the episode's writer unless a live one holds it (another process, or
        another run in this one: one writer per episode), with a new attempt token that
        this store's writers of the episode append under. Clears old cancel requests."""
        conn = self._conn
        with self._writing():
            if control.read_lease(conn, episode_id).alive():
                return False  # nothing written: the commit ends the read
            token = control.write_lease(conn, episode_id)
        self._leases[episode_id] = token
        return True

    def heartbeat(
        self, episode_id: str, checkpoint: tuple[int, dict[str, Any]] | None = None
    ) -> str | None:
        """Refresh this store's lease of the episode; return a pending cancel request.
        Raises :class:`~agentrunner.store.control.LeaseLostError` once another writer
        took the lease over."""
        return control.heartbeat(self._conn, episode_id, self._leases.get(episode_id), checkpoint)

    def release_writer(self, episode_id: str) -> None:
        """Give up the writer lease (best effort: a full disk or a lost store must not hide
        the error that ended the run; the lease dies with this process anyway)."""
        token = self._leases.pop(episode_id, None)
        with contextlib.suppress(StoreDriverError):
            control.release(self._conn, episode_id, token)

    def request_cancel(self, episode_id: str, reason: str = "cancel requested") -> None:
        """Ask the episode's writer (in any process) to cancel; it polls within a second."""
        control.request_cancel(self._conn, self.resolve(episode_id), reason, utc_now())

    # ---------------------------------------------------------------- reads

    def resolve(self, id_or_prefix: str) -> str:
        """The full episode id for an id or a unique prefix (case-insensitive)."""
        prefix = id_or_prefix.strip().upper()
        if not prefix:
            raise EpisodeNotFoundError("empty episode id")
        if self.sql.postgres:  # its text order is the database's collation, not code points
            rows = self._conn.execute(
                "SELECT id FROM episodes WHERE starts_with(id, ?) ORDER BY id LIMIT 3", (prefix,)
            ).fetchall()
        else:
            rows = self._conn.execute(
                "SELECT id FROM episodes WHERE id >= ? AND id < ? ORDER BY id LIMIT 3",
                (prefix, prefix + "\U0010ffff"),
            ).fetchall()
        if not rows:
            raise EpisodeNotFoundError(f"no episode {id_or_prefix!r} in {self.where}")
        if len(rows) > 1 and rows[0][0] != prefix:
            ids = ", ".join(r[0] for r in rows[:2])
            raise EpisodeNotFoundError(f"episode id {id_or_prefix!r} is ambiguous ({ids}, ...)")
        return str(rows[0][0])

    def episode(self, id_or_prefix: str) -> EpisodeSummary:
        episode_id = self.resolve(id_or_prefix)
        return summaries(self, "WHERE e.id = ?", (episode_id,))[0]

    def list_episodes(
        self,
        *,
        limit: int | None = None,
        corrupt: list[StoreCorruptError] | None = None,
        where: EpisodeFilter | None = None,
    ) -> list[EpisodeSummary]:
        """Episodes, newest first, with derived status and totals, those ``where`` keeps (at
        most ``limit``; None or 0: all). A corrupt episode raises StoreCorruptError, or with
        ``corrupt`` given is left out and reported there."""
        return _summaries.list_summaries(self, where or EpisodeFilter(), limit, corrupt)

    def count_episodes(self, where: EpisodeFilter | None = None) -> int:
        """How many episodes ``where`` keeps (what ``list_episodes`` would list without a
        limit)."""
        return _summaries.count_summaries(self, where or EpisodeFilter())

    def list_batches(
        self, *, limit: int | None = None, corrupt: list[StoreCorruptError] | None = None
    ) -> list[BatchSummary]:
        """Batch runs, newest first, with their episodes' progress, mean reward and cost."""
        return _summaries.batch_summaries(self, limit, corrupt)

    def count_batches(self) -> int:
        return _summaries.count_batches(self)

    def resolve_batch(self, id_prefix_or_name: str) -> str:
        """A batch's full id from its id, a unique prefix of it, or its ``--name``."""
        return _summaries.resolve_batch(self, id_prefix_or_name)

    def episode_ids(self) -> list[str]:
        """Every episode id in the store (for short, unique id prefixes)."""
        return [r[0] for r in self._conn.execute("SELECT id FROM episodes ORDER BY id")]

    def children(self, episode_id: str) -> list[str]:
        rows = self._conn.execute(
            "SELECT id FROM episodes WHERE parent_episode_id = ? ORDER BY id", (episode_id,)
        )
        return [r[0] for r in rows]

    def ancestors(self, episode_id: str) -> list[str]:
        """Parent, grandparent, ... up to the root."""
        return [seg.episode_id for seg in reversed(self.segments(episode_id)[:-1])]

    def tree(self, episode_id: str) -> list[tuple[str, str | None, int | None, int]]:
        """The whole lineage tree ``episode_id`` belongs to, root first, depth-first:
        ``(id, parent_id, fork_seq, depth)``."""
        root = ([episode_id, *self.ancestors(episode_id)])[-1]
        rows = self._conn.execute(
            "WITH RECURSIVE t(id, parent, fork_seq, depth, path) AS ("
            " SELECT id, parent_episode_id, fork_seq, 0, id FROM episodes WHERE id = ?"
            " UNION ALL SELECT e.id, e.parent_episode_id, e.fork_seq, t.depth + 1,"
            " t.path || '/' || e.id FROM episodes e JOIN t ON e.parent_episode_id = t.id)"
            " SELECT id, parent, fork_seq, depth FROM t ORDER BY path",
            (root,),
        ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def remove_episode(self, id_or_prefix: str) -> int:
        """Delete an episode no fork depends on (explicit, never automatic); return the
        number of events removed. Messages stay: they are shared by content."""
        episode = self.episode(id_or_prefix)
        episode_id = episode.episode_id
        kids = self.children(episode_id)
        if kids:
            raise UsageError(
                f"episode {episode_id} has {len(kids)} fork(s) that depend on it "
                f"({', '.join(kids[:3])}{', ...' if len(kids) > 3 else ''}); remove them "
                "first, or all of them with `rm --tree`"
            )
        if episode.status == "running":
            raise UsageError(f"episode {episode_id} is running (pid {episode.writer_pid})")
        return self._delete_episode(episode_id)

    def remove_tree(self, id_or_prefix: str) -> list[tuple[str, int]]:
        """Delete an episode and every fork descending from it, children before parents, in
        one transaction; refused (nothing removed) while any of them runs. Returns
        ``(episode_id, events removed)`` in the order they were removed."""
        root = self.resolve(id_or_prefix)
        conn = self._conn
        with critical, self._writing():  # no fork can join the tree meanwhile
            ids = [
                r[0]
                for r in conn.execute(
                    "WITH RECURSIVE t(id, depth) AS (SELECT ?, 0 UNION ALL"
                    " SELECT e.id, t.depth + 1 FROM episodes e"
                    " JOIN t ON e.parent_episode_id = t.id)"
                    " SELECT id FROM t ORDER BY depth DESC, id DESC",
                    (root,),
                )
            ]
            marks = ", ".join("?" for _ in ids)
            running = [
                e
                for e in summaries(self, f"WHERE e.id IN ({marks})", tuple(ids))
                if e.status == "running"
            ]
            if running:
                raise UsageError(
                    f"{len(running)} episode(s) of the tree of {root} are running ("
                    + ", ".join(f"{e.episode_id} pid {e.writer_pid}" for e in running[:3])
                    + "); cancel them or wait, then remove the tree"
                )
            removed = [(episode_id, self._delete_rows(episode_id)) for episode_id in ids]
        return removed

    def _delete_episode(self, episode_id: str) -> int:
        with critical, self._writing():
            removed = self._delete_rows(episode_id)
        return removed

    def _delete_rows(self, episode_id: str) -> int:
        """Inside a write transaction: an episode's rows everywhere, with a removal permit
        for its events; fork groups made at it go too (their members, its forks, are gone)."""
        conn = self._conn
        conn.execute(
            self.sql.keep_existing("INSERT INTO removals (episode_id, requested_at) VALUES (?, ?)"),
            (episode_id, utc_now()),
        )
        removed = conn.execute(
            "DELETE FROM event_log WHERE id BETWEEN ? AND ?", eventlog.span(self._key(episode_id))
        ).rowcount
        for table in ("control", "batch_members", "fork_group_members", "verifications", "imports"):
            conn.execute(f"DELETE FROM {table} WHERE episode_id = ?", (episode_id,))
        for table in ("fork_group_members", "decision_outcomes"):
            conn.execute(
                f"DELETE FROM {table} WHERE group_id IN"
                " (SELECT id FROM fork_groups WHERE parent_episode_id = ?)",
                (episode_id,),
            )
        conn.execute("DELETE FROM fork_groups WHERE parent_episode_id = ?", (episode_id,))
        conn.execute("DELETE FROM episodes WHERE id = ?", (episode_id,))
        conn.execute("DELETE FROM removals WHERE episode_id = ?", (episode_id,))
        return int(removed)

    def segments(self, episode_id: str) -> list[Segment]:
        """Where an episode's history lives: ancestors' prefixes, then its own rows (a segment
        may be empty: a fork of a fork before the parent's own fork point skips the parent)."""
        chain: list[Segment] = []
        current: str | None = episode_id
        limit: int | None = None
        while current is not None:
            row = self._conn.execute(
                "SELECT parent_episode_id, fork_seq, key FROM episodes WHERE id = ?", (current,)
            ).fetchone()
            if row is None:
                raise EpisodeNotFoundError(f"no episode {current!r} in {self.where}")
            parent, fork_seq, key = row
            start = (fork_seq or 0) + 1
            chain.append(Segment(current, start, limit, key))
            # A fork made before its parent's own fork point inherits only up to its point:
            # every ancestor's part ends at the lowest fork point below it.
            if fork_seq is not None:
                limit = fork_seq if limit is None else min(limit, fork_seq)
            current = parent
        return list(reversed(chain))

    def events(
        self,
        episode_id: str,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]:
        """One page of an episode's full history (inherited events included), by seq."""
        out: list[EventRow] = []
        kind_sql, kind_args = eventlog.kinds_sql(kinds) if kinds else ("", ())
        for seg in segments if segments is not None else self.segments(episode_id):
            if len(out) >= limit:
                break
            if seg.end is not None and seg.end <= after_seq:
                continue
            lo, hi = eventlog.span(seg.key, max(after_seq + 1, seg.start), seg.end)
            rows = self._conn.execute(
                f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{kind_sql}"
                " ORDER BY id LIMIT ?",
                (lo, hi, *kind_args, limit - len(out)),
            ).fetchall()
            out.extend(eventlog.to_row(seg.episode_id, r) for r in rows)
        return out

    def iter_events(self, episode_id: str, *, page: int = 2000, **kw: Any) -> Iterator[EventRow]:
        """Every event of an episode, paged."""
        after = 0
        segs = self.segments(episode_id)
        while True:
            batch = self.events(episode_id, after_seq=after, limit=page, segments=segs, **kw)
            yield from batch
            if len(batch) < page:
                return
            after = batch[-1].seq

    def last_events(self, episode_id: str, n: int = 50) -> list[EventRow]:
        """The last ``n`` events of an episode's own rows, in seq order (for tails)."""
        rows = self._conn.execute(
            f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?"
            " ORDER BY id DESC LIMIT ?",
            (*eventlog.span(self._key(episode_id)), n),
        ).fetchall()
        return [eventlog.to_row(episode_id, r) for r in reversed(rows)]

    def has_own_event(self, episode_id: str, kind: str) -> bool:
        """Whether the episode's own rows (not inherited ones) hold an event of ``kind``."""
        clause, codes = eventlog.kinds_sql([kind])
        row = self._conn.execute(
            f"SELECT 1 FROM event_log WHERE id BETWEEN ? AND ?{clause} LIMIT 1",
            (*eventlog.span(self._key(episode_id)), *codes),
        ).fetchone()
        return row is not None

    def last_of_kind(self, episode_id: str, kind: str) -> EventRow | None:
        """The episode's own last event of ``kind`` (not an inherited one), or None."""
        clause, codes = eventlog.kinds_sql([kind])
        row = self._conn.execute(
            f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{clause}"
            " ORDER BY id DESC LIMIT 1",
            (*eventlog.span(self._key(episode_id)), *codes),
        ).fetchone()
        return None if row is None else eventlog.to_row(episode_id, row)

    def count_chunks(self, episode_id: str, call_id: str) -> int:
        """How many chunks the episode's own rows hold for model call ``call_id``."""
        row = self._conn.execute(
            f"SELECT count(*) FROM event_log WHERE id BETWEEN ? AND ? AND kind = {eventlog.CHUNK}"
            f" AND {self.sql.text('payload', 'call_id')} = ?",
            (*eventlog.span(self._key(episode_id)), call_id),
        ).fetchone()
        return int(row[0])

    def message_chain(self, tip_hash: str | None) -> list[Message]:
        """The messages of a chain, root first, ending at ``tip_hash``."""
        if tip_hash is None:
            return []
        rows = self._conn.execute(
            "WITH RECURSIVE chain(hash, parent_hash, message, depth) AS ("
            " SELECT hash, parent_hash, message, 0 FROM messages WHERE hash = ?"
            " UNION ALL SELECT m.hash, m.parent_hash, m.message, c.depth + 1"
            " FROM messages m JOIN chain c ON m.hash = c.parent_hash)"
            " SELECT message FROM chain ORDER BY depth DESC",
            (tip_hash,),
        ).fetchall()
        if not rows:
            raise StoreError(f"message {tip_hash[:12]} is missing from {self.where}")
        return [Message.model_validate_json(r[0]) for r in rows]

    def message(self, message_hash_: str) -> Message:
        row = self._conn.execute(
            "SELECT message FROM messages WHERE hash = ?", (message_hash_,)
        ).fetchone()
        if row is None:
            raise StoreError(f"message {message_hash_[:12]} is missing from {self.where}")
        return Message.model_validate_json(row[0])

    def tools(self, tools_hash_: str) -> list[ToolSpec]:
        row = self._conn.execute(
            "SELECT tools FROM tools WHERE hash = ?", (tools_hash_,)
        ).fetchone()
        if row is None:
            raise StoreError(f"tool set {tools_hash_[:12]} is missing from {self.where}")
        return [ToolSpec.model_validate(t) for t in json.loads(row[0])]

    def last_at_turn(self, episode_id: str, kind: str, turn: int) -> EventRow | None:
        """The last event of ``kind`` at model turn ``turn`` in the episode's full history."""
        found: EventRow | None = None
        clause, codes = eventlog.kinds_sql([kind])
        for seg in self.segments(episode_id):
            row = self._conn.execute(
                f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{clause}"
                " AND turn = ? ORDER BY id DESC LIMIT 1",
                (*eventlog.span(seg.key, seg.start, seg.end), *codes, turn),
            ).fetchone()
            if row is not None:
                found = eventlog.to_row(seg.episode_id, row)
        return found

    def reconstruct_request(self, episode_id: str, turn: int) -> ModelInput:
        """The exact input the model received at ``turn`` (its last request at that turn)."""
        episode_id = self.resolve(episode_id)
        row = self.last_at_turn(episode_id, "model.request", turn)
        if row is None:
            raise EpisodeNotFoundError(f"episode {episode_id} has no model request at turn {turn}")
        request = row.payload
        return ModelInput(
            messages=self.message_chain(request["tip_hash"]),
            tools=self.tools(request["tools_hash"]),
            params=request.get("params", {}),
            provider=request.get("provider", ""),
            model=request.get("model", ""),
            tip_hash=request["tip_hash"],
        )

    # ---------------------------------------------------------------- readers' lookups
    # (SQL in store/lookups.py, store/search.py, store/verifications.py)

    def read_snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside the ``with`` block see one state of the store."""
        return lookups.read_snapshot(self)

    def events_before(
        self,
        episode_id: str,
        before_seq: int | None = None,
        *,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]:
        """One page of an episode's full history before ``before_seq`` (None: up to its
        end), newest first: :meth:`events` read backwards."""
        return lookups.events_before(self, episode_id, before_seq, limit, kinds, segments)

    def nonchunk_seqs(self, segments: Sequence[Segment]) -> array:
        """Seqs of a history's events that are not streamed chunks, ascending (index only)."""
        return lookups.nonchunk_seqs(self, segments)

    def last_seq(self, segments: Sequence[Segment]) -> int:
        """The last seq of a history: its own last event's, else its fork point."""
        return lookups.last_seq(self, segments)

    def find(
        self, segments: Sequence[Segment], term: str, seq: int, *, forward: bool
    ) -> int | None:
        """The seq of the nearest match of ``term`` after (or before) ``seq`` in a history
        (an event, or the first chunk of a stream whose text matches; see store/search.py)."""
        return search.find(self._conn, self.sql, segments, term, seq, forward)

    def messages(self, hashes: Iterable[str]) -> dict[str, Message]:
        """The stored messages with these hashes, by hash (missing ones left out)."""
        return lookups.messages_by_hash(self, hashes)

    def message_parent(self, message_hash_: str) -> str | None:
        """The hash of the message before this one in its chain (None: a root, or unknown)."""
        return lookups.message_parent(self, message_hash_)

    def forks(self) -> list[tuple[str, str, int]]:
        """Every fork, by id: ``(episode_id, parent_episode_id, fork_seq)``."""
        return lookups.forks(self)

    def batches_of(self, episode_ids: Iterable[str]) -> list[str]:
        """The ids of the batches these episodes belong to, sorted."""
        return lookups.batches_of(self, episode_ids)

    def spawned(self) -> list[tuple[str, str, str | None]]:
        """Every sub-agent episode: ``(episode_id, parent_id, the parent's call id)``."""
        return lookups.spawned(self)

    def proposal_forks(self) -> set[str]:
        """The fan-out forks that only proposed a candidate (one re-sampled turn)."""
        return lookups.proposal_forks(self)

    def log_facts(self) -> dict[str, reports.LogFacts]:
        """Per episode: its tool calls, model latencies and errors (one indexed pass)."""
        return reports.log_facts(self)

    def verifications(self, episode_id: str) -> list[StoredVerification]:
        """Every verifier result stored for an episode, newest first."""
        return verifications.for_episode(self, episode_id)

    def latest_verifications(self, *, details: bool = False) -> list[StoredVerification]:
        """The latest result of each verifier for each episode (``details``: with them)."""
        return verifications.latest(self, details)
