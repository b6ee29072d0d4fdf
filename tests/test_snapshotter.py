"""Tests for incremental workspace snapshots (``agentrunner.envs.snapshotter``): real files in
a temp folder, a real trace store as the backend (memory where that is the point)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrunner.envs import snapshotter
from agentrunner.envs.manifest import DirEntry, FileEntry, LinkEntry
from agentrunner.envs.snapshots import SnapshotStore
from agentrunner.envs.snapshotter import MemorySnapshots, Snapshotter, load_manifest
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.store import TraceStore
from agentrunner.values.environment import ToolAction
from agentrunner.values.errors import EnvironmentFailure

MiB = 1 << 20
_CHILD = "AGENTRUNNER_TEST_UNPRIVILEGED_CHILD"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def snap(ws: Path, store: TraceStore) -> Snapshotter:
    return Snapshotter(ws, store)


@pytest.fixture
def unprivileged(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Permission bits bind only a non-root user. Run as root, the test runs first as uid 1000
    of a user namespace (where root's files belong to another user, so no DAC override) and
    fails when it fails there; then it goes on as root."""
    if os.geteuid() != 0:
        return
    if os.environ.get(_CHILD):
        pytest.skip("still root inside the user namespace")
    argv = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    if shutil.which("unshare") is None or subprocess.run([*argv, "true"]).returncode != 0:
        pytest.skip("root, and no user namespace to run this test as another user")
    pytest_argv = ["-m", "pytest", "-q", "--runxfail", "-p", "no:cacheprovider"]
    child = subprocess.run(
        [*argv, sys.executable, *pytest_argv, f"--basetemp={tmp_path / 'x'}", request.node.nodeid],
        cwd=request.config.rootpath,
        env={**os.environ, _CHILD: "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, f"as uid 1000:\n{child.stdout[-4000:]}"


def tree(root: Path) -> dict[bytes, tuple[object, ...]]:
    """Everything under ``root`` by path (bytes), links not followed: files as
    (mode, sha256), links as their target, folders as their mode."""
    out: dict[bytes, tuple[object, ...]] = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, base)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", oct(stat.S_IMODE(st.st_mode)))
            else:
                with open(full, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                out[rel] = ("file", oct(stat.S_IMODE(st.st_mode)), digest)
    return out


def restored(backend: TraceStore | MemorySnapshots, snapshot_id: str, folder: Path) -> Path:
    """``snapshot_id`` restored into a new folder by a new Snapshotter: only the backend shared."""
    folder.mkdir()
    Snapshotter(folder, backend).restore(snapshot_id)
    return folder


def count(store: TraceStore, table: str) -> int:
    value: int = store.raw_connection().execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return value


def changes_of(store: TraceStore, snapshot_id: str) -> dict[str, object]:
    row = (
        store.raw_connection()
        .execute("SELECT changes FROM snapshots WHERE id = ?", (snapshot_id,))
        .fetchone()
    )
    value: dict[str, object] = json.loads(row[0])
    return value


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- round trips ----------------------------------------------------------------------------


def test_a_text_file_round_trips_byte_for_byte(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    text = "naïve café\r\nline two\n\ttabs and trailing spaces   \nno final newline".encode()
    (ws / "notes.txt").write_bytes(text)
    out = restored(store, snap.save(), tmp_path / "out")
    assert (out / "notes.txt").read_bytes() == text


def test_a_binary_file_with_nul_bytes_round_trips(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    data = b"\x00\x01\x00\xff\xfe\x00" * 1000 + b"\x00"
    (ws / "blob.bin").write_bytes(data)
    out = restored(store, snap.save(), tmp_path / "out")
    assert (out / "blob.bin").read_bytes() == data


def test_a_random_1_mb_file_round_trips(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    data = random.Random(1).randbytes(MiB)
    (ws / "random.bin").write_bytes(data)
    out = restored(store, snap.save(), tmp_path / "out")
    assert sha((out / "random.bin").read_bytes()) == sha(data)


def test_an_empty_file_round_trips_as_an_empty_file(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    (ws / "empty").touch()
    snapshot_id = snap.save()
    out = restored(store, snapshot_id, tmp_path / "out")
    assert (out / "empty").is_file()
    assert (out / "empty").read_bytes() == b""
    assert store.read_blob(sha(b"")) == b""


def test_a_20_mb_file_is_stored_in_three_parts_and_round_trips(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    data = random.Random(2).randbytes(20 * MiB)
    (ws / "big.bin").write_bytes(data)
    snapshot_id = snap.save()
    parts = (
        store.raw_connection()
        .execute("SELECT part, length(data) FROM blobs WHERE hash = ? ORDER BY part", (sha(data),))
        .fetchall()
    )
    assert parts == [(0, 8 * MiB), (1, 8 * MiB), (2, 4 * MiB)]
    out = restored(store, snapshot_id, tmp_path / "out")
    assert sha((out / "big.bin").read_bytes()) == sha(data)


def test_symlinks_are_kept_as_links_and_never_followed(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not workspace content")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    os.symlink("pkg/mod.py", ws / "inside")
    os.symlink("pkg", ws / "folder-link")
    os.symlink("nowhere/at/all", ws / "dangling")
    os.symlink(outside, ws / "absolute")
    snapshot_id = snap.save()
    assert sha(outside.read_bytes()) in store.missing_blobs([sha(outside.read_bytes())])
    out = restored(store, snapshot_id, tmp_path / "out")
    assert os.readlink(out / "inside") == "pkg/mod.py"
    assert os.readlink(out / "folder-link") == "pkg"
    assert os.readlink(out / "dangling") == "nowhere/at/all"
    assert os.readlink(out / "absolute") == str(outside)
    assert tree(out) == tree(ws)


def test_file_modes_round_trip(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    modes = {"run.sh": 0o755, "plain": 0o644, "private": 0o600, "readonly": 0o444, "g": 0o750}
    for name, mode in modes.items():
        (ws / name).write_text(name)
        os.chmod(ws / name, mode)
    out = restored(store, snap.save(), tmp_path / "out")
    assert {name: stat.S_IMODE((out / name).stat().st_mode) for name in modes} == modes


def test_empty_folders_and_folder_modes_round_trip(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    (ws / "empty" / "nested").mkdir(parents=True)
    (ws / "private").mkdir()
    os.chmod(ws / "private", 0o700)
    (ws / "shared").mkdir()
    os.chmod(ws / "shared", 0o775)
    (ws / "frozen").mkdir()
    (ws / "frozen" / "f").write_text("f")
    os.chmod(ws / "frozen", 0o555)
    out = restored(store, snap.save(), tmp_path / "out")
    assert (out / "empty" / "nested").is_dir()
    assert list((out / "empty" / "nested").iterdir()) == []
    assert tree(out) == tree(ws)
    assert stat.S_IMODE((out / "frozen").stat().st_mode) == 0o555


def test_names_with_spaces_unicode_and_non_utf8_bytes_round_trip(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    names = [b"with space.txt", "ünïcødé ✓.py".encode(), b"latin1-caf\xe9", b"\xff\xfe raw"]
    (ws / "dir with space").mkdir()
    for name in names:
        for folder in (os.fsencode(ws), os.fsencode(ws / "dir with space")):
            with open(os.path.join(folder, name), "wb") as fh:
                fh.write(name)
    out = restored(store, snap.save(), tmp_path / "out")
    assert set(os.listdir(os.fsencode(out / "dir with space"))) == set(names)
    for name in names:
        with open(os.path.join(os.fsencode(out), name), "rb") as fh:
            assert fh.read() == name
    assert tree(out) == tree(ws)


def test_pycache_folders_are_not_snapshotted(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    (ws / "pkg" / "__pycache__").mkdir(parents=True)
    (ws / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x00pyc")
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    snapshot_id = snap.save()
    assert sorted(snap.load(snapshot_id)) == ["pkg", "pkg/mod.py"]
    out = restored(store, snapshot_id, tmp_path / "out")
    assert not (out / "pkg" / "__pycache__").exists()


def test_a_snapshot_lists_files_links_and_folders_with_their_entries(
    snap: Snapshotter, ws: Path
) -> None:
    (ws / "d").mkdir()
    os.chmod(ws / "d", 0o750)
    (ws / "d" / "f").write_bytes(b"abc")
    os.chmod(ws / "d" / "f", 0o640)
    os.symlink("d/f", ws / "l")
    assert snap.load(snap.save()) == {
        "d": DirEntry(0o750),
        "d/f": FileEntry(0o640, sha(b"abc"), 3),
        "l": LinkEntry("d/f"),
    }


# -- what a save costs ------------------------------------------------------------------------


def test_a_save_without_changes_returns_the_same_id_and_adds_no_row(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a.txt").write_text("a")
    first = snap.save()
    rows, blobs = count(store, "snapshots"), count(store, "blobs")
    assert snap.save() == first
    assert (count(store, "snapshots"), count(store, "blobs")) == (rows, blobs)


def test_touching_a_file_without_changing_it_keeps_the_same_id(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a.txt").write_text("a")
    first = snap.save()
    os.utime(ws / "a.txt", ns=(10**18, 10**18))
    assert snap.save() == first
    assert count(store, "snapshots") == 1


def test_one_changed_file_adds_one_blob_and_a_row_naming_only_that_file(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    for i in range(50):
        (ws / f"f{i:02d}.txt").write_text(f"file {i}\n" * 100)
    first = snap.save()
    rows, blobs = count(store, "snapshots"), count(store, "blobs")
    (ws / "f17.txt").write_text("changed\n")
    os.chmod(ws / "f17.txt", 0o640)
    second = snap.save()
    assert second != first
    assert (count(store, "snapshots"), count(store, "blobs")) == (rows + 1, blobs + 1)
    assert changes_of(store, second) == {"f17.txt": ["f", 0o640, sha(b"changed\n"), 8]}
    assert store.raw_connection().execute(
        "SELECT parent_id, depth FROM snapshots WHERE id = ?", (second,)
    ).fetchone() == (first, 1)


def test_a_mode_change_alone_stores_no_blob(snap: Snapshotter, store: TraceStore, ws: Path) -> None:
    (ws / "run.sh").write_text("echo hi\n")
    snap.save()
    blobs = count(store, "blobs")
    os.chmod(ws / "run.sh", 0o755)
    changed = snap.save()
    assert count(store, "blobs") == blobs
    assert changes_of(store, changed) == {"run.sh": ["f", 0o755, sha(b"echo hi\n"), 8]}


def test_a_removed_file_is_recorded_as_null(snap: Snapshotter, store: TraceStore, ws: Path) -> None:
    (ws / "keep").write_text("k")
    (ws / "gone").write_text("g")
    snap.save()
    (ws / "gone").unlink()
    assert changes_of(store, snap.save()) == {"gone": None}


def test_the_same_content_in_two_files_is_stored_once(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    data = random.Random(3).randbytes(100_000)
    (ws / "a.bin").write_bytes(data)
    (ws / "b.bin").write_bytes(data)
    snap.save()
    assert store.raw_connection().execute(
        "SELECT count(*) FROM blobs WHERE hash = ?", (sha(data),)
    ).fetchone() == (1,)
    assert count(store, "blobs") == 1


def test_the_same_workspace_in_two_episodes_is_stored_once(
    store: TraceStore, tmp_path: Path
) -> None:
    ids = []
    for name in ("episode-1", "episode-2"):
        root = tmp_path / name
        (root / "src").mkdir(parents=True)
        (root / "src" / "big.bin").write_bytes(random.Random(4).randbytes(2 * MiB))
        (root / "README").write_text("same\n")
        ids.append(Snapshotter(root, store).save())
    assert ids[0] == ids[1]
    assert (count(store, "snapshots"), count(store, "blobs")) == (1, 2)


def test_a_file_changed_in_a_second_episode_stores_only_its_new_content(
    store: TraceStore, tmp_path: Path
) -> None:
    for name, text in (("episode-1", "v1"), ("episode-2", "v2")):
        root = tmp_path / name
        root.mkdir()
        (root / "shared.bin").write_bytes(random.Random(5).randbytes(MiB))
        (root / "own.txt").write_text(text)
        Snapshotter(root, store).save()
    assert count(store, "blobs") == 3


def test_a_same_size_rewrite_with_the_old_mtime_restored_is_still_detected(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    path = ws / "config.py"
    path.write_text("DEBUG = 0\n")
    before = path.stat()
    first = snap.save()
    path.write_text("DEBUG = 1\n")  # same size, at once: maybe the same clock tick
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    second = snap.save()
    assert second != first
    assert (restored(store, second, tmp_path / "out") / "config.py").read_text() == "DEBUG = 1\n"


def test_a_scan_hashes_only_the_files_whose_stat_changed(snap: Snapshotter, ws: Path) -> None:
    for i in range(20):
        (ws / f"f{i}.txt").write_text(f"content {i}\n")
    time.sleep(2 * snapshotter._RACY_NS / 1e9)  # older than the racy window: trusted by stat
    snap.save()
    (ws / "f7.txt").write_text("new content\n")
    time.sleep(2 * snapshotter._RACY_NS / 1e9)
    _, hashed = snap.scan()
    assert list(hashed.values()) == [b"new content\n"]


# -- restoring --------------------------------------------------------------------------------


def test_restore_removes_files_and_folders_added_since_the_snapshot(
    snap: Snapshotter, ws: Path
) -> None:
    (ws / "a.txt").write_text("a")
    snapshot_id = snap.save()
    before = tree(ws)
    (ws / "added.txt").write_text("x")
    (ws / "new" / "deep").mkdir(parents=True)
    (ws / "new" / "deep" / "f").write_text("f")
    os.symlink("a.txt", ws / "link")
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_brings_back_deleted_files_and_folders(snap: Snapshotter, ws: Path) -> None:
    (ws / "pkg" / "sub").mkdir(parents=True)
    (ws / "pkg" / "sub" / "m.py").write_text("m")
    (ws / "top.txt").write_text("t")
    os.symlink("top.txt", ws / "link")
    snapshot_id = snap.save()
    before = tree(ws)
    shutil.rmtree(ws / "pkg")
    (ws / "top.txt").unlink()
    (ws / "link").unlink()
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_replaces_a_folder_by_the_file_it_was(snap: Snapshotter, ws: Path) -> None:
    (ws / "thing").write_text("a file\n")
    snapshot_id = snap.save()
    (ws / "thing").unlink()
    (ws / "thing" / "inner").mkdir(parents=True)
    (ws / "thing" / "inner" / "x").write_text("x")
    (ws / "thing" / "__pycache__").mkdir()
    snap.save()
    snap.restore(snapshot_id)
    assert (ws / "thing").read_text() == "a file\n"


def test_restore_replaces_a_file_by_the_folder_it_was(snap: Snapshotter, ws: Path) -> None:
    (ws / "thing").mkdir()
    (ws / "thing" / "x").write_text("x")
    snapshot_id = snap.save()
    before = tree(ws)
    shutil.rmtree(ws / "thing")
    (ws / "thing").write_text("now a file")
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_replaces_links_and_files_by_each_other(snap: Snapshotter, ws: Path) -> None:
    (ws / "target").write_text("t")
    os.symlink("target", ws / "was-link")
    (ws / "was-file").write_text("f")
    os.symlink("target", ws / "retargeted")
    snapshot_id = snap.save()
    before = tree(ws)
    (ws / "was-link").unlink()
    (ws / "was-link").write_text("now a file")
    (ws / "was-file").unlink()
    os.symlink("/etc/passwd", ws / "was-file")
    (ws / "retargeted").unlink()
    os.symlink("elsewhere", ws / "retargeted")
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_removes_a_link_to_an_outside_folder_without_touching_that_folder(
    snap: Snapshotter, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    (ws / "d").mkdir()
    (ws / "d" / "f").write_text("f")
    snapshot_id = snap.save()
    shutil.rmtree(ws / "d")
    os.symlink(outside, ws / "d")
    snap.save()
    snap.restore(snapshot_id)
    assert (ws / "d" / "f").read_text() == "f"
    assert not (ws / "d").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


def test_restore_brings_back_file_and_folder_modes(snap: Snapshotter, ws: Path) -> None:
    (ws / "bin").mkdir()
    os.chmod(ws / "bin", 0o755)
    (ws / "bin" / "tool").write_text("#!/bin/sh\n")
    os.chmod(ws / "bin" / "tool", 0o755)
    (ws / "secret").write_text("s")
    os.chmod(ws / "secret", 0o600)
    snapshot_id = snap.save()
    before = tree(ws)
    os.chmod(ws / "bin" / "tool", 0o644)
    os.chmod(ws / "secret", 0o666)
    os.chmod(ws / "bin", 0o700)
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_rewrites_only_the_files_that_differ(snap: Snapshotter, ws: Path) -> None:
    (ws / "same.txt").write_text("same")
    (ws / "changed.txt").write_text("v1")
    snapshot_id = snap.save()
    (ws / "changed.txt").write_text("v2 is longer")
    snap.save()
    same_ino, changed_ino = (ws / "same.txt").stat().st_ino, (ws / "changed.txt").stat().st_ino
    snap.restore(snapshot_id)
    assert (ws / "same.txt").stat().st_ino == same_ino
    assert (ws / "changed.txt").stat().st_ino != changed_ino
    assert (ws / "changed.txt").read_text() == "v1"


def test_restore_of_a_mode_only_change_keeps_the_file(snap: Snapshotter, ws: Path) -> None:
    (ws / "run.sh").write_text("echo\n")
    os.chmod(ws / "run.sh", 0o640)
    snapshot_id = snap.save()
    os.chmod(ws / "run.sh", 0o755)
    snap.save()
    ino = (ws / "run.sh").stat().st_ino
    snap.restore(snapshot_id)
    assert (ws / "run.sh").stat().st_ino == ino
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o640


def test_restore_to_an_unsaved_workspace_state_writes_the_snapshot(
    snap: Snapshotter, ws: Path
) -> None:
    (ws / "a").write_text("saved")
    snapshot_id = snap.save()
    (ws / "a").write_text("never saved")
    (ws / "b").write_text("never saved either")
    snap.restore(snapshot_id)
    assert sorted(os.listdir(ws)) == ["a"]
    assert (ws / "a").read_text() == "saved"


def test_a_save_right_after_a_restore_returns_the_restored_id(snap: Snapshotter, ws: Path) -> None:
    (ws / "a").write_text("1")
    first = snap.save()
    (ws / "a").write_text("2")
    (ws / "b").write_text("b")
    snap.save()
    snap.restore(first)
    assert snap.save() == first


def test_saving_after_restoring_an_earlier_snapshot_branches_from_it(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a").write_text("1")
    first = snap.save()
    (ws / "a").write_text("2")
    snap.save()
    snap.restore(first)
    (ws / "a").write_text("3")
    branch = snap.save()
    assert store.raw_connection().execute(
        "SELECT parent_id, depth FROM snapshots WHERE id = ?", (branch,)
    ).fetchone() == (first, 1)


def test_a_chain_longer_than_the_checkpoint_depth_stores_a_full_snapshot_again(
    snap: Snapshotter, store: TraceStore, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshotter, "CHECKPOINT_DEPTH", 4)
    for i in range(10):
        (ws / "counter").write_text(str(i))
        (ws / f"file{i}").write_text(str(i))
        snap.save()
    rows = (
        store.raw_connection()
        .execute(
            "SELECT depth, parent_id IS NULL, json_array_length(json(changes)) FROM snapshots"
            " ORDER BY rowid"
        )
        .fetchall()
    )
    assert [r[0] for r in rows] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert [bool(r[1]) for r in rows] == [d == 0 for d, _, _ in rows]
    full = (
        store.raw_connection()
        .execute("SELECT changes FROM snapshots ORDER BY rowid LIMIT 1 OFFSET 4")
        .fetchone()[0]
    )
    assert sorted(json.loads(full)) == ["counter"] + [f"file{i}" for i in range(5)]


def test_every_snapshot_of_a_chain_past_the_checkpoint_depth_restores(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshotter, "CHECKPOINT_DEPTH", 3)
    trees = {}
    for i in range(8):
        (ws / "counter").write_text(str(i))
        (ws / f"file{i}").write_text(str(i))
        if i % 3 == 2:
            (ws / f"file{i - 1}").unlink()
        trees[snap.save()] = tree(ws)
    assert len(trees) == 8
    for n, (snapshot_id, expected) in enumerate(trees.items()):
        assert tree(restored(store, snapshot_id, tmp_path / f"out{n}")) == expected
    for snapshot_id, expected in reversed(trees.items()):
        snap.restore(snapshot_id)
        assert tree(ws) == expected


def test_restoring_an_unknown_id_raises_environment_failure(snap: Snapshotter, ws: Path) -> None:
    (ws / "a").write_text("a")
    snap.save()
    with pytest.raises(EnvironmentFailure, match="unknown snapshot"):
        snap.restore("0" * 64)
    assert (ws / "a").read_text() == "a"
    assert snap.holds("0" * 64) is False


def test_an_unknown_id_is_unknown_to_the_memory_backend_too(ws: Path) -> None:
    with pytest.raises(EnvironmentFailure, match="unknown snapshot"):
        Snapshotter(ws, MemorySnapshots()).restore("f" * 64)


def test_a_snapshot_whose_parent_row_is_gone_raises_environment_failure(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a").write_text("1")
    first = snap.save()
    (ws / "a").write_text("2")
    second = snap.save()
    store.raw_connection().execute("DELETE FROM snapshots WHERE id = ?", (first,))
    fresh = Snapshotter(ws, store)
    assert fresh.holds(second) is False
    with pytest.raises(EnvironmentFailure, match="broken parent chain"):
        fresh.restore(second)


def test_a_corrupted_blob_is_detected_on_restore_and_never_written(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a.txt").write_text("original")
    snapshot_id = snap.save()
    (ws / "a.txt").write_text("edited")
    snap.save()
    store.raw_connection().execute(
        "UPDATE blobs SET data = ? WHERE hash = ?", (b"evil", sha(b"original"))
    )
    with pytest.raises(EnvironmentFailure, match="corrupt"):
        snap.restore(snapshot_id)
    assert (ws / "a.txt").read_text() == "edited"
    assert [p.name for p in ws.iterdir()] == ["a.txt"]  # no temp file left behind


def test_after_a_restore_stopped_by_a_corrupt_blob_the_next_save_records_the_workspace(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    """The restore is not atomic: what sorts before the corrupt file is already restored and
    what comes after is not; the snapshotter stays in step with the folder all the same."""
    for name in ("a", "b", "c"):
        (ws / name).write_text(f"{name} old")
    snapshot_id = snap.save()
    for name in ("a", "b", "c"):
        (ws / name).write_text(f"{name} new")
    (ws / "added").write_text("added")
    snap.save()
    store.raw_connection().execute(
        "UPDATE blobs SET data = ? WHERE hash = ?", (b"bad", sha(b"b old"))
    )
    with pytest.raises(EnvironmentFailure, match="corrupt"):
        snap.restore(snapshot_id)
    assert {p.name: p.read_text() for p in ws.iterdir()} == {
        "a": "a old",
        "b": "b new",
        "c": "c new",
    }
    half = tree(ws)
    assert tree(restored(store, snap.save(), tmp_path / "out")) == half


def test_another_snapshotter_on_another_folder_restores_from_the_store_alone(
    tmp_path: Path,
) -> None:
    first_machine = tmp_path / "first"
    (first_machine / "src").mkdir(parents=True)
    (first_machine / "src" / "a.py").write_text("a = 1\n")
    os.symlink("src/a.py", first_machine / "link")
    with TraceStore(tmp_path / "t.db") as store:
        snap = Snapshotter(first_machine, store)
        snap.save()
        (first_machine / "src" / "b.py").write_text("b = 2\n")
        snapshot_id = snap.save()
    shutil.rmtree(tmp_path / "first")
    (tmp_path / "first").mkdir()
    (tmp_path / "first" / "stale").write_text("not from the snapshot")
    second_machine = tmp_path / "second"
    second_machine.mkdir()
    (second_machine / "stale").write_text("not from the snapshot")
    with TraceStore(tmp_path / "t.db") as store:
        Snapshotter(second_machine, store).restore(snapshot_id)
    assert sorted(os.listdir(second_machine)) == ["link", "src"]
    assert (second_machine / "src" / "b.py").read_text() == "b = 2\n"
    assert os.readlink(second_machine / "link") == "src/a.py"


def test_the_memory_backend_round_trips_a_chain_like_the_store(ws: Path, tmp_path: Path) -> None:
    backend = MemorySnapshots()
    snap = Snapshotter(ws, backend)
    (ws / "a").write_text("1")
    first, first_tree = snap.save(), tree(ws)
    (ws / "a").write_text("2")
    (ws / "b").mkdir()
    second, second_tree = snap.save(), tree(ws)
    assert tree(restored(backend, first, tmp_path / "out1")) == first_tree
    assert tree(restored(backend, second, tmp_path / "out2")) == second_tree


def test_load_manifest_reads_a_snapshot_without_a_workspace(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "a").write_text("1")
    snap.save()
    (ws / "b").write_text("2")
    os.chmod(ws / "b", 0o600)
    second = snap.save()
    manifest, depth = load_manifest(store, second)
    mode = stat.S_IMODE((ws / "a").stat().st_mode)
    assert manifest == {"a": FileEntry(mode, sha(b"1"), 1), "b": FileEntry(0o600, sha(b"2"), 1)}
    assert depth == 1


def test_load_manifest_of_an_unknown_id_raises_environment_failure(store: TraceStore) -> None:
    with pytest.raises(EnvironmentFailure, match="unknown snapshot"):
        load_manifest(store, "a" * 64)


# -- permissions, as a user that root's override does not help ---------------------------------


def test_restore_rewrites_a_changed_file_in_a_read_only_folder(
    unprivileged: None, snap: Snapshotter, ws: Path
) -> None:
    (ws / "ro").mkdir()
    (ws / "ro" / "a").write_text("old")
    os.chmod(ws / "ro", 0o555)
    snapshot_id = snap.save()
    os.chmod(ws / "ro", 0o755)
    (ws / "ro" / "a").write_text("new")
    os.chmod(ws / "ro", 0o555)
    snap.save()
    snap.restore(snapshot_id)
    assert (ws / "ro" / "a").read_text() == "old"
    assert stat.S_IMODE((ws / "ro").stat().st_mode) == 0o555


def test_a_save_reads_files_the_agent_made_unreadable_and_keeps_their_modes(
    unprivileged: None, snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "locked").mkdir()
    (ws / "locked" / "f").write_text("secret")
    os.chmod(ws / "locked" / "f", 0)
    os.chmod(ws / "locked", 0)
    manifest = snap.load(snap.save())
    assert manifest["locked/f"] == FileEntry(0, sha(b"secret"), 6)
    assert stat.S_IMODE((ws / "locked").stat().st_mode) == 0
    os.chmod(ws / "locked", 0o700)
    assert stat.S_IMODE((ws / "locked" / "f").stat().st_mode) == 0


def test_restore_removes_a_file_added_to_a_read_only_folder(
    unprivileged: None, snap: Snapshotter, ws: Path
) -> None:
    (ws / "ro").mkdir()
    (ws / "ro" / "a").write_text("a")
    os.chmod(ws / "ro", 0o555)
    snapshot_id = snap.save()
    os.chmod(ws / "ro", 0o755)
    (ws / "ro" / "added").write_text("b")
    os.chmod(ws / "ro", 0o555)
    snap.save()
    snap.restore(snapshot_id)
    assert sorted(os.listdir(ws / "ro")) == ["a"]


def test_restore_rewrites_a_changed_file_in_a_locked_folder(
    unprivileged: None, snap: Snapshotter, ws: Path
) -> None:
    (ws / "locked").mkdir()
    (ws / "locked" / "f").write_text("old")
    os.chmod(ws / "locked", 0)
    snapshot_id = snap.save()
    os.chmod(ws / "locked", 0o700)
    (ws / "locked" / "f").write_text("new")
    os.chmod(ws / "locked", 0)
    snap.save()
    snap.restore(snapshot_id)
    os.chmod(ws / "locked", 0o700)
    assert (ws / "locked" / "f").read_text() == "old"


# -- bugs -------------------------------------------------------------------------------------


def test_a_save_without_changes_at_the_checkpoint_depth_keeps_the_same_id(
    snap: Snapshotter, store: TraceStore, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshotter, "CHECKPOINT_DEPTH", 4)
    for i in range(4):
        (ws / "a").write_text(str(i))
        last = snap.save()
    rows = count(store, "snapshots")
    assert snap.save() == last
    assert count(store, "snapshots") == rows


def test_a_file_with_a_255_byte_name_restores(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    name = "n" * 255
    (ws / name).write_text("long")
    out = restored(store, snap.save(), tmp_path / "out")
    assert (out / name).read_text() == "long"


def test_a_file_named_like_the_restore_temp_file_survives_a_restore(
    snap: Snapshotter, ws: Path
) -> None:
    (ws / ".a.agentrunner-restore").write_text("mine")
    (ws / "a").write_text("A")
    snapshot_id = snap.save()
    before = tree(ws)
    (ws / ".a.agentrunner-restore").unlink()
    (ws / "a").write_text("B")
    snap.save()
    snap.restore(snapshot_id)
    assert tree(ws) == before


def test_restore_puts_back_a_folder_where_a_fifo_now_is(snap: Snapshotter, ws: Path) -> None:
    (ws / "build").mkdir()
    (ws / "build" / "out").write_text("o")
    snapshot_id = snap.save()
    shutil.rmtree(ws / "build")
    os.mkfifo(ws / "build")
    snap.save()
    snap.restore(snapshot_id)
    assert (ws / "build" / "out").read_text() == "o"


# -- through WorkspaceEnv ---------------------------------------------------------------------


def test_a_legacy_tar_snapshot_restores_after_reset_and_the_next_snapshot_works(
    store: TraceStore, tmp_path: Path
) -> None:
    legacy_dir = tmp_path / "snapshots"
    with WorkspaceEnv() as old:
        old.reset("demo-mean", seed=0)
        (old.workspace / "notes.txt").write_text("from an old episode\n")
        os.chmod(old.workspace / "stats.py", 0o755)
        legacy_id = SnapshotStore(legacy_dir).save(old.workspace)
        legacy_tree = tree(old.workspace)
    with WorkspaceEnv(snapshot_dir=legacy_dir) as env:
        env.bind_store(store)
        env.reset("demo-mean", seed=0)
        env.restore(legacy_id)
        assert tree(env.workspace) == legacy_tree
        after_restore = env.snapshot()
        assert store.snapshot_changes(after_restore) is not None
        result = env.step(
            ToolAction(name="write_file", arguments={"path": "notes.txt", "content": "later\n"})
        )
        assert result.snapshot is not None and result.snapshot != after_restore
        env.restore(after_restore)
        assert tree(env.workspace) == legacy_tree


def test_a_workspace_env_restores_its_own_snapshot_after_a_legacy_restore(
    tmp_path: Path,
) -> None:
    legacy_dir = tmp_path / "snapshots"
    with WorkspaceEnv(snapshot_dir=legacy_dir) as env:
        env.reset("demo-mean", seed=0)
        legacy_id = SnapshotStore(legacy_dir).save(env.workspace)
        (env.workspace / "extra.txt").write_text("x")
        own = env.snapshot()
        env.restore(legacy_id)
        assert not (env.workspace / "extra.txt").exists()
        env.restore(own)
        assert (env.workspace / "extra.txt").read_text() == "x"
