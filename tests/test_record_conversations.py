"""Which recorded episode a call belongs to, when the client writes the same message in two
forms from one call to the next."""

from __future__ import annotations

from pathlib import Path

import httpx
from record_support import anthropic_text, anthropic_tool
from sse_replay import Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread


def test_a_message_sent_as_one_text_block_then_as_a_string_continues_its_episode(
    tmp_path: Path,
) -> None:
    ask = "Copy the notes."
    block = {"type": "text", "text": ask, "cache_control": {"type": "ephemeral"}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cp a b"}}
    first = {"model": "claude-x", "stream": True, "max_tokens": 50,
             "messages": [{"role": "user", "content": [block]}]}  # fmt: skip
    second = {**first, "messages": [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "done"}]},
    ]}  # fmt: skip
    replies = [
        Reply(events=anthropic_tool("toolu_1", "Bash", {"command": "cp a b"})),
        Reply(events=anthropic_text("Copied.")),
    ]
    db = tmp_path / "t.db"
    with SSEReplayServer(*replies) as upstream:
        journal = Journal(str(db), Origin())
        journal.start()
        server = ProxyThread(Proxy(journal, ProxySettings(upstreams={"anthropic": upstream.url})))
        port = server.start()
        try:
            for body in (first, second):
                url = f"http://127.0.0.1:{port}/anthropic/v1/messages"
                httpx.post(url, json=body, headers={"x-api-key": "sk-ant-test-0123456789"})
        finally:
            server.stop()
            journal.close()
    with TraceStore(db) as store:
        (episode,) = [e.episode_id for e in store.list_episodes()]
        (result,) = store.events(episode, kinds=["tool.result"])
    assert (result.payload["call_id"], result.payload["name"]) == ("toolu_1", "Bash")
