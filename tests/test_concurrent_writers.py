"""Many processes, one store: two ``agentrunner run`` writers and a reader at the same time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from agentrunner import TraceStore

PAGE = 25


class Reader(threading.Thread):
    """Lists episodes and pages through every episode's events until stopped (like the TUI)."""

    def __init__(self, db: Path) -> None:
        super().__init__(name="store-reader", daemon=True)
        self.db = db
        self.stop = threading.Event()
        self.passes = 0
        self.pages = 0
        self.seen_running: set[str] = set()
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            with TraceStore(self.db) as store:
                while not self.stop.is_set():
                    self.read_all(store)
                    self.passes += 1
                    time.sleep(0.002)  # a tight poll, as a live view's
        except Exception as exc:  # reported by the test, with its type
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def read_all(self, store: TraceStore) -> None:
        for episode in store.list_episodes():
            if episode.status == "running":
                self.seen_running.add(episode.episode_id)
            after = 0
            while True:
                page = store.events(episode.episode_id, after_seq=after, limit=PAGE)
                self.pages += 1
                seqs = [e.seq for e in page]
                assert seqs == list(range(after + 1, after + 1 + len(page))), seqs
                for event in page:
                    event.typed()
                if len(page) < PAGE:
                    break
                after = seqs[-1]


def _run(db: Path, tmp: Path, seed: int) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.005", "TMPDIR": str(tmp)}
    cli = [sys.executable, "-m", "agentrunner.cli.main", "run", "--json", "--seed", str(seed)]
    return subprocess.Popen(
        [*cli, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_two_runs_and_a_reader_share_one_store(tmp_path: Path) -> None:
    db = tmp_path / "traces" / "traces.db"
    TraceStore(db).close()  # the store exists first, as when the TUI is open
    reader = Reader(db)
    reader.start()
    began = time.monotonic()
    runs = [_run(db, tmp_path, seed) for seed in (1, 2)]
    outputs = [proc.communicate(timeout=120) for proc in runs]
    reader.stop.set()
    reader.join(timeout=30)
    print(
        f"\n2 runs + reader in {time.monotonic() - began:.1f} s: reader made {reader.passes}"
        f" passes, {reader.pages} pages, saw {len(reader.seen_running)} episodes running"
    )

    for proc, (_, err) in zip(runs, outputs, strict=True):
        assert "database is locked" not in err
        assert proc.returncode == 0, err
    assert reader.errors == []
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert [(r["status"], r["total_reward"]) for r in results] == [("completed", 1.0)] * 2
    assert len(reader.seen_running) == 2  # the reads really overlapped both writers
    with TraceStore(db) as store:
        assert store.raw_connection().execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for result in results:
            seqs = [e.seq for e in store.iter_events(result["episode_id"])]
            assert seqs == list(range(1, len(seqs) + 1))
            assert store.episode(result["episode_id"]).status == "completed"


def test_processes_creating_one_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    code = "import sys\nfrom agentrunner import TraceStore\nTraceStore(sys.argv[1]).close()"
    for i in range(8):
        db = tmp_path / f"fresh{i}" / "traces.db"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE, text=True
            )
            for _ in range(3)
        ]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], errors
