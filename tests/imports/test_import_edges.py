"""Importing at the edges: a format named for a file of another, `import --follow` stopped
with a model call open, `show` of a session with many records kept raw, the words of a JSON
error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_process import AGENTRUNNER, run_cli

from agentrunner import TraceStore
from agentrunner.imports import claude_code
from agentrunner.imports.importer import SessionReport, import_file
from agentrunner.imports.items import jsonl_records
from tests.imports.conftest import FIXTURES, needs

TOOL_HEAVY = FIXTURES / "claude-code" / "tool_heavy.jsonl"
SESSION = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # tool_heavy.jsonl's sessionId


@needs("claude-code")
def test_a_format_named_for_a_file_of_another_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "traces.db"
    done = run_cli("import", "--db", str(db), "--format", "codex", str(TOOL_HEAVY))
    assert done.returncode == 2, done.stderr
    assert "no conversation" in done.stderr and "Traceback" not in done.stderr
    with TraceStore(db) as store:
        assert store.count_episodes() == 0


def live_import(store: TraceStore, path: Path) -> list[SessionReport]:
    return import_file(store, path, claude_code, live=True)


def _events(db: Path) -> int:
    with TraceStore(db) as store:
        return sum(store.episode(e).last_seq for e in store.episode_ids())


def _requests_and_responses(db: Path) -> tuple[int, int]:
    with TraceStore(db) as store:
        kinds = [
            row.kind
            for e in store.episode_ids()
            for row in store.iter_events(e, kinds=["model.request", "model.response"])
        ]
    return kinds.count("model.request"), kinds.count("model.response")


@needs("claude-code")
def test_ctrl_c_on_follow_closes_the_model_call_its_file_left_open(tmp_path: Path) -> None:
    lines = TOOL_HEAVY.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = max(i for i, line in enumerate(lines[:20]) if json.loads(line)["type"] == "assistant")
    session = tmp_path / "live" / f"{SESSION}.jsonl"
    session.parent.mkdir()
    session.write_text("".join(lines[: cut + 1]), encoding="utf-8")  # its last call is open
    with TraceStore(tmp_path / "live.db") as live:  # what following it imports
        want = sum(live.episode(r.episode_id).last_seq for r in live_import(live, session))
        assert _requests_and_responses(tmp_path / "live.db") == (2, 1)  # the last call open
    db = tmp_path / "traces.db"
    follow = [*AGENTRUNNER, "import", "--db", str(db), "--follow", "--poll", "0.05"]
    proc = subprocess.Popen([*follow, str(session.parent)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if db.exists() and _events(db) >= want:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    asked, answered = _requests_and_responses(db)
    assert asked == answered
    with TraceStore(db) as store:  # as a one-shot import of the file as it is closes it
        assert {store.episode(e).status for e in store.episode_ids()} == {"completed"}
    with TraceStore(tmp_path / "once.db") as once:
        import_file(once, session, claude_code)
    assert _requests_and_responses(tmp_path / "once.db") == (asked, answered)


@needs("claude-code")
def test_show_prints_a_run_of_records_kept_raw_as_one_line(tmp_path: Path) -> None:
    session = tmp_path / f"{SESSION}.jsonl"
    lines = TOOL_HEAVY.read_text(encoding="utf-8").splitlines(keepends=True)
    noise = [json.dumps({"type": "noise-for-the-test", "n": i}) + "\n" for i in range(40)]
    session.write_text("".join([*lines[:5], *noise, *lines[5:]]), encoding="utf-8")
    db = tmp_path / "traces.db"
    assert run_cli("import", "--db", str(db), str(session)).returncode == 0
    with TraceStore(db) as store:
        (episode,) = store.episode_ids()
    shown = run_cli("show", "--db", str(db), episode)
    assert shown.returncode == 0, shown.stderr
    grouped = [line for line in shown.stdout.splitlines() if "40 × noise-for-the-test" in line]
    assert len(grouped) == 1, shown.stdout
    assert "noise-for-the-test record" not in shown.stdout.replace(grouped[0], "")


def test_a_line_that_is_not_json_says_where_in_plain_words(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": "unterminated\n{"b": 1}\n', encoding="utf-8")
    first, _ = jsonl_records(bad, live=False)
    assert "starting at char" in first.problem and "at at" not in first.problem


def test_an_incomplete_json_trace_is_named_once_in_its_error(tmp_path: Path) -> None:
    half = tmp_path / "trajectory.traj.json"
    half.write_text('{"trajectory": [{"a": "cut', encoding="utf-8")
    db = tmp_path / "traces.db"
    done = run_cli("import", "--db", str(db), "--format", "mini-swe-agent", str(half))
    assert done.returncode == 2
    assert done.stderr.count(str(half)) == 1, done.stderr
    assert "at at" not in done.stderr and sys.executable not in done.stderr
