"""The snapshotter's stat cache: what it may skip, and what it must still see.

A save compares only the paths its scan read afresh against the last snapshot; these tests
pin the cases where that shortcut would go wrong: an entry too recent to trust (git's racy
rule), a scan between two saves, renames and removals, and the files and bytes recorded
for a snapshot built from changes alone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentrunner.envs import snapshotter
from agentrunner.envs.manifest import FileEntry
from agentrunner.envs.snapshotter import Snapshotter
from agentrunner.store import TraceStore


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def snap(ws: Path, store: TraceStore) -> Snapshotter:
    return Snapshotter(ws, store)


def _past_the_racy_window() -> None:
    time.sleep(2 * snapshotter._RACY_NS / 1e9)


def _restored(store: TraceStore, snapshot_id: str, folder: Path) -> dict[str, str]:
    folder.mkdir()
    Snapshotter(folder, store).restore(snapshot_id)
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_a_file_stamped_as_late_as_its_scan_is_read_again_though_its_stat_is_unchanged(
    snap: Snapshotter, ws: Path
) -> None:
    # git's racy rule: a change in the same clock tick as the scan leaves the stat as it was,
    # so an entry whose timestamps are not older than its scan is never trusted by stat.
    (ws / "racy.txt").write_text("same tick\n")
    snap.save()
    _, hashed = snap.scan()
    assert list(hashed.values()) == [b"same tick\n"]
    _past_the_racy_window()
    snap.scan()  # read once more: its timestamps are now older than this scan
    _, hashed = snap.scan()
    assert hashed == {}


def test_a_save_after_a_scan_still_records_what_the_scan_saw_change(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("kept\n")
    _past_the_racy_window()
    first = snap.save()
    (ws / "a.txt").write_text("two, longer\n")
    _past_the_racy_window()
    snap.scan()  # the stat cache now knows the new content; the last snapshot does not
    second = snap.save()
    assert second != first
    assert _restored(store, second, tmp_path / "out") == {"a.txt": "two, longer\n",
                                                          "b.txt": "kept\n"}  # fmt: skip


def test_renames_and_removals_between_saves_reach_the_snapshot(
    snap: Snapshotter, store: TraceStore, ws: Path, tmp_path: Path
) -> None:
    for name in ("a", "b", "c"):
        (ws / f"{name}.txt").write_text(name)
    _past_the_racy_window()
    snap.save()
    (ws / "a.txt").rename(ws / "z.txt")
    (ws / "b.txt").unlink()
    renamed = snap.save()
    assert _restored(store, renamed, tmp_path / "out") == {"c.txt": "c", "z.txt": "a"}


def test_an_incremental_snapshot_records_the_files_and_bytes_of_the_whole_tree(
    snap: Snapshotter, store: TraceStore, ws: Path
) -> None:
    (ws / "pkg").mkdir()
    (ws / "pkg" / "a.py").write_text("a" * 10)
    (ws / "b.py").write_text("b" * 20)
    _past_the_racy_window()
    snap.save()
    (ws / "pkg" / "a.py").write_text("a" * 15)
    (ws / "b.py").unlink()
    (ws / "c.py").write_text("c" * 7)
    (ws / "pkg" / "d").symlink_to("a.py")
    snap.save()
    snap.restore(snap.save())
    (ws / "e.py").write_text("e" * 3)
    last = snap.save()
    row = (
        store.raw_connection()
        .execute("SELECT files, bytes FROM snapshots WHERE id = ?", (last,))
        .fetchone()
    )
    files = [e for e in snap.load(last).values() if isinstance(e, FileEntry)]
    assert tuple(row) == (len(files), sum(e.size for e in files)) == (3, 25)
