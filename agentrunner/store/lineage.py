"""The store's lineage: forks, their parents and children, sub-agents, and removing an
episode (or a whole tree) that no fork depends on.
"""

from __future__ import annotations

from collections.abc import Iterable

from agentrunner.store import eventlog, lookups
from agentrunner.store.base import utc_now
from agentrunner.store.episodes import EpisodeStore
from agentrunner.store.summaries import summaries
from agentrunner.values.critical import critical
from agentrunner.values.errors import UsageError
from agentrunner.values.statuses import Status


class LineageStore(EpisodeStore):
    """Forks and their parents: the lineage tree, and removing episodes that no fork needs."""

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

    def forks(self) -> list[tuple[str, str, int]]:
        """Every fork, by id: ``(episode_id, parent_episode_id, fork_seq)``."""
        return lookups.forks(self)

    def spawned(self) -> list[tuple[str, str, str | None]]:
        """Every sub-agent episode: ``(episode_id, parent_id, the parent's call id)``."""
        return lookups.spawned(self)

    def proposal_forks(self) -> set[str]:
        """The fan-out forks that only proposed a candidate (one re-sampled turn)."""
        return lookups.proposal_forks(self)

    def batches_of(self, episode_ids: Iterable[str]) -> list[str]:
        """The ids of the batches these episodes belong to, sorted."""
        return lookups.batches_of(self, episode_ids)

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
        if episode.status == Status.RUNNING:
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
                if e.status == Status.RUNNING
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
        self._changed()
        return int(removed)
