"""Every command against a Postgres store (a real server the tests start): run, ls, show,
show --follow of a run in another process, resume, fork, replay, fanout, batch, verify,
export, rm; ``AGENTRUNNER_DB`` as a URL; credentials never printed nor stored."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pg
import pytest
from cli_process import AGENTRUNNER, run_cli
from pg import PostgresServer

from agentrunner import TraceStore


def _json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture
def ran(pg_url: str) -> tuple[str, str]:
    """The store's URL and an episode run into it."""
    episode = _json(run_cli("run", "--db", pg_url, "--json"))
    return pg_url, episode["episode_id"]


def test_a_run_into_postgres_is_listed_shown_verified_and_exported(
    ran: tuple[str, str], tmp_path: Path
) -> None:
    url, ep = ran
    (listed,) = _json(run_cli("ls", "--db", url, "--json"))
    assert (listed["episode_id"], listed["status"]) == (ep, "completed")
    shown = _json(run_cli("show", ep[:8], "--events", "--db", url, "--json"))
    assert [e["seq"] for e in shown["events"]] == list(range(1, shown["last_seq"] + 1))
    verdict = _json(run_cli("verify", ep, "--rule", "reward>=1", "--db", url, "--json"))
    assert json.dumps(verdict).count('"passed": true') or "true" in json.dumps(verdict)
    out = tmp_path / "sft.jsonl"
    assert run_cli("export", "--format", "sft", "-o", str(out), "--db", url).returncode == 0
    assert len(out.read_text().splitlines()) == 1


def test_fork_replay_and_fanout_work_on_postgres(ran: tuple[str, str]) -> None:
    url, ep = ran
    forked = run_cli("fork", ep, "--turn", "3", "--run", "--db", url)
    assert forked.returncode == 0, forked.stderr
    replay = run_cli("replay", ep, "--db", url)
    assert replay.returncode == 0 and "all steps match" in replay.stdout
    fan = run_cli("fanout", ep, "--turn", "2", "-k", "2", "-n", "2", "--db", url, "--json")
    assert fan.returncode == 0, fan.stderr
    with TraceStore(url) as store:
        assert len(store.children(ep)) >= 1 + 2 * 2


def test_a_batch_into_postgres_runs_each_pair_once_and_again_resumes_nothing(
    pg_url: str,
) -> None:
    args = ("batch", "--task", "demo-mean", "--seeds", "0-3", "--db", pg_url, "--json")
    first = _json(run_cli(*args))
    again = _json(run_cli(*args))
    assert first["batch_id"] == again["batch_id"]
    with TraceStore(pg_url) as store:
        assert store.count_episodes() == 4
        assert {e.status for e in store.list_episodes()} == {"completed"}


def test_a_run_killed_mid_episode_resumes_from_postgres(pg_url: str) -> None:
    runner = subprocess.Popen(
        [*AGENTRUNNER, "run", "--db", pg_url],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.01"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with TraceStore(pg_url) as store:
        while not store.list_episodes() or store.list_episodes()[0].last_seq < 40:
            assert runner.poll() is None, "the run ended before it was killed"
            time.sleep(0.02)
        runner.kill()
        runner.wait()
        (episode,) = store.list_episodes()
        assert episode.status == "interrupted"
    resumed = run_cli("resume", episode.episode_id, "--db", pg_url)
    assert resumed.returncode == 0, resumed.stderr
    with TraceStore(pg_url) as store:
        assert store.episode(episode.episode_id).status == "completed"
        assert any(e.kind == "resume" for e in store.iter_events(episode.episode_id))


def test_show_follow_tails_a_run_written_by_another_process(pg_url: str) -> None:
    runner = subprocess.Popen(
        [*AGENTRUNNER, "run", "--db", pg_url],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.01"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with TraceStore(pg_url) as store:
            while not store.list_episodes():
                assert runner.poll() is None, "the run ended before it made its episode"
                time.sleep(0.05)
            ep = store.list_episodes()[0].episode_id
        follow = run_cli("show", ep, "--follow", "--json", "--db", pg_url)
    finally:
        runner.wait(timeout=120)
    assert _json(follow)["status"] == "completed"
    assert "end: done" in follow.stderr


def test_the_store_url_comes_from_agentrunner_db_and_its_password_is_never_shown(
    pg_server: Any, tmp_path: Path
) -> None:
    url = pg_server.schema_url().replace("postgres@", "postgres:s3cret-pw@", 1)
    env = {"AGENTRUNNER_DB": url}
    run = run_cli("run", "--json", env=env)
    listed = run_cli("ls", "--json", env=env)
    missing = run_cli("show", "NOSUCH", env=env)
    for proc in (run, listed, missing):
        assert "s3cret-pw" not in proc.stdout + proc.stderr
    assert missing.returncode == 2 and "postgresql://postgres@" in missing.stderr
    with TraceStore(url) as store:
        dump = store.raw_connection().execute(
            "SELECT string_agg(payload, '') FROM event_log"
        ).fetchone()[0] + json.dumps([e.env for e in store.list_episodes()])
    assert "s3cret-pw" not in dump


def test_a_password_given_in_db_is_warned_of_once_and_never_shown(pg_server: Any) -> None:
    url = pg_server.schema_url().replace("postgres@", "postgres:s3cret-pw@", 1)
    assert run_cli("run", env={"AGENTRUNNER_DB": url}).returncode == 0
    given = run_cli("ls", "--db", url)
    from_env = run_cli("ls", env={"AGENTRUNNER_DB": url})
    assert given.returncode == 0 and from_env.returncode == 0
    warning = "the password in --db is visible to every user of this machine"
    assert given.stderr.count(warning) == 1 and "$AGENTRUNNER_DB" in given.stderr
    assert warning not in from_env.stderr  # the environment is not on the command line
    assert "s3cret-pw" not in given.stdout + given.stderr


def test_a_dead_database_is_one_clear_line() -> None:
    proc = run_cli(
        "ls", "--db", "postgresql://nobody@/nodb?host=/nonexistent-dir&connect_timeout=2"
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "cannot connect to the trace store postgresql://nobody@" in proc.stderr


def test_a_database_dead_past_the_patience_ends_the_run_in_one_line_and_it_resumes() -> None:
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer()  # its own server: this test stops it
    try:
        url = server.url()
        runner = subprocess.Popen(
            [*AGENTRUNNER, "run", "--db", url],
            env={
                **os.environ,
                "AGENTRUNNER_SCRIPTED_PACE": "0.01",
                "AGENTRUNNER_STORE_PATIENCE": "2",  # waited out until then
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        with TraceStore(url) as store:
            while not store.list_episodes() or store.list_episodes()[0].last_seq < 30:
                assert runner.poll() is None, "the run ended before the server stopped"
                time.sleep(0.02)
            episode_id = store.list_episodes()[0].episode_id
        server.halt()
        _, stderr = runner.communicate(timeout=120)
        assert runner.returncode == 1, stderr
        assert "Traceback" not in stderr and "error:" in stderr
        assert "AGENTRUNNER_STORE_PATIENCE allows 2 s" in stderr, stderr
        server.start()
        resumed = run_cli("resume", episode_id, "--db", url)
        assert resumed.returncode == 0, resumed.stderr
        with TraceStore(url) as store:
            assert store.episode(episode_id).status == "completed"
    finally:
        server.stop()


def test_without_psycopg_a_postgres_url_gets_the_install_hint() -> None:
    blocked = (
        "import sys; sys.modules['psycopg'] = None; from agentrunner.cli.main import main;"
        " sys.exit(main(['ls', '--db', 'postgresql://someone@db.example/traces']))"
    )
    proc = subprocess.run(
        [AGENTRUNNER[0], "-c", blocked], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "pip install 'agentrunner[postgres]'" in proc.stderr
