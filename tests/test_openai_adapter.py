"""The OpenAI adapters (Responses and Chat Completions) against a real loopback server.

The real ``openai`` SDK client is pointed by base URL at :class:`SSEReplayServer`, which
replays SSE bodies written here from the documented wire formats; episodes run through the
real runner into a real store file, and the assertions read the recorded events back.
"""

from __future__ import annotations

import json
import os
import signal
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
from agentrunner.values.errors import ProviderAuthError, ProviderConfigError
from agentrunner.values.model import AgentContext
from agentrunner.values.types import Message
from providers import get_model
from providers.openai_messages import responses_input

KEY = "sk-test-openai-0123456789abcdef"
MODEL = "gpt-5-2025-08-07"


class ResponsesBody:
    """A Responses API stream, event by event, in the documented wire shapes."""

    def __init__(self, model: str = MODEL) -> None:
        self.model = model
        self.events: list[str] = []
        self.output: list[dict[str, Any]] = []
        self._event("response.created", response=self._response("in_progress"))

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 1700000000,
            "status": status,
            "model": self.model,
            "output": list(self.output) if status != "in_progress" else [],
            **extra,
        }

    def _event(self, kind: str, **fields: Any) -> None:
        self.events.append(sse({"type": kind, **fields, "sequence_number": len(self.events)}, kind))

    def reasoning(self, summary: list[str], encrypted: str) -> dict[str, Any]:
        index, item_id = len(self.output), f"rs_{len(self.output)}"
        added = {"id": item_id, "type": "reasoning", "summary": [], "encrypted_content": "x"}
        self._event("response.output_item.added", output_index=index, item=added)
        self._event(
            "response.reasoning_summary_part.added",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            part={"type": "summary_text", "text": ""},
        )
        for delta in summary:
            self._event(
                "response.reasoning_summary_text.delta",
                item_id=item_id,
                output_index=index,
                summary_index=0,
                delta=delta,
            )
        text = "".join(summary)
        item = {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}],
            "encrypted_content": encrypted,
        }
        return self._done(index, item)

    def message(self, deltas: list[str], *, kind: str = "output_text") -> dict[str, Any]:
        index, item_id = len(self.output), f"msg_{len(self.output)}"
        field = "text" if kind == "output_text" else "refusal"
        added = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
        self._event("response.output_item.added", output_index=index, item={**added, "content": []})
        part: dict[str, Any] = {"type": kind, field: ""}
        if kind == "output_text":
            part["annotations"] = []
        self._event(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=part,
        )
        delta_kind = (
            "response.output_text.delta" if kind == "output_text" else "response.refusal.delta"
        )
        for delta in deltas:
            self._event(
                delta_kind, item_id=item_id, output_index=index, content_index=0, delta=delta
            )
        item = {**added, "status": "completed", "content": [{**part, field: "".join(deltas)}]}
        return self._done(index, item)

    def function_call(self, call_id: str, name: str, deltas: list[str]) -> dict[str, Any]:
        index, item_id = len(self.output), f"fc_{len(self.output)}"
        item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name}
        added = {**item, "status": "in_progress", "arguments": ""}
        self._event("response.output_item.added", output_index=index, item=added)
        for delta in deltas:
            self._event(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=delta,
            )
        arguments = "".join(deltas)
        self._event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        return self._done(index, {**item, "status": "completed", "arguments": arguments})

    def _done(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        self._event("response.output_item.done", output_index=index, item=item)
        self.output.append(item)
        return item

    def raw(self, event: dict[str, Any]) -> None:
        self._event(str(event["type"]), **{k: v for k, v in event.items() if k != "type"})

    def completed(
        self, input_tokens: int = 100, output_tokens: int = 20, **usage: Any
    ) -> list[str]:
        details = {"cached_tokens": usage.pop("cached", 0)}
        out_details = {"reasoning_tokens": usage.pop("reasoning", 0)}
        self._event(
            "response.completed",
            response=self._response(
                "completed",
                usage={
                    "input_tokens": input_tokens,
                    "input_tokens_details": details,
                    "output_tokens": output_tokens,
                    "output_tokens_details": out_details,
                    "total_tokens": input_tokens + output_tokens,
                },
            ),
        )
        return self.events


def chat_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-4o-2024-08-06",
        "choices": choices,
        **extra,
    }
    return sse(body)


def chat_usage(prompt: int = 50, completion: int = 10) -> str:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return chat_chunk(None, usage=usage)


DONE = "data: [DONE]"


# -- helpers


@pytest.fixture
def server() -> Any:
    with SSEReplayServer() as srv:
        yield srv


def openai_model(server: SSEReplayServer, spec: str = "openai:gpt-5", **options: Any) -> Any:
    options = {"api_key": KEY, "retry_delay": 0.001, "price_provider": "openai", **options}
    return get_model(spec, base_url=server.url + "/v1", **options)


def run(
    store: TraceStore,
    model: Any,
    *,
    env: ToolTableEnv | None = None,
    max_turns: int = 3,
    cancel_check: Any = None,
    observer: Any = None,
) -> Rollout:
    return run_agent_episode(
        env=env or ToolTableEnv({"get_weather": "sunny"}),
        task_id="t",
        model_fn=model,
        store=store,
        max_turns=max_turns,
        cancel_check=cancel_check,
        observer=observer,
    )


def payloads(store: TraceStore, rollout: Rollout, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.iter_events(rollout.episode_id) if e.kind == kind]


def chunks(store: TraceStore, rollout: Rollout, channel: str | None = None) -> list[dict[str, Any]]:
    found = payloads(store, rollout, "model.chunk")
    return [c for c in found if channel is None or c["channel"] == channel]


def submit_turn() -> list[str]:
    body = ResponsesBody()
    body.function_call("call_submit", "submit", ["{}"])
    return body.completed()


# -- Responses API


def test_responses_parallel_tool_calls_are_recorded_with_their_full_arguments(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.function_call("call_a", "get_weather", ['{"city":', ' "Paris"}'])
    body.function_call("call_b", "get_weather", ['{"city":', ' "Oslo"}'])
    server.add(Reply(events=body.completed()), Reply(events=submit_turn()))
    rollout = run(store, openai_model(server))
    calls = payloads(store, rollout, "tool.call")[:2]
    assert [(c["call_id"], c["arguments"]) for c in calls] == [
        ("call_a", '{"city": "Paris"}'),
        ("call_b", '{"city": "Oslo"}'),
    ]
    args = chunks(store, rollout, "tool_args")[:4]
    assert [(c["tool_call_id"], c["text"]) for c in args] == [
        ("call_a", '{"city":'),
        ("call_a", ' "Paris"}'),
        ("call_b", '{"city":'),
        ("call_b", ' "Oslo"}'),
    ]


def test_responses_reasoning_then_tool_call_then_text_are_recorded_in_stream_order(
    store: TraceStore, server: SSEReplayServer
) -> None:
    first = ResponsesBody()
    first.reasoning(["Need the ", "weather."], encrypted="gAAAA-enc-1")
    first.function_call("call_w", "get_weather", ['{"city": "Rome"}'])
    second = ResponsesBody()
    second.message(["It is ", "sunny."])
    server.add(Reply(events=first.completed()), Reply(events=second.completed()))
    rollout = run(store, openai_model(server), max_turns=2)
    recorded = [(c["channel"], c["text"]) for c in chunks(store, rollout)]
    assert recorded == [
        ("reasoning", "Need the "),
        ("reasoning", "weather."),
        ("tool_args", '{"city": "Rome"}'),
        ("text", "It is "),
        ("text", "sunny."),
    ]


def test_responses_second_request_rebuilt_from_the_store_carries_encrypted_reasoning(
    store: TraceStore, server: SSEReplayServer
) -> None:
    first = ResponsesBody()
    reasoning_item = first.reasoning(["Plan."], encrypted="gAAAA-opaque-" + "Z" * 500)
    first.message(["Checking."])
    call_item = first.function_call("call_w", "get_weather", ['{"city": "Rome"}'])
    second = ResponsesBody()
    second.message(["Sunny."])
    server.add(Reply(events=first.completed()), Reply(events=second.completed()))
    rollout = run(store, openai_model(server), max_turns=2)
    sent = server.requests[1].json["input"]
    assert sent[1] == reasoning_item  # verbatim, as output_item.done sent it
    assert sent[3] == call_item and sent[4]["type"] == "function_call_output"
    rebuilt = store.reconstruct_request(rollout.episode_id, 2)
    assert responses_input(rebuilt.messages) == sent


def test_responses_edited_assistant_message_keeps_its_reasoning_item_and_sends_the_edit(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    reasoning_item = body.reasoning(["Plan."], encrypted="gAAAA-opaque")
    body.message(["Original answer."])
    server.add(Reply(events=body.completed()))
    rollout = run(store, openai_model(server), max_turns=1)
    response = payloads(store, rollout, "model.response")[0]
    edited = store.message(response["message_hash"]).model_copy(update={"content": "Edited."})
    assert responses_input([edited]) == [
        reasoning_item,
        {"role": "assistant", "content": "Edited."},
    ]


def test_responses_requests_are_stateless_with_encrypted_reasoning_included(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn()))
    run(store, openai_model(server))
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert (request.json["store"], request.json["include"], request.json["stream"]) == (
        False,
        ["reasoning.encrypted_content"],
        True,
    )


def test_responses_stream_cut_off_records_partial_text_and_incomplete_stop(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["Hello ", "wor", "ld"])
    events = body.completed()
    server.add(Reply(events=events, cut_after=5))  # created, added, part, "Hello ", "wor"
    rollout = run(store, openai_model(server))
    response = payloads(store, rollout, "model.response")[0]
    message = store.message(response["message_hash"])
    error = payloads(store, rollout, "error")[-1]
    assert (rollout.stop_reason, response["stop_reason"], message.content) == (
        "incomplete",
        "incomplete",
        "Hello wor",
    )
    assert error["type"] == "IncompleteStreamError"


def test_responses_stream_ending_without_a_terminal_event_is_incomplete(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["Partial answer"])
    server.add(Reply(events=body.events))  # no response.completed, clean end of body
    rollout = run(store, openai_model(server))
    response = payloads(store, rollout, "model.response")[0]
    assert (rollout.status, response["stop_reason"]) == ("failed", "incomplete")
    assert "without a finish reason" in payloads(store, rollout, "error")[-1]["message"]


def test_responses_rate_limit_429_then_success_records_one_retried_error(
    store: TraceStore, server: SSEReplayServer
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    server.add(Reply(status=429, body=limited), Reply(events=submit_turn()))
    rollout = run(store, openai_model(server))
    errors = payloads(store, rollout, "error")
    assert [(e["type"], e["retryable"], e["attempt"]) for e in errors] == [
        ("RateLimitError", True, 1)
    ]
    assert (rollout.status, len(server.requests)) == ("completed", 2)


def test_responses_error_event_mid_stream_keeps_the_partial_output(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["Half an ans"])
    body.raw({"type": "error", "code": "server_error", "message": "The server had an error"})
    server.add(Reply(events=body.events))
    rollout = run(store, openai_model(server))
    response = payloads(store, rollout, "model.response")[0]
    error = payloads(store, rollout, "error")[-1]
    assert store.message(response["message_hash"]).content == "Half an ans"
    assert error["type"] == "IncompleteStreamError" and "server had an error" in error["message"]


def test_responses_cancel_mid_stream_closes_the_connection_and_keeps_recorded_chunks(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["one ", "two ", "three ", "four"])
    server.add(Reply(events=body.events, hold=10))
    stop = threading.Event()

    def observer(seq: int, turn: int, payload: BaseModel) -> None:
        if getattr(payload, "kind", "") == "model.chunk" and getattr(payload, "index", 0) == 1:
            stop.set()

    rollout = run(store, openai_model(server), cancel_check=stop.is_set, observer=observer)
    assert server.client_closed.wait(5)
    assert rollout.status == "cancelled"
    assert [c["text"] for c in chunks(store, rollout)] == ["one ", "two "]


def test_responses_ctrl_c_mid_stream_closes_the_connection_and_records_a_cancel(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["one ", "two ", "three"])
    server.add(Reply(events=body.events, hold=10))

    def observer(seq: int, turn: int, payload: BaseModel) -> None:
        if getattr(payload, "kind", "") == "model.chunk":
            signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, delivered by the runner's handler

    rollout = run(store, openai_model(server), observer=observer)
    assert server.client_closed.wait(5)
    assert (rollout.status, [c["text"] for c in chunks(store, rollout)]) == ("cancelled", ["one "])


def test_responses_rate_limit_retries_are_bounded_and_each_recorded(
    store: TraceStore, server: SSEReplayServer
) -> None:
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    server.add(*[Reply(status=429, body=limited) for _ in range(3)])
    rollout = run(store, openai_model(server, max_retries=2))
    errors = payloads(store, rollout, "error")
    assert [(e["type"], e["attempt"]) for e in errors[:2]] == [
        ("RateLimitError", 1),
        ("RateLimitError", 2),
    ]
    assert "gave up after 3 attempts" in errors[2]["message"] and errors[2]["attempt"] == 3
    assert (rollout.stop_reason, len(server.requests)) == ("error", 3)


def test_responses_refusal_is_recorded_as_a_refusal_not_as_text(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.message(["I can't ", "help with that."], kind="refusal")
    server.add(Reply(events=body.completed()))
    rollout = run(store, openai_model(server), max_turns=1)
    response = payloads(store, rollout, "model.response")[0]
    assert [c["channel"] for c in chunks(store, rollout)] == ["refusal", "refusal"]
    assert response["refusal"] == "I can't help with that."
    assert store.message(response["message_hash"]).content == ""


def test_responses_context_window_overflow_ends_the_episode_with_context_overflow(
    store: TraceStore, server: SSEReplayServer
) -> None:
    overflow = {
        "error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    server.add(Reply(status=400, body=overflow))
    rollout = run(store, openai_model(server))
    assert rollout.stop_reason == "context_overflow"
    assert payloads(store, rollout, "error")[-1]["type"] == "ContextOverflowError"


def test_responses_unknown_event_type_is_kept_raw_on_the_response(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.raw({"type": "response.brand_new_thing", "detail": {"x": 1}})
    body.function_call("call_s", "submit", ["{}"])
    server.add(Reply(events=body.completed()))
    rollout = run(store, openai_model(server))
    opaque = payloads(store, rollout, "model.response")[0]["opaque"]
    kept = [p["data"]["events"] for p in opaque if p["type"] == "unknown_events"]
    assert kept == [
        [{"type": "response.brand_new_thing", "detail": {"x": 1}, "sequence_number": 1}]
    ]
    assert rollout.status == "completed"


def test_responses_usage_is_normalised_and_priced_offline(
    store: TraceStore, server: SSEReplayServer
) -> None:
    body = ResponsesBody()
    body.function_call("call_s", "submit", ["{}"])
    server.add(Reply(events=body.completed(1000, 300, cached=400, reasoning=120)))
    rollout = run(store, openai_model(server))
    usage = payloads(store, rollout, "usage")[0]
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=300),
        MODEL,
        provider_id="openai",
    )
    assert (usage["input_tokens"], usage["cache_read_tokens"], usage["output_tokens"]) == (
        1000,
        400,
        300,
    )
    assert usage["reasoning_tokens"] == 120
    assert usage["cost_usd"] == pytest.approx(float(expected.total_price))
    assert usage["price_source"].startswith("genai-prices")


def test_responses_unknown_model_has_no_cost(store: TraceStore, server: SSEReplayServer) -> None:
    body = ResponsesBody(model="my-private-finetune")
    body.function_call("call_s", "submit", ["{}"])
    server.add(Reply(events=body.completed()))
    rollout = run(store, openai_model(server))
    usage = payloads(store, rollout, "usage")[0]
    assert (usage["cost_usd"], usage["input_tokens"]) == (None, 100)


def test_responses_request_id_header_is_recorded_on_the_response(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn(), headers={"x-request-id": "req_abc123"}))
    rollout = run(store, openai_model(server))
    assert payloads(store, rollout, "model.response")[0]["provider_request_id"] == "req_abc123"


def test_responses_401_is_a_provider_auth_error_naming_the_key_variable(
    server: SSEReplayServer,
) -> None:
    server.add(Reply(status=401, body={"error": {"message": "Incorrect API key provided"}}))
    model = openai_model(server)
    context = AgentContext(
        messages=[Message(role="user", content="hi")], tools=[], turn=1, task_id="t", seed=0
    )
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        model(context)


def test_api_key_never_reaches_the_store(
    store: TraceStore, server: SSEReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.add(Reply(events=submit_turn()))
    model = get_model("openai:gpt-5", base_url=server.url + "/v1")
    run(store, model)
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    conn = sqlite3.connect(store.path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    rows = [repr(row) for t in tables for row in conn.execute(f"SELECT * FROM {t}")]
    conn.close()
    assert rows and not [r for r in rows if KEY in r]
    files = [p for p in store.path.parent.iterdir() if p.name.startswith(store.path.name)]
    assert not [p for p in files if KEY.encode() in p.read_bytes()]


def test_missing_openai_key_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY is not set"):
        get_model("openai:gpt-5")


def test_spec_and_params_hold_no_key(server: SSEReplayServer) -> None:
    model = openai_model(server, api_key=KEY)
    assert KEY not in json.dumps(model.spec()) + json.dumps(model.params)


# -- Chat Completions


def test_chat_parallel_tool_calls_are_assembled_by_index(
    store: TraceStore, server: SSEReplayServer
) -> None:
    def call(index: int, id_: str | None, name: str | None, args: str) -> dict[str, Any]:
        fn = {"arguments": args, **({"name": name} if name else {})}
        return {"index": index, **({"id": id_, "type": "function"} if id_ else {}), "function": fn}

    events = [
        chat_chunk({"role": "assistant", "content": None}),
        chat_chunk({"tool_calls": [call(0, "call_0", "get_weather", "")]}),
        chat_chunk({"tool_calls": [call(0, None, None, '{"city": "Lima"}')]}),
        chat_chunk({"tool_calls": [call(1, "call_1", "get_weather", "")]}),
        chat_chunk({"tool_calls": [call(1, None, None, '{"city": ')]}),
        chat_chunk({"tool_calls": [call(1, None, None, '"Quito"}')]}),
        chat_chunk({}, finish="tool_calls"),
        chat_usage(),
        DONE,
    ]
    server.add(Reply(events=events), Reply(events=[chat_chunk({"content": "done"}, "stop"), DONE]))
    rollout = run(store, openai_model(server, "openai-chat:gpt-4o"), max_turns=2)
    calls = payloads(store, rollout, "tool.call")
    assert [(c["call_id"], c["arguments"]) for c in calls] == [
        ("call_0", '{"city": "Lima"}'),
        ("call_1", '{"city": "Quito"}'),
    ]
    assert server.requests[1].json["messages"][1]["tool_calls"][1]["id"] == "call_1"


def test_chat_reasoning_field_from_compatible_servers_is_recorded_as_reasoning(
    store: TraceStore, server: SSEReplayServer
) -> None:
    events = [
        chat_chunk({"role": "assistant", "reasoning": "Think "}),
        chat_chunk({"reasoning": "first."}),
        chat_chunk({"content": "Answer."}),
        chat_chunk({}, finish="stop"),
        DONE,
    ]
    server.add(Reply(events=events))
    rollout = run(store, openai_model(server, "openai-chat:qwen3"), max_turns=1)
    recorded = [(c["channel"], c["text"]) for c in chunks(store, rollout)]
    assert recorded == [("reasoning", "Think "), ("reasoning", "first."), ("text", "Answer.")]


def test_chat_request_asks_for_usage_in_the_stream(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=[chat_chunk({"content": "hi"}, "stop"), chat_usage(7, 3), DONE]))
    rollout = run(store, openai_model(server, "openai-chat:gpt-4o"), max_turns=1)
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].json["stream_options"] == {"include_usage": True}
    usage = payloads(store, rollout, "usage")[0]
    assert (usage["input_tokens"], usage["output_tokens"]) == (7, 3)


def test_chat_stream_without_finish_reason_is_incomplete(
    store: TraceStore, server: SSEReplayServer
) -> None:
    server.add(Reply(events=[chat_chunk({"content": "Par"}), chat_chunk({"content": "tial"})]))
    rollout = run(store, openai_model(server, "openai-chat:gpt-4o"))
    response = payloads(store, rollout, "model.response")[0]
    assert (rollout.stop_reason, store.message(response["message_hash"]).content) == (
        "incomplete",
        "Partial",
    )


def test_chat_uses_openai_base_url_from_the_environment(
    store: TraceStore, server: SSEReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.add(Reply(events=[chat_chunk({"content": "hi"}, "stop"), DONE]))
    model = get_model("openai-chat:llama3", api_key=KEY)
    run(store, model, max_turns=1)
    assert model.spec()["base_url"] == server.url + "/v1" and len(server.requests) == 1


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


def test_cli_run_without_openai_key_fails_with_one_clear_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = _cli("run", "--model", "openai:gpt-5", "--db", str(tmp_path / "t.db"), env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: OPENAI_API_KEY is not set; export it to use openai models"
    ]


def test_cli_run_with_openai_key_and_base_url_completes(
    tmp_path: Path, server: SSEReplayServer
) -> None:
    server.add(Reply(events=submit_turn()))
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    db = str(tmp_path / "t.db")
    args = ("run", "--model", "openai:gpt-5", "--base-url", server.url + "/v1", "--db", db)
    proc = _cli(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["status"] == "completed"
