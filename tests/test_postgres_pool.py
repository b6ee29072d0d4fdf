"""A process's Postgres connections are a small pool its threads share: a batch of many
concurrent episodes runs on a server whose ``max_connections`` is below two per episode (a run
and its heartbeat each held one before), and the process never holds more than the pool."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator

import pg
import pytest
from cli_process import AGENTRUNNER, last_json
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.store.postgres_pool import POOL_SIZE
from agentrunner.values.errors import StoreUnreachableError

psycopg = pytest.importorskip("psycopg")

MAX_CONNECTIONS = 20
CONCURRENCY = 32


@pytest.fixture(scope="module")
def small_server() -> Iterator[PostgresServer]:
    """A server that takes 20 connections (the default takes 100), its own for this module."""
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    server = PostgresServer(max_connections=MAX_CONNECTIONS, superuser_reserved_connections=0)
    yield server
    server.stop()


def _agentrunner_sessions(conn: object) -> int:
    row = conn.execute(  # type: ignore[attr-defined]
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agentrunner'"
    ).fetchone()
    return int(row[0])


def test_a_batch_of_32_concurrent_episodes_runs_on_a_server_of_20_connections(
    small_server: PostgresServer,
) -> None:
    url = small_server.schema_url()
    command = [*AGENTRUNNER, "batch", "--db", url, "--task", "demo-mean", "--json"]
    command += ["--seeds", f"0-{CONCURRENCY - 1}", "--concurrency", str(CONCURRENCY)]
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.002"}
    env.pop("AGENTRUNNER_DB", None)
    watching = psycopg.connect(small_server.url(), autocommit=True)  # before the batch's
    batch = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    held: list[int] = []
    done = threading.Event()

    def watch() -> None:  # the sessions the batch's process holds, as often as we can look
        while not done.is_set():
            held.append(_agentrunner_sessions(watching))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out, err = batch.communicate(timeout=900)
    finally:
        done.set()
        watcher.join()
        watching.close()
    assert batch.returncode == 0, err[-3000:]
    summary = last_json(out)["summary"]
    assert summary["completed"] == CONCURRENCY and summary["errors"] == 0
    assert held and max(held) <= POOL_SIZE
    with TraceStore(url) as store:
        episodes = store.list_episodes()
    assert len(episodes) == CONCURRENCY
    assert all(e.status == "completed" for e in episodes)


def test_threads_share_the_pool_and_a_transaction_keeps_its_connection(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        start = threading.Barrier(POOL_SIZE * 2)

        def beat(seed: int) -> str:
            ep = store.create_episode(task_id="t", seed=seed, env={}, model={}, claim=True)
            start.wait()
            for _ in range(20):
                store.heartbeat(ep)
            store.release_writer(ep)
            return ep

        threads = [threading.Thread(target=beat, args=(seed,)) for seed in range(POOL_SIZE * 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert store.open_connections() <= POOL_SIZE
        assert len(store.list_episodes()) == POOL_SIZE * 2
        with store.atomic():  # every statement of one transaction on one server session
            conn = store.raw_connection()
            pids = {conn.execute("SELECT pg_backend_pid()").fetchone()[0] for _ in range(5)}
            seen = threading.Thread(target=lambda: store.list_episodes())
            seen.start()
            seen.join()
            pids.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert len(pids) == 1


def test_a_transaction_a_thread_left_open_is_not_lent_to_another(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        conn = store.raw_connection()

        def leave_open() -> None:
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM episodes")
            assert conn.in_transaction
            store.done_in_this_thread()  # a thread that ends: its transaction rolled back

        thread = threading.Thread(target=leave_open)
        thread.start()
        thread.join()
        conn.execute("SELECT 1")
        assert not conn.in_transaction  # the statement ran outside any transaction
        assert store.open_connections() == 1


def test_a_connection_the_server_dropped_is_replaced_and_the_statement_runs_on_the_new_one(
    pg_url: str,
) -> None:
    with TraceStore(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as admin:
        conn = store.raw_connection()
        (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))  # gone on return
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
        assert store.open_connections() == 1


def test_a_transaction_whose_connection_the_server_dropped_fails_to_its_caller(
    pg_url: str,
) -> None:
    with TraceStore(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as admin:
        conn = store.raw_connection()
        conn.execute("BEGIN")
        (pid,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        with pytest.raises(StoreUnreachableError):  # its statements are gone with it
            conn.execute("SELECT 1")
        assert not conn.in_transaction
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid
