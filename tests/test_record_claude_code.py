"""The real Claude Code CLI recorded by ``agentrunner record`` against a loopback upstream
that streams scripted Anthropic answers, then replayed with that upstream stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_clients import claude_env, client, scratch_repo
from record_support import anthropic_text, anthropic_tool, last_json
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body

pytestmark = pytest.mark.slow

PROMPT = "Write the note file."
COMMAND = "cat notes.txt | tee copy.txt"  # its output is the tool result the model reads


def _agentrunner(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args],
        cwd=cwd,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _claude(
    db: Path, repo: Path, home: Path, *record_args: str
) -> subprocess.CompletedProcess[str]:
    claude = str(client("claude"))
    return _agentrunner(
        "record", "--db", str(db), "--json", *record_args, "--",
        claude, "-p", PROMPT, "--output-format", "json", "--dangerously-skip-permissions",
        cwd=repo, env=claude_env(home),
    )  # fmt: skip


def _script() -> list[Reply]:
    bash = {"command": COMMAND, "description": "copy the notes"}
    return [
        Reply(events=anthropic_tool("toolu_bash_1", "Bash", bash)),
        Reply(events=anthropic_text("Done: copy.txt written.")),
    ]


@pytest.fixture
def recorded(tmp_path: Path) -> dict[str, Any]:
    """One recorded Claude Code session: the command ran, the file exists."""
    client("claude")
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "first notes\n"})
    db = tmp_path / "t.db"
    with SSEReplayServer(*_script()) as upstream:
        done = _claude(db, repo, tmp_path / "home", "--upstream-anthropic", upstream.url)
    assert done.returncode == 0, done.stderr[-3000:]
    posts = [r for r in upstream.requests if r.path.split("?")[0].endswith("/v1/messages")]
    return {"db": db, "repo": repo, "home": tmp_path / "home", "done": done, "posts": posts,
            "episodes": last_json(done.stdout)["episodes"]}  # fmt: skip


def test_claude_codes_command_ran_and_every_call_it_sent_is_one_recorded_request(
    recorded: dict[str, Any],
) -> None:
    assert (recorded["repo"] / "copy.txt").read_text() == "first notes\n"
    (episode,) = recorded["episodes"]
    with TraceStore(recorded["db"]) as store:
        requests = store.events(episode, kinds=["model.request"])
        (call,) = store.events(episode, kinds=["tool.call"])
        (result,) = store.events(episode, kinds=["tool.result"])
        assert store.episode(episode).status == "completed"
    assert len(requests) == len(recorded["posts"]) == 2
    assert call.payload["name"] == "Bash" and call.payload["parsed"]["command"] == COMMAND
    assert result.payload["call_id"] == "toolu_bash_1" and result.seq < requests[1].seq


def test_each_rebuilt_claude_code_request_equals_the_body_the_upstream_received(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    with TraceStore(recorded["db"]) as store:
        rebuilt = [request_body(store, episode, turn) for turn in (1, 2)]
    assert rebuilt == [json.loads(r.raw) for r in recorded["posts"]]


def test_request_diff_names_exactly_the_messages_claude_code_added_between_two_calls(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    first, second = (json.loads(r.raw)["messages"] for r in recorded["posts"])
    shown = _agentrunner(
        "show", episode, "--request-diff", "2", "--json", "--db", str(recorded["db"]),
        cwd=recorded["repo"], env={"HOME": str(recorded["home"])},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    found = last_json(shown.stdout)
    changes = found["messages"]["changes"]
    assert [c["kind"] for c in changes] == ["added"] * (len(second) - len(first))
    assert [c["after"]["raw"] for c in changes] == second[len(first) :]
    assert found["system"] is None and found["tools"]["added"] == []


def test_show_and_export_read_a_recorded_claude_code_session(recorded: dict[str, Any]) -> None:
    (episode,) = recorded["episodes"]
    env = {"HOME": str(recorded["home"])}
    shown = _agentrunner(
        "show", episode, "--db", str(recorded["db"]), cwd=recorded["repo"], env=env
    )
    exported = _agentrunner(
        "export", "--format", "atif", episode, "--db", str(recorded["db"]),
        cwd=recorded["repo"], env=env,
    )  # fmt: skip
    assert shown.returncode == 0 and "Bash" in shown.stdout and COMMAND in shown.stdout
    assert exported.returncode == 0, exported.stderr
    from test_export_atif import rule_violations, schema_errors

    doc = json.loads(exported.stdout.strip().splitlines()[-1])
    assert schema_errors(doc) == [] and rule_violations(doc) == []


def test_a_replay_with_the_upstream_stopped_makes_the_same_change(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    (recorded["repo"] / "copy.txt").unlink()
    replayed = _claude(recorded["db"], recorded["repo"], recorded["home"], "--replay", episode)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    assert (recorded["repo"] / "copy.txt").read_text() == "first notes\n"
    (again,) = last_json(replayed.stdout)["episodes"]
    with TraceStore(recorded["db"]) as store:
        assert store.episode(again).env["replay_of"] == episode
        assert len(store.events(again, kinds=["model.response"])) == 2


def test_a_replay_whose_tool_output_changed_stops_at_that_turn_naming_the_result(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    (recorded["repo"] / "notes.txt").write_text("other notes\n")
    (recorded["repo"] / "copy.txt").unlink()
    replayed = _claude(recorded["db"], recorded["repo"], recorded["home"], "--replay", episode)
    report = last_json(replayed.stdout)["diverged"]
    assert replayed.returncode == 1 and report is not None
    assert f"turn 2 of episode {episode}" in report and "toolu_bash_1" in report


def test_a_diverging_replay_with_on_miss_live_goes_on_against_the_upstream_as_a_fork(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    (recorded["repo"] / "notes.txt").write_text("other notes\n")
    with SSEReplayServer(Reply(events=anthropic_text("Copied the other notes."))) as upstream:
        replayed = _claude(
            recorded["db"], recorded["repo"], recorded["home"],
            "--replay", episode, "--on-miss", "live", "--upstream-anthropic", upstream.url,
        )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    result = last_json(replayed.stdout)
    assert result["went_live"] == [episode, 2] and len(upstream.requests) == 1
    with TraceStore(recorded["db"]) as store:
        forks = [e for e in result["episodes"] if store.episode(e).parent_episode_id == episode]
        (fork,) = forks
        (live,) = [e for e in store.events(fork, kinds=["tool.result"]) if e.seq > 0][-1:]
        assert store.episode(fork).status == "completed"
    assert "other notes" in live.payload["observation"]


def test_a_fork_at_call_2_with_a_message_serves_call_1_and_sends_call_2_live(
    recorded: dict[str, Any],
) -> None:
    (episode,) = recorded["episodes"]
    with SSEReplayServer(Reply(events=anthropic_text("Done, and hi."))) as upstream:
        forked = _claude(
            recorded["db"], recorded["repo"], recorded["home"],
            "--fork", episode, "--turn", "2", "--message", "Also say hi.",
            "--upstream-anthropic", upstream.url,
        )  # fmt: skip
    assert forked.returncode == 0, forked.stderr[-3000:]
    (sent,) = upstream.requests
    last = sent.json["messages"][-1]
    assert last["role"] == "user" and last["content"][-1] == {
        "type": "text",
        "text": "Also say hi.",
    }
    (fork,) = last_json(forked.stdout)["episodes"]
    with TraceStore(recorded["db"]) as store:
        assert store.episode(fork).parent_episode_id == episode
        assert request_body(store, fork, 2) == sent.json
        own = [e.kind for e in store.events(fork) if e.seq > store.episode(fork).fork_seq]
    assert own[:3] == ["tool.result", "message", "model.request"] and own[-1] == "episode.end"


def test_a_fork_at_call_2_with_a_response_file_answers_it_from_the_file_without_the_upstream(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    (episode,) = recorded["episodes"]
    answer = tmp_path / "answer.sse"
    answer.write_text("\n\n".join(anthropic_text("Forked: the notes are copied.")) + "\n\n")
    with SSEReplayServer() as upstream:
        forked = _claude(
            recorded["db"], recorded["repo"], recorded["home"],
            "--fork", episode, "--turn", "2", "--response", str(answer),
            "--upstream-anthropic", upstream.url,
        )  # fmt: skip
        reached = list(upstream.requests)
    assert forked.returncode == 0, forked.stderr[-3000:]
    assert reached == [] and "Forked: the notes are copied." in forked.stdout
    (fork,) = last_json(forked.stdout)["episodes"]
    with TraceStore(recorded["db"]) as store:
        assert store.episode(fork).parent_episode_id == episode
        own = store.episode(fork).fork_seq or 0
        chunks = store.events(fork, kinds=["model.chunk"])
        texts = [c.payload["text"] for c in chunks if c.seq > own]
    assert "".join(texts) == "Forked: the notes are copied."


def test_a_response_file_that_is_neither_sse_nor_json_is_refused_before_the_agent_runs(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    (episode,) = recorded["episodes"]
    answer = tmp_path / "answer.txt"
    answer.write_text("just some words")
    forked = _claude(
        recorded["db"], recorded["repo"], recorded["home"],
        "--fork", episode, "--turn", "2", "--response", str(answer),
    )  # fmt: skip
    assert forked.returncode == 2 and "neither an SSE stream" in forked.stderr


def test_a_gateway_in_the_users_settings_is_the_upstream_and_the_file_is_left_alone(
    tmp_path: Path,
) -> None:
    client("claude")
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "first notes\n"})
    home = tmp_path / "home"
    with SSEReplayServer(*_script()) as gateway:
        settings = home / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True)
        settings.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": gateway.url}}))
        before = settings.read_bytes()
        done = _claude(tmp_path / "t.db", repo, home)
        posts = [r for r in gateway.requests if r.path.split("?")[0].endswith("/v1/messages")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert settings.read_bytes() == before and len(posts) == 2
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(tmp_path / "t.db") as store:
        assert len(store.events(episode, kinds=["model.request"])) == 2
        assert store.episode(episode).env["upstreams"]["anthropic"] == gateway.url


def test_a_sub_agent_claude_code_starts_is_a_child_episode_shown_as_a_tree(
    tmp_path: Path,
) -> None:
    client("claude")
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "first notes\n"})
    task = {"description": "read the notes", "prompt": "Read notes.txt and say what it holds.",
            "subagent_type": "general-purpose"}  # fmt: skip
    script = [
        Reply(events=anthropic_tool("toolu_agent_1", "Agent", task)),
        Reply(events=anthropic_text("It holds: first notes.", message_id="msg_sub")),
        Reply(events=anthropic_text("The notes say: first notes.", message_id="msg_end")),
    ]
    db = tmp_path / "t.db"
    with SSEReplayServer(*script) as upstream:
        done = _claude(db, repo, tmp_path / "home", "--upstream-anthropic", upstream.url)
    assert done.returncode == 0, done.stderr[-3000:]
    parent, child = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        assert store.episode(child).env["spawned_by"] == {
            "episode_id": parent,
            "call_id": "toolu_agent_1",
        }
        assert len(store.events(child, kinds=["model.request"])) == 1
        assert len(store.events(parent, kinds=["model.request"])) == 2
    env = {"HOME": str(tmp_path / "home")}
    shown = _agentrunner("show", parent, "--json", "--db", str(db), cwd=repo, env=env)
    assert last_json(shown.stdout)["subagents"] == [
        {"episode_id": child, "call_id": "toolu_agent_1", "subagents": []}
    ]
    printed = _agentrunner("show", parent, "--db", str(db), cwd=repo, env=env)
    tree = printed.stdout.split("sub-agents", 1)[1].splitlines()[1]
    assert child[:8] in tree and "started by call toolu_agent_1" in tree
    printed_child = _agentrunner("show", child, "--db", str(db), cwd=repo, env=env)
    assert f"spawned   by {parent} (call toolu_agent_1)" in printed_child.stdout
