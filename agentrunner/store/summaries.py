"""Episode and batch summaries: status derived from the log and the writer's lease, totals
(a fork's own spend apart from what it inherits), and the filters listings apply."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.store import control
from agentrunner.store.eventlog import (
    KIND_CODE,
    KIND_NAME,
    NOT_CHUNK,
    SEQ_BITS,
    SEQ_MASK,
    row_id,
    span,
)
from agentrunner.store.records import (
    BatchSummary,
    EpisodeFilter,
    EpisodeSummary,
    ForkGroupRole,
    Segment,
)
from agentrunner.store.status import IMPORT_KIND, derive, started
from agentrunner.values.errors import StoreCorruptError, StoreFailedError, UsageError
from agentrunner.values.statuses import Status, StopReason, stop_reason

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase


def summaries(
    store: StoreBase,
    clause: str,
    args: tuple[Any, ...],
    corrupt: list[StoreCorruptError] | None = None,
) -> list[EpisodeSummary]:
    """Episodes matching ``clause`` (SQL after FROM, on alias ``e``), with derived status.

    An episode whose rows cannot be read (a payload that is not JSON, written by another
    tool) raises :class:`StoreCorruptError` naming it and the seq; with ``corrupt`` given,
    it is left out and its error appended there instead, so the others stay readable."""
    rows = store._conn.execute(
        "SELECT e.id, e.parent_episode_id, e.fork_seq, e.task_id, e.seed, e.created_at,"
        " e.env, e.model, c.writer_pid, c.writer_host, c.writer_started, c.heartbeat_at,"
        f" (SELECT (v.id & {SEQ_MASK}) || ' ' || v.attempt || ' ' || v.turn || ' ' || v.kind"
        f"   FROM event_log v WHERE v.id BETWEEN (e.key << {SEQ_BITS}) + 1"
        f"   AND (e.key << {SEQ_BITS}) + {SEQ_MASK} ORDER BY v.id DESC LIMIT 1) AS last,"
        " (SELECT group_id || ' ' || candidate || ' ' || sample FROM fork_group_members m"
        "   WHERE m.episode_id = e.id LIMIT 1) AS fork_group"
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


def _checked_summary(store: StoreBase, row: tuple[Any, ...]) -> EpisodeSummary:
    try:
        return _summary(store, row)
    except (StoreFailedError, ValueError) as exc:
        if store.sql.postgres:  # the database checks every payload is JSON
            raise
        bad = store._conn.execute(
            f"SELECT id & {SEQ_MASK} FROM event_log WHERE id BETWEEN ? AND ?"
            " AND NOT json_valid(payload) ORDER BY id LIMIT 5",
            span(store.episode_key(row[0])),
        ).fetchall()
        if not bad:
            raise
        seqs = ", ".join(str(r[0]) for r in bad)
        raise StoreCorruptError(
            f"{store.where}: episode {row[0]} is corrupt: the payload of event seq {seqs}"
            " is not JSON (written by another tool?); the other episodes are readable"
        ) from exc


def _summary(store: StoreBase, row: tuple[Any, ...]) -> EpisodeSummary:
    episode_id, parent, fork_seq, task_id, seed, created, env, model = row[:8]
    lease = control.Lease(*row[8:12])
    if row[12]:
        seq_s, attempt_s, turn_s, kind_s = row[12].split(" ")
        last_seq, attempt, turn = int(seq_s), int(attempt_s), int(turn_s)
        last_kind = KIND_NAME[int(kind_s)]
    else:  # no own events yet: a fresh episode or a fork before its first append
        last_seq, attempt, turn, last_kind = fork_seq or 0, 0, 0, ""
    end: _End | None = None
    env_spec = json.loads(env)
    imported = parent is None and env_spec.get("kind") == IMPORT_KIND
    if last_kind == "episode.end":
        payload = store._conn.execute(
            "SELECT payload FROM event_log WHERE id = ?",
            (row_id(store.episode_key(episode_id), last_seq),),
        ).fetchone()[0]
        end = _read_end(payload, f"{store.where}: the episode.end of episode {episode_id}")
    status = derive(
        stop_reason=end.stop_reason if end is not None else None,
        writer_live=end is None and lease.alive(),
        imported=imported,
        has_started=started(fork_seq, last_seq, last_kind),
    )
    stopped = "imported" if imported and status == Status.COMPLETED else None
    inherited = _Spend()
    if parent is not None:  # a fork: its own spend and what its history inherits, apart
        segments = store.segments(episode_id)
        inherited = _scan(store, segments[:-1])
        own = _scan(store, segments[-1:])
        reward = end.total_reward if end is not None else _plus(inherited.reward, own.reward)
        tokens, cost = own.tokens, own.cost_usd
    elif end is not None:
        reward, tokens, cost = end.total_reward, end.totals.get("tokens", {}), None
        cost = end.totals.get("cost_usd")
    else:
        spend = _running_totals(store, episode_id)
        reward, tokens, cost = spend.reward, spend.tokens, spend.cost_usd
    group = None
    if row[13]:
        group_id, candidate, sample = row[13].split(" ")
        group = ForkGroupRole(group_id, int(candidate), int(sample))
    return EpisodeSummary(
        episode_id=episode_id,
        parent_episode_id=parent,
        fork_seq=fork_seq,
        task_id=task_id,
        seed=seed,
        created_at=created,
        env=env_spec,
        model=json.loads(model),
        status=status,
        stop_reason=end.stop_reason if end is not None else stopped,
        turns=turn,
        last_seq=last_seq,
        attempt=attempt,
        total_reward=reward,
        tokens=tokens,
        cost_usd=cost,
        writer_pid=lease.pid if status == Status.RUNNING else None,
        inherited_tokens=inherited.tokens,
        inherited_cost_usd=inherited.cost_usd,
        fork_group=group,
    )


@dataclass(frozen=True, slots=True)
class _End:
    """What a summary reads of an ``episode.end``: its stop reason, reward and totals."""

    stop_reason: StopReason | str
    total_reward: float | None
    totals: dict[str, Any]


def _read_end(payload: str, where: str) -> _End:
    """An ``episode.end``'s payload read as JSON (a summary needs three of its fields, not
    the event model), the reward as a float as the model reads it; ``where`` names the
    event in the error when a field is not of its type."""
    end = json.loads(payload)
    if isinstance(end, dict) and isinstance(end.get("stop_reason"), str):
        reward, totals = end.get("total_reward"), end.get("totals", {})
        try:
            total_reward = None if reward is None else float(reward)
        except (TypeError, ValueError):
            pass
        else:
            if isinstance(totals, dict):
                return _End(stop_reason(end["stop_reason"]), total_reward, totals)
    raise StoreCorruptError(
        f"{where} is corrupt: it needs a stop_reason, a numeric total_reward and totals"
    )


@dataclass
class _Spend:
    """Reward, tokens and cost summed over some events (cost None: none known; reward None:
    the writer's checkpoint says nothing judged the episode)."""

    reward: float | None = 0.0
    tokens: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("input", "output", "cache_read", "cache_write", "reasoning"), 0
        )
    )
    cost_usd: float | None = None


def _plus(a: float | None, b: float | None) -> float | None:
    """A sum of rewards, None while neither is known."""
    return a if b is None else (a or 0.0) + float(b)


def _running_totals(store: StoreBase, episode_id: str) -> _Spend:
    """Totals of a root episode without an end: the writer's checkpoint (totals as of a seq)
    plus the events after it, or, with no checkpoint, a scan of the whole history."""
    checkpoint = control.read_checkpoint(store._conn, episode_id)
    if checkpoint is None:
        return _scan(store, store.segments(episode_id))
    seq, totals = checkpoint
    known = totals.get("reward")
    spend = _Spend(None if known is None else float(known), cost_usd=totals["cost_usd"])
    spend.tokens.update(totals["tokens"])
    return _scan(store, [Segment(episode_id, seq + 1, None, store.episode_key(episode_id))], spend)


def _scan(store: StoreBase, segments: Sequence[Segment], spend: _Spend | None = None) -> _Spend:
    """``spend`` (default: nothing) plus the rewards and usage of the events in ``segments``."""
    out = spend if spend is not None else _Spend()
    result, usage = KIND_CODE["tool.result"], KIND_CODE["usage"]
    sql = store.sql
    for seg in segments:
        rng = span(seg.key, seg.start, seg.end)
        r = store._conn.execute(
            f"SELECT {sql.total(sql.number('payload', 'reward'))} FROM event_log"
            f" WHERE kind = {result} AND {NOT_CHUNK} AND id BETWEEN ? AND ?",
            rng,
        ).fetchone()
        out.reward = _plus(out.reward, r[0] or None)
        u = store._conn.execute(
            "SELECT "
            + ", ".join(
                sql.total(sql.number("payload", f"{name}_tokens"))
                for name in ("input", "output", "cache_read", "cache_write", "reasoning")
            )
            + f", sum({sql.number('payload', 'cost_usd')})"
            f" FROM event_log WHERE kind = {usage} AND {NOT_CHUNK} AND id BETWEEN ? AND ?",
            rng,
        ).fetchone()
        for key, value in zip(list(out.tokens), u[:5], strict=True):
            out.tokens[key] += int(value or 0)
        if u[5] is not None:
            out.cost_usd = (out.cost_usd or 0.0) + u[5]
    return out


# ------------------------------------------------------------------------------ listings

_PAGE = 200


def _conditions(store: StoreBase, where: EpisodeFilter) -> tuple[list[str], list[Any]]:
    conds: list[str] = []
    args: list[Any] = []
    sql = store.sql
    if where.task_id is not None:
        conds.append(sql.glob("e.task_id"))
        args.append(sql.glob_pattern(where.task_id))
    if where.model is not None:
        conds.append(sql.glob(sql.text("e.model", "spec")))
        args.append(sql.glob_pattern(where.model))
    if where.batch_id is not None:
        conds.append("e.id IN (SELECT episode_id FROM batch_members WHERE batch_id = ?)")
        args.append(where.batch_id)
    if where.parent_episode_id is not None:
        conds.append("e.parent_episode_id = ?")
        args.append(where.parent_episode_id)
    if where.roots_only:
        conds.append("e.parent_episode_id IS NULL")
    if where.served_session is not None:
        conds.append(f"{sql.text_at('e.env', 'served', 'session_id')} = ?")
        args.append(where.served_session)
    return conds, args


def list_summaries(
    store: StoreBase,
    where: EpisodeFilter,
    limit: int | None,
    corrupt: list[StoreCorruptError] | None,
) -> list[EpisodeSummary]:
    """Episodes matching ``where``, newest first, at most ``limit``. A status filter needs
    the derived status, so those are read in pages until ``limit`` of them match."""
    conds, args = _conditions(store, where)
    if where.status is None:
        clause = ("WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY e.id DESC"
        if limit:
            clause, args = clause + " LIMIT ?", [*args, int(limit)]
        return summaries(store, clause, tuple(args), corrupt)
    out: list[EpisodeSummary] = []
    before: str | None = None
    while limit is None or len(out) < limit:
        page_conds = [*conds, "e.id < ?"] if before is not None else conds
        page_args = [*args, before] if before is not None else args
        clause = ("WHERE " + " AND ".join(page_conds) if page_conds else "") + (
            " ORDER BY e.id DESC LIMIT ?"
        )
        ids = [
            r[0]
            for r in store._conn.execute(
                f"SELECT e.id FROM episodes e {clause}", (*page_args, _PAGE)
            ).fetchall()
        ]
        if not ids:
            break
        before = ids[-1]
        marks = ", ".join("?" for _ in ids)
        page = summaries(store, f"WHERE e.id IN ({marks}) ORDER BY e.id DESC", tuple(ids), corrupt)
        out.extend(e for e in page if e.status == where.status)
    return out[:limit] if limit else out


def count_summaries(store: StoreBase, where: EpisodeFilter) -> int:
    """How many episodes match ``where`` (corrupt ones counted unless a status is asked for:
    those have no status)."""
    if where.status is not None:
        return len(list_summaries(store, where, None, []))
    conds, args = _conditions(store, where)
    clause = "WHERE " + " AND ".join(conds) if conds else ""
    return int(
        store._conn.execute(f"SELECT count(*) FROM episodes e {clause}", tuple(args)).fetchone()[0]
    )


def resolve_batch(store: StoreBase, text: str) -> str:
    """A batch's id from its id, a unique prefix of it, or its name."""
    name = store.sql.text("config", "name")
    rows = store._conn.execute(
        f"SELECT id, {name} FROM batches"
        f" WHERE id = ? OR {name} = ? OR substr(id, 1, length(?)) = ?"
        " ORDER BY id",
        (text, text, text, text),
    ).fetchall()
    for matches in (
        [r[0] for r in rows if r[0] == text],
        [r[0] for r in rows if r[1] == text],
        [r[0] for r in rows],
    ):
        if len(matches) == 1:
            return str(matches[0])
        if len(matches) > 1:
            raise UsageError(
                f"batch {text!r} is ambiguous ({', '.join(matches[:3])}, ...);"
                " see `agentrunner ls --batches`"
            )
    raise UsageError(f"no batch {text!r} in {store.where}; see `agentrunner ls --batches`")


def batch_summaries(
    store: StoreBase, limit: int | None, corrupt: list[StoreCorruptError] | None
) -> list[BatchSummary]:
    """Batches, newest first, each with its episodes' derived status and totals."""
    clause = "ORDER BY created_at DESC, id DESC" + (" LIMIT ?" if limit else "")
    out = []
    for batch_id, created, config_json in store._conn.execute(
        f"SELECT id, created_at, config FROM batches {clause}", (limit,) if limit else ()
    ).fetchall():
        config = json.loads(config_json)
        members = summaries(
            store,
            "WHERE e.id IN (SELECT episode_id FROM batch_members WHERE batch_id = ?)",
            (batch_id,),
            corrupt,
        )
        ended = [m for m in members if m.status == Status.COMPLETED]
        done = [m.total_reward for m in ended if m.total_reward is not None]
        costs = [m.cost_usd for m in members if m.cost_usd is not None]
        model = config.get("model")
        out.append(
            BatchSummary(
                batch_id=batch_id,
                name=config.get("name"),
                model=model.get("spec") if isinstance(model, dict) else None,
                created_at=created,
                pairs=len(config.get("pairs") or []),
                episodes=len(members),
                completed=len(ended),
                mean_reward=sum(done) / len(done) if done else None,
                cost_usd=sum(costs) if costs else None,
            )
        )
    return out


def count_batches(store: StoreBase) -> int:
    return int(store._conn.execute("SELECT count(*) FROM batches").fetchone()[0])
