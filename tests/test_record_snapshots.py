"""``agentrunner record --snapshots``: a recorded agent's working folder snapshotted as each
request arrives, so that ``diff`` shows its change (per step and whole) and ``verify --test``
scores it, as for native runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_clients import claude_env, client, scratch_repo
from record_support import CLIENTS, anthropic_text, anthropic_tool
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
START = {"calc.py": BUGGY, ".gitignore": "build/\n", "README": "a calculator\n"}
SECRET = "tok-agent-9f8e7d6c5b4a3928"
API_KEY = "sk-test-edits-0123456789"
"""The client's key (in its script, not in the environment): the proxy learns it from headers."""
PASSES = "python3 -c 'import calc; assert calc.add(2, 2) == 4'"
FAILS = "python3 -c 'import calc; assert calc.add(2, 2) == 5'"


def _agentrunner(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "AGENTRUNNER_DB")) and "KEY" not in k
    }
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args],
        cwd=cwd,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _folder(path: Path) -> Path:
    path.mkdir()
    for name, text in START.items():
        (path / name).write_text(text)
    return path


def _steps() -> list[Reply]:
    """Step 1 fixes calc.py; step 2 writes a note holding a key and an ignored build log."""
    return [
        Reply(events=anthropic_tool("toolu_1", "write", {"path": "calc.py", "text": FIXED})),
        Reply(
            events=anthropic_tool(
                "toolu_2",
                "write",
                {"path": "notes.txt", "text": f"{API_KEY} ", "env": "AGENT_TOKEN"},
            )
        ),
        Reply(events=anthropic_tool("toolu_3", "write", {"path": "build/out.log", "text": "x"})),
        Reply(events=anthropic_text("Fixed.")),
    ]


def _record(
    db: Path,
    folder: Path,
    *flags: str,
    agent: str = "anthropic_edits_folder",
    steps: list[Reply] | None = None,
) -> str:
    with SSEReplayServer(*(steps or _steps())) as upstream:
        done = _agentrunner(
            "record", "--db", str(db), "--json", "--upstream-anthropic", upstream.url, *flags,
            "--", sys.executable, str(CLIENTS / f"{agent}.py"),
            cwd=folder, env={"AGENT_TOKEN": SECRET},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (episode,) = json.loads(done.stdout.strip().splitlines()[-1])["episodes"]
    return str(episode)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One agent recorded with --snapshots: it fixed calc.py, then wrote two more files."""
    top = tmp_path_factory.mktemp("snapshots")
    folder = _folder(top / "work")
    db = top / "t.db"
    return {"db": db, "folder": folder, "top": top, "episode": _record(db, folder, "--snapshots")}


def _diff(recorded: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return _agentrunner("diff", recorded["episode"], "--db", str(recorded["db"]), *args)


def test_diff_shows_the_recorded_agents_change_as_a_patch_git_apply_accepts(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    patch = _diff(recorded)
    assert patch.returncode == 0, patch.stderr
    checkout = scratch_repo(tmp_path / "checkout", START)
    applied = subprocess.run(
        ["git", "apply"], input=patch.stdout, text=True, cwd=checkout, capture_output=True
    )
    assert applied.returncode == 0, applied.stderr
    assert (checkout / "calc.py").read_text() == FIXED
    assert (checkout / "notes.txt").exists() and not (checkout / "build").exists()


def test_diff_at_turn_one_shows_only_the_first_steps_change(recorded: dict[str, Any]) -> None:
    first = _diff(recorded, "--turn", "1", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["files"] == 1 and "+    return a + b" in summary["patch"]
    assert "notes.txt" not in summary["patch"]


def test_verify_test_scores_the_recorded_change_as_for_a_native_run(
    recorded: dict[str, Any],
) -> None:
    verdicts = []
    for command in (PASSES, FAILS):
        proc = _agentrunner(
            "verify", recorded["episode"], "--test", command, "--db", str(recorded["db"]), "--json"
        )
        assert proc.returncode == 0, proc.stderr
        (result,) = json.loads(proc.stdout.strip().splitlines()[-1])["results"]
        verdicts.append((result["score"], result["passed"]))
    assert verdicts == [(1.0, True), (0.0, False)]


def test_keys_the_agent_writes_into_its_folder_never_reach_the_store(
    recorded: dict[str, Any],
) -> None:
    assert (recorded["folder"] / "notes.txt").read_text() == f"{API_KEY} {SECRET}"
    assert _diff(recorded).stdout.count("[redacted:") == 2
    stored = b"".join(p.read_bytes() for p in recorded["top"].glob("t.db*"))
    assert SECRET.encode() not in stored and API_KEY.encode() not in stored


def test_an_agent_acting_on_the_models_words_has_its_change_per_step_too(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    steps = [
        Reply(events=anthropic_text(f"WRITE calc.py\n{FIXED}")),
        Reply(events=anthropic_text("WRITE extra.txt\nmore\n")),
        Reply(events=anthropic_text("Done.")),
    ]
    folder = _folder(tmp_path / "work")
    episode = _record(db, folder, "--snapshots", agent="anthropic_text_actions", steps=steps)
    diffs = [
        json.loads(_agentrunner("diff", episode, "--db", str(db), "--json", *turn).stdout)
        for turn in (("--turn", "1"), ())
    ]
    assert [d["files"] for d in diffs] == [1, 2]
    assert "+    return a + b" in diffs[0]["patch"] and "+more" in diffs[1]["patch"]


def _message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg", "type": "message", "role": "assistant", "model": "m", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 5},
    }  # fmt: skip


def test_a_subagents_edit_is_its_episodes_step_and_the_parents_agent_step(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    spawn = {"description": "fix", "prompt": "Fix the sign in calc.py."}
    write = {"path": "calc.py", "text": FIXED}
    steps = [
        Reply(body=_message([{"type": "tool_use", "id": "toolu_agent", "name": "Agent",
                              "input": spawn}], "tool_use")),
        Reply(body=_message([{"type": "tool_use", "id": "toolu_w", "name": "write",
                              "input": write}], "tool_use")),
        Reply(body=_message([{"type": "text", "text": "Sign fixed."}], "end_turn")),
        Reply(body=_message([{"type": "text", "text": "Done."}], "end_turn")),
    ]  # fmt: skip
    with SSEReplayServer(*steps) as upstream:
        done = _agentrunner(
            "record", "--db", str(db), "--json", "--snapshots", "--upstream-anthropic",
            upstream.url, "--", sys.executable, str(CLIENTS / "anthropic_subagent_edits.py"),
            cwd=_folder(tmp_path / "work"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parent, child = json.loads(done.stdout.strip().splitlines()[-1])["episodes"]
    with TraceStore(db) as store:
        named = {
            episode: [(r.payload["call_id"], bool(r.payload["snapshot"])) for r in rows]
            for episode in (parent, child)
            for rows in [store.events(episode, kinds=["tool.result"])]
        }
    assert named == {parent: [("toolu_agent", True)], child: [("toolu_w", True)]}
    for episode in (child, parent):
        patch = _agentrunner("diff", episode, "--db", str(db)).stdout
        assert "-    return a - b\n+    return a + b" in patch


def test_without_snapshots_the_recording_holds_no_snapshot_and_diff_says_why(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    episode = _record(db, _folder(tmp_path / "work"))
    with TraceStore(db) as store:
        results = store.events(episode, kinds=["tool.result"])
        start = store.events(episode, kinds=["episode.start"])[0].payload
    assert len(results) == 3 and all(r.payload.get("snapshot") is None for r in results)
    assert "base" not in start["env"]
    proc = _agentrunner("diff", episode, "--db", str(db))
    assert proc.returncode == 2 and "recorded without --snapshots" in proc.stderr


def test_a_folder_over_the_snapshot_size_limit_is_refused_before_the_agent_runs(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path / "work")
    with (folder / "big.bin").open("wb") as fh:
        fh.truncate(2 << 30)  # sparse: counted at its apparent size, nothing read
    proc = _agentrunner(
        "record", "--db", str(tmp_path / "t.db"), "--snapshots", "--upstream-anthropic",
        "http://127.0.0.1:9", "--", sys.executable, "-c", "open('ran', 'w')",
        cwd=folder,
    )  # fmt: skip
    assert proc.returncode == 1 and "over the limit of 1,024 MiB" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (folder / "ran").exists()


def test_resume_still_refuses_an_agent_recorded_with_snapshots(recorded: dict[str, Any]) -> None:
    proc = _agentrunner("resume", recorded["episode"], "--db", str(recorded["db"]))
    assert proc.returncode != 0 and "only the agent can continue it" in proc.stderr


@pytest.mark.slow
def test_claude_codes_edit_through_its_bash_tool_is_what_diff_shows(tmp_path: Path) -> None:
    claude = str(client("claude"))
    repo = scratch_repo(tmp_path / "repo", {"calc.py": BUGGY})
    db = tmp_path / "t.db"
    fix = "sed -i 's/a - b/a + b/' calc.py"
    script = [
        Reply(
            events=anthropic_tool("toolu_bash_1", "Bash", {"command": fix, "description": "fix"})
        ),
        Reply(events=anthropic_text("Fixed calc.py.")),
    ]
    with SSEReplayServer(*script) as upstream:
        done = _agentrunner(
            "record", "--db", str(db), "--json", "--snapshots",
            "--upstream-anthropic", upstream.url, "--",
            claude, "-p", "Fix calc.py.", "--output-format", "json",
            "--dangerously-skip-permissions",
            cwd=repo, env=claude_env(tmp_path / "home"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "calc.py").read_text() == FIXED
    with TraceStore(db) as store:
        (main,) = [
            e.episode_id
            for e in store.list_episodes()
            if any(
                r.payload["name"] == "Bash" for r in store.events(e.episode_id, kinds=["tool.call"])
            )
        ]
    patch = _agentrunner("diff", main, "--db", str(db))
    assert patch.returncode == 0, patch.stderr
    assert "-    return a - b\n+    return a + b" in patch.stdout
