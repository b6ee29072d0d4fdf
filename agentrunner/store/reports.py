"""What an evaluation report reads of the log, in one pass over the kind index: per
episode, its tool calls, its model calls' latencies, its errors and its model calls of unknown
usage (never the chunks); and which episodes have a reward at all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentrunner.store import eventlog

if TYPE_CHECKING:
    from agentrunner.store.core import StoreCore

_CALL = eventlog.KIND_CODE["tool.call"]
_RESPONSE = eventlog.KIND_CODE["model.response"]
_ERROR = eventlog.KIND_CODE["error"]
_USAGE = eventlog.KIND_CODE["usage"]
_RESULT = eventlog.KIND_CODE["tool.result"]
_END = eventlog.KIND_CODE["episode.end"]


@dataclass
class LogFacts:
    """One episode's own events, as a report counts them."""

    tool_calls: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """``type: message`` of each error event (the first line, cut at 120 characters)."""
    unknown_usage: int = 0
    """Model calls whose token counts the source did not record (null, never 0)."""


def log_facts(store: StoreCore) -> dict[str, LogFacts]:
    """Every episode's :class:`LogFacts` (its own events, not inherited ones), by id."""
    sql = store.sql
    ids = dict(store._conn.execute("SELECT key, id FROM episodes").fetchall())
    out: dict[str, LogFacts] = {episode_id: LogFacts() for episode_id in ids.values()}
    rows = store._conn.execute(
        f"SELECT id, kind, CASE WHEN kind = {_RESPONSE} THEN {sql.text('payload', 'latency_s')}"
        f" WHEN kind = {_ERROR} THEN {sql.text('payload', 'type')}"
        f" WHEN kind = {_USAGE} THEN {sql.text('payload', 'input_tokens')} END,"
        f" CASE WHEN kind = {_ERROR} THEN {sql.text('payload', 'message')} END"
        f" FROM event_log WHERE kind IN ({_CALL}, {_RESPONSE}, {_ERROR}, {_USAGE})"
        f" AND {eventlog.NOT_CHUNK}"
    )
    for rid, kind, value, message in rows:
        episode_id = ids.get(rid >> eventlog.SEQ_BITS)
        if episode_id is None:
            continue
        facts = out[episode_id]
        if kind == _CALL:
            facts.tool_calls += 1
        elif kind == _RESPONSE:
            if value is not None:
                facts.latencies.append(float(value))
        elif kind == _USAGE:
            facts.unknown_usage += value is None
        else:
            first = str(message or "").strip().splitlines()[0] if message else ""
            facts.errors.append(f"{value}: {first[:120]}")
    return out


def rewarded(store: StoreCore) -> set[str]:
    """The episodes whose own events carry a reward: an ``episode.end`` with a total reward
    or a tool result with one. Any other episode (an imported session, a run with no test)
    has an unknown reward, whatever its summary's total says."""
    sql = store.sql
    ids = dict(store._conn.execute("SELECT key, id FROM episodes").fetchall())
    rows = store._conn.execute(
        f"SELECT id FROM event_log WHERE"
        f" (kind = {_END} AND {sql.number('payload', 'total_reward')} IS NOT NULL)"
        f" OR (kind = {_RESULT} AND {sql.number('payload', 'reward')} IS NOT NULL)"
    )
    keys = {rid >> eventlog.SEQ_BITS for (rid,) in rows}
    return {ids[k] for k in keys if k in ids}
