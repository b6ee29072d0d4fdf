"""``copy`` of a recorded agent's episode: the answers the proxy kept (what a replay serves)
travel with it, so the copy replays as the original does."""

from __future__ import annotations

from pathlib import Path

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
