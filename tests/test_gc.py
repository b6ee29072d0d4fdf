"""``agentrunner gc``: content no episode references is deleted and the file shrinks; shared
content stays; a store another process has open is left alone until it is done; a dry run
changes no byte. Real runs (the scripted model on a git repository made here with a big
committed file) on a real SQLite file, and on a real Postgres server for the deletion."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_process import AGENTRUNNER, last_json, run_cli
from pg import PostgresServer
from thirdparty_repo import git

from agentrunner import TraceStore
from agentrunner.envs.manifest import FileEntry, load_manifest
from agentrunner.values.events import Error

BIG = 3 << 20
PROMPT = "fix a.py"


def make_repo(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / "big.bin").write_bytes(os.urandom(BIG))
    (dest / "a.py").write_text("print(1)\n", encoding="utf-8")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "a big committed file")
    return dest


def script(path: Path, command: str) -> Path:
    turns = [
        {"text": "editing", "tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    path.write_text(json.dumps({"name": "t", "episodes": [{"match": "fix", "turns": turns}]}))
    return path


def run_args(repo: Path, db: str, model: Path) -> list[str]:
    return [
        "run",
        "--repo",
        str(repo),
        "--prompt",
        PROMPT,
        "--model",
        f"scripted:{model}",
        "--sandbox",
        "process",
        "--db",
        db,
        "--json",
    ]


def run(repo: Path, db: str, model: Path) -> str:
    proc = run_cli(*run_args(repo, db, model))
    assert proc.returncode == 0, proc.stderr
    return str(last_json(proc.stdout)["episode_id"])


def cli_ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


def size(db: Path) -> int:
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def everything_readable(location: str, episode_id: str) -> None:
    """Every snapshot the episode names restores: its chain and each file's bytes."""
    with TraceStore(location) as store:
        snapshots = [
            row.payload["snapshot"]
            for row in store.iter_events(episode_id, kinds=["tool.result"])
            if row.payload.get("snapshot")
        ]
        start = store.events(episode_id, kinds=["episode.start"], limit=1)[0]
        snapshots.append(start.payload["env"]["base"]["snapshot"])
        for snapshot in snapshots:
            manifest, _ = load_manifest(store, snapshot)
            for entry in manifest.values():
                if isinstance(entry, FileEntry):
                    assert len(store.read_blob(entry.sha256)) == entry.size


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def edit(tmp_path: Path) -> Path:
    return script(tmp_path / "edit.json", "echo 'print(2)' > a.py")


def test_gc_after_rm_shrinks_the_file_by_at_least_the_big_files_size(
    repo: Path, edit: Path, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    episode = run(repo, str(db), edit)
    cli_ok("rm", episode, "--db", str(db))
    before = size(db)
    assert before > BIG
    report = last_json(cli_ok("gc", "--db", str(db), "--json").stdout)
    assert report["freed"]["blobs"]["bytes"] >= BIG
    assert report["size_before"] - report["size_after"] >= BIG
    assert before - size(db) >= BIG


def test_gc_keeps_what_a_remaining_episode_shares_and_it_still_diffs_and_exports(
    repo: Path, edit: Path, tmp_path: Path
) -> None:
    db = tmp_path / "t.db"
    gone = run(repo, str(db), script(tmp_path / "junk.json", "head -c 500000 /dev/urandom > j"))
    kept = run(repo, str(db), edit)
    cli_ok("rm", gone, "--db", str(db))
    report = last_json(cli_ok("gc", "--db", str(db), "--json").stdout)
    assert 500000 <= report["freed"]["blobs"]["bytes"] < BIG  # the junk only, not big.bin
    assert size(db) > BIG
    everything_readable(str(db), kept)
    assert "+print(2)" in cli_ok("diff", kept, "--db", str(db)).stdout
    out = tmp_path / "sft.jsonl"
    cli_ok("export", "--format", "sft", kept, "--db", str(db), "-o", str(out))
    assert "print(2)" in out.read_text()


def test_a_dry_run_changes_no_byte_of_the_store(repo: Path, edit: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    cli_ok("rm", run(repo, str(db), edit), "--db", str(db))
    before = db.read_bytes()
    report = last_json(cli_ok("gc", "--dry-run", "--db", str(db), "--json").stdout)
    assert report["dry_run"] is True
    assert report["would_free"]["blobs"]["bytes"] >= BIG
    assert report["parts"]["blobs"]["bytes"] >= BIG
    assert db.read_bytes() == before
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0


def _poll(what: str, check: Callable[[], bool], patience: float = 120.0) -> None:
    deadline = time.monotonic() + patience
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_gc_while_another_process_writes_an_episode_loses_nothing_of_it(
    repo: Path, tmp_path: Path
) -> None:
    """The writer runs on the repository of a removed episode, so it reuses that episode's
    blobs (unreferenced until its own events land): gc deletes nothing while the writer has
    the store open, and with --wait collects only what the writer does not use."""
    db = tmp_path / "t.db"
    gone = run(repo, str(db), script(tmp_path / "junk.json", "head -c 500000 /dev/urandom > j"))
    cli_ok("rm", gone, "--db", str(db))
    go = tmp_path / "go"
    held = script(
        tmp_path / "held.json", f"while [ ! -e {go} ]; do sleep 0.05; done; echo x > a.py"
    )
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"}
    env.pop("AGENTRUNNER_DB", None)
    writer = subprocess.Popen(
        [*AGENTRUNNER, *run_args(repo, str(db), held)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waiter: subprocess.Popen[str] | None = None
    try:

        def writing() -> bool:
            with TraceStore(db) as store:
                return any(e.status == "running" for e in store.list_episodes())

        _poll("the writer's episode to run", writing)
        refused = run_cli("gc", "--db", str(db))
        assert refused.returncode == 1
        assert "other process" in refused.stderr and str(writer.pid) in refused.stderr
        waiter = subprocess.Popen(
            [*AGENTRUNNER, "gc", "--wait", "--json", "--db", str(db)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = waiter.stderr
        assert said is not None
        _poll("gc to wait", lambda: "waiting" in said.readline())
        go.touch()
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        done, err = waiter.communicate(timeout=300)
        assert waiter.returncode == 0, err
    finally:
        for proc in (writer, waiter):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    episode = last_json(out)["episode_id"]
    assert 500000 <= last_json(done)["freed"]["blobs"]["bytes"] < BIG
    everything_readable(str(db), episode)
    assert "+x" in cli_ok("diff", episode, "--db", str(db)).stdout


WRITER = """
import sys, time
from pathlib import Path
from agentrunner import TraceStore
from agentrunner.envs.snapshotter import Snapshotter
db, folder, go = sys.argv[1:]
with TraceStore(db) as store:
    snapshot = Snapshotter(Path(folder), store).save()  # finds the removed run's blob there
    print(snapshot, flush=True)
    while not Path(go).exists():
        time.sleep(0.05)
    store.create_episode(task_id="t", seed=0, env={"base": {"snapshot": snapshot}}, model={})
"""


def test_a_writer_that_found_unreferenced_content_before_gc_and_names_it_after_keeps_it(
    repo: Path, edit: Path, tmp_path: Path
) -> None:
    """How a run starts on the repository of a removed episode: its base snapshot reuses
    the blobs already there (unreferenced), and its episode names them only later."""
    db = tmp_path / "t.db"
    cli_ok("rm", run(repo, str(db), edit), "--db", str(db))
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "big.bin").write_bytes((repo / "big.bin").read_bytes())
    go = tmp_path / "go"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(folder), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        snapshot = writer.stdout.readline().strip()
        assert snapshot, writer.stderr.read() if writer.stderr else ""
        refused = run_cli("gc", "--db", str(db))
        go.touch()
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert refused.returncode == 1, refused.stdout
    last_json(cli_ok("gc", "--db", str(db), "--json").stdout)
    with TraceStore(db) as store:
        manifest, _ = load_manifest(store, snapshot)
        entry = manifest["big.bin"]
        assert isinstance(entry, FileEntry)
        assert store.read_blob(entry.sha256) == (repo / "big.bin").read_bytes()


@pytest.fixture
def pg_url(pg_server: PostgresServer) -> str:
    """A store in a database of its own: gc needs no other session connected to it (other
    tests' stores live in other schemas of the server's main database)."""
    import psycopg

    name = f"gc_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def test_gc_on_postgres_deletes_only_the_content_no_episode_references(
    repo: Path, edit: Path, tmp_path: Path, pg_url: str
) -> None:
    gone = run(repo, pg_url, script(tmp_path / "junk.json", "head -c 500000 /dev/urandom > j"))
    kept = run(repo, pg_url, edit)
    cli_ok("rm", gone, "--db", pg_url)
    dry = last_json(cli_ok("gc", "--dry-run", "--db", pg_url, "--json").stdout)
    report = last_json(cli_ok("gc", "--db", pg_url, "--json").stdout)
    assert report["freed"] == dry["would_free"]
    assert 500000 <= report["freed"]["blobs"]["bytes"] < BIG
    assert report["freed"]["snapshots"]["rows"] >= 1
    again = last_json(cli_ok("gc", "--dry-run", "--db", pg_url, "--json").stdout)
    assert all(part["rows"] == 0 for part in again["would_free"].values())
    everything_readable(pg_url, kept)
    assert "+print(2)" in cli_ok("diff", kept, "--db", pg_url).stdout
    cli_ok("rm", kept, "--db", pg_url)
    emptied = last_json(cli_ok("gc", "--db", pg_url, "--json").stdout)
    assert emptied["freed"]["blobs"]["bytes"] >= BIG
    assert emptied["parts"]["blobs"]["rows"] >= 2


def test_gc_help_explains_what_it_deletes_and_when_it_refuses() -> None:
    text = " ".join(cli_ok("gc", "--help").stdout.split())
    for words in ("no episode references", "--dry-run", "--wait", "other process", "VACUUM"):
        assert words in text


def test_gc_on_postgres_deletes_nothing_while_another_session_is_connected(
    repo: Path, edit: Path, pg_url: str
) -> None:
    cli_ok("rm", run(repo, pg_url, edit), "--db", pg_url)
    with TraceStore(pg_url) as store:
        store.episode_ids()  # a session of this process, connected to the database
        refused = run_cli("gc", "--db", pg_url)
    assert refused.returncode == 1
    assert "other session" in refused.stderr and "nothing was deleted" in refused.stderr
    dry = last_json(cli_ok("gc", "--dry-run", "--db", pg_url, "--json").stdout)
    assert dry["would_free"]["blobs"]["bytes"] >= BIG


def test_gc_keeps_the_answer_a_recorded_call_names_and_deletes_an_unnamed_blob(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    answer, junk = b"data: {}\n\n" * 1000, b"nobody names this"
    named, unnamed = hashlib.sha256(answer).hexdigest(), hashlib.sha256(junk).hexdigest()
    with TraceStore(db) as store:
        store.put_blobs([(named, [answer]), (unnamed, [junk])])
        episode = store.create_episode(task_id="t", seed=0, env={}, model={}, claim=True)
        with store.lease(episode, claimed=True):
            failed = Error(where="model", type="HTTP 529", message="overloaded")
            extra = {"answer": {"status": 529, "body": named, "bytes": len(answer)}}
            store.writer(episode).append(1, failed.model_copy(update=extra))
    report = last_json(cli_ok("gc", "--db", str(db), "--json").stdout)
    assert report["freed"]["blobs"] == {"rows": 1, "bytes": len(junk)}
    with TraceStore(db) as store:
        assert store.read_blob(named) == answer
        assert store.missing_blobs([unnamed]) == {unnamed}


def test_gc_in_a_process_whose_threads_used_the_postgres_store_is_not_held_by_its_own_pool(
    pg_url: str,
) -> None:
    """A thread that is done with the store gives its connection back to the pool, where it
    stays open: gc in that same process must not count those as other clients."""
    import threading

    from agentrunner.store.gc import collect

    with TraceStore(pg_url) as store:
        together = threading.Barrier(4)

        def use() -> None:  # four transactions at once: four connections, then idle
            conn = store.raw_connection()
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM episodes")
            together.wait(timeout=60)
            conn.execute("COMMIT")
            store.done_in_this_thread()

        threads = [threading.Thread(target=use) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.open_connections() >= 2  # the pool keeps them open
        report = collect(store, progress=lambda _: None)
    assert not report.dry_run and report.size_after is not None
