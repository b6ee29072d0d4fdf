"""What only the Postgres store has to get right: server connections, roles, the URL."""

from __future__ import annotations

import time
import uuid

import pg
import pytest
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.runtime.liveness import Heartbeat
from agentrunner.values.errors import StoreError, StoreFailedError

psycopg = pytest.importorskip("psycopg")


def test_heartbeats_of_episodes_run_one_after_another_do_not_pile_up_connections(
    pg_url: str,
) -> None:
    store = TraceStore(pg_url)
    for seed in range(5):  # a heartbeat thread per episode, as in `resume --all` or a batch
        ep = store.create_episode(task_id="t", seed=seed, env={}, model={}, claim=True)
        beats: list[int] = []

        def counted(beats: list[int] = beats) -> None:
            beats.append(1)  # called as the heartbeat thread beats

        with Heartbeat(
            store,
            ep,
            None,
            interrupt_main=False,
            interval_s=0.01,
            checkpoint=counted,  # type: ignore[arg-type]
        ):
            while len(beats) < 3:  # it has beaten (through its own connection) at least twice
                time.sleep(0.01)
        store.release_writer(ep)
    assert store.open_connections() == 1  # this thread's; each heartbeat closed its own
    store.close()


def test_a_role_that_may_only_read_opens_an_up_to_date_store(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        ep = store.create_episode(task_id="t", seed=0, env={}, model={})
        schema = store.raw_connection().execute("SELECT current_schema()").fetchone()[0]
    role = f"viewer_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(pg_url, autocommit=True)
    admin.execute(f"CREATE ROLE {role} LOGIN")
    admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    admin.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}")
    viewer_url = pg_url.replace("postgres@", f"{role}@", 1)
    with TraceStore(viewer_url, create=False) as store:
        assert [e.episode_id for e in store.list_episodes()] == [ep]
        with pytest.raises(StoreFailedError, match="permission denied"):
            store.create_episode(task_id="t", seed=1, env={}, model={})
    admin.close()


def test_a_database_without_a_store_is_not_made_one_by_a_reader(pg_url: str) -> None:
    with pytest.raises(StoreError, match="no trace store in postgresql://"):
        TraceStore(pg_url, create=False)


def test_a_literal_percent_reads_as_one_with_or_without_parameters(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        conn = store.raw_connection()
        assert conn.execute("SELECT 7 % 3").fetchone()[0] == 1
        assert conn.execute("SELECT ? || '%'", ("50",)).fetchone()[0] == "50%"


def test_two_schemas_of_one_database_are_two_stores(pg_server: object) -> None:
    first, second = pg_server.schema_url(), pg_server.schema_url()  # type: ignore[attr-defined]
    with TraceStore(first) as a, TraceStore(second) as b:
        assert a.identity != b.identity
        assert a.identity == TraceStore(first).identity


def test_a_writer_whose_heartbeat_cannot_reach_the_database_past_its_patience_is_told_to_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if pg.why_not() is not None:
        pytest.skip(str(pg.why_not()))
    monkeypatch.setenv("AGENTRUNNER_STORE_PATIENCE", "0.5")  # waited out until then
    server = PostgresServer()  # its own: this test stops it
    try:
        store = TraceStore(server.url())
        ep = store.create_episode(task_id="t", seed=0, env={}, model={}, claim=True)
        lost: list[str] = []
        with Heartbeat(
            store,
            ep,
            None,
            interrupt_main=False,
            interval_s=0.01,
            lost_after_s=0.05,
            on_store_lost=lost.append,
        ):
            server.halt()
            while not lost:
                time.sleep(0.01)
        assert "the trace store postgresql://" in lost[0]
        assert "has been unreachable for" in lost[0]
        assert "stops here (resume it later)" in lost[0]
        store.close()
    finally:
        server.stop()
