"""The server's sessions: opened up to ``--max-sessions`` (past it a clear refusal), found by
id, closed once, and ended when idle past ``--idle-timeout`` (recorded as such)."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Awaitable, Callable

from agentrunner.serve.catalog import Catalog
from agentrunner.serve.episode import Peer
from agentrunner.serve.session import Session
from agentrunner.store import TraceStore


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
        self, store: TraceStore, catalog: Catalog, max_sessions: int, idle_timeout: float
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

    async def close(self, session: Session, why: str | None) -> None:
        """End the session's episode (``why``: the cancel reason recorded; None: the client
        closed it) and free its slot; shielded, so a cancelled caller still frees it."""
        self.sessions.pop(session.id, None)
        self.hangups.pop(session.id, None)
        await asyncio.shield(session.close(why))

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
