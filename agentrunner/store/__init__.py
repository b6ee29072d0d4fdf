"""The trace store: append-only event log, content-addressed messages, control; in a
SQLite file (the default) or a Postgres database (``TraceStore("postgresql://...")``)."""

from agentrunner.store.postgres import PostgresStore
from agentrunner.store.records import EpisodeSummary, EventRow, ModelInput, Segment
from agentrunner.store.store import DEFAULT_DB, EpisodeWriter, TraceStore, default_db_path

__all__ = [
    "DEFAULT_DB",
    "EpisodeSummary",
    "EpisodeWriter",
    "EventRow",
    "ModelInput",
    "PostgresStore",
    "Segment",
    "TraceStore",
    "default_db_path",
]
