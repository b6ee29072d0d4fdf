"""``agentrunner show EP --request-diff``: what changed between two model calls' requests,
on a native episode and on a recorded one whose system prompt and parameters changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from record_support import anthropic_text, last_json
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread


def cli(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0", "AGENTRUNNER_SANDBOX": "process"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def demo(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "t.db"
    done = cli("run", "--json", db=db)
    assert done.returncode == 0, done.stderr
    return db, last_json(done.stdout)["episode_id"]


def test_the_messages_a_native_call_added_are_exactly_those_its_request_holds_beyond_the_last(
    tmp_path: Path,
) -> None:
    db, episode = demo(tmp_path)
    shown = cli("show", episode, "--request-diff", "3", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    found = last_json(shown.stdout)
    with TraceStore(db) as store:
        before = store.reconstruct_request(episode, 2).messages
        after = store.reconstruct_request(episode, 3).messages
    added = [c["after"] for c in found["messages"]["changes"]]
    assert [c["kind"] for c in found["messages"]["changes"]] == ["added"] * len(added)
    assert added == [m.model_dump(mode="json", exclude_none=True) for m in after[len(before) :]]
    assert found["messages"]["kept"] == sum(m.role != "system" for m in before)
    assert found["system"] is None and found["params"]["changed"] == {}
    assert (found["before"]["turn"], found["after"]["turn"]) == (2, 3)


def test_two_calls_can_be_named_by_turn_or_call_id(tmp_path: Path) -> None:
    db, episode = demo(tmp_path)
    with TraceStore(db) as store:
        call_id = store.events(episode, kinds=["model.request"])[0].payload["call_id"]
    shown = cli("show", episode, "--request-diff", f"{call_id},4", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    assert last_json(shown.stdout)["before"] == {
        "episode_id": episode,
        "turn": 1,
        "call_id": call_id,
    }


def test_the_first_call_or_a_call_that_is_not_there_is_a_one_line_usage_error(
    tmp_path: Path,
) -> None:
    db, episode = demo(tmp_path)
    for spec in ("1", "99", "nope,2", "1,2,3"):
        shown = cli("show", episode, "--request-diff", spec, db=db)
        assert shown.returncode == 2, (spec, shown.stderr)
        assert len(shown.stderr.strip().splitlines()) == 1 and "Traceback" not in shown.stderr


def _post_twice(db: Path, bodies: list[dict[str, Any]]) -> None:
    replies = [Reply(events=anthropic_text(f"answer {i}")) for i in range(len(bodies))]
    with SSEReplayServer(*replies) as upstream:
        journal = Journal(str(db), Origin())
        journal.start()
        server = ProxyThread(Proxy(journal, ProxySettings(upstreams={"anthropic": upstream.url})))
        port = server.start()
        try:
            for body in bodies:
                url = f"http://127.0.0.1:{port}/anthropic/v1/messages"
                httpx.post(url, json=body, headers={"x-api-key": "sk-ant-test-0123456789"})
        finally:
            server.stop()
            journal.close()


def test_a_changed_system_prompt_and_parameter_are_named_beside_the_messages_added(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    ask = {"role": "user", "content": "What is 2+2?"}
    first = {"model": "claude-x", "stream": True, "max_tokens": 100, "system": "Be brief.",
             "messages": [ask]}  # fmt: skip
    second = {**first, "system": "Be brief.\nAnswer in French.", "max_tokens": 200,
              "messages": [ask, {"role": "assistant", "content": "answer 0"},
                           {"role": "user", "content": "And 3+3?"}]}  # fmt: skip
    _post_twice(db, [first, second])
    with TraceStore(db) as store:
        (episode,) = [e.episode_id for e in store.list_episodes()]
    shown = cli("show", episode, "--request-diff", "2", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    found = last_json(shown.stdout)
    assert found["system"] == ["Be brief.", "Be brief.\nAnswer in French."]
    assert found["params"]["changed"] == {"max_tokens": [100, 200]}
    assert [(c["kind"], c["after"]["raw"]) for c in found["messages"]["changes"]] == [
        ("added", second["messages"][1]),
        ("added", second["messages"][2]),
    ]
    printed = cli("show", episode, "--request-diff", "2", db=db)
    assert "system    changed" in printed.stdout and "+Answer in French." in printed.stdout
    assert json.dumps(second["messages"][2]["content"])[1:-1] in printed.stdout


def test_a_forks_call_is_compared_with_its_originals_call_across_episodes(
    tmp_path: Path,
) -> None:
    """``A,EP:B``: a fork's call 3 (after an injected message) against the original's call 3
    names exactly that message as added, and both episodes."""
    db, episode = demo(tmp_path)
    forked = cli("fork", episode, "--turn", "3", "--message", "Check the tests first.",
                 "--run", "--json", db=db)  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    (fork,) = last_json(forked.stdout)["forks"]
    shown = cli("show", fork, "--request-diff", f"{episode[:10]}:3,3", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    found = last_json(shown.stdout)
    assert (found["before"]["episode_id"], found["after"]["episode_id"]) == (episode, fork)
    (change,) = found["messages"]["changes"]
    assert change["kind"] == "added" and change["after"]["content"] == "Check the tests first."
    printed = cli("show", fork, "--request-diff", f"{episode}:3,3", db=db)
    first = printed.stdout.splitlines()[0]
    assert first.startswith(f"{fork} call 3 (") and f" against {episode} call 3 (" in first
    missing = cli("show", fork, "--request-diff", "NOSUCHEPISODE:3,3", db=db)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
