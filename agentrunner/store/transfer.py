"""Copying episodes between stores of either kind (SQLite file, Postgres database).

An episode is copied as it is: its id, lineage (``parent_episode_id``, ``fork_seq``), every
event with its seq, attempt, turn, kind, time and payload, the messages, tool sets and
workspace snapshots (with their file blobs, read from the source's table or bucket and
written to the destination's) its events name, and its rows in the side
tables (batch membership, fork groups, verifications, the import it came from). A fork's
ancestors are copied first, so the destination never holds a fork without its history.

Copying is idempotent and incremental: an episode the destination already holds gets only
the events it lacks (one that grew since), after checking the two agree on the last event
they share; what the events need is written before the events, so a copy killed midway
leaves a destination that reads correctly and a copy run again finishes it. An episode
running in the source is not copied (it would look interrupted in the destination, and be
resumed there too); while copying, the copy holds the episode's lease in the destination.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentrunner.store import blobs, control, eventlog
from agentrunner.values.critical import critical
from agentrunner.values.errors import StoreError

if TYPE_CHECKING:
    from agentrunner.store.core import StoreCore

_PAGE = 1000


@dataclass(frozen=True)
class Copied:
    """What copying one episode did: ``new`` (it was not there), ``grew`` (events were
    added to it) or ``unchanged``; and how many events were written."""

    episode_id: str
    outcome: str
    events: int


def lineage_order(src: StoreCore, episode_ids: Iterable[str] | None) -> list[str]:
    """The episodes to copy (None: all of them) with their ancestors, parents first."""
    if episode_ids is None:
        rows = src._conn.execute("SELECT id FROM episodes ORDER BY key").fetchall()
        return [str(r[0]) for r in rows]
    wanted: dict[str, None] = {}
    for given in episode_ids:
        episode_id = src.resolve(given)
        for ancestor in reversed(src.ancestors(episode_id)):
            wanted.setdefault(ancestor)
        wanted.setdefault(episode_id)
    return list(wanted)


def copy_episode(src: StoreCore, dst: StoreCore, episode_id: str) -> Copied:
    """Copy one episode (whose ancestors ``dst`` already holds) from ``src`` into ``dst``."""
    row = src._conn.execute(
        "SELECT id, parent_episode_id, fork_seq, task_id, seed, created_at, env, model"
        " FROM episodes WHERE id = ?",
        (episode_id,),
    ).fetchone()
    if row is None:
        raise StoreError(f"no episode {episode_id} in {src.where}")
    src_key = src.episode_key(episode_id)
    mine = dst._conn.execute(
        "SELECT parent_episode_id, fork_seq, task_id, seed FROM episodes WHERE id = ?",
        (episode_id,),
    ).fetchone()
    if mine is not None and tuple(mine) != (row[1], row[2], row[3], row[4]):
        raise StoreError(
            f"{dst.where} holds another episode with the id {episode_id} (a different task,"
            " seed or lineage); nothing of it was copied"
        )
    lease = control.read_lease(src._conn, episode_id)
    if lease.alive():
        raise StoreError(
            f"episode {episode_id} is running in {src.where} (pid {lease.pid} on"
            f" {lease.host}); copy it when that run ends"
        )
    _check_membership(src, dst, episode_id)
    upto = src.last_seq(src.segments(episode_id)[-1:])  # what this copy takes, at most
    after = 0 if mine is None else _check_agree(src, dst, episode_id, src_key)
    _copy_references(src, dst, _events(src, src_key, after, upto))
    written = 0
    with critical:
        if mine is None:
            _, parent, fork_seq, task_id, seed, created_at, env, model = row
            with dst._writing():
                dst._insert_episode(
                    task_id,
                    seed,
                    json.loads(env),
                    json.loads(model),
                    parent,
                    fork_seq,
                    episode_id=episode_id,
                    created_at=created_at,
                )
        busy = StoreError(
            f"episode {episode_id} is being written in {dst.where}; copy it when that run ends"
        )
        with dst.lease(episode_id, refused=busy):  # no run may append there meanwhile
            dst_key = dst.episode_key(episode_id)
            page: list[tuple[Any, ...]] = []
            for event in _events(src, src_key, after, upto):
                page.append(event)
                if len(page) >= _PAGE:
                    written += _insert_events(dst, dst_key, page)
                    page = []
            if page:
                written += _insert_events(dst, dst_key, page)
            _copy_side_rows(src, dst, episode_id)
    outcome = "new" if mine is None else ("grew" if written else "unchanged")
    return Copied(episode_id, outcome, written)


def _check_agree(src: StoreCore, dst: StoreCore, episode_id: str, src_key: int) -> int:
    """The destination's last seq of the episode, after checking both stores hold the same
    event there (and the destination nothing the source lacks)."""
    dst_key = dst.episode_key(episode_id)
    last = dst._conn.execute(
        "SELECT id, kind, ts, payload FROM event_log WHERE id BETWEEN ? AND ?"
        " ORDER BY id DESC LIMIT 1",
        eventlog.span(dst_key),
    ).fetchone()
    if last is None:
        return 0
    seq = int(last[0]) & eventlog.SEQ_MASK
    theirs = src._conn.execute(
        "SELECT kind, ts, payload FROM event_log WHERE id = ?", (eventlog.row_id(src_key, seq),)
    ).fetchone()
    if theirs is None or tuple(theirs) != tuple(last[1:]):
        raise StoreError(
            f"episode {episode_id} differs between {src.where} and {dst.where} at seq {seq}"
            " (written on both sides?); nothing of it was copied"
        )
    return seq


def _events(src: StoreCore, key: int, after: int, upto: int) -> Iterator[tuple[Any, ...]]:
    """The episode's own rows after seq ``after`` up to ``upto``: ``(seq, attempt, turn,
    kind, ts, payload)``."""
    if upto <= after:
        return
    lo, hi = eventlog.span(key, after + 1, upto)
    while True:
        rows = src._conn.execute(
            "SELECT id, attempt, turn, kind, ts, payload FROM event_log"
            " WHERE id BETWEEN ? AND ? ORDER BY id LIMIT ?",
            (lo, hi, _PAGE),
        ).fetchall()
        for r in rows:
            yield (int(r[0]) & eventlog.SEQ_MASK, *r[1:])
        if len(rows) < _PAGE:
            return
        lo = int(rows[-1][0]) + 1


def _insert_events(dst: StoreCore, key: int, rows: list[tuple[Any, ...]]) -> int:
    conn = dst._conn
    conn.execute(dst.sql.begin_write)
    try:
        conn.executemany(eventlog.INSERT, [(eventlog.row_id(key, r[0]), *r[1:]) for r in rows])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(rows)


def _copy_references(src: StoreCore, dst: StoreCore, events: Iterable[tuple[Any, ...]]) -> None:
    """The messages (whole chains), tool sets, snapshots (with their blobs) and the answers
    a recorded call kept (``answer.body``, a blob: what a replay serves) the events name,
    written into ``dst`` before the events that name them."""
    tips: set[str] = set()
    tools: set[str] = set()
    snapshots: set[str] = set()
    answers: set[str] = set()
    for *_, payload in events:
        value = json.loads(payload)
        answer = value.get("answer")
        if isinstance(answer, dict) and isinstance(answer.get("body"), str):
            answers.add(answer["body"])
        for key in ("tip_hash", "message_hash"):
            if isinstance(value.get(key), str):
                tips.add(value[key])
        if isinstance(value.get("tools_hash"), str):
            tools.add(value["tools_hash"])
        if isinstance(value.get("snapshot"), str):
            snapshots.add(value["snapshot"])
        env = value.get("env")
        base = env.get("base") if isinstance(env, dict) else None
        if isinstance(base, dict) and isinstance(base.get("snapshot"), str):
            snapshots.add(base["snapshot"])  # the base of an episode with no step yet
    insert_message = dst.sql.keep_existing(
        "INSERT INTO messages (hash, parent_hash, message) VALUES (?, ?, ?)"
    )
    for tip in sorted(tips):
        chain = src._conn.execute(
            "WITH RECURSIVE chain(hash, parent_hash, message, depth) AS ("
            " SELECT hash, parent_hash, message, 0 FROM messages WHERE hash = ?"
            " UNION ALL SELECT m.hash, m.parent_hash, m.message, c.depth + 1"
            " FROM messages m JOIN chain c ON m.hash = c.parent_hash)"
            " SELECT hash, parent_hash, message FROM chain ORDER BY depth DESC",
            (tip,),
        ).fetchall()
        dst._conn.executemany(insert_message, [tuple(r) for r in chain])
    for digest in sorted(tools):
        found = src._conn.execute("SELECT hash, tools FROM tools WHERE hash = ?", (digest,))
        dst._conn.executemany(
            dst.sql.keep_existing("INSERT INTO tools (hash, tools) VALUES (?, ?)"),
            [tuple(r) for r in found.fetchall()],
        )
    for snapshot in sorted(snapshots):
        _copy_snapshot(src, dst, snapshot)
    missing = dst.missing_blobs(answers)
    dst.put_blobs((digest, blobs.blob_parts(src._conn, digest)) for digest in sorted(missing))


def _copy_snapshot(src: StoreCore, dst: StoreCore, snapshot_id: str) -> None:
    rows = src._conn.execute(
        "WITH RECURSIVE chain(id, parent_id, depth, created_at, files, bytes, changes) AS ("
        " SELECT id, parent_id, depth, created_at, files, bytes, changes FROM snapshots"
        " WHERE id = ? UNION ALL SELECT s.id, s.parent_id, s.depth, s.created_at, s.files,"
        " s.bytes, s.changes FROM snapshots s JOIN chain c ON s.id = c.parent_id)"
        " SELECT id, parent_id, depth, created_at, files, bytes, changes FROM chain"
        " ORDER BY depth",
        (snapshot_id,),
    ).fetchall()
    for row in rows:  # base first: a snapshot row is written after its parent and blobs
        digests = {
            entry[2]
            for entry in json.loads(row[6]).values()
            if isinstance(entry, list) and entry and entry[0] == "f"
        }
        missing = dst.missing_blobs(digests)
        dst.put_blobs((digest, blobs.blob_parts(src._conn, digest)) for digest in sorted(missing))
        dst._conn.execute(
            dst.sql.keep_existing(
                "INSERT INTO snapshots (id, parent_id, depth, created_at, files, bytes, changes)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            tuple(row),
        )


def _check_membership(src: StoreCore, dst: StoreCore, episode_id: str) -> None:
    """Refuse an episode whose batch already has another episode for its (task, seed) in
    ``dst`` (the same batch run in two stores: a batch holds one episode per pair)."""
    for batch_id, task_id, seed in src._conn.execute(
        "SELECT batch_id, task_id, seed FROM batch_members WHERE episode_id = ?", (episode_id,)
    ).fetchall():
        row = dst._conn.execute(
            "SELECT episode_id FROM batch_members WHERE batch_id = ? AND task_id = ? AND seed = ?",
            (batch_id, task_id, seed),
        ).fetchone()
        if row is not None and row[0] != episode_id:
            raise StoreError(
                f"batch {batch_id} in {dst.where} already has episode {row[0]} for {task_id}"
                f" seed {seed} (the batch was run in both stores; a batch holds one episode per"
                f" pair); nothing of {episode_id} was copied: copy it into another store, or"
                f" remove one of the two (agentrunner rm)"
            )


def _copy_side_rows(src: StoreCore, dst: StoreCore, episode_id: str) -> None:
    """Batch membership, fork groups made at or joined by the episode, verifications and
    the import key, each row once."""
    keep = dst.sql.keep_existing
    for batch_id, config, created in src._conn.execute(
        "SELECT b.id, b.config, b.created_at FROM batches b JOIN batch_members m"
        " ON m.batch_id = b.id WHERE m.episode_id = ?",
        (episode_id,),
    ).fetchall():
        dst._conn.execute(
            keep("INSERT INTO batches (id, created_at, config) VALUES (?, ?, ?)"),
            (batch_id, created, config),
        )
    _copy_rows(src, dst, "batch_members", "batch_id, task_id, seed, episode_id", episode_id)
    groups = src._conn.execute(
        "SELECT id, parent_episode_id, fork_seq, turn, created_at, config FROM fork_groups"
        " WHERE parent_episode_id = ? OR id IN"
        " (SELECT group_id FROM fork_group_members WHERE episode_id = ?)",
        (episode_id, episode_id),
    ).fetchall()
    dst._conn.executemany(
        keep(
            "INSERT INTO fork_groups (id, parent_episode_id, fork_seq, turn, created_at, config)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        ),
        [tuple(g) for g in groups],
    )
    _copy_rows(
        src,
        dst,
        "fork_group_members",
        "group_id, episode_id, candidate, sample, action",
        episode_id,
    )
    for group in groups:  # what the decision points made at this episode decided
        if group[1] != episode_id:
            continue
        rows = src._conn.execute(
            "SELECT group_id, outcome, created_at FROM decision_outcomes WHERE group_id = ?",
            (group[0],),
        ).fetchall()
        dst._conn.executemany(
            keep("INSERT INTO decision_outcomes (group_id, outcome, created_at) VALUES (?, ?, ?)"),
            [tuple(r) for r in rows],
        )
    _copy_rows(src, dst, "imports", "source_key, episode_id", episode_id)
    have = {
        (r[0], r[1])
        for r in dst._conn.execute(
            "SELECT verifier, created_at FROM verifications WHERE episode_id = ?", (episode_id,)
        ).fetchall()
    }
    for verifier, score, passed, details, created in src._conn.execute(
        "SELECT verifier, score, passed, details, created_at FROM verifications"
        " WHERE episode_id = ? ORDER BY id",
        (episode_id,),
    ).fetchall():
        if (verifier, created) not in have:
            dst._conn.execute(
                "INSERT INTO verifications (episode_id, verifier, score, passed, details,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (episode_id, verifier, score, passed, details, created),
            )


def _copy_rows(src: StoreCore, dst: StoreCore, table: str, columns: str, episode_id: str) -> None:
    rows = src._conn.execute(
        f"SELECT {columns} FROM {table} WHERE episode_id = ?", (episode_id,)
    ).fetchall()
    marks = ", ".join("?" for _ in columns.split(","))
    dst._conn.executemany(
        dst.sql.keep_existing(f"INSERT INTO {table} ({columns}) VALUES ({marks})"),
        [tuple(r) for r in rows],
    )
