"""The Gemini API through the recording proxy: streamed (SSE and JSON array) and whole answers,
thought parts and signatures, function calls and their responses in the next request, usage,
the exact body rebuilt from the store, keys kept out of it, and ``countTokens`` left alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sse_replay import Reply, SSEReplayServer, sse

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

KEY = "AIzaSyD-gemini-test-key-0123456789abcdef"
MODEL = "gemini-2.5-flash"
STREAM = f"/gemini/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
SYSTEM = {"parts": [{"text": "You are a coding agent."}]}
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "run_shell_command",
                "description": "Runs a shell command.",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                },
            },
            {"name": "read_file", "description": "Reads a file.", "parameters": {"type": "object"}},
        ]
    }
]
SIGNATURE = "CiQBjz1rX3Ffake+signature/opaque=="
CALL_PART = {
    "functionCall": {"name": "run_shell_command", "args": {"command": "ls"}},
    "thoughtSignature": SIGNATURE,
}


def chunk(parts: list[dict[str, Any]], finish: str | None = None, **usage: int) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 120, **usage},
        "modelVersion": MODEL,
        "responseId": "resp-1",
    }


CALL_CHUNKS = [
    chunk([{"text": "I should list the files.", "thought": True}], thoughtsTokenCount=7),
    chunk([{"text": "Let me look."}], candidatesTokenCount=3, thoughtsTokenCount=7),
    chunk([CALL_PART], "STOP", candidatesTokenCount=9, thoughtsTokenCount=7),
]
TEXT_CHUNKS = [chunk([{"text": "There are two files."}], "STOP", candidatesTokenCount=5)]


def first_body() -> dict[str, Any]:
    return {
        "contents": [{"role": "user", "parts": [{"text": "What is here?"}]}],
        "systemInstruction": SYSTEM,
        "tools": TOOLS,
        "generationConfig": {"temperature": 0.2, "thinkingConfig": {"includeThoughts": True}},
    }


def second_body() -> dict[str, Any]:
    body = first_body()
    body["contents"] += [
        {
            "role": "model",
            "parts": [
                {"text": "I should list the files.", "thought": True},
                {"text": "Let me look."},
                CALL_PART,
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "run_shell_command",
                        "response": {"output": "a.py\nb.py"},
                    }
                }
            ],
        },
    ]
    return body


@contextmanager
def proxy(db: Path, upstream: str) -> Iterator[str]:
    journal = Journal(str(db), Origin())
    journal.start()
    upstreams = {"anthropic": upstream, "openai": upstream, "gemini": upstream}
    server = ProxyThread(Proxy(journal, ProxySettings(upstreams=upstreams)))
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        journal.close()


def post(base: str, path: str, body: dict[str, Any]) -> bytes:
    headers = {"x-goog-api-key": KEY}
    with httpx.stream("POST", base + path, json=body, headers=headers, timeout=60) as answer:
        return b"".join(answer.iter_raw())


def session(db: Path) -> tuple[SSEReplayServer, list[bytes]]:
    """Two calls of one conversation: a function call, then text after its response."""
    replies = [
        Reply(events=[sse(c) for c in CALL_CHUNKS]),
        Reply(events=[sse(c) for c in TEXT_CHUNKS]),
    ]
    with SSEReplayServer(*replies) as upstream, proxy(db, upstream.url) as base:
        answers = [post(base, STREAM, first_body()), post(base, STREAM, second_body())]
    return upstream, answers


def only_episode(store: TraceStore) -> str:
    (episode,) = [e.episode_id for e in store.list_episodes()]
    return episode


def test_a_streamed_answer_is_recorded_as_reasoning_text_a_tool_call_and_usage(
    tmp_path: Path,
) -> None:
    session(tmp_path / "t.db")
    with TraceStore(tmp_path / "t.db") as store:
        episode = only_episode(store)
        chunks = store.events(episode, kinds=["model.chunk"])
        request = store.events(episode, kinds=["model.request"])[0]
        response, _ = store.events(episode, kinds=["model.response"])
        usage = store.events(episode, kinds=["usage"])[0]
        (call,) = store.events(episode, kinds=["tool.call"])
    by_channel = {
        ch: "".join(c.payload["text"] for c in chunks if c.turn == 1 and c.payload["channel"] == ch)
        for ch in ("reasoning", "text")
    }
    assert by_channel == {"reasoning": "I should list the files.", "text": "Let me look."}
    assert (request.payload["api"], request.payload["model"]) == ("gemini", MODEL)
    assert (call.payload["name"], call.payload["parsed"]) == (
        "run_shell_command",
        {"command": "ls"},
    )
    assert response.payload["stop_reason"] == "STOP"
    assert (usage.payload["input_tokens"], usage.payload["output_tokens"]) == (120, 16)
    assert usage.payload["reasoning_tokens"] == 7


def test_a_function_response_in_the_next_request_is_the_result_of_the_call(tmp_path: Path) -> None:
    session(tmp_path / "t.db")
    with TraceStore(tmp_path / "t.db") as store:
        episode = only_episode(store)
        (call,) = store.events(episode, kinds=["tool.call"])
        (result,) = store.events(episode, kinds=["tool.result"])
    assert result.payload["call_id"] == call.payload["call_id"] == "run_shell_command#0"
    assert result.payload["name"] == "run_shell_command"
    assert json.loads(result.payload["observation"]) == {"output": "a.py\nb.py"}


def test_each_request_body_is_rebuilt_from_the_store_as_the_upstream_received_it(
    tmp_path: Path,
) -> None:
    upstream, answers = session(tmp_path / "t.db")
    with TraceStore(tmp_path / "t.db") as store:
        episode = only_episode(store)
        rebuilt = [request_body(store, episode, turn) for turn in (1, 2)]
    assert rebuilt == [r.json for r in upstream.requests]
    assert rebuilt[1]["contents"][1]["parts"][2]["thoughtSignature"] == SIGNATURE
    assert answers[0] == "".join(sse(c) + "\n\n" for c in CALL_CHUNKS).encode()


def test_the_api_key_in_a_header_or_the_query_reaches_the_upstream_and_never_the_store(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    path = f"/gemini/v1beta/models/{MODEL}:streamGenerateContent?alt=sse&key={KEY}"
    reply = Reply(events=[sse(c) for c in TEXT_CHUNKS])
    with SSEReplayServer(reply) as upstream, proxy(db, upstream.url) as base:
        post(base, path, first_body())
    assert upstream.requests[0].headers["x-goog-api-key"] == KEY
    assert f"key={KEY}" in upstream.requests[0].path
    for stored in tmp_path.iterdir():
        assert KEY.encode() not in stored.read_bytes(), stored.name


def test_a_stream_sent_as_a_json_array_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    array = json.dumps(
        [chunk([{"text": "Two "}]), chunk([{"text": "files."}], "STOP", candidatesTokenCount=4)]
    )
    with SSEReplayServer(Reply(body=array)) as upstream, proxy(db, upstream.url) as base:
        post(base, f"/gemini/v1beta/models/{MODEL}:streamGenerateContent", first_body())
    with TraceStore(db) as store:
        episode = only_episode(store)
        chunks = store.events(episode, kinds=["model.chunk"])
        (response,) = store.events(episode, kinds=["model.response"])
        (usage,) = store.events(episode, kinds=["usage"])
    assert "".join(c.payload["text"] for c in chunks) == "Two files."
    assert (response.payload["stop_reason"], usage.payload["output_tokens"]) == ("STOP", 4)


def test_a_whole_answer_of_generate_content_is_recorded(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    whole = chunk([CALL_PART], "STOP", candidatesTokenCount=9)
    with SSEReplayServer(Reply(body=whole)) as upstream, proxy(db, upstream.url) as base:
        post(base, f"/gemini/v1beta/models/{MODEL}:generateContent", first_body())
    with TraceStore(db) as store:
        episode = only_episode(store)
        (call,) = store.events(episode, kinds=["tool.call"])
        assert request_body(store, episode, 1) == upstream.requests[0].json
    assert call.payload["parsed"] == {"command": "ls"}


def test_count_tokens_is_forwarded_and_not_recorded_as_a_model_call(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    reply = Reply(body={"totalTokens": 31})
    with SSEReplayServer(reply) as upstream, proxy(db, upstream.url) as base:
        answer = post(base, f"/gemini/v1beta/models/{MODEL}:countTokens", first_body())
    assert json.loads(answer) == {"totalTokens": 31}
    assert upstream.requests[0].path == f"/v1beta/models/{MODEL}:countTokens"
    with TraceStore(db, create=False) as store:
        assert store.list_episodes() == []
