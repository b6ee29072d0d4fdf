"""The SQLite trace store: append-only event log, content-addressed messages, control."""

from agentrunner.store.records import EpisodeSummary, EventRow, ModelInput, Segment
from agentrunner.store.store import DEFAULT_DB, EpisodeWriter, TraceStore, default_db_path

__all__ = [
    "DEFAULT_DB",
    "EpisodeSummary",
    "EpisodeWriter",
    "EventRow",
    "ModelInput",
    "Segment",
    "TraceStore",
    "default_db_path",
]
