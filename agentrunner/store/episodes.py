"""The store's episodes: creating them (alone, in batches, claimed, imported), resolving ids,
and their summaries (SQL of the summaries in :mod:`agentrunner.store.summaries`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentrunner.store import control, eventlog
from agentrunner.store import summaries as _summaries
from agentrunner.store.base import StoreBase, utc_now
from agentrunner.store.eventlog import KIND_CODE, now_us
from agentrunner.store.ids import new_episode_id
from agentrunner.store.records import BatchSummary, EpisodeFilter, EpisodeSummary
from agentrunner.store.summaries import summaries
from agentrunner.store.writer import EpisodeWriter
from agentrunner.values.critical import critical
from agentrunner.values.errors import (
    EpisodeNotFoundError,
    StoreCorruptError,
    StoreError,
    StoreRefusedError,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agentrunner.store.listing import ListingChanges, ListingCursor


class EpisodeStore(StoreBase):
    """Episodes: made (alone, in a batch, claimed, imported), found by id, summarized."""

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
            self._changed()
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
        with critical:  # run again after a lost server: it adds only what is missing
            return self._patiently(lambda again: self._add_batch(batch_id, config, members))

    def _add_batch(
        self, batch_id: str, config: dict[str, Any], members: Sequence[tuple[str, int, Any, Any]]
    ) -> dict[tuple[str, int], str]:
        conn = self._conn
        with self._writing():
            self._insert_batch(batch_id, config)
            have = self.batch_members(batch_id)
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
            self._changed()
        return have

    def ensure_batch(self, batch_id: str, config: dict[str, Any]) -> bool:
        """Record a batch once (its episodes come with :meth:`create_episode`'s
        ``batch_id``); return True when it is new."""
        with critical:
            return self._insert_batch(batch_id, config)

    def _insert_batch(self, batch_id: str, config: dict[str, Any]) -> bool:
        cur = self._conn.execute(
            self.sql.keep_existing("INSERT INTO batches (id, created_at, config) VALUES (?, ?, ?)"),
            (batch_id, utc_now(), json.dumps(config, sort_keys=True)),
        )
        return cur.rowcount == 1

    def batch_members(self, batch_id: str) -> dict[tuple[str, int], str]:
        """``(task_id, seed) -> episode_id`` for the batch's episodes so far."""
        rows = self._conn.execute(
            "SELECT task_id, seed, episode_id FROM batch_members WHERE batch_id = ?",
            (batch_id,),
        ).fetchall()
        return {(str(r[0]), int(r[1])): str(r[2]) for r in rows}

    def batch_config(self, episode_id: str) -> dict[str, Any] | None:
        """The configuration of the batch an episode was made for (None: not a batch's)."""
        row = self._conn.execute(
            "SELECT b.config FROM batch_members m JOIN batches b ON b.id = m.batch_id"
            " WHERE m.episode_id = ?",
            (episode_id,),
        ).fetchone()
        if row is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None

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

    def listing_changes(self, since: ListingCursor | None = None) -> ListingChanges:
        """For a live view: every episode (``since`` None), else only those new or changed
        since the cursor a former call returned (see :mod:`agentrunner.store.listing`)."""
        from agentrunner.store import listing  # for live views only

        return listing.changes(self, since)

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
