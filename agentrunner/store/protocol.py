"""The trace store's interface, written down: what any backend provides.

:class:`agentrunner.store.TraceStore` (SQLite) implements it; a second backend (Postgres)
implements the same methods (:class:`agentrunner.store.PostgresStore`, a sibling over the
same shared core, :mod:`agentrunner.store.core`) and passes the same contract suite
(``tests/test_store_contract.py``, parametrized by backend). Everything outside
``agentrunner/store/`` reads and writes a store through these methods only; no SQL lives
anywhere else.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from pydantic import BaseModel

from agentrunner.store.gc import Part, Report
from agentrunner.store.leases import Lease
from agentrunner.store.records import (
    BatchSummary,
    EpisodeFilter,
    EpisodeSummary,
    EventRow,
    ModelInput,
    Segment,
)
from agentrunner.store.reports import LogFacts
from agentrunner.store.verifications import StoredVerification
from agentrunner.values.environment import SnapshotBackend
from agentrunner.values.errors import AgentRunnerError, StoreCorruptError
from agentrunner.values.types import Message, ToolSpec

if TYPE_CHECKING:  # imported by the store only when fork groups are used
    from agentrunner.store.groups import DecisionOutcome, ForkGroup, GroupMember
    from agentrunner.store.listing import ListingChanges, ListingCursor
    from agentrunner.store.notices import Listener


class EventWriter(Protocol):
    """Appends one episode's events: dense seqs, one commit per event (or per group)."""

    episode_id: str
    next_seq: int
    attempt: int
    lost: str | None
    clock: Callable[[], int]

    def append(self, turn: int, payload: BaseModel) -> int: ...

    def append_deferred(self, turn: int, payload: BaseModel) -> int: ...

    def append_json(self, turn: int, kind: str, body: str) -> int: ...

    def append_together(self, turn: int, payloads: Sequence[BaseModel]) -> list[int]: ...


class StoreBackend(SnapshotBackend, Protocol):
    """A trace store: the append-only log, content-addressed messages, tools and workspace
    blobs (the :class:`~agentrunner.values.environment.SnapshotBackend` methods), episodes and their
    lineage, writer leases, and the side tables."""

    path: Path

    def close(self) -> None: ...

    # -- episodes and the log
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
    ) -> str: ...

    def imported_episode(self, import_key: str) -> str | None: ...

    def add_batch(
        self,
        batch_id: str,
        config: dict[str, Any],
        members: Sequence[tuple[str, int, dict[str, Any], dict[str, Any]]],
    ) -> dict[tuple[str, int], str]: ...

    def ensure_batch(self, batch_id: str, config: dict[str, Any]) -> bool: ...

    def batch_members(self, batch_id: str) -> dict[tuple[str, int], str]: ...

    def batch_config(self, episode_id: str) -> dict[str, Any] | None: ...

    def atomic(self) -> contextlib.AbstractContextManager[None]: ...

    @property
    def location(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def identity(self) -> str: ...

    def writer(self, episode_id: str, *, attempt: int | None = None) -> EventWriter: ...

    def resolve(self, id_or_prefix: str) -> str: ...

    def episode(self, id_or_prefix: str) -> EpisodeSummary: ...

    def list_episodes(
        self,
        *,
        limit: int | None = None,
        corrupt: list[StoreCorruptError] | None = None,
        where: EpisodeFilter | None = None,
    ) -> list[EpisodeSummary]: ...

    def count_episodes(self, where: EpisodeFilter | None = None) -> int: ...

    def listing_changes(self, since: ListingCursor | None = None) -> ListingChanges: ...

    def episode_ids(self) -> list[str]: ...

    def segments(self, episode_id: str) -> list[Segment]: ...

    def events(
        self,
        episode_id: str,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]: ...

    def iter_events(
        self, episode_id: str, *, page: int = 2000, **kw: Any
    ) -> Iterator[EventRow]: ...

    def last_events(self, episode_id: str, n: int = 50) -> list[EventRow]: ...

    def last_of_kind(self, episode_id: str, kind: str) -> EventRow | None: ...

    def last_at_turn(self, episode_id: str, kind: str, turn: int) -> EventRow | None: ...

    def has_own_event(self, episode_id: str, kind: str) -> bool: ...

    def count_chunks(self, episode_id: str, call_id: str) -> int: ...

    def events_before(
        self,
        episode_id: str,
        before_seq: int | None = None,
        *,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]: ...

    def nonchunk_seqs(self, segments: Sequence[Segment]) -> array[int]: ...

    def last_seq(self, segments: Sequence[Segment]) -> int: ...

    def find(
        self, segments: Sequence[Segment], term: str, seq: int, *, forward: bool
    ) -> int | None: ...

    def read_snapshot(self) -> contextlib.AbstractContextManager[None]: ...

    def reconstruct_request(self, episode_id: str, turn: int) -> ModelInput: ...

    # -- lineage and removal
    def children(self, episode_id: str) -> list[str]: ...

    def ancestors(self, episode_id: str) -> list[str]: ...

    def tree(self, episode_id: str) -> list[tuple[str, str | None, int | None, int]]: ...

    def forks(self) -> list[tuple[str, str, int]]: ...

    def proposal_forks(self) -> set[str]: ...

    def remove_episode(self, id_or_prefix: str) -> int: ...

    def remove_tree(self, id_or_prefix: str) -> list[tuple[str, int]]: ...

    # -- content-addressed messages and tool sets
    def put_message(self, parent_hash: str | None, message: Message) -> str: ...

    def message(self, message_hash_: str) -> Message: ...

    def message_json(self, message_hash_: str) -> dict[str, Any]: ...

    def message_chain(self, tip_hash: str | None) -> list[Message]: ...

    def messages(self, hashes: Iterable[str]) -> dict[str, Message]: ...

    def message_parent(self, message_hash_: str) -> str | None: ...

    def put_tools(self, tools: Sequence[ToolSpec]) -> str: ...

    def tools(self, tools_hash_: str) -> list[ToolSpec]: ...

    # -- the writer's lease, heartbeats and cancel requests
    def lease(
        self, episode_id: str, *, claimed: bool = False, refused: AgentRunnerError | None = None
    ) -> Lease: ...

    def claim_writer(self, episode_id: str) -> bool: ...

    def heartbeat(
        self, episode_id: str, checkpoint: tuple[int, dict[str, Any]] | None = None
    ) -> str | None: ...

    def release_writer(self, episode_id: str) -> None: ...

    def request_cancel(self, episode_id: str, reason: str = "cancel requested") -> None: ...

    def identity_problem(self) -> str | None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    @property
    def shared(self) -> bool: ...

    def done_in_this_thread(self) -> None: ...

    def unreachable(self) -> str | None: ...

    def listen(self, heard: Callable[[], None]) -> Listener | None: ...

    # -- side tables
    def add_verification(
        self,
        episode_id: str,
        verifier: str,
        score: float | None,
        passed: bool,
        details: dict[str, Any],
    ) -> tuple[int, str]: ...

    def verifications(self, episode_id: str) -> list[StoredVerification]: ...

    def latest_verifications(self, *, details: bool = False) -> list[StoredVerification]: ...

    def log_facts(self) -> dict[str, LogFacts]: ...

    def create_fork_group(
        self, parent_episode_id: str, fork_seq: int, turn: int, config: dict[str, Any]
    ) -> str: ...

    def add_group_member(self, group_id: str, member: GroupMember) -> None: ...

    def fork_groups(self, parent_episode_id: str | None = None) -> list[ForkGroup]: ...

    def record_outcome(self, group_id: str, outcome: DecisionOutcome) -> None: ...

    def decision_outcomes(self, group_ids: list[str]) -> dict[str, DecisionOutcome]: ...

    def batch_memberships(self) -> dict[str, list[str]]: ...

    def rewarded_episodes(self) -> set[str]: ...

    # -- space
    def space(self) -> tuple[dict[str, Part], int]: ...

    def collect_garbage(
        self, *, dry_run: bool = False, wait: bool = False, progress: Callable[[str], None] = ...
    ) -> Report: ...

    # -- batches
    def list_batches(
        self, *, limit: int | None = None, corrupt: list[StoreCorruptError] | None = None
    ) -> list[BatchSummary]: ...

    def count_batches(self) -> int: ...

    def resolve_batch(self, id_prefix_or_name: str) -> str: ...

    def batches_of(self, episode_ids: Iterable[str]) -> list[str]: ...

    def spawned(self) -> list[tuple[str, str, str | None]]: ...


if TYPE_CHECKING:
    from agentrunner.store.postgres import PostgresStore
    from agentrunner.store.store import TraceStore

    def _sqlite_is_a_backend(store: TraceStore) -> StoreBackend:
        """mypy checks here that the SQLite store implements the whole protocol."""
        return store

    def _postgres_is_a_backend(store: PostgresStore) -> StoreBackend:
        """And the Postgres store, its sibling."""
        return store
