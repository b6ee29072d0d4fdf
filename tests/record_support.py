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
    options: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``agentrunner record --json [OPTIONS] -- python record_clients/CLIENT.py`` with the
    given upstreams, in an environment without any provider's key or base URL."""
    args = [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(db), "--json"]
    args += options
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


def responses_call(
    call_id: str, name: str, arguments: dict[str, Any], *, namespace: str | None = None
) -> list[str]:
    """A Responses stream answering with one function call (of a tool in ``namespace``: a
    Codex namespace such as ``multi_agent_v1``)."""
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": "", "status": "in_progress"}  # fmt: skip
    if namespace is not None:
        item["namespace"] = namespace
    text = json.dumps(arguments)
    done = {**item, "arguments": text, "status": "completed"}
    return [
        *_created(f"resp_{call_id}"),
        sse({"type": "response.output_item.added", "output_index": 0, "item": item}, "response.output_item.added"),  # noqa: E501
        sse({"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": item["id"], "delta": text}, "response.function_call_arguments.delta"),  # noqa: E501
        sse({"type": "response.function_call_arguments.done", "output_index": 0, "item_id": item["id"], "arguments": text}, "response.function_call_arguments.done"),  # noqa: E501
        sse({"type": "response.output_item.done", "output_index": 0, "item": done}, "response.output_item.done"),  # noqa: E501
        *_completed(f"resp_{call_id}", [done]),
    ]  # fmt: skip


def responses_text(text: str, *, response_id: str = "resp_text") -> list[str]:
    """A Responses stream answering with one message."""
    part = {"type": "output_text", "text": "", "annotations": []}
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    done = {**item, "status": "completed", "content": [{**part, "text": text}]}
    return [
        *_created(response_id),
        sse({"type": "response.output_item.added", "output_index": 0, "item": item}, "response.output_item.added"),  # noqa: E501
        sse({"type": "response.content_part.added", "output_index": 0, "item_id": "msg_1", "content_index": 0, "part": part}, "response.content_part.added"),  # noqa: E501
        sse({"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": text}, "response.output_text.delta"),  # noqa: E501
        sse({"type": "response.output_text.done", "output_index": 0, "item_id": "msg_1", "content_index": 0, "text": text}, "response.output_text.done"),  # noqa: E501
        sse({"type": "response.output_item.done", "output_index": 0, "item": done}, "response.output_item.done"),  # noqa: E501
        *_completed(response_id, [done]),
    ]  # fmt: skip


def _created(response_id: str) -> list[str]:
    response = {
        "id": response_id,
        "object": "response",
        "status": "in_progress",
        "model": "gpt-5",
        "output": [],
    }
    return [sse({"type": "response.created", "response": response}, "response.created")]


def _completed(response_id: str, output: list[dict[str, Any]]) -> list[str]:
    usage = {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28,
             "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}  # noqa: E501  # fmt: skip
    response = {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "model": "gpt-5",
        "output": output,
        "usage": usage,
    }
    return [sse({"type": "response.completed", "response": response}, "response.completed")]


def through_proxy(
    db: Path, upstream: str, path: str, body: dict[str, Any], headers: dict[str, str]
) -> bytes:
    """One POST through a recording proxy run in this process (into ``db``); the answer."""
    import httpx

    from agentrunner.record.episodes import Origin
    from agentrunner.record.journal import Journal
    from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

    journal = Journal(str(db), Origin())
    journal.start()
    upstreams = {"anthropic": upstream, "openai": upstream + "/v1"}
    server = ProxyThread(Proxy(journal, ProxySettings(upstreams=upstreams)))
    port = server.start()
    try:
        url = f"http://127.0.0.1:{port}{path}"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as answer:
            return b"".join(answer.iter_raw())
    finally:
        server.stop()
        journal.close()
