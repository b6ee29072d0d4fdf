"""``show EP`` prints its transcript in batches; the text is the live view's, event for event.

``show --follow`` (the live tail) prints each event as it arrives, one at a time; ``show``
gathers the same pieces and prints them in batches. For the demo episode, a fork of it and
an imported Claude Code session, with colour off and forced, the transcript ``show`` prints
is the one ``--follow`` prints, character for character (escape sequences included).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli

from agentrunner import TraceStore
from tests.imports.conftest import FIXTURES

CLAUDE_SESSION = FIXTURES / "claude-code" / "tool_heavy.jsonl"
COLOURS = {
    "no colour": {"NO_COLOR": "1", "FORCE_COLOR": None},
    "colour forced": {"FORCE_COLOR": "1", "NO_COLOR": None},
}


def _ok(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store holding the demo episode, a fork of it and (when the fixture is there) an
    imported Claude Code session; their ids by what they are."""
    db = tmp_path_factory.mktemp("show") / "traces.db"
    demo = json.loads(_ok("run", "--db", str(db), "--json").stdout.splitlines()[-1])
    ids = {"demo": demo["episode_id"]}
    before = {*TraceStore(db).episode_ids()}
    _ok("fork", ids["demo"], "--turn", "2", "--run", "--db", str(db))
    store = TraceStore(db)
    [ids["fork"]] = {*store.episode_ids()} - before
    if CLAUDE_SESSION.is_file():
        before = {*store.episode_ids()}
        _ok("import", "--db", str(db), str(CLAUDE_SESSION))
        [ids["claude-code"]] = {*store.episode_ids()} - before
    store.close()
    return db, ids


@pytest.mark.parametrize("colour", COLOURS)
@pytest.mark.parametrize("kind", ["demo", "fork", "claude-code"])
def test_show_prints_the_transcript_the_live_tail_prints(
    episodes: tuple[Path, dict[str, str]], kind: str, colour: str
) -> None:
    db, ids = episodes
    if kind not in ids:
        pytest.skip(f"{CLAUDE_SESSION} is absent")
    env = COLOURS[colour]
    shown = _ok("show", ids[kind], "--db", str(db), env=env).stdout
    tailed = _ok("show", ids[kind], "--follow", "--db", str(db), env=env).stdout
    transcript = shown.split("\n\n", 1)[1]  # after the summary
    assert transcript and tailed.startswith(transcript)
    assert tailed[len(transcript) :].count("\n") == 1  # then only the final status line
