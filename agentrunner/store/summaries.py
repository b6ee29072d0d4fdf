"""Episode summaries: status derived from the log and the writer's lease, and totals."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentrunner.errors import StoreCorruptError
from agentrunner.events import EpisodeEnd, status_for
from agentrunner.store import control
from agentrunner.store.records import EpisodeSummary, Segment

if TYPE_CHECKING:
    from agentrunner.store.store import TraceStore


def summaries(
    store: TraceStore,
    clause: str,
    args: tuple[Any, ...],
    corrupt: list[StoreCorruptError] | None = None,
) -> list[EpisodeSummary]:
    """Episodes matching ``clause`` (SQL after FROM, on alias ``e``), with derived status.

    An episode whose rows cannot be read (a payload that is not JSON, written by another
    tool) raises :class:`StoreCorruptError` naming it and the seq; with ``corrupt`` given,
    it is left out and its error appended there instead, so the others stay readable."""
    rows = store.conn.execute(
        "SELECT e.id, e.parent_episode_id, e.fork_seq, e.task_id, e.seed, e.created_at,"
        " e.env, e.model, c.writer_pid, c.writer_host, c.writer_started, c.heartbeat_at,"
        " (SELECT seq || ' ' || attempt || ' ' || turn || ' ' || kind FROM events v"
        "   WHERE v.episode_id = e.id ORDER BY seq DESC LIMIT 1) AS last"
        f" FROM episodes e LEFT JOIN control c ON c.episode_id = e.id {clause}",
        args,
    ).fetchall()
    out: list[EpisodeSummary] = []
    for row in rows:
        try:
            out.append(_checked_summary(store, row))
        except StoreCorruptError as exc:
            if corrupt is None:
                raise
            corrupt.append(exc)
    return out


def _checked_summary(store: TraceStore, row: tuple[Any, ...]) -> EpisodeSummary:
    try:
        return _summary(store, row)
    except (sqlite3.OperationalError, ValidationError, ValueError) as exc:
        bad = store.conn.execute(
            "SELECT seq FROM events WHERE episode_id = ? AND NOT json_valid(payload)"
            " ORDER BY seq LIMIT 5",
            (row[0],),
        ).fetchall()
        if not bad:
            raise
        seqs = ", ".join(str(r[0]) for r in bad)
        raise StoreCorruptError(
            f"{store.path}: episode {row[0]} is corrupt: the payload of event seq {seqs}"
            " is not JSON (written by another tool?); the other episodes are readable"
        ) from exc


def _summary(store: TraceStore, row: tuple[Any, ...]) -> EpisodeSummary:
    episode_id, parent, fork_seq, task_id, seed, created, env, model = row[:8]
    lease = control.Lease(*row[8:12])
    if row[12]:
        seq_s, attempt_s, turn_s, last_kind = row[12].split(" ")
        last_seq, attempt, turn = int(seq_s), int(attempt_s), int(turn_s)
    else:  # no own events yet: a fresh episode or a fork before its first append
        last_seq, attempt, turn, last_kind = fork_seq or 0, 0, 0, ""
    stop_reason = None
    if last_kind == "episode.end":
        end = EpisodeEnd.model_validate_json(
            store.conn.execute(
                "SELECT payload FROM events WHERE episode_id = ? AND seq = ?",
                (episode_id, last_seq),
            ).fetchone()[0]
        )
        stop_reason = end.stop_reason
        status = status_for(end.stop_reason)
        reward, tokens, cost = end.total_reward, end.totals.get("tokens", {}), None
        cost = end.totals.get("cost_usd")
    else:
        status = "running" if lease.alive() else "interrupted"
        reward, tokens, cost = _running_totals(store, episode_id)
    return EpisodeSummary(
        episode_id=episode_id,
        parent_episode_id=parent,
        fork_seq=fork_seq,
        task_id=task_id,
        seed=seed,
        created_at=created,
        env=json.loads(env),
        model=json.loads(model),
        status=status,
        stop_reason=stop_reason,
        turns=turn,
        last_seq=last_seq,
        attempt=attempt,
        total_reward=reward,
        tokens=tokens,
        cost_usd=cost,
        writer_pid=lease.pid if status == "running" else None,
    )


def _running_totals(
    store: TraceStore, episode_id: str
) -> tuple[float, dict[str, int], float | None]:
    """Totals of an episode without an end: the writer's checkpoint (totals as of a seq) plus
    the events after it, or, with no checkpoint, a scan of the whole history."""
    reward = 0.0
    tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0}
    cost: float | None = None
    segments = store.segments(episode_id)
    checkpoint = control.read_checkpoint(store.conn, episode_id)
    if checkpoint is not None:
        seq, totals = checkpoint
        reward, cost = float(totals["reward"]), totals["cost_usd"]
        tokens.update(totals["tokens"])
        segments = [Segment(episode_id, seq + 1, None)]
    for seg in segments:
        hi = seg.end if seg.end is not None else 2**62
        rng = (seg.episode_id, seg.start, hi)
        r = store.conn.execute(
            "SELECT total(json_extract(payload, '$.reward')) FROM events WHERE episode_id = ?"
            " AND kind = 'tool.result' AND seq BETWEEN ? AND ?",
            rng,
        ).fetchone()
        reward += r[0] or 0.0
        u = store.conn.execute(
            "SELECT total(json_extract(payload, '$.input_tokens')),"
            " total(json_extract(payload, '$.output_tokens')),"
            " total(json_extract(payload, '$.cache_read_tokens')),"
            " total(json_extract(payload, '$.cache_write_tokens')),"
            " total(json_extract(payload, '$.reasoning_tokens')),"
            " sum(json_extract(payload, '$.cost_usd'))"
            " FROM events WHERE episode_id = ? AND kind = 'usage' AND seq BETWEEN ? AND ?",
            rng,
        ).fetchone()
        for key, value in zip(tokens, u[:5], strict=True):
            tokens[key] += int(value or 0)
        if u[5] is not None:
            cost = (cost or 0.0) + u[5]
    return reward, tokens, cost
