"""The trace store on a real SQLite file: schema, append-only log, messages, status."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from rawstore import insert_event

from agentrunner import TraceStore
from agentrunner.runtime.recorder import Recorder
from agentrunner.store.schema import KNOWN_MIGRATIONS
from agentrunner.values.errors import (
    EpisodeNotFoundError,
    StoreCorruptError,
    StoreError,
    StoreSchemaError,
)
from agentrunner.values.events import ModelChunk
from agentrunner.values.formatting import unique_prefixes
from agentrunner.values.types import Chunk, Message


def _episode(store: TraceStore) -> str:
    return store.create_episode(task_id="t", seed=1, env={"kind": "x"}, model={"spec": "s:m"})


def _chunk(i: int) -> ModelChunk:
    return ModelChunk(call_id="c", channel="text", index=i, text=f"piece {i}")


def test_store_uses_wal_and_normal_synchronous(store: TraceStore) -> None:
    assert store.raw_connection().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.raw_connection().execute("PRAGMA synchronous").fetchone()[0] == 1


def test_store_synchronous_full_by_option(db_path: Path) -> None:
    with TraceStore(db_path, synchronous="FULL") as s:
        assert s.raw_connection().execute("PRAGMA synchronous").fetchone()[0] == 2


def test_appended_events_get_dense_seqs(store: TraceStore) -> None:
    ep = _episode(store)
    writer = store.writer(ep)
    seqs = [writer.append(1, _chunk(i)) for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    assert [e.seq for e in store.events(ep)] == [1, 2, 3, 4, 5]


def test_a_second_writer_continues_after_the_last_seq(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(0))
    assert store.writer(ep).append(0, _chunk(1)) == 2


def test_update_on_events_is_refused_by_the_schema(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(0))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.raw_connection().execute(
            "UPDATE events SET payload = '{}' WHERE episode_id = ?", (ep,)
        )


def test_delete_on_events_is_refused_by_the_schema(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(0))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        store.raw_connection().execute("DELETE FROM events WHERE episode_id = ?", (ep,))


def test_duplicate_seq_is_refused(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(0))
    writer = store.writer(ep)
    writer.next_seq = 1
    with pytest.raises(StoreError, match="UNIQUE constraint failed"):
        writer.append(0, _chunk(1))


def test_payload_is_plain_json_text_without_kind(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(3, _chunk(7))
    row = (
        store.raw_connection()
        .execute("SELECT kind, turn, typeof(payload), payload FROM events")
        .fetchone()
    )
    assert row[:3] == ("model.chunk", 3, "text")
    assert '"text":"piece 7"' in row[3] and '"kind"' not in row[3]


def test_typed_event_round_trips(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(4))
    assert store.events(ep)[0].typed() == _chunk(4)


def test_identical_messages_in_one_chain_position_are_stored_once(store: TraceStore) -> None:
    m = Message(role="user", content="hello")
    assert store.put_message(None, m) == store.put_message(None, m)
    assert store.raw_connection().execute("SELECT count(*) FROM messages").fetchone()[0] == 1


def test_same_message_under_another_parent_is_a_new_node(store: TraceStore) -> None:
    root = store.put_message(None, Message(role="system", content="s"))
    m = Message(role="user", content="hello")
    assert store.put_message(root, m) != store.put_message(None, m)


def test_message_chain_rebuilds_the_conversation_in_order(store: TraceStore) -> None:
    tip = None
    msgs = [Message(role="user", content=f"m{i}") for i in range(30)]
    for m in msgs:
        tip = store.put_message(tip, m)
    assert store.message_chain(tip) == msgs


def test_events_are_paged_by_seq(store: TraceStore) -> None:
    ep = _episode(store)
    writer = store.writer(ep)
    for i in range(25):
        writer.append(0, _chunk(i))
    page = store.events(ep, after_seq=10, limit=5)
    assert [e.seq for e in page] == [11, 12, 13, 14, 15]


def test_events_can_be_filtered_by_kind(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(0))
    assert store.events(ep, kinds=["tool.call"]) == []


def test_fork_history_reads_as_one_dense_sequence(store: TraceStore) -> None:
    parent = _episode(store)
    writer = store.writer(parent)
    for i in range(6):
        writer.append(0, _chunk(i))
    fork = store.create_episode(
        task_id="t", seed=1, env={}, model={}, parent_episode_id=parent, fork_seq=3
    )
    store.writer(fork).append(0, _chunk(99))
    rows = store.events(fork)
    assert [(r.episode_id, r.seq) for r in rows] == [
        (parent, 1),
        (parent, 2),
        (parent, 3),
        (fork, 4),
    ]


def test_episode_resolves_a_unique_prefix(store: TraceStore) -> None:
    ep = _episode(store)
    assert store.episode(ep[:12].lower()).episode_id == ep


def test_unknown_episode_is_a_clear_error(store: TraceStore) -> None:
    with pytest.raises(EpisodeNotFoundError, match="no episode 'NOPE'"):
        store.episode("NOPE")


def test_episode_without_end_and_dead_writer_is_interrupted(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(1))  # started: without an event of its own, pending
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentrunner import TraceStore\n"
            f"TraceStore({str(store.path)!r}).claim_writer({ep!r})",
        ],
        check=True,
    )
    assert child.returncode == 0
    assert store.episode(ep).status == "interrupted"


def test_episode_with_live_writer_is_running(store: TraceStore) -> None:
    ep = _episode(store)
    store.claim_writer(ep)
    assert store.episode(ep).status == "running"


def test_claim_is_refused_while_another_live_process_writes(store: TraceStore) -> None:
    ep = _episode(store)
    sleeper = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom agentrunner import TraceStore\n"
            f"TraceStore({str(store.path)!r}).claim_writer({ep!r})\n"
            "print('ok', flush=True)\ntime.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "ok"
        assert store.claim_writer(ep) is False
    finally:
        sleeper.kill()
        sleeper.wait()
    assert store.claim_writer(ep) is True


def test_cancel_request_is_seen_by_the_writer_heartbeat(store: TraceStore) -> None:
    ep = _episode(store)
    store.claim_writer(ep)
    store.request_cancel(ep, "stop please")
    assert store.heartbeat(ep) == "stop please"


def test_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "t.db"
    bad.write_text("this is not a database at all, definitely not")
    with pytest.raises(StoreCorruptError, match="not a SQLite database"):
        TraceStore(bad)


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(StoreError, match="not an agentrunner trace store"):
        TraceStore(other)


def test_store_from_a_newer_schema_is_refused(db_path: Path) -> None:
    TraceStore(db_path).close()
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('agentrunner', 'm999_from_the_future', 'now')"
        )
    with pytest.raises(StoreSchemaError, match="newer agentrunner"):
        TraceStore(db_path)


def test_reopening_a_store_applies_no_migration_twice(db_path: Path) -> None:
    TraceStore(db_path).close()
    TraceStore(db_path).close()
    with sqlite3.connect(db_path) as conn:
        applied = conn.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()[0]
    assert applied == len(KNOWN_MIGRATIONS)


def test_store_folder_is_created_when_missing(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "t.db"
    TraceStore(path).close()
    assert path.exists()


def test_default_path_honours_agentrunner_db(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTRUNNER_DB", str(tmp_path / "env.db"))
    with TraceStore() as s:
        assert s.path == tmp_path / "env.db"


def test_store_is_readable_by_plain_sqlite3(store: TraceStore) -> None:
    ep = _episode(store)
    store.writer(ep).append(0, _chunk(1))
    with sqlite3.connect(store.path) as conn:
        text = conn.execute("SELECT json_extract(payload, '$.text') FROM events").fetchone()[0]
    assert text == "piece 1"


def test_pid_of_this_process_counts_as_a_live_writer(store: TraceStore) -> None:
    ep = _episode(store)
    store.claim_writer(ep)
    assert store.episode(ep).writer_pid == os.getpid()


def test_a_payload_that_is_not_json_is_reported_as_corruption(store: TraceStore) -> None:
    ep = _episode(store)
    store.raw_connection().execute("PRAGMA ignore_check_constraints = ON")  # as in an older store
    insert_event(store.raw_connection(), ep, 1, "message", "{not json")
    with pytest.raises(StoreCorruptError, match="not JSON"):
        _ = store.events(ep)[0].payload


def test_unique_prefixes_are_at_least_8_characters_and_tell_same_millisecond_ids_apart() -> None:
    same_ms = ["01JAAA00000000000000000001", "01JAAA00000000000000000002"]
    prefixes = unique_prefixes([*same_ms, "01JBBB00000000000000000000"])
    assert prefixes["01JBBB00000000000000000000"] == "01JBBB00"
    assert prefixes[same_ms[0]] == same_ms[0] and prefixes[same_ms[1]] == same_ms[1]
    assert len(set(prefixes.values())) == 3


@pytest.mark.parametrize("text", ["plain", "ünïcode ✓", "with \ud800 a lone surrogate"])
def test_the_chunk_hot_path_writes_exactly_what_the_typed_event_would(
    store: TraceStore, text: str
) -> None:
    ep = _episode(store)
    rec = Recorder(store, store.writer(ep), secrets={})
    rec.chunk("call-1-1", Chunk(channel="tool_args", text=text, tool_call_id="t1"))
    (row,) = store.events(ep)
    clean = text.replace("\ud800", "\ufffd")
    extra = {"replaced_chars": 1} if clean != text else {}
    expected = ModelChunk(
        call_id="call-1-1", channel="tool_args", index=0, text=clean, tool_call_id="t1", **extra
    )
    assert row.payload_json == expected.model_dump_json(exclude={"kind"})
    assert row.typed() == expected


def test_opening_a_store_again_keeps_the_locks_this_process_holds(tmp_path: Path) -> None:
    """Closing any descriptor of a file drops every POSIX lock this process holds on it, so
    opening a second store on the file must not open the file itself: another process could
    then take the database from under the first connection (here: switch it out of WAL)."""
    db = tmp_path / "t.db"
    with TraceStore(db) as first:
        first.episode_ids()  # a live connection: it holds its shared lock on the file
        with TraceStore(db) as second:
            second.episode_ids()
            other = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], timeout=0);"
                    " print(c.execute('PRAGMA journal_mode=DELETE').fetchone()[0])",
                    str(db),
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert "delete" not in other.stdout.lower(), other
