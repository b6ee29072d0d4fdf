"""Change notices on a Postgres store: live views hear of a change instead of polling for it.

Whatever changes how an episode is listed and leaves no mark a cheap look finds at once
(:mod:`agentrunner.store.listing`) also sends a notice: a new episode or batch, a lease
claimed or released (an episode starting, ending or stopping), a cancel request, a
verification, a removal. A writer sends it in the change's own transaction where it has one
(a new episode or batch, a claim, a removal), so it is delivered once that commits, and right
after it otherwise (a release, a cancel request, a verification: a crash in between loses the
notice, and the view's slower poll finds the change). ``pg_notify`` on :data:`CHANNEL`, with
the store's schema as its payload, so stores in two schemas of one database do not wake each
other. Appends and
heartbeats send none: a view reads a running episode's growth as it polls it.

:class:`Listener` is a view's ear: one connection of its own that ``LISTEN``\\ s, in a thread
that calls back on every notice for its store and reconnects (with back-off) when the server
goes away. A SQLite store sends none; its views poll.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable
from typing import Any

CHANNEL = "agentrunner_changes"
NOTIFY = f"SELECT pg_notify('{CHANNEL}', current_schema())"
"""The statement a writer runs (in its transaction) after a change a live view lists."""
_WAIT_S = 0.5
_LONGEST_PAUSE_S = 5.0


class Listener:
    """Calls ``heard()`` (in its own thread) on every notice of the store at ``url`` until
    :meth:`close`."""

    def __init__(self, url: str, heard: Callable[[], None]) -> None:
        self._url = url
        self._heard = heard
        self._stop = threading.Event()
        self.listens = 0
        """How many times a ``LISTEN`` was put in place (once, then once per reconnection)."""
        self._thread = threading.Thread(target=self._run, name="agentrunner-notices", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        psycopg = importlib.import_module("psycopg")
        pause = _WAIT_S
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, application_name="agentrunner-notices"
                ) as conn:
                    (schema,) = conn.execute("SELECT current_schema()").fetchone()
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listens += 1
                    if self.listens > 1:
                        self._tell()  # what changed while it was not listening went unheard
                    pause = _WAIT_S
                    self._hear(conn, schema)
            except psycopg.Error:  # the server went away: listen again once it is back
                if self._stop.wait(pause):
                    return
                pause = min(pause * 2, _LONGEST_PAUSE_S)

    def _hear(self, conn: Any, schema: str) -> None:
        while not self._stop.is_set():
            for notice in conn.notifies(timeout=_WAIT_S):
                if notice.payload == schema:
                    self._tell()

    def _tell(self) -> None:
        """``heard()``, whose failure (the view closing) must not end the listening."""
        with contextlib.suppress(Exception):
            self._heard()
