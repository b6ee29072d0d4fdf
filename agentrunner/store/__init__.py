"""The trace store: append-only event log, content-addressed messages, control; in a
SQLite file (the default) or a Postgres database (``TraceStore("postgresql://...")``).

The names below are imported on first use: a module of the package (``store.location``)
loads without the store itself, and the Postgres backend loads when a store is opened.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.store.location import default_db_path, user_db_path
    from agentrunner.store.postgres import PostgresStore
    from agentrunner.store.records import EpisodeSummary, EventRow, ModelInput, Segment
    from agentrunner.store.store import EpisodeWriter, TraceStore

_EXPORTS: dict[str, str] = {
    "EpisodeSummary": "agentrunner.store.records",
    "EpisodeWriter": "agentrunner.store.store",
    "EventRow": "agentrunner.store.records",
    "ModelInput": "agentrunner.store.records",
    "PostgresStore": "agentrunner.store.postgres",
    "Segment": "agentrunner.store.records",
    "TraceStore": "agentrunner.store.store",
    "default_db_path": "agentrunner.store.location",
    "user_db_path": "agentrunner.store.location",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrunner.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "EpisodeSummary",
    "EpisodeWriter",
    "EventRow",
    "ModelInput",
    "PostgresStore",
    "Segment",
    "TraceStore",
    "default_db_path",
    "user_db_path",
]
