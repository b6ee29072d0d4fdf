"""``ls`` reads an ``episode.end`` as JSON: one whose fields are not of their type (written by
another tool) names that episode in one line on stderr and exits 1, never a traceback."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentrunner.values.statuses import EVENT_KINDS


def _agentrunner(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"},
        timeout=300,
    )


def test_an_episode_end_without_a_stop_reason_is_named_as_corrupt(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    assert _agentrunner("run", "--db", str(db), "--json").returncode == 0
    with sqlite3.connect(db) as conn:  # another tool rewrites the end the run recorded
        conn.execute("DROP TRIGGER event_log_refuse_update")
        conn.execute(
            "UPDATE event_log SET payload = ? WHERE kind = ?",
            ('{"turns": 1}', EVENT_KINDS.index("episode.end") + 1),
        )
    ls = _agentrunner("ls", "--db", str(db))
    assert (ls.returncode, ls.stderr.count("\n")) == (1, 1)
    assert "the episode.end of episode" in ls.stderr and "is corrupt" in ls.stderr
