"""A crash of the Postgres server never loses an event the runner acted on.

The store's connections commit with ``synchronous_commit`` off (fast chunks), but every event
the runner acts on commits with it on. Here a run's tool leaves a mark outside the store each
time it runs (so its ``tool.call`` was acknowledged before), the last one while the run waits;
the server is then stopped as a crash would (``pg_ctl stop -m immediate``) and started again,
and every marked call must be in the store. The server flushes asynchronous commits only
every 10 s (``wal_writer_delay``), so a ``tool.call`` committed without a flush is lost.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pg
import pytest
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.values.events import EpisodeStart

HELPER = Path(__file__).with_name("crash_writer.py")
CALLS = 6
DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    server = PostgresServer(wal_writer_delay=10000)  # of this module's own: its tests crash it
    yield server
    server.stop()


def wait_for(mark: Path, writer: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not mark.exists():
        assert writer.poll() is None, f"the run ended before its last tool ran: {log.read_text()}"
        assert time.monotonic() < deadline, f"{mark.name} never appeared"
        time.sleep(0.01)


def test_every_tool_call_whose_tool_ran_survives_a_server_crash(
    server: PostgresServer, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    url = server.schema_url()
    log = tmp_path / "writer.log"
    with log.open("wb") as sink:
        writer = subprocess.Popen(
            [sys.executable, str(HELPER), url, str(marks), str(CALLS)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        wait_for(marks / str(CALLS), writer, log)
        server.halt()
    finally:
        writer.kill()
        writer.wait()
    server.start()
    ran = sorted(int(p.name) for p in marks.iterdir())
    with TraceStore(url) as store:
        (episode,) = store.list_episodes()
        calls = [e.payload for e in store.iter_events(episode.episode_id) if e.kind == "tool.call"]
    assert ran == list(range(1, CALLS + 1))
    assert [c["parsed"]["n"] for c in calls] == ran


def test_an_episode_created_just_before_a_server_crash_is_there_after_it(
    server: PostgresServer,
) -> None:
    url = server.schema_url()
    start = EpisodeStart(task_id="t", seed=0, env={}, model={}, config={}, version="0")
    store = TraceStore(url)
    episode_id = store.create_episode(
        task_id="t", seed=0, env={}, model={}, claim=True, first_event=(0, start)
    )
    server.halt()
    store.close()
    server.start()
    with TraceStore(url) as again:
        kinds = [e.kind for e in again.iter_events(episode_id)]
    assert kinds == ["episode.start"]
