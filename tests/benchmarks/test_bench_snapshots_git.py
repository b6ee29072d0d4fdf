"""Snapshots and restores beside git on the same 10,000-file tree (issue 25, goal 3).

Run on demand: ``pytest tests/benchmarks/test_bench_snapshots_git.py -m benchmark -s``.
Each figure is the median of alternated runs (ours, then the baseline, then ours ...) in the
same process and on the same machine, printed with its ratio; nothing is asserted about time
(the machine may be loaded), only that both sides did the same work:

- a step's snapshot (one file rewritten): ``Snapshotter.save`` against ``git add -A && git
  write-tree`` and against a bare ``os.scandir`` + ``lstat`` walk in Python;
- a snapshot of an unchanged tree: the same pair;
- an incremental restore (one file differs): ``Snapshotter.restore`` against ``git read-tree
  -m -u`` (git trusts its index; agentrunner scans the tree first, since an agent may have
  changed anything).
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import statistics
import string
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrunner.envs.snapshotter import Snapshotter
from agentrunner.store import TraceStore

pytestmark = pytest.mark.benchmark

FOLDERS = 100
FILES = 100
RUNS = 7
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.com",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.com",
}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def _tree(root: Path) -> None:
    rng = random.Random(0)
    pool = "".join(rng.choices(string.ascii_lowercase + " \n", k=1 << 20))
    for d in range(FOLDERS):
        folder = root / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for f in range(FILES):
            at = rng.randrange(len(pool) - 2000)
            (folder / f"mod{f:03d}.py").write_text(f"# {d}/{f}\n{pool[at : at + 2000]}")


def _edit(root: Path, n: int) -> None:
    path = root / f"pkg{n % FOLDERS:03d}" / f"mod{(n * 7) % FILES:03d}.py"
    path.write_text(path.read_text() + f"\n# step {n}\n")


def _bare_walk(folder: str) -> int:
    found = 0
    with os.scandir(folder) as it:
        for item in it:
            st = item.stat(follow_symlinks=False)
            found += _bare_walk(item.path) if stat.S_ISDIR(st.st_mode) else 1
    return found


def _alternated(*sides: Callable[[int], float]) -> list[float]:
    """Median seconds of each side, the sides run in turn RUNS times."""
    times: list[list[float]] = [[] for _ in sides]
    for n in range(RUNS):
        for i, side in enumerate(sides):
            times[i].append(side(n))
    return [statistics.median(t) for t in times]


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _line(what: str, ours: float, name: str, base: float) -> None:
    print(f"\n{what}: agentrunner {ours * 1e3:.1f} ms, {name} {base * 1e3:.1f} ms,"
          f" ratio {ours / base:.2f}x")  # fmt: skip


def test_snapshots_and_restores_beside_git(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "git"
    _tree(ours)
    shutil.copytree(ours, theirs)
    _git(theirs, "init", "-q")
    _git(theirs, "add", "-A")
    _git(theirs, "write-tree")
    with TraceStore(tmp_path / "t.db") as store:
        snap = Snapshotter(ours, store)
        snap.save()
        time.sleep(0.1)  # past the racy window of the first scan, as git's index is
        snap.save()

        def git_snapshot() -> None:
            _git(theirs, "add", "-A")
            _git(theirs, "write-tree")

        same = _alternated(
            lambda n: _timed(snap.save),
            lambda n: _timed(git_snapshot),
            lambda n: _timed(lambda: _bare_walk(str(ours))),
        )
        _line("snapshot, nothing changed", same[0], "git add -A && git write-tree", same[1])
        _line("snapshot, nothing changed", same[0], "a bare Python walk", same[2])

        def our_step(n: int) -> float:
            _edit(ours, n)
            return _timed(snap.save)

        def git_step(n: int) -> float:
            _edit(theirs, n)
            return _timed(git_snapshot)

        step = _alternated(our_step, git_step, lambda n: _timed(lambda: _bare_walk(str(ours))))
        _line("snapshot after a one-file step", step[0], "git add -A && git write-tree", step[1])
        _line("snapshot after a one-file step", step[0], "a bare Python walk", step[2])

        def our_restore(n: int) -> float:
            before = snap.save()
            _edit(ours, 100 + n)
            snap.save()
            elapsed = _timed(lambda: snap.restore(before))
            assert snap.scan()[0] == snap.load(before)
            return elapsed

        def git_restore(n: int) -> float:
            _git(theirs, "add", "-A")
            before = _git(theirs, "write-tree")
            _edit(theirs, 100 + n)
            _git(theirs, "add", "-A")
            elapsed = _timed(lambda: _git(theirs, "read-tree", "-m", "-u", before))
            assert _git(theirs, "diff-files", "--name-only") == ""
            assert _git(theirs, "write-tree") == before
            return elapsed

        restore = _alternated(our_restore, git_restore)
        _line("incremental restore, one file differs", restore[0], "git read-tree -m -u",
              restore[1])  # fmt: skip
