"""The trace store: append-only event log, content-addressed messages, control; in a
SQLite file (the default) or a Postgres database (``TraceStore("postgresql://...")``)."""

from agentrunner.store.location import default_db_path, user_db_path
from agentrunner.store.postgres import PostgresStore
from agentrunner.store.records import EpisodeSummary, EventRow, ModelInput, Segment
from agentrunner.store.store import EpisodeWriter, TraceStore

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
