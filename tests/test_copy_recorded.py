"""``copy`` carries what an episode names besides its events: a recorded agent's kept answers
(what a replay serves), and the base snapshot of an episode that has no step yet."""

from __future__ import annotations

import json
from pathlib import Path

from cli_process import run_cli
from record_support import anthropic_text, through_proxy
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.replay import Replay
from agentrunner.store.transfer import copy_episode


def test_a_copied_recorded_episode_holds_the_answers_its_replay_serves(tmp_path: Path) -> None:
    body = {"model": "claude-x", "stream": True, "max_tokens": 20,
            "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    with SSEReplayServer(Reply(events=anthropic_text("hi there"))) as upstream:
        answer = through_proxy(tmp_path / "a.db", upstream.url, "/anthropic/v1/messages", body, {})
    with TraceStore(tmp_path / "a.db") as src, TraceStore(tmp_path / "b.db") as dst:
        (episode,) = [e.episode_id for e in src.list_episodes()]
        copy_episode(src, dst, episode)
        (recorded,) = Replay(dst, episode).answers
    assert recorded.body == answer


def test_an_episode_with_no_step_is_copied_with_its_base_snapshot(tmp_path: Path) -> None:
    script = tmp_path / "stop.json"
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": [{"text": "No."}]}]}))
    run = run_cli("run", "--model", f"scripted:{script}", "--max-turns", "1", "--db",
                  str(tmp_path / "a.db"), "--json")  # fmt: skip
    episode = json.loads(run.stdout.strip().splitlines()[-1])["episode_id"]
    with TraceStore(tmp_path / "a.db") as src, TraceStore(tmp_path / "b.db") as dst:
        base = src.episode(episode).env["base"]["snapshot"]
        copy_episode(src, dst, episode)
        assert dst.snapshot_changes(base) is not None
