"""No credential a client sends through the recording proxy (in a header or in the query
string) reaches the store file, its WAL or an export, as it is or encoded."""

from __future__ import annotations

import base64
import codecs
import subprocess
import sys
from pathlib import Path

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
