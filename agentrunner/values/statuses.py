"""The event log's kind names, an episode's statuses and stop reasons, and the rule from one
to the other: plain Python (no pydantic), so a listing reads them without loading the event
models; :mod:`agentrunner.values.events` re-exports every name here."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

EVENT_KINDS = (
    "episode.start",
    "model.request",
    "model.chunk",
    "model.response",
    "usage",
    "tool.call",
    "tool.result",
    "message",
    "cancel",
    "error",
    "resume",
    "episode.end",
)


class Status(StrEnum):
    """An episode's status, derived from its log and its writer's lease (never stored)."""

    PENDING = "pending"  # created, never started: a fork made without --run, a batch member
    RUNNING = "running"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class StopReason(StrEnum):
    """Why an attempt of an episode stopped (``episode.end.stop_reason``)."""

    DONE = "done"  # the environment said so (submit)
    MAX_TURNS = "max_turns"  # the runner's only limit
    MAX_STEPS = "max_steps"  # the environment's horizon
    CANCELLED = "cancelled"
    ERROR = "error"
    INCOMPLETE = "incomplete"  # the stream ended without a finish reason
    CONTEXT_OVERFLOW = "context_overflow"  # the provider refused the request as too long
    CONTEXT_EXHAUSTED = "context_exhausted"  # the next request would pass the window: not sent
    INTERRUPTED = "interrupted"  # the environment broke: no end recorded, resumable
    IMPORTED = "imported"  # a summary's: an imported session that recorded no end (completed)


COMPACTION: Literal["compaction"] = "compaction"
"""The ``purpose`` of a model call that summarizes the history
(:mod:`agentrunner.runtime.context`); here, beneath the event models, so that readers that
load none of them (``show``) name it too."""

STOP_REASON_STATUS: dict[str, Status] = {
    StopReason.DONE: Status.COMPLETED,
    StopReason.MAX_TURNS: Status.COMPLETED,
    StopReason.MAX_STEPS: Status.COMPLETED,
    StopReason.CANCELLED: Status.CANCELLED,
    StopReason.ERROR: Status.FAILED,
    StopReason.INCOMPLETE: Status.FAILED,
    StopReason.CONTEXT_OVERFLOW: Status.FAILED,
    StopReason.CONTEXT_EXHAUSTED: Status.FAILED,
    StopReason.INTERRUPTED: Status.INTERRUPTED,
}


def stop_reason(text: str) -> StopReason | str:
    """A recorded stop reason as ``episode.end`` reads it: a :class:`StopReason` when it is
    one, else the text an imported trace gave for one of its own."""
    return StopReason(text) if text in StopReason._value2member_map_ else text


def status_for(stop_reason: str) -> Status:
    """The episode status an ``episode.end`` with this stop reason means."""
    return STOP_REASON_STATUS.get(stop_reason, Status.FAILED)
