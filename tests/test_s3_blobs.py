"""Workspace blobs in an S3-compatible bucket (``agentrunner.store.blob_bucket``), against
moto's standalone S3 server started here as a subprocess on loopback: the store keeps only
the index, restores fetch from the bucket, gc deletes only objects no row names, copy moves
the bytes, and a writer SIGKILLed at any instant leaves no snapshot row naming a missing blob.
Skipped when boto3 or moto's server is not installed (the ``[s3]`` extra)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.snapshotter import Snapshotter
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.store.blob_bucket import use_bucket
from agentrunner.store.transfer import copy_episode, lineage_order
from agentrunner.values.errors import StoreError
from providers.scripted import ScriptedModel

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

KILLS = 12
PARALLEL = 4
PACE_S = "0.005"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server, on a loopback port of its own, for this module's tests."""
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with open(log, "wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(600):  # only bounds a server that never answers
            if server.poll() is not None:
                pytest.fail(f"moto's server exited: {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment boto3 reads (the server and made-up credentials), set for this test."""
    env = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def bucket(s3_env: dict[str, str]) -> str:
    name = f"b-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def _objects(bucket: str, prefix: str, client: Any = None) -> set[str]:
    pages = (
        (client or boto3.client("s3"))
        .get_paginator("list_objects_v2")
        .paginate(Bucket=bucket, Prefix=f"{prefix}/sha256/")
    )
    return {str(o["Key"]).rsplit("/", 1)[1] for page in pages for o in page.get("Contents", [])}


def _column(store: TraceStore, sql: str) -> set[str]:
    return {str(r[0]) for r in store.raw_connection().execute(sql).fetchall()}


def _snapshot_files(store: TraceStore) -> set[str]:
    """The digests of every file every snapshot row names."""
    found: set[str] = set()
    for (changes,) in store.raw_connection().execute("SELECT changes FROM snapshots"):
        for entry in json.loads(changes).values():
            if isinstance(entry, list) and entry and entry[0] == "f":
                found.add(str(entry[2]))
    return found


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _workspace(root: Path) -> Path:
    root.mkdir()
    (root / "src").mkdir()
    for i in range(20):
        (root / "src" / f"m{i}.py").write_text(f"VALUE = {i}\n" * (i + 1))
    (root / "data.bin").write_bytes(os.urandom(300_000))
    return root


def _bucket_store(path: Path, bucket: str, prefix: str = "team/blobs") -> TraceStore:
    store = TraceStore(path)
    use_bucket(store, f"s3://{bucket}/{prefix}")
    return store


def _episode(store: TraceStore, tmp_path: Path) -> str:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0), store=store
        )
    return rollout.episode_id


def test_snapshot_blobs_go_to_the_bucket_and_the_store_keeps_only_their_index(
    bucket: str, tmp_path: Path
) -> None:
    ws = _workspace(tmp_path / "ws")
    with _bucket_store(tmp_path / "t.db", bucket) as store:
        snapshot = Snapshotter(ws, store).save()
        assert _column(store, "SELECT hash FROM blobs") == set()
        indexed = _column(store, "SELECT hash FROM blob_objects")
    assert indexed == _snapshot_files(TraceStore(tmp_path / "t.db"))
    assert _objects(bucket, "team/blobs") == indexed
    with TraceStore(tmp_path / "t.db") as again:  # the bucket is found in the store
        (tmp_path / "out").mkdir()
        Snapshotter(tmp_path / "out", again).restore(snapshot)
    assert _tree(tmp_path / "out") == _tree(ws)


def test_a_store_without_a_bucket_keeps_its_blobs_in_its_table(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    with TraceStore(tmp_path / "t.db") as store:
        Snapshotter(ws, store).save()
        assert _column(store, "SELECT hash FROM blob_objects") == set()
        assert _column(store, "SELECT hash FROM blobs") == _snapshot_files(store)


def test_the_store_records_where_the_bucket_is_and_no_credential(
    bucket: str, tmp_path: Path
) -> None:
    with _bucket_store(tmp_path / "t.db", bucket) as store:
        rows = store.raw_connection().execute("SELECT * FROM blob_bucket").fetchall()
    assert [r[1] for r in rows] == [f"s3://{bucket}/team/blobs"]
    assert b"testing-secret" not in (tmp_path / "t.db").read_bytes()


def test_a_bucket_location_holding_credentials_is_refused(bucket: str, tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        with pytest.raises(StoreError, match="names no credentials"):
            use_bucket(store, f"s3://key:secret@{bucket}/p")
        assert _column(store, "SELECT url FROM blob_bucket") == set()


def test_a_prefix_holding_another_stores_blobs_is_refused(bucket: str, tmp_path: Path) -> None:
    _bucket_store(tmp_path / "a.db", bucket).close()
    with TraceStore(tmp_path / "b.db") as other:
        with pytest.raises(StoreError, match="another store's blobs"):
            use_bucket(other, f"s3://{bucket}/team/blobs")
        use_bucket(other, f"s3://{bucket}/other")  # a prefix of its own is fine


def test_gc_deletes_the_objects_no_row_names_and_keeps_every_named_one(
    bucket: str, tmp_path: Path
) -> None:
    with _bucket_store(tmp_path / "t.db", bucket) as store:
        _episode(store, tmp_path)
        named = _snapshot_files(store)
        store.put_blobs([("ab" * 32, [b"nothing names this blob"])])
    orphan = "cd" * 32  # as a writer killed between its put and its index row leaves
    boto3.client("s3").put_object(Bucket=bucket, Key=f"team/blobs/sha256/{orphan}", Body=b"x")
    assert {"ab" * 32, orphan} <= _objects(bucket, "team/blobs")
    with TraceStore(tmp_path / "t.db") as store:
        store.collect_garbage()
    with TraceStore(tmp_path / "t.db") as store:
        assert _column(store, "SELECT hash FROM blob_objects") == named
    assert _objects(bucket, "team/blobs") == named


def test_copy_moves_the_bytes_out_of_the_bucket_into_a_store_without_one(
    bucket: str, tmp_path: Path
) -> None:
    with _bucket_store(tmp_path / "src.db", bucket) as src, TraceStore(tmp_path / "dst.db") as dst:
        episode = _episode(src, tmp_path)
        for episode_id in lineage_order(src, [episode]):
            copy_episode(src, dst, episode_id)
        files = _snapshot_files(src)
        assert _column(dst, "SELECT hash FROM blobs") == files
        for digest in files:
            assert dst.read_blob(digest) == src.read_blob(digest)


def test_copy_puts_the_bytes_into_the_destinations_bucket(bucket: str, tmp_path: Path) -> None:
    with TraceStore(tmp_path / "src.db") as src:
        episode = _episode(src, tmp_path)
        files = _snapshot_files(src)
    with TraceStore(tmp_path / "src.db") as src, _bucket_store(tmp_path / "dst.db", bucket) as dst:
        for episode_id in lineage_order(src, [episode]):
            copy_episode(src, dst, episode_id)
        assert _column(dst, "SELECT hash FROM blobs") == set()
        assert _column(dst, "SELECT hash FROM blob_objects") == files
    assert _objects(bucket, "team/blobs") == files


# -- SIGKILL at many instants -----------------------------------------------------------------

CHILD = r"""
import os, sys
ack = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from providers.scripted import ScriptedModel

db, snapshots = sys.argv[1], sys.argv[2]

def observer(seq, turn, payload):  # called after the event is committed
    ack.write(f"{seq}\n")
    ack.flush()

with TraceStore(db) as store, WorkspaceEnv(snapshot_dir=snapshots) as env:
    model = ScriptedModel("demo", pace=float(os.environ["PACE"]))
    run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store, observer=observer)
ack.write("end\n")
ack.flush()
"""


def _child(db: Path, snapshots: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(snapshots)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env, "PACE": PACE_S},
    )


def _killed_after(db: Path, tmp: Path, env: dict[str, str], acks: int) -> bool:
    """Run an episode in a child, SIGKILL it once it acknowledged ``acks`` events (if it is
    still running); whether it was killed."""
    proc = _child(db, tmp, env)
    assert proc.stdout is not None
    for seen, line in enumerate(proc.stdout, start=1):
        if line == "end\n":
            break
        if seen >= acks:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    return proc.returncode == -signal.SIGKILL


def _check_and_resume(db: Path, bucket: str, prefix: str) -> dict[str, Any]:
    """Every snapshot row's blobs exist (in the bucket, indexed); the episode resumes."""
    with TraceStore(db) as store:
        files = _snapshot_files(store)
        indexed = _column(store, "SELECT hash FROM blob_objects")
        assert files <= indexed, "a snapshot row names a blob the store has not indexed"
        assert indexed <= _objects(bucket, prefix), "an index row names a missing object"
        (episode,) = [e.episode_id for e in store.list_episodes()]
        if store.episode(episode).status != "completed":
            resume_episode(store, episode, model_fn=ScriptedModel("demo", pace=0))
        summary = store.episode(episode)
        return {"status": summary.status, "reward": summary.total_reward}


@pytest.mark.slow
@pytest.mark.timeout(1200)  # only bounds a hang
def test_writers_killed_at_many_instants_leave_no_row_naming_a_missing_blob(
    bucket: str, s3_env: dict[str, str], tmp_path: Path
) -> None:
    reference = tmp_path / "reference.db"
    _bucket_store(reference, bucket, "reference").close()
    assert not _killed_after(reference, tmp_path / "r", s3_env, 10**6)
    with TraceStore(reference) as store:
        total = store.raw_connection().execute("SELECT count(*) FROM events").fetchone()[0]
        expected = {"status": "completed", "reward": store.list_episodes()[0].total_reward}
    instants = [1 + (i * (total - 3)) // KILLS for i in range(KILLS)]
    for i in range(KILLS):
        _bucket_store(tmp_path / f"k{i}.db", bucket, f"k{i}").close()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(PARALLEL) as pool:
        killed = list(
            pool.map(
                lambda i: _killed_after(
                    tmp_path / f"k{i}.db", tmp_path / f"s{i}", s3_env, instants[i]
                ),
                range(KILLS),
            )
        )
    assert any(killed), "no run was killed before it ended"  # the early instants always are
    outcomes = [_check_and_resume(tmp_path / f"k{i}.db", bucket, f"k{i}") for i in range(KILLS)]
    assert outcomes == [expected] * KILLS


def test_a_postgres_store_keeps_only_the_index_and_gc_deletes_only_unnamed_objects(
    bucket: str, pg_url: str, tmp_path: Path
) -> None:
    with TraceStore(pg_url) as store:
        use_bucket(store, f"s3://{bucket}/team")
        episode = _episode(store, tmp_path)
        store.put_blobs([("ab" * 32, [b"nothing names this blob"])])
        named = _snapshot_files(store)
        last = store.last_of_kind(episode, "tool.result")
        assert last is not None
        snapshot = str(last.payload["snapshot"])
        (tmp_path / "before").mkdir()
        Snapshotter(tmp_path / "before", store).restore(snapshot)
    with TraceStore(pg_url) as store:
        store.collect_garbage()
    with TraceStore(pg_url) as store:
        assert _column(store, "SELECT hash FROM blobs") == set()
        assert _column(store, "SELECT hash FROM blob_objects") == named
        (tmp_path / "after").mkdir()
        Snapshotter(tmp_path / "after", store).restore(snapshot)
    assert _objects(bucket, "team") == named
    assert _tree(tmp_path / "after") == _tree(tmp_path / "before") != {}


SNAPSHOTTER = r"""
import os, random, sys
from pathlib import Path
ack = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
from agentrunner import TraceStore
from agentrunner.envs.snapshotter import Snapshotter

db, root, rounds, files = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with TraceStore(db) as store:
    snap = Snapshotter(root, store)
    for i in range(rounds):
        (root / f"r{i}").mkdir(exist_ok=True)
        for j in range(files):
            data = random.Random(i * 1000 + j).randbytes(32_000)
            (root / f"r{i}" / f"f{j}.bin").write_bytes(data)
        ack.write(f"{snap.save()}\n")
        ack.flush()
"""
ROUNDS = 4
FILES = 20
SNAPSHOT_KILLS = 12


def _snapshotter(db: Path, root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    root.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", SNAPSHOTTER, str(db), str(root), str(ROUNDS), str(FILES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env},
    )


def _killed_at_object(db: Path, root: Path, env: dict[str, str], bucket: str, n: int) -> str:
    """Take snapshots in a child; SIGKILL it as soon as the bucket holds ``n`` of its objects
    (in the middle of putting a snapshot's blobs); the last snapshot it acknowledged."""
    proc = _snapshotter(db, root, env)
    client = boto3.client("s3")
    while proc.poll() is None and len(_objects(bucket, db.stem, client)) < n:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    return out.split()[-1] if out.split() else ""


@pytest.mark.slow
@pytest.mark.timeout(1200)  # only bounds a hang
def test_a_snapshotter_killed_while_putting_blobs_leaves_no_row_naming_a_missing_blob(
    s3_env: dict[str, str], tmp_path: Path
) -> None:
    total = ROUNDS * FILES
    kills = [1 + (i * (total - 2)) // SNAPSHOT_KILLS for i in range(SNAPSHOT_KILLS)]
    for i, n in enumerate(kills):
        db = tmp_path / f"p{i}.db"
        bucket = f"k-{uuid.uuid4().hex[:12]}"  # its own: listing it stays cheap
        boto3.client("s3").create_bucket(Bucket=bucket)
        _bucket_store(db, bucket, db.stem).close()
        acked = _killed_at_object(db, tmp_path / f"w{i}", s3_env, bucket, n)
        with TraceStore(db) as store:
            files = _snapshot_files(store)
            indexed = _column(store, "SELECT hash FROM blob_objects")
            assert files <= indexed, f"kill {i}: a snapshot row names an unindexed blob"
            assert indexed <= _objects(bucket, db.stem), f"kill {i}: a row names no object"
            if acked:  # the last acknowledged snapshot restores from the bucket
                (tmp_path / f"o{i}").mkdir()
                Snapshotter(tmp_path / f"o{i}", store).restore(acked)
                rounds = {p.split("/")[0] for p in _tree(tmp_path / f"o{i}")}
                assert _tree(tmp_path / f"o{i}") == {
                    p: d for p, d in _tree(tmp_path / f"w{i}").items() if p.split("/")[0] in rounds
                }
        again = _snapshotter(db, tmp_path / f"w{i}", s3_env)  # the writer starts over
        last = again.communicate()[0].split()[-1]
        assert again.returncode == 0
        with TraceStore(db) as store:
            (tmp_path / f"a{i}").mkdir()
            Snapshotter(tmp_path / f"a{i}", store).restore(last)
        assert _tree(tmp_path / f"a{i}") == _tree(tmp_path / f"w{i}")


def test_db_blobs_sends_a_stores_new_blobs_to_the_bucket_and_refuses_credentials(
    bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentrunner.cli.main import main

    db = tmp_path / "cli.db"
    assert main(["run", "--db", str(db), "--json"]) == 0
    capsys.readouterr()
    leaked = f"s3://AKIA:hush@{bucket}/cli"
    assert main(["db", "blobs", leaked, "--db", str(db)]) == 1
    assert "hush" not in db.read_bytes().decode("latin-1")
    assert main(["db", "blobs", f"s3://{bucket}/cli", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["blobs"].endswith("/cli")
    with TraceStore(db) as store:
        before = _column(store, "SELECT hash FROM blobs")
    # another task: its files are not in the store yet (blobs are stored by content)
    assert main(["run", "--db", str(db), "--task", "paginate-off-by-one", "--json"]) == 0
    with TraceStore(db) as store:
        named = _snapshot_files(store)
        assert _column(store, "SELECT hash FROM blobs") == before  # new blobs left the table
    in_bucket = _objects(bucket, "cli")
    assert in_bucket and named <= before | in_bucket


def test_a_blob_copied_out_of_a_bucket_is_stored_in_parts(bucket: str, tmp_path: Path) -> None:
    """A bucket's object comes back in parts of at most ``PART_SIZE`` (a store without a
    bucket keeps each part as a row), never whole in memory; an empty blob is one empty part."""
    import hashlib

    from agentrunner.store.blobs import PART_SIZE, blob_parts

    data = os.urandom(PART_SIZE + 12345)
    digest = hashlib.sha256(data).hexdigest()
    empty = hashlib.sha256(b"").hexdigest()
    with _bucket_store(tmp_path / "b.db", bucket, "parts") as store:
        store.put_blobs([(digest, [data]), (empty, [b""])])
        conn = store.raw_connection()
        parts = list(blob_parts(conn, digest))
        assert [len(p) for p in parts] == [PART_SIZE, 12345] and b"".join(parts) == data
        assert list(blob_parts(conn, empty)) == [b""]
