"""No credential a client sends through the recording proxy (in a header or in the query
string) reaches the store file, its WAL or an export, as it is or encoded."""

from __future__ import annotations

import base64
import codecs
import subprocess
import sys
from pathlib import Path

import httpx
from record_support import anthropic_text, through_proxy
from sse_replay import Reply, SSEReplayServer

HEADER_KEY = "sk-ant-api03-HdrQ7vXw9LmN2pR4tY6uK8hJ0gF3dS5a"
QUERY_KEY = "AIzaQryKey-7vXw9LmN2pR4tY6uK8hJ0gF3dS5aZ"


def _forms(key: str) -> list[bytes]:
    raw = key.encode()
    return [raw, base64.b64encode(raw), raw.hex().encode(), key[::-1].encode(),
            codecs.encode(key, "rot13").encode()]  # fmt: skip


def test_keys_in_headers_and_the_query_string_reach_neither_the_store_nor_an_export(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    body = {"model": "m", "stream": True, "max_tokens": 5,
            "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    headers = {"x-api-key": HEADER_KEY, "authorization": f"Bearer {HEADER_KEY}"}
    with SSEReplayServer(Reply(events=anthropic_text("hi there"))) as upstream:
        through_proxy(db, upstream.url, f"/anthropic/v1/messages?key={QUERY_KEY}", body, headers)
        sent = upstream.requests[0]
    assert sent.headers["x-api-key"] == HEADER_KEY and QUERY_KEY in sent.path  # forwarded
    exported = [
        subprocess.run(
            [sys.executable, "-m", "agentrunner.cli.main", "export", "--format", fmt,
             "--status", "any", "--db", str(db)],
            capture_output=True, timeout=120,
        ).stdout
        for fmt in ("sft", "atif")
    ]  # fmt: skip
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("t.db*"))
    for blob in (stored, *exported):
        assert not [f for key in (HEADER_KEY, QUERY_KEY) for f in _forms(key) if f in blob]
    assert b"hi there" in stored and all(b"hi there" in out for out in exported)


def test_a_proxy_with_a_token_refuses_a_request_without_it_and_never_forwards_it(
    tmp_path: Path,
) -> None:
    from agentrunner import TraceStore
    from agentrunner.record.episodes import Origin
    from agentrunner.record.journal import Journal
    from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

    body = {"model": "m", "stream": True, "max_tokens": 5,
            "messages": [{"role": "user", "content": "hello"}]}  # fmt: skip
    journal = Journal(str(tmp_path / "t.db"), Origin())
    journal.start()
    with SSEReplayServer(Reply(events=anthropic_text("hi"))) as upstream:
        upstreams = {"anthropic": upstream.url, "openai": upstream.url}
        server = ProxyThread(
            Proxy(journal, ProxySettings(upstreams=upstreams, token="s3cret-token"))
        )
        url = f"http://127.0.0.1:{server.start()}/anthropic/v1/messages"
        try:
            refused = httpx.post(url, json=body, timeout=60)
            refused_calls = len(upstream.requests)
            allowed = httpx.post(
                url, json=body, headers={"x-agentrunner-token": "s3cret-token"}, timeout=60
            )
        finally:
            server.stop()
            journal.close()
        forwarded = upstream.requests
    assert refused.status_code == 401 and refused_calls == 0 and allowed.status_code == 200
    assert "x-agentrunner-token" not in forwarded[0].headers
    with TraceStore(tmp_path / "t.db") as store:
        (episode,) = store.list_episodes()
        assert len(store.events(episode.episode_id, kinds=["model.request"])) == 1
