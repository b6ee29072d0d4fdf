"""Conformance of the recording proxy: every real recorded provider stream of
``../shared/fixtures/provider-streams/`` passed through the proxy (in this process, to a
loopback upstream replaying it) is recorded as its sidecar's ``expect`` says the stream holds:
the text, the refusal, the reasoning, the tool calls with their full arguments, the output
tokens and the stop reason; and the client receives the stream's bytes unchanged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from record_support import FIXTURES, through_proxy
from sse_replay import Reply, SSEReplayServer, events_from_file

from agentrunner import TraceStore

STREAMS = sorted(p.stem for p in FIXTURES.glob("*.sse")) if FIXTURES.is_dir() else []
PATHS = {
    "anthropic-messages": "/anthropic/v1/messages",
    "openai-chat": "/openai/chat/completions",
    "deepseek-chat": "/openai/chat/completions",
    "openai-responses": "/openai/responses",
}


def _through_proxy(name: str, db: Path) -> tuple[dict[str, Any], bytes, bytes]:
    sidecar = json.loads((FIXTURES / f"{name}.json").read_text())
    body = (sidecar.get("request") or {}).get("json") or {
        "model": sidecar["expect"].get("model") or "m",
        "stream": True,
        "messages": [{"role": "user", "content": "hello"}],
    }
    raw = (FIXTURES / f"{name}.sse").read_bytes()
    with SSEReplayServer(Reply(events=events_from_file(FIXTURES / f"{name}.sse"))) as upstream:
        got = through_proxy(db, upstream.url, PATHS[sidecar["api"]], body, {})
    return sidecar["expect"], got, raw


@pytest.mark.skipif(not STREAMS, reason=f"provider stream fixtures not found at {FIXTURES}")
@pytest.mark.parametrize("name", STREAMS)
def test_a_real_provider_stream_is_recorded_as_it_holds_and_passed_on_unchanged(
    name: str, tmp_path: Path
) -> None:
    expect, got, raw = _through_proxy(name, tmp_path / "t.db")
    assert got == raw
    with TraceStore(tmp_path / "t.db") as store:
        (episode,) = [e.episode_id for e in store.list_episodes()]
        chunks = store.events(episode, kinds=["model.chunk"])
        (response,) = store.events(episode, kinds=["model.response"])
        (usage,) = store.events(episode, kinds=["usage"])
        calls = store.events(episode, kinds=["tool.call"])
    said = {ch: "".join(c.payload["text"] for c in chunks if c.payload["channel"] == ch)
            for ch in ("text", "reasoning", "refusal")}  # fmt: skip
    assert said["text"] == expect["text"]
    if expect.get("refusal"):
        assert said["refusal"] == expect["refusal"]
    reasoning = expect.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("sha256"):
        assert hashlib.sha256(said["reasoning"].encode()).hexdigest() == reasoning["sha256"]
    wanted = [(c["name"], json.loads(c["arguments"])) for c in expect.get("tool_calls") or []]
    assert [(c.payload["name"], c.payload["parsed"]) for c in calls] == wanted
    counts = expect["usage"]
    out = counts.get("output_tokens", counts.get("completion_tokens"))
    assert usage.payload["output_tokens"] == out
    stop = expect.get("stop_reason") or expect.get("finish_reason") or expect.get("status")
    assert response.payload["stop_reason"] == stop
