"""Claude Code sessions imported: counts checked against the raw files, idempotent, growing,
followed live through a SIGKILL, forked and re-sampled with another model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import claude_code
from agentrunner.imports.importer import import_file
from agentrunner.imports.registry import detect, import_paths
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import can_resume, resume_episode
from agentrunner.values.errors import UsageError
from agentrunner.values.events import ModelRequest
from providers.scripted import ScriptedModel
from tests.imports.conftest import FIXTURES, fixture_files, needs

SAMPLES = fixture_files("claude-code", "*.jsonl")
SESSION = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # tool_heavy.jsonl's sessionId
SUBAGENT_SESSION = "491e126e-1e71-469c-ade2-fcc8af567c74"  # subagent.jsonl's


def _raw_sessions(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The raw conversation records of each session in a file, read directly: the main
    session's user/assistant lines, and each subagent's (agent_progress) messages."""
    sessions: dict[str, list[dict[str, Any]]] = {"": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        data = record.get("data")
        if record.get("type") == "progress" and isinstance(data, dict):
            if data.get("type") == "agent_progress" and isinstance(data.get("message"), dict):
                sessions.setdefault(f"agent-{data.get('agentId')}", []).append(data["message"])
            continue
        message = record.get("message")
        conversation = record.get("type") in ("user", "assistant") and isinstance(message, dict)
        if conversation and "content" in message:
            sessions["sidechain" if record.get("isSidechain") else ""].append(record)
    return sessions


def _expected(records: list[dict[str, Any]]) -> dict[str, int]:
    users = calls = tool_calls = results = 0
    usage: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for record in records:
        content = record["message"].get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = blocks if isinstance(blocks, list) else []
        if record["type"] == "user":
            kinds = [b.get("type") if isinstance(b, dict) else "text" for b in blocks]
            users += any(k != "tool_result" for k in kinds)
            results += kinds.count("tool_result")
        elif record.get("isApiErrorMessage"):
            continue
        else:
            message_id = record["message"].get("id") or record.get("uuid")
            if not order or order[-1] != message_id:
                order.append(message_id)
            usage[message_id] = record["message"].get("usage") or usage.get(message_id, {})
            tool_calls += sum(1 for b in blocks if isinstance(b, dict) and b["type"] == "tool_use")
    calls = len(order)
    tokens_in = sum(
        u.get("input_tokens", 0)
        + u.get("cache_read_input_tokens", 0)
        + u.get("cache_creation_input_tokens", 0)
        for u in usage.values()
    )
    tokens_out = sum(u.get("output_tokens", 0) for u in usage.values())
    return {
        "users": users,
        "calls": calls,
        "tool_calls": tool_calls,
        "results": results,
        "input": tokens_in,
        "output": tokens_out,
    }


def _counts(store: TraceStore, episode_id: str) -> dict[str, int]:
    out = Counter()
    for row in store.iter_events(episode_id):
        payload = row.payload
        if row.kind == "message" and payload["role"] == "user" and payload["reason"] == "prompt":
            out["users"] += 1
        elif row.kind == "model.request":
            out["calls"] += 1
        elif row.kind == "tool.call":
            out["tool_calls"] += 1
        elif row.kind == "tool.result":
            out["results"] += 1
        elif row.kind == "usage":
            out["input"] += payload["input_tokens"]
            out["output"] += payload["output_tokens"]
    keys = ("users", "calls", "tool_calls", "results", "input", "output")
    return {k: out[k] for k in keys}


def _log(store: TraceStore, episode_id: str) -> list[tuple[str, dict[str, Any]]]:
    """An episode's events without the import's own bookkeeping (positions, and the tools
    inferred from the calls: an import of a longer file has seen more of them)."""
    out = []
    for row in store.iter_events(episode_id):
        payload = {k: v for k, v in row.payload.items() if k not in ("src", "tools_hash")}
        if row.kind == "episode.start":
            payload["env"] = {k: v for k, v in payload["env"].items() if k not in ("sha256",)}
        out.append((row.kind, payload))
    return out


@needs("claude-code")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_every_session_counts_what_its_file_holds(store: TraceStore, path: Path) -> None:
    reports = import_file(store, path, claude_code)
    by_session = {r.source.session_id.rpartition("/")[2]: r for r in reports}
    raw = {k: v for k, v in _raw_sessions(path).items() if v or not k}
    assert len(reports) == len(raw)
    for key, records in raw.items():
        report = reports[0] if not key else by_session[key]
        assert _counts(store, report.episode_id) == _expected(records), key
        episode = store.episode(report.episode_id)
        assert (episode.status, episode.stop_reason) == ("completed", "imported")
        assert episode.env["format"] == "claude-code"


@needs("claude-code")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_nothing_is_dropped_what_is_not_mapped_is_kept_raw(store: TraceStore, path: Path) -> None:
    (report, *_) = import_file(store, path, claude_code)
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    kept = [
        row.payload["raw"]
        for row in store.iter_events(report.episode_id, kinds=["error"])
        if row.payload["where"] == "import"
    ]
    conversation = sum(len(v) for v in _raw_sessions(path).values())
    # every line is the main session's, a subagent's message, or kept raw
    assert len(kept) == len(lines) - conversation
    assert report.kept_raw == len(kept)


@needs("claude-code")
def test_importing_twice_adds_nothing(store: TraceStore) -> None:
    first = import_paths(store, [FIXTURES / "claude-code"])
    rows = store.count_episodes()
    second = import_paths(store, [FIXTURES / "claude-code"])
    assert store.count_episodes() == rows
    assert sum(s.events for f in first for s in f.sessions) > 0
    assert sum(s.events for f in second for s in f.sessions) == 0
    assert not any(s.created for f in second for s in f.sessions)


@needs("claude-code")
@pytest.mark.parametrize("cut", [1, 7, 20, 35])
def test_a_session_that_grew_gains_only_its_new_records(tmp_path: Path, cut: int) -> None:
    source = FIXTURES / "claude-code" / "tool_heavy.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / f"{SESSION}.jsonl"  # Claude Code names a session's file by its id
    growing.write_text("".join(lines[:cut]), encoding="utf-8")
    with TraceStore(tmp_path / "grown.db") as grown, TraceStore(tmp_path / "whole.db") as whole:
        import_file(grown, growing, claude_code, live=True)  # still being written
        growing.write_text("".join(lines), encoding="utf-8")
        (report,) = import_file(grown, growing, claude_code)
        assert not report.created
        (reference,) = import_file(whole, source, claude_code)
        assert _log(grown, report.episode_id)[1:] == _log(whole, reference.episode_id)[1:]


@needs("claude-code")
@pytest.mark.parametrize("cut", range(2, 39, 3))
def test_a_call_closed_at_the_end_of_a_file_that_grows_continues(tmp_path: Path, cut: int) -> None:
    """A finished-looking file that was not finished: the call its import closed at the
    end goes on as a new call when more of it comes; nothing is lost or doubled."""
    source = FIXTURES / "claude-code" / "tool_heavy.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / f"{SESSION}.jsonl"  # Claude Code names a session's file by its id
    growing.write_text("".join(lines[:cut]), encoding="utf-8")
    with TraceStore(tmp_path / "grown.db") as grown, TraceStore(tmp_path / "whole.db") as whole:
        import_file(grown, growing, claude_code)
        growing.write_text("".join(lines), encoding="utf-8")
        (report,) = import_file(grown, growing, claude_code)
        (reference,) = import_file(whole, source, claude_code)
        got = Counter(k for k, _ in _log(grown, report.episode_id))
        want = Counter(k for k, _ in _log(whole, reference.episode_id))
        for kind in ("message", "model.chunk", "tool.call", "tool.result", "error"):
            assert got[kind] == want[kind], kind
        assert got["model.request"] - want["model.request"] in (0, 1)
        assert got["model.response"] == got["model.request"]


@needs("claude-code")
def test_a_session_another_process_is_writing_is_refused_untouched(
    store: TraceStore, tmp_path: Path
) -> None:
    source = FIXTURES / "claude-code" / "tool_heavy.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / f"{SESSION}.jsonl"
    growing.write_text("".join(lines[:20]), encoding="utf-8")
    (report,) = import_file(store, growing, claude_code)
    assert store.episode(report.episode_id).status == "completed"  # the lease was released
    growing.write_text("".join(lines), encoding="utf-8")
    before = store.episode(report.episode_id).last_seq
    refused = pytest.raises(UsageError, match="being written by another process")
    with TraceStore(store.path) as other, other.lease(report.episode_id), refused:
        import_file(store, growing, claude_code)
    assert store.episode(report.episode_id).last_seq == before


@needs("claude-code")
def test_detect_names_claude_code_files_only() -> None:
    for path in sorted(p for p in FIXTURES.glob("*/*") if p.is_file()):
        assert (detect(path) == "claude-code") == (path.parent.name == "claude-code"), path


@needs("claude-code")
def test_a_fork_of_an_imported_session_resamples_its_exact_input(store: TraceStore) -> None:
    (main, _subagent) = import_file(store, FIXTURES / "claude-code" / "subagent.jsonl", claude_code)
    episode = store.episode(main.episode_id)
    assert "no environment" in (can_resume(store, episode) or "")
    turn = 4
    before = store.reconstruct_request(main.episode_id, turn)
    (fork_id,) = fork_episode(store, main.episode_id, turn=turn, model="scripted:demo")
    rollout = resume_episode(store, fork_id, model_fn=ScriptedModel("demo"))
    assert rollout.turns_completed == turn
    assert store.reconstruct_request(fork_id, turn).messages == before.messages
    requests = [r.typed() for r in store.iter_events(fork_id, kinds=["model.request"])]
    assert isinstance(requests[-1], ModelRequest) and requests[-1].provider == "scripted"
    tools = {t.name for t in store.reconstruct_request(fork_id, turn).tools}
    assert {"Bash", "Read", "Task"} <= tools  # inferred from the calls the session made
    assert store.episode(fork_id).env["tools_from"] == "calls"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentrunner.cli.entry", *args]


def _wait_for(store_path: Path, want: int, proc: subprocess.Popen[bytes]) -> int:
    """The number of events in the store once it reaches ``want`` (or the follower died)."""
    deadline = time.monotonic() + 120
    seen = -1
    while time.monotonic() < deadline:
        with TraceStore(store_path) as store:
            ids = store.episode_ids()
            seen = sum(store.episode(e).last_seq for e in ids)
        if seen >= want or proc.poll() is not None:
            return seen
        time.sleep(0.05)
    return seen


@needs("claude-code")
def test_follow_imports_a_growing_session_once_through_a_sigkill(tmp_path: Path) -> None:
    source = FIXTURES / "claude-code" / "subagent.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    session = tmp_path / "live" / f"{SUBAGENT_SESSION}.jsonl"
    session.parent.mkdir()
    session.write_text("", encoding="utf-8")
    db = tmp_path / "traces.db"
    reference = tmp_path / "reference" / session.name  # the same name: the same session id
    reference.parent.mkdir()

    def expected_events(upto: int) -> int:
        reference.write_text("".join(lines[:upto]), encoding="utf-8")
        with TraceStore(tmp_path / f"ref{upto}.db") as ref:
            reports = import_file(ref, reference, claude_code, live=True)
            return sum(ref.episode(r.episode_id).last_seq for r in reports)

    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"}
    follow = _cli("import", "--db", str(db), "--follow", "--poll", "0.02", str(session.parent))
    proc = subprocess.Popen(follow, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        written = 0
        for upto, kill in ((10, False), (30, True), (55, True), (len(lines), False)):
            chunk = "".join(lines[written:upto])
            half = len(chunk) // 2
            with session.open("a", encoding="utf-8") as f:  # a line written in two halves
                f.write(chunk[:half])
                f.flush()
                f.write(chunk[half:])
            written = upto
            want = expected_events(upto)
            assert _wait_for(db, want, proc) == want, f"after {upto} lines"
            if kill:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                proc = subprocess.Popen(
                    follow, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
        with TraceStore(db) as got, TraceStore(tmp_path / "final.db") as final:
            shutil.copy(session, reference)
            reports = import_file(final, reference, claude_code, live=True)
            for report in reports:
                mine = got.imported_episode(f"claude-code:{report.source.session_id}")
                assert mine is not None
                ours, theirs = _log(got, mine), _log(final, report.episode_id)
                assert [k for k, _ in ours] == [k for k, _ in theirs]
                assert ours[1:] == theirs[1:]
                assert got.episode(mine).status == "running"  # the follower holds it
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    with TraceStore(db) as store:
        assert {store.episode(e).status for e in store.episode_ids()} == {"completed"}
