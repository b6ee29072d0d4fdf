"""A batch waits out its Postgres server stopped for 20 s in its middle, and completes.

The server is stopped both ways a team meets: ``fast`` (an administrator's restart: sessions
ended, their transactions rolled back) and ``immediate`` (a crash: what was committed without
a flush is lost; the store's chunks commit so), under a batch of threads and one on a local
Ray cluster (whose workers each wait for the server on their own). Every statement outside a
transaction waits for the server with bounded back-off, a transaction cut short runs again,
and a writer writes again the unflushed chunks the crash lost. So: every (task, seed)
exactly once, completed, dense seqs, the driver's summary equal to the store, no errors, and
stderr saying the store was unreachable and then reachable again.

Also: an insert whose reply was lost but which committed stands when tried again; the patience
(``AGENTRUNNER_STORE_PATIENCE``) bounds the wait; a store never reached fails at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pg
import pytest
from cli_process import AGENTRUNNER, last_json
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.envs.workspace import TOOL_SPECS
from agentrunner.store.postgres_pool import PATIENCE_ENV
from agentrunner.store.writer import EpisodeWriter
from agentrunner.values.errors import StoreError, StoreUnreachableError, UsageError
from agentrunner.values.events import EpisodeStart, MessageEvent, ModelChunk
from agentrunner.values.types import Message

psycopg = pytest.importorskip("psycopg")

SEEDS = 16
OUTAGE_S = 20.0
DEADLINE_S = 600.0


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    """A server of this module's own (its tests stop it) that flushes asynchronous commits
    only every 10 s, so a crash surely loses the chunks since the last flushed event."""
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    server = PostgresServer(wal_writer_delay=10000)
    yield server
    server.stop()


def _ended(store_url: str) -> int:
    """How many of the store's episodes have ended (read over a connection of the test's own)."""
    try:
        with TraceStore(store_url, create=False) as store:
            return sum(e.status == "completed" for e in store.list_episodes())
    except StoreError:  # the batch has not made its tables yet
        return 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "executor"), [("fast", "threads"), ("immediate", "threads"), ("fast", "ray")]
)
def test_a_batch_waits_out_its_server_stopped_for_20_s_and_completes(
    server: PostgresServer, mode: str, executor: str
) -> None:
    if executor == "ray":
        pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentrunner[ray]')")
    url = server.schema_url()
    command = [*AGENTRUNNER, "batch", "--db", url, "--task", "demo-mean", "--json"]
    command += ["--seeds", f"0-{SEEDS - 1}", "--concurrency", "4"]
    command += ["--ray"] if executor == "ray" else []
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.01"}
    env.pop("AGENTRUNNER_DB", None)
    batch = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    output: dict[str, str] = {}
    reader = threading.Thread(
        target=lambda: output.update(zip(("out", "err"), batch.communicate(), strict=True))
    )
    reader.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while _ended(url) < 1:  # in its middle: one episode done, the rest not
            assert batch.poll() is None, "the batch ended before the server was stopped"
            assert time.monotonic() < deadline, "no episode of the batch completed"
            time.sleep(0.05)
        server.shut(mode)
        time.sleep(OUTAGE_S)  # the outage itself; nothing is timed against it
        assert batch.poll() is None, "the batch gave up while its server was stopped"
        server.start()
        reader.join(DEADLINE_S)
    finally:
        if batch.poll() is None:
            batch.kill()
        reader.join()
        if not (server.data / "postmaster.pid").exists():
            server.start()
    out, err = output["out"], output["err"]
    assert batch.returncode == 0, err[-3000:]
    if executor == "threads":  # Ray workers' stderr stays on their nodes
        assert "is unreachable" in err and "is reachable again" in err, err[-3000:]
    summary = last_json(out)["summary"]
    assert summary["errors"] == 0 and summary["completed"] == SEEDS, summary
    with TraceStore(url, create=False) as store:
        episodes = store.list_episodes()
        assert sorted(e.seed for e in episodes) == list(range(SEEDS))  # each exactly once
        assert all(e.status == "completed" for e in episodes)
        for episode in episodes:
            seqs = [e.seq for e in store.iter_events(episode.episode_id)]
            assert seqs == list(range(1, len(seqs) + 1)), episode.episode_id


def _start(store: TraceStore) -> str:
    start = EpisodeStart(task_id="t", seed=0, env={}, model={}, config={}, version="0")
    return store.create_episode(
        task_id="t", seed=0, env={}, model={}, claim=True, first_event=(0, start)
    )


def test_an_insert_that_committed_before_its_reply_was_lost_stands_when_tried_again(
    pg_url: str,
) -> None:
    with TraceStore(pg_url) as store:
        episode_id = _start(store)
        writer = store.writer(episode_id)
        writer.clock = lambda: 1_700_000_000_000_000
        hello = ModelChunk(call_id="c", channel="text", index=0, text="hello")
        seq = writer.append(1, hello)
        writer.next_seq = seq  # as if its reply never came: the same row once more
        assert writer.append(1, hello) == seq
        writer.next_seq = seq  # another row at that seq is still refused
        with pytest.raises(StoreError, match="is another run writing this episode"):
            writer.append(1, hello.model_copy(update={"text": "other"}))
        texts = [e.payload.get("text") for e in store.iter_events(episode_id)]
    assert texts == [None, "hello"]


def _three_chunks_then_a_crash(
    store: TraceStore, server: PostgresServer
) -> tuple[str, EpisodeWriter]:
    """An episode whose writer wrote three chunks, and a crash of the server: their commits
    were never flushed, so they are lost."""
    episode_id = _start(store)
    writer = store.writer(episode_id)
    for index in range(3):
        writer.append(1, ModelChunk(call_id="c", channel="text", index=index, text="x"))
    server.halt()
    server.start()
    return episode_id, writer


def test_chunks_a_crash_of_the_server_lost_are_written_again_before_the_log_goes_on(
    server: PostgresServer,
) -> None:
    url = server.schema_url()
    with TraceStore(url) as store:
        episode_id, writer = _three_chunks_then_a_crash(store, server)
        with TraceStore(url) as other:  # really gone from the server
            assert [e.kind for e in other.iter_events(episode_id)] == ["episode.start"]
        writer.append(1, ModelChunk(call_id="c", channel="text", index=3, text="y"))
        events = list(store.iter_events(episode_id))
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [e.payload.get("index") for e in events[1:]] == [0, 1, 2, 3]


def test_a_flushed_event_after_lost_chunks_waits_for_them_and_a_second_crash_keeps_all(
    server: PostgresServer,
) -> None:
    url = server.schema_url()
    with TraceStore(url) as store:
        episode_id, writer = _three_chunks_then_a_crash(store, server)
        writer.append(1, MessageEvent(role="user", message_hash="0" * 64))  # flushed
        with TraceStore(url) as other:  # no gap, not even before the next event
            assert [e.seq for e in other.iter_events(episode_id)] == [1, 2, 3, 4, 5]
        server.halt()  # what came back before the flushed event was flushed with it
        server.start()
        writer.append(1, ModelChunk(call_id="c", channel="text", index=9, text="y"))
        kinds = [e.kind for e in store.iter_events(episode_id)]
    assert kinds == ["episode.start", *["model.chunk"] * 3, "message", "model.chunk"]


def test_content_put_just_before_a_crash_is_there_for_the_event_that_names_it(
    server: PostgresServer,
) -> None:
    url = server.schema_url()
    with TraceStore(url) as store:
        episode_id = _start(store)
        writer = store.writer(episode_id)
        digest = store.put_message(None, Message(role="user", content="hi"))
        tools = store.put_tools(TOOL_SPECS)
        server.halt()  # between the puts and the event naming them
        server.start()
        writer.append(1, MessageEvent(role="user", message_hash=digest))
        assert store.message(digest).content == "hi"
        assert store.tools(tools)


def test_a_statement_waits_for_its_server_no_longer_than_the_patience(
    server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "1")
    url = server.schema_url()
    with TraceStore(url) as store:
        _start(store)
        server.shut("fast")
        try:
            with pytest.raises(StoreUnreachableError, match=PATIENCE_ENV):
                store.list_episodes()
            assert store.unreachable() is not None  # what a live view shows meanwhile
        finally:
            server.start()
        assert len(store.list_episodes()) == 1  # and on again once it is back
        assert store.unreachable() is None


def test_a_store_never_reached_fails_at_once_whatever_the_patience(
    server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "3600")
    url = f"postgresql://postgres@/postgres?host={server.root / 'nowhere'}"
    with pytest.raises(StoreError, match="cannot connect to the trace store") as caught:
        TraceStore(url)
    assert not isinstance(caught.value, StoreUnreachableError)


def test_a_bad_patience_is_named(monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "soon")
    with pytest.raises(UsageError, match=f"{PATIENCE_ENV} must be a number of seconds"):
        TraceStore(pg_url)


def test_a_listener_hears_notices_again_once_its_server_is_back(server: PostgresServer) -> None:
    url = server.schema_url()
    told: list[int] = []
    with TraceStore(url) as store:
        listener = store.listen(lambda: told.append(len(told)))
        assert listener is not None
        try:
            _until(lambda: listener.listens == 1)
            store.create_episode(task_id="t", seed=0, env={}, model={})
            _until(lambda: len(told) == 1)
            server.shut("fast")
            server.start()
            _until(lambda: listener.listens == 2 and len(told) == 2)  # and a look to catch up
            store.create_episode(task_id="t", seed=1, env={}, model={})
            _until(lambda: len(told) == 3)  # heard on the new connection
        finally:
            listener.close()


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_ctrl_c_while_a_run_waits_for_its_server_stops_the_wait(server: PostgresServer) -> None:
    url = server.schema_url()
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.05", PATIENCE_ENV: "3600"}
    env.pop("AGENTRUNNER_DB", None)
    run = subprocess.Popen(
        [*AGENTRUNNER, "run", "--db", url], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stderr is not None
    try:
        _until(lambda: _ended(url) == 0 and _events(url) > 20)  # streaming now
        server.shut("fast")
        said = run.stderr.readline()
        while "is unreachable" not in said:  # it waits for the server now
            assert said, "the run ended without waiting for its server"
            said = run.stderr.readline()
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)  # not the hour of its patience
    finally:
        if run.poll() is None:
            run.kill()
        server.start()
    assert run.returncode != 0 and "Traceback" not in err
    assert "stopped waiting for it (interrupted)" in err


def _events(url: str) -> int:
    try:
        with TraceStore(url, create=False) as store:
            return sum(e.last_seq for e in store.list_episodes())
    except StoreError:
        return 0
