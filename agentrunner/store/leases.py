"""The store's writer leases: one writer per episode, claimed, kept alive by heartbeats,
released once; and cancel requests to a writer (SQL in :mod:`agentrunner.store.control`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

from agentrunner.store import control
from agentrunner.store.base import utc_now
from agentrunner.store.log import LogStore
from agentrunner.values.errors import AgentRunnerError, StoreDriverError, UsageError


class Lease:
    """One episode's writer lease as one store holds it: claimed at most once, released once
    (a ``with`` block does both; an import claims in one call and releases in another)."""

    def __init__(
        self,
        store: LeaseStore,
        episode_id: str,
        *,
        claimed: bool = False,
        refused: AgentRunnerError | None = None,
    ) -> None:
        self._store = store
        self.episode_id = episode_id
        self.held = claimed
        """Whether this store is the episode's writer through this lease."""
        self._refused = refused or UsageError(
            f"episode {episode_id} is being written by another run"
        )

    def claim(self) -> None:
        """Become the episode's writer (nothing to do when already), or raise ``refused``
        while another live writer holds it."""
        if not self.held:
            if not self._store.claim_writer(self.episode_id):
                raise self._refused
            self.held = True

    def release(self) -> None:
        """Give the lease up (once: later calls do nothing)."""
        if self.held:
            self.held = False
            self._store.release_writer(self.episode_id)

    def __enter__(self) -> Lease:
        self.claim()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Leasing(Protocol):
    """What :class:`Leases` needs of a store (any backend's)."""

    def lease(
        self, episode_id: str, *, claimed: bool = False, refused: AgentRunnerError | None = None
    ) -> Lease: ...


class Leases:
    """The writer leases of several episodes one store holds together (an import of a file,
    an ``import --follow``): each claimed once, all released together."""

    def __init__(self, store: Leasing) -> None:
        self._store = store
        self._held: dict[str, Lease] = {}

    def hold(
        self, episode_id: str, *, claimed: bool = False, refused: AgentRunnerError | None = None
    ) -> None:
        """Hold the episode's lease (``claimed``: the store already does, having created the
        episode claimed); nothing to do when it is held already."""
        if episode_id not in self._held:
            lease = self._store.lease(episode_id, claimed=claimed, refused=refused)
            lease.claim()
            self._held[episode_id] = lease

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._held

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._held))

    def release_all(self) -> None:
        """Give every lease up, once each."""
        for lease in self._held.values():
            lease.release()
        self._held.clear()


class LeaseStore(LogStore):
    """Writer leases (one writer per episode) and cancel requests, in the control table."""

    def lease(
        self, episode_id: str, *, claimed: bool = False, refused: AgentRunnerError | None = None
    ) -> Lease:
        """The episode's writer lease: ``with store.lease(ep):`` makes this store its one
        writer for the block (``claimed``: it already is, since it created the episode
        claimed), released once on the way out. Refused with ``refused`` (default: a
        UsageError) while another live run holds it."""
        return Lease(self, episode_id, claimed=claimed, refused=refused)

    def claim_writer(self, episode_id: str) -> bool:
        """Become the episode's writer unless a live one holds it (another process, or
        another run in this one: one writer per episode), with a new attempt token that
        this store's writers of the episode append under. Clears old cancel requests."""
        conn = self._conn
        token = control.new_token()

        def claim(again: bool) -> bool:
            with self._writing():
                if again and control.lease_token(conn, episode_id) == token:
                    return True  # the try before committed; its reply was lost
                if control.read_lease(conn, episode_id).alive():
                    return False  # nothing written: the commit ends the read
                control.write_lease(conn, episode_id, token)
                self._changed()
            return True

        if not self._patiently(claim):
            return False
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
            self._changed()

    def request_cancel(self, episode_id: str, reason: str = "cancel requested") -> None:
        """Ask the episode's writer (in any process) to cancel; it polls within a second."""
        control.request_cancel(self._conn, self.resolve(episode_id), reason, utc_now())
        self._changed()
