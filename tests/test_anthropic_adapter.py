"""The Anthropic Messages adapter against a real loopback server.

The real ``anthropic`` SDK client is pointed by base URL at :class:`SSEReplayServer`, which
replays SSE bodies written here from the documented wire format; episodes run through the
real runner into a real store file, and the assertions read the recorded events back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from pydantic import BaseModel
from sse_replay import Reply, SSEReplayServer, ToolTableEnv, sse

from agentrunner import TraceStore, run_agent_episode
from agentrunner.runtime.runner import Rollout
from agentrunner.values.errors import ProviderAuthError
from agentrunner.values.model import AgentContext
from agentrunner.values.types import Message
from providers import get_model
from providers._anthropic_messages import request_messages

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-sonnet-4-6"


class MessagesBody:
    """A Messages API stream, event by event, in the documented wire shapes."""

    def __init__(self, input_tokens: int = 100, **usage: int) -> None:
        self.events: list[str] = []
        self.blocks: list[dict[str, Any]] = []
        start_usage = {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": usage.get("cache_write", 0),
            "cache_read_input_tokens": usage.get("cache_read", 0),
            "output_tokens": 1,
        }
        message = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        self._event("message_start", message=message)
        self._event("ping")

    def _event(self, kind: str, **fields: Any) -> None:
        self.events.append(sse({"type": kind, **fields}, kind))

    def _block(self, start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        index = len(self.blocks)
        self._event("content_block_start", index=index, content_block=start)
        for delta in deltas:
            self._event("content_block_delta", index=index, delta=delta)
        self._event("content_block_stop", index=index)

    def thinking(self, deltas: list[str], signature: str) -> dict[str, Any]:
        parts = [{"type": "thinking_delta", "thinking": d} for d in deltas]
        sig = [{"type": "signature_delta", "signature": signature}]
        self._block({"type": "thinking", "thinking": "", "signature": ""}, parts + sig)
        block = {"type": "thinking", "thinking": "".join(deltas), "signature": signature}
        self.blocks.append(block)
        return block

    def redacted(self, data: str) -> dict[str, Any]:
        block = {"type": "redacted_thinking", "data": data}
        self._block(block, [])
        self.blocks.append(block)
        return block

    def text(self, deltas: list[str]) -> dict[str, Any]:
        self._block(
            {"type": "text", "text": ""}, [{"type": "text_delta", "text": d} for d in deltas]
        )
        block = {"type": "text", "text": "".join(deltas)}
        self.blocks.append(block)
        return block

    def tool_use(self, id_: str, name: str, partials: list[str]) -> dict[str, Any]:
        start = {"type": "tool_use", "id": id_, "name": name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *partials]]
        self._block(start, deltas)
        block = {**start, "input": json.loads("".join(partials) or "{}")}
        self.blocks.append(block)
        return block

    def error(self, kind: str, message: str) -> list[str]:
        self._event("error", error={"type": kind, "message": message})
        return self.events

    def finish(self, stop_reason: str = "end_turn", output_tokens: int = 30, **extra: Any) -> list:
        delta = {"stop_reason": stop_reason, "stop_sequence": None, **extra}
        self._event("message_delta", delta=delta, usage={"output_tokens": output_tokens})
        self._event("message_stop")
        return self.events


def submit_turn() -> list[str]:
    body = MessagesBody()
    body.tool_use("toolu_submit", "submit", ["{}"])
    return body.finish("tool_use")


@pytest.fixture
def server() -> Any:
    with SSEReplayServer(request_id_header="request-id") as srv:
        yield srv


def claude(server: SSEReplayServer, **options: Any) -> Any:
    options = {"api_key": KEY, "retry_delay": 0.001, "price_provider": "anthropic", **options}
    return get_model(f"anthropic:{MODEL}", base_url=server.url, **options)


def run(store: TraceStore, model: Any, *, max_turns: int = 3, **kw: Any) -> Rollout:
    env = ToolTableEnv({"get_weather": "sunny", "get_time": "noon"})
    return run_agent_episode(
        env=env, task_id="t", model_fn=model, store=store, max_turns=max_turns, **kw
    )


def payloads(store: TraceStore, rollout: Rollout, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.iter_events(rollout.episode_id) if e.kind == kind]


def chunks(store: TraceStore, rollout: Rollout) -> list[tuple[str, str]]:
    return [(c["channel"], c["text"]) for c in payloads(store, rollout, "model.chunk")]


def assistant_contents(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


# -- thinking, signatures, redacted thinking


def test_thinking_deltas_are_reasoning_chunks_and_the_signature_is_kept_verbatim(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    thinking = body.thinking(["Let me ", "think."], signature="EqQBCkYI" + "s" * 300)
    body.text(["Done."])
    server.add(Reply(events=body.finish()))
    rollout = run(store, claude(server), max_turns=1)
    assert chunks(store, rollout) == [
        ("reasoning", "Let me "),
        ("reasoning", "think."),
        ("text", "Done."),
    ]
    opaque = payloads(store, rollout, "model.response")[0]["opaque"]
    assert [p["data"] for p in opaque if p["type"] == "thinking"] == [thinking]


def test_interleaved_thinking_round_trips_in_order_next_to_each_tool_use(
    store: TraceStore, server: SSEReplayServer
) -> None:
    first = MessagesBody()
    think_a = first.thinking(["First I need the weather."], signature="sig-A-" + "a" * 100)
    use_a = first.tool_use("toolu_a", "get_weather", ['{"city": "Rome"}'])
    second = MessagesBody()
    think_b = second.thinking(["Now the time."], signature="sig-B-" + "b" * 100)
    use_b = second.tool_use("toolu_b", "get_time", ['{"tz": "CET"}'])
    third = MessagesBody()
    third.text(["Sunny at noon."])
    server.add(
        Reply(events=first.finish("tool_use")),
        Reply(events=second.finish("tool_use")),
        Reply(events=third.finish()),
    )
    rollout = run(store, claude(server, thinking="adaptive"))
    sent = server.requests[2].json
    assert assistant_contents(sent) == [[think_a, use_a], [think_b, use_b]]
    _, rebuilt = request_messages(store.reconstruct_request(rollout.episode_id, 3).messages)
    assert rebuilt == sent["messages"]


def test_redacted_thinking_is_stored_verbatim_and_sent_back_unchanged(
    store: TraceStore, server: SSEReplayServer
) -> None:
    first = MessagesBody()
    redacted = first.redacted("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw" + "r" * 200)
    thinking = first.thinking(["Visible part."], signature="sig-" + "v" * 80)
    use = first.tool_use("toolu_1", "get_weather", ['{"city": "Oslo"}'])
    second = MessagesBody()
    second.text(["Cold."])
    server.add(Reply(events=first.finish("tool_use")), Reply(events=second.finish()))
    rollout = run(store, claude(server), max_turns=2)
    opaque = payloads(store, rollout, "model.response")[0]["opaque"]
    assert [p["data"] for p in opaque if p["type"] == "redacted_thinking"] == [redacted]
    assert assistant_contents(server.requests[1].json) == [[redacted, thinking, use]]


def test_edited_assistant_message_keeps_its_thinking_block_and_sends_the_edit(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    thinking = body.thinking(["Hmm."], signature="sig-" + "e" * 40)
    body.text(["Original."])
    server.add(Reply(events=body.finish()))
    rollout = run(store, claude(server), max_turns=1)
    response = payloads(store, rollout, "model.response")[0]
    edited = store.message(response["message_hash"]).model_copy(update={"content": "Edited."})
    _, messages = request_messages([edited])
    assert messages == [
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "Edited."}]}
    ]


# -- tool use


def test_parallel_tool_use_input_is_assembled_from_input_json_deltas(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.text(["Checking both."])
    body.tool_use("toolu_1", "get_weather", ['{"ci', 'ty": "Rome"}'])
    body.tool_use("toolu_2", "get_time", ['{"tz": ', '"CET"}'])
    server.add(Reply(events=body.finish("tool_use")), Reply(events=submit_turn()))
    rollout = run(store, claude(server))
    args = [c for c in payloads(store, rollout, "model.chunk") if c["channel"] == "tool_args"]
    calls = payloads(store, rollout, "tool.call")[:2]
    assert [(c["tool_call_id"], c["text"]) for c in args[:4]] == [
        ("toolu_1", '{"ci'),
        ("toolu_1", 'ty": "Rome"}'),
        ("toolu_2", '{"tz": '),
        ("toolu_2", '"CET"}'),
    ]
    assert [(c["call_id"], c["parsed"]) for c in calls] == [
        ("toolu_1", {"city": "Rome"}),
        ("toolu_2", {"tz": "CET"}),
    ]


# -- usage and ids


def test_usage_counts_cache_read_and_creation_tokens_and_is_priced_offline(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody(input_tokens=50, cache_read=2000, cache_write=300)
    body.text(["Hi."])
    server.add(Reply(events=body.finish(output_tokens=40)))
    rollout = run(store, claude(server), max_turns=1)
    usage = payloads(store, rollout, "usage")[0]
    counts = genai_prices.Usage(
        input_tokens=2350, cache_read_tokens=2000, cache_write_tokens=300, output_tokens=40
    )
    expected = genai_prices.calc_price(counts, MODEL, provider_id="anthropic")
    assert (usage["input_tokens"], usage["cache_read_tokens"], usage["cache_write_tokens"]) == (
        2350,
        2000,
        300,
    )
    assert usage["output_tokens"] == 40
    assert usage["cost_usd"] == pytest.approx(float(expected.total_price))


def test_request_id_header_is_recorded_on_the_response(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn(), headers={"request-id": "req_011CXYZ"}))
    rollout = run(store, claude(server))
    assert payloads(store, rollout, "model.response")[0]["provider_request_id"] == "req_011CXYZ"


# -- failures


def test_overloaded_error_event_before_any_output_is_retried_and_recorded(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(
        Reply(events=MessagesBody().error("overloaded_error", "Overloaded")),
        Reply(events=submit_turn()),
    )
    rollout = run(store, claude(server))
    errors = payloads(store, rollout, "error")
    assert [(e["type"], e["retryable"], e["attempt"]) for e in errors] == [
        ("ProviderServerError", True, 1)
    ]
    assert rollout.status == "completed"


def test_overloaded_529_then_success_records_one_retried_error(
    store: TraceStore, server: SSEReplayServer
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.add(Reply(status=529, body=overloaded), Reply(events=submit_turn()))
    rollout = run(store, claude(server))
    assert [e["type"] for e in payloads(store, rollout, "error")] == ["ProviderServerError"]
    assert (rollout.status, len(server.requests)) == ("completed", 2)


def test_error_event_after_text_keeps_the_partial_output(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.text(["The answer is"])
    server.add(Reply(events=body.error("overloaded_error", "Overloaded")))
    rollout = run(store, claude(server))
    response = payloads(store, rollout, "model.response")[0]
    error = payloads(store, rollout, "error")[-1]
    assert store.message(response["message_hash"]).content == "The answer is"
    assert (response["stop_reason"], error["type"]) == ("incomplete", "IncompleteStreamError")
    assert "overloaded" in error["message"].lower()


def test_stream_ending_without_a_stop_reason_records_the_partial_turn(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.thinking(["Hmm."], signature="sig-partial")
    body.text(["Partial"])
    server.add(Reply(events=body.events))  # no message_delta / message_stop
    rollout = run(store, claude(server))
    response = payloads(store, rollout, "model.response")[0]
    message = store.message(response["message_hash"])
    assert (rollout.stop_reason, message.content, message.reasoning) == (
        "incomplete",
        "Partial",
        "Hmm.",
    )


def test_stream_cut_off_mid_tool_use_records_the_partial_arguments(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.text(["Let me look."])
    body.tool_use("toolu_1", "get_weather", ['{"city": ', '"Ro', 'me"}'])
    events = body.finish("tool_use")
    cut = next(i for i, e in enumerate(events) if '"Ro' in e) + 1
    server.add(Reply(events=events, cut_after=cut))
    rollout = run(store, claude(server))
    response = payloads(store, rollout, "model.response")[0]
    message = store.message(response["message_hash"])
    assert (response["stop_reason"], message.content) == ("incomplete", "Let me look.")
    assert [c.arguments for c in message.tool_calls] == ['{"city": "Ro']
    assert payloads(store, rollout, "tool.call") == []


def test_refusal_stop_is_recorded_as_a_refusal(store: TraceStore, server: SSEReplayServer) -> None:
    body = MessagesBody()
    details = {"type": "refusal", "category": "cyber", "explanation": "Malware request."}
    server.add(Reply(events=body.finish("refusal", stop_details=details)))
    rollout = run(store, claude(server), max_turns=1)
    response = payloads(store, rollout, "model.response")[0]
    assert response["stop_reason"] == "refusal" and "Malware request." in response["refusal"]
    assert [channel for channel, _ in chunks(store, rollout)] == ["refusal"]


def test_prompt_too_long_is_a_context_overflow(store: TraceStore, server: SSEReplayServer) -> None:
    too_long = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
    }
    server.add(Reply(status=400, body=too_long))
    rollout = run(store, claude(server))
    assert rollout.stop_reason == "context_overflow"
    assert payloads(store, rollout, "error")[-1]["type"] == "ContextOverflowError"


def test_401_is_a_provider_auth_error(server: SSEReplayServer) -> None:
    denied = {
        "type": "error",
        "error": {"type": "authentication_error", "message": "invalid x-api-key"},
    }
    server.add(Reply(status=401, body=denied))
    prompt = [Message(role="user", content="hi")]
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        claude(server)(AgentContext(messages=prompt, tools=[], turn=1, task_id="t", seed=0))


def test_cancel_mid_stream_closes_the_connection_and_keeps_recorded_chunks(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.text(["one ", "two ", "three ", "four"])
    server.add(Reply(events=body.events, hold=10))
    stop = threading.Event()

    def observer(seq: int, turn: int, payload: BaseModel) -> None:
        if getattr(payload, "kind", "") == "model.chunk" and getattr(payload, "index", 0) == 1:
            stop.set()

    rollout = run(store, claude(server), cancel_check=stop.is_set, observer=observer)
    assert server.client_closed.wait(5)
    assert rollout.status == "cancelled"
    assert chunks(store, rollout) == [("text", "one "), ("text", "two ")]


def test_unknown_event_type_is_kept_raw_and_not_fatal(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = MessagesBody()
    body.events.append(sse({"type": "message_annotation", "note": "new"}, "message_annotation"))
    body.text(["Fine."])
    server.add(Reply(events=body.finish()))
    rollout = run(store, claude(server), max_turns=1)
    opaque = payloads(store, rollout, "model.response")[0]["opaque"]
    kept = [p["data"]["events"] for p in opaque if p["type"] == "unknown_events"]
    assert kept == [[{"type": "message_annotation", "note": "new"}]]


# -- request shape


def test_thinking_budget_option_is_sent_as_manual_extended_thinking(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn()))
    run(store, claude(server, thinking=4096, max_tokens=20000))
    sent = server.requests[0].json
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert (sent["max_tokens"], sent["stream"]) == (20000, True)


def test_api_key_never_reaches_the_store(
    store: TraceStore, server: SSEReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server.add(Reply(events=submit_turn()))
    run(store, get_model(f"anthropic:{MODEL}", base_url=server.url))
    headers = server.requests[0].headers
    assert KEY in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )
    conn = sqlite3.connect(store.path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    rows = [repr(row) for t in tables for row in conn.execute(f"SELECT * FROM {t}")]
    conn.close()
    assert rows and not [r for r in rows if KEY in r]
    files = [p for p in store.path.parent.iterdir() if p.name.startswith(store.path.name)]
    assert not [p for p in files if KEY.encode() in p.read_bytes()]


# -- the command line


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )


def test_cli_run_without_anthropic_key_fails_with_one_clear_line(tmp_path: Path) -> None:
    hidden = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    spec = "anthropic:claude-sonnet-4-5"
    proc = _cli("run", "--model", spec, "--db", str(tmp_path / "t.db"), env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: ANTHROPIC_API_KEY is not set; export it to use anthropic models"
    ]


def test_cli_run_with_anthropic_key_and_base_url_completes(
    tmp_path: Path, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn()))
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY}
    db = str(tmp_path / "t.db")
    spec = "anthropic:claude-sonnet-4-5"
    proc = _cli("run", "--model", spec, "--base-url", server.url, "--db", db, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["status"] == "completed"
    assert server.requests[0].path == "/v1/messages"
