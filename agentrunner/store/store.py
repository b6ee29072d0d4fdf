"""``TraceStore``: the trace store in a SQLite file (the default backend).

It supplies what the shared core (:mod:`agentrunner.store.core`) leaves to a backend: its
connections (one per thread, WAL, see :mod:`agentrunner.store.connection`), its write lock
(``BEGIN IMMEDIATE``) and its dialect. ``TraceStore(location)`` opens the backend that
handles the location (a ``postgresql://`` URL: :class:`~agentrunner.store.PostgresStore`,
a sibling over the same core).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrunner.store.base import utc_now
from agentrunner.store.connection import Connections, Synchronous, immediate, open_connections
from agentrunner.store.core import StoreCore
from agentrunner.store.dialect import SQLITE, Conn, Dialect
from agentrunner.store.location import default_db_path
from agentrunner.store.writer import EpisodeWriter

__all__ = ["EpisodeWriter", "TraceStore", "register_backend", "utc_now"]

_BACKENDS: list[tuple[Callable[[Any], bool], Callable[..., StoreCore]]] = []
BACKEND_MODULES = ("agentrunner.store.postgres",)
"""The modules whose import registers another backend (each takes URLs, ``scheme://``):
imported when the first store at a URL is opened, not when this module is."""


def register_backend(matches: Callable[[Any], bool], backend: Callable[..., StoreCore]) -> None:
    """Let ``TraceStore(location)`` open ``backend`` for the locations ``matches`` accepts
    (how ``postgresql://`` URLs reach the Postgres store)."""
    _BACKENDS.append((matches, backend))


@functools.cache
def _backends() -> list[tuple[Callable[[Any], bool], Callable[..., StoreCore]]]:
    for module in BACKEND_MODULES:
        importlib.import_module(module)
    return _BACKENDS


class TraceStore(StoreCore):
    """A trace store file. Safe to share between threads; many processes may open one file.

    ``TraceStore("postgresql://...")`` opens the Postgres store instead (a sibling with the
    same methods, see :mod:`agentrunner.store.postgres`)."""

    def __new__(cls, path: str | Path | None = None, **kwargs: Any) -> Any:
        if cls is TraceStore:
            location = path if path is not None else os.environ.get("AGENTRUNNER_DB")
            if isinstance(location, str) and "://" in location:  # a file loads no backend
                for matches, backend in _backends():
                    if matches(location):
                        return backend(path, **kwargs)  # not a TraceStore: no __init__ again
        return super().__new__(cls)

    sql: Dialect = SQLITE

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
        self._files: Connections = open_connections(self.path, synchronous, create=create)
        super().__init__(self._files)
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

    def raw_connection(self) -> Conn:
        """This thread's ``sqlite3`` connection, for tests and ad-hoc tools only: agentrunner
        itself reads and writes through the store's named methods."""
        return self._files.get().raw

    def _begin_writing(self) -> contextlib.AbstractContextManager[None]:
        return immediate(self._conn)
