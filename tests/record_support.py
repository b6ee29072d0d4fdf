"""Test support for the recording proxy: running ``agentrunner record`` on a client script
against a loopback upstream, and small Anthropic streams of our own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sse_replay import sse

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "provider-streams"


CLIENTS = Path(__file__).resolve().parent / "record_clients"


def record(
    client: str,
    *,
    db: Path,
    anthropic: str | None = None,
    openai: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``agentrunner record --json -- python record_clients/CLIENT.py`` with the given
    upstreams, in an environment without any provider's key or base URL."""
    args = [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(db), "--json"]
    if anthropic:
        args += ["--upstream-anthropic", anthropic]
    if openai:
        args += ["--upstream-openai", openai]
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_")) and "KEY" not in k
    }
    return subprocess.run(
        [*args, "--", sys.executable, str(CLIENTS / f"{client}.py")],
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def last_json(out: str) -> Any:
    return json.loads(out.strip().splitlines()[-1])


def fixture_request(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text())["request"]["json"])


def anthropic_text(text: str, *, message_id: str = "msg_1") -> list[str]:
    """A Messages stream answering ``text``."""
    return [
        *_start(message_id),
        sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start"),  # noqa: E501
        sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}, "content_block_delta"),  # noqa: E501
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        *_stop("end_turn"),
    ]  # fmt: skip


def anthropic_tool(call_id: str, name: str, arguments: dict[str, Any]) -> list[str]:
    """A Messages stream answering with one ``tool_use`` block."""
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
    return [
        *_start(f"msg_{call_id}"),
        sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"),  # noqa: E501
        sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta"),
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        *_stop("tool_use"),
    ]  # fmt: skip


def _start(message_id: str) -> list[str]:
    message = {
        "id": message_id, "type": "message", "role": "assistant", "content": [],
        "model": "claude-sonnet-4-5", "stop_reason": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }  # fmt: skip
    return [sse({"type": "message_start", "message": message}, "message_start")]


def _stop(reason: str) -> list[str]:
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": reason},
        "usage": {"output_tokens": 7},
    }
    return [sse(delta, "message_delta"), sse({"type": "message_stop"}, "message_stop")]
