"""An episode's status: the one rule, for readers in Python (``ls``, ``show``, resume, the TUI,
exports) and spelled as SQL for the ``episode_summary`` view, from the same data.

In order: an episode whose own last event is an ``episode.end`` has the status its stop reason
means (:data:`agentrunner.values.statuses.STOP_REASON_STATUS`, any other reason ``failed``);
one whose writer holds a live lease is ``running``; an imported session is ``completed``
(nothing of it is left to run); one that never started (no own event but the edit or
message that made it a fork: nothing of a run of it was ever recorded) is ``pending``; any
other is ``interrupted``, resumable at once. Only the log says whether an episode started, so
a copy of a store (which claims each episode it writes) keeps a pending fork pending.

A writer is live while it holds the lease and its heartbeat is fresh (younger than
:data:`~agentrunner.store.control.HEARTBEAT_STALE_S`). Python also checks a writer on this
machine by its process (:meth:`~agentrunner.store.control.Lease.alive`), which SQL cannot
see: the view calls a writer killed on this machine ``interrupted`` once its heartbeat is
stale, ``ls`` at once.
"""

from __future__ import annotations

from agentrunner.store import eventlog
from agentrunner.store.control import HEARTBEAT_STALE_S
from agentrunner.store.dialect import Dialect
from agentrunner.values.statuses import STOP_REASON_STATUS, Status, status_for

IMPORT_KIND = "import"
"""The ``env.kind`` of an imported session (``agentrunner.envs.imported.KIND``)."""


def started(fork_seq: int | None, last_seq: int, last_kind: str) -> bool:
    """Whether an episode has begun: it has an own event beyond the one that made it (the
    edit or injected message of a fork, written with it)."""
    if not last_kind:
        return False
    return not (last_kind == "message" and last_seq <= (fork_seq or 0) + 1)


def derive(
    *, stop_reason: str | None, writer_live: bool, imported: bool, has_started: bool
) -> Status:
    """The status the rule gives (``stop_reason``: of the own last event, when that is an
    ``episode.end``)."""
    if stop_reason is not None:
        return status_for(stop_reason)
    if writer_live:
        return Status.RUNNING
    if imported:
        return Status.COMPLETED
    if not has_started:
        return Status.PENDING
    return Status.INTERRUPTED


def status_sql(sql: Dialect) -> str:
    """The rule as one SQL expression over ``e`` (the episode's ``episodes`` row), ``last``
    (its own last ``event_log`` row, NULLs when it has none) and ``c`` (its ``control``
    row, NULLs when it never had a writer)."""
    end, message = eventlog.KIND_CODE["episode.end"], eventlog.KIND_CODE["message"]
    stop = sql.text("last.payload", "stop_reason")
    reasons = " ".join(
        f"WHEN '{reason}' THEN '{status}'" for reason, status in STOP_REASON_STATUS.items()
    )
    now = (
        "extract(epoch from clock_timestamp())"
        if sql.postgres
        else "((julianday('now') - 2440587.5) * 86400.0)"
    )
    live = f"c.writer_pid IS NOT NULL AND c.heartbeat_at > {now} - {HEARTBEAT_STALE_S}"
    imported = f"e.parent_episode_id IS NULL AND {sql.text('e.env', 'kind')} = '{IMPORT_KIND}'"
    never_started = (
        f"last.id IS NULL OR (last.kind = {message}"
        f" AND (last.id & {eventlog.SEQ_MASK}) <= coalesce(e.fork_seq, 0) + 1)"
    )
    return (
        f"CASE WHEN last.kind = {end} THEN CASE {stop} {reasons} ELSE '{Status.FAILED}' END"
        f" WHEN {live} THEN '{Status.RUNNING}'"
        f" WHEN {imported} THEN '{Status.COMPLETED}'"
        f" WHEN {never_started} THEN '{Status.PENDING}'"
        f" ELSE '{Status.INTERRUPTED}' END"
    )
