"""The trace store's shared core: one class over episodes, lineage, the log and leases
(:mod:`agentrunner.store.episodes`, :mod:`~agentrunner.store.lineage`,
:mod:`~agentrunner.store.log`, :mod:`~agentrunner.store.leases`), plus verifications and
space. The SQLite and Postgres stores are siblings over it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agentrunner.store import reports, verifications
from agentrunner.store.base import utc_now
from agentrunner.store.leases import LeaseStore
from agentrunner.store.verifications import StoredVerification
from agentrunner.values.critical import critical
from agentrunner.values.errors import (
    StoreCorruptError,
    StoreDriverError,
    StoreError,
    StoreFailedError,
)

if TYPE_CHECKING:
    from agentrunner.store import gc as _gc
    from agentrunner.store.groups import DecisionOutcome, ForkGroup, GroupMember
    from agentrunner.store.notices import Listener

_T = TypeVar("_T")


class StoreCore(LeaseStore):
    """The trace store's shared core: every query both backends run, written once in the
    subset of SQL both read alike (see :mod:`agentrunner.store.dialect`). A backend
    (:class:`agentrunner.store.TraceStore` for SQLite, :class:`agentrunner.store.PostgresStore`)
    supplies its connections, its write lock and its dialect."""

    @property
    def shared(self) -> bool:
        """Whether other machines may write this store (a server database, not a file)."""
        return self.sql.postgres

    def space(self) -> tuple[dict[str, _gc.Part], int]:
        """Rows and bytes by part (events, messages, tools, blobs, snapshots, other), and
        the store's whole size in bytes."""
        from agentrunner.store import gc  # loaded for gc and space only

        return self._gc_translated(lambda: gc.space(self))

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
        from agentrunner.store import gc

        return self._gc_translated(
            lambda: gc.collect(self, dry_run=dry_run, wait=wait, progress=progress)
        )

    def _gc_translated(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StoreFailedError as exc:
            raise StoreError(f"{self.where}: gc: {exc}") from None
        except StoreDriverError as exc:
            raise StoreCorruptError(f"{self.where}: gc: {exc}") from None

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
            self._changed()
        return int(row_id), created

    def listen(self, heard: Callable[[], None]) -> Listener | None:
        """Call ``heard()`` (in a thread of its own) whenever another connection changes how
        episodes are listed, until the returned listener is closed; None: this store sends
        no notices (a SQLite file: poll it). See :mod:`agentrunner.store.notices`."""
        if not self.sql.postgres:
            return None
        from agentrunner.store.notices import Listener  # for live views only

        return Listener(self.location, heard)

    def verifications(self, episode_id: str) -> list[StoredVerification]:
        """Every verifier result stored for an episode, newest first."""
        return verifications.for_episode(self, episode_id)

    def latest_verifications(self, *, details: bool = False) -> list[StoredVerification]:
        """The latest result of each verifier for each episode (``details``: with them)."""
        return verifications.latest(self, details)

    # -- fork groups and decision points (:mod:`agentrunner.store.groups`, imported when
    # used: its typed configs cost a store that never forks)

    def create_fork_group(
        self, parent_episode_id: str, fork_seq: int, turn: int, config: dict[str, Any]
    ) -> str:
        """Record a fork group (a fan-out or a decision point) at a parent's turn; its id."""
        from agentrunner.store import groups

        return groups.create_fork_group(self, parent_episode_id, fork_seq, turn, config)

    def add_group_member(self, group_id: str, member: GroupMember) -> None:
        """Add a fork to a group (its candidate and sample)."""
        from agentrunner.store import groups

        groups.add_group_member(self, group_id, member)

    def fork_groups(self, parent_episode_id: str | None = None) -> list[ForkGroup]:
        """Fork groups (optionally of one parent), each with its members, oldest first."""
        from agentrunner.store import groups

        return groups.fork_groups(self, parent_episode_id)

    def record_outcome(self, group_id: str, outcome: DecisionOutcome) -> None:
        """Keep what a decision point decided (the first record stands)."""
        from agentrunner.store import groups

        groups.record_outcome(self, group_id, outcome)

    def decision_outcomes(self, group_ids: list[str]) -> dict[str, DecisionOutcome]:
        """The recorded outcomes of these decision points, by group id (undecided absent)."""
        from agentrunner.store import groups

        return groups.outcomes(self, group_ids)

    def batch_memberships(self) -> dict[str, list[str]]:
        """The batches each episode belongs to."""
        from agentrunner.store import groups

        return groups.memberships(self)

    def rewarded_episodes(self) -> set[str]:
        """The episodes whose own events carry a reward (any other's reward is unknown)."""
        return reports.rewarded(self)

    def log_facts(self) -> dict[str, reports.LogFacts]:
        """Per episode: its tool calls, model latencies and errors (one indexed pass)."""
        # store/reports.py (another engineer's) still names the SQLite class for any store
        return reports.log_facts(self)
