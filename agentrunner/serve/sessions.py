"""The server's sessions: opened up to ``--max-sessions`` (past it a clear refusal), found by
id, continued by id after a reconnect, closed once, and ended when idle past
``--idle-timeout`` (recorded as such)."""

from __future__ import annotations

import asyncio
import functools
import re
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentrunner.serve.catalog import Catalog
from agentrunner.serve.episode import Peer
from agentrunner.serve.session import Session, SessionProblem

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

SESSION_ID = re.compile(r"[0-9a-f]{16}")
"""A session id as this server makes them (16 hex digits)."""


class CapacityReached(Exception):
    """Every session slot is taken."""

    def __init__(self, active: int, limit: int) -> None:
        super().__init__(
            f"this server already serves {active} sessions, its limit (--max-sessions"
            f" {limit}): close a session or start the server with a higher --max-sessions"
        )
        self.active = active
        self.limit = limit


class SessionTable:
    """Open sessions by id, bounded; an idle reaper ends the forgotten ones."""

    def __init__(
        self, store: StoreBackend, catalog: Catalog, max_sessions: int, idle_timeout: float
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.sessions: dict[str, Session] = {}
        self.recording = threading.Lock()
        """Taken by every session for each write of its record (see ``ServedEpisode``)."""
        self.hangups: dict[str, Callable[[], Awaitable[object]]] = {}
        """How to hang up on a session's client (its WebSocket) when it idles out."""
        self._ending: dict[str, asyncio.Future[None]] = {}
        """Sessions being closed (their episode's end still being recorded), by id."""

    def open(self, server: str, client: str, address: str, transport: str) -> Session:
        """A new session, or ``CapacityReached``."""
        if len(self.sessions) >= self.max_sessions:
            raise CapacityReached(len(self.sessions), self.max_sessions)
        peer = Peer(server, client, address, transport, secrets.token_hex(8))
        session = Session(self.store, self.catalog, peer, self.recording)
        self.sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    async def rejoin(self, session: Session, session_id: object) -> dict[str, Any]:
        """Continue session ``session_id``'s episode in ``session`` (a new connection of a
        client whose connection, or server, went away), which takes that id; the reset's wire
        observation. Refused while that session is still open elsewhere."""
        if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
            raise SessionProblem(
                f"session_id must be the 16 hex digits a reset returned, not {session_id!r}",
                "VALIDATION_ERROR",
            )
        ending = self._ending.get(session_id)
        if ending is not None:  # its end is being recorded: continue after it
            await asyncio.shield(ending)
        if session_id in self.sessions:
            raise SessionProblem(
                f"session {session_id} is still open on another connection: close it, or"
                f" wait until the server sees it gone (at most --idle-timeout"
                f" {self.idle_timeout:g} s)",
                "SESSION_ERROR",
            )
        own = session.id
        self._rekey(own, session_id)
        try:
            return await session.rejoin(session_id)
        except BaseException:
            self._rekey(session_id, own)
            raise

    def _rekey(self, old: str, new: str) -> None:
        self.sessions[new] = self.sessions.pop(old)
        hangup = self.hangups.pop(old, None)
        if hangup is not None:
            self.hangups[new] = hangup

    async def close(self, session: Session, why: str | None) -> None:
        """End the session's episode (``why``: the cancel reason recorded; None: the client
        closed it) and free its slot; shielded, so a cancelled caller still frees it."""
        self.sessions.pop(session.id, None)
        self.hangups.pop(session.id, None)
        closing = asyncio.ensure_future(session.close(why))
        self._ending[session.id] = closing
        closing.add_done_callback(functools.partial(self._ended, session.id))
        await asyncio.shield(closing)

    def _ended(self, session_id: str, closing: asyncio.Future[None]) -> None:
        """Forget a session's close once done (unless a later close of the id replaced it)."""
        if self._ending.get(session_id) is closing:
            del self._ending[session_id]

    async def close_all(self, why: str) -> None:
        for session in list(self.sessions.values()):
            await self.close(session, why)

    async def reap(self) -> None:
        """End idle sessions, forever (cancel the task to stop)."""
        pause = min(1.0, self.idle_timeout / 4)
        while True:
            await asyncio.sleep(pause)
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if session.busy or now - session.last_active < self.idle_timeout:
                    continue
                hangup = self.hangups.get(session.id)
                await self.close(
                    session,
                    f"the session was idle for {self.idle_timeout:g} s (--idle-timeout)",
                )
                if hangup is not None:
                    await hangup()
