"""Conformance: real recorded provider streams, replayed through the adapters and the runner.

Reads ``../shared/fixtures/provider-streams/`` beside the checkout (skipped when absent).
Each ``X.sse`` is replayed by the loopback server to the matching adapter (the real SDK
client), one episode per conversation (``__turnN`` files in order), recorded into a real
store; the recorded trace is checked against the sidecar's ``expect``: every SDK event was
consumed, text / reasoning / refusal chunks, tool calls with their full arguments, usage,
stop reason, request id, signatures and encrypted reasoning (lengths and hashes), redacted
blocks. For a two-turn conversation, the second request (which the store alone can
rebuild) carries the first turn's encrypted reasoning / server-tool blocks verbatim.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from sse_replay import Reply, SSEReplayServer, ToolTableEnv, events_from_file

from agentrunner import TraceStore, run_agent_episode
from providers import get_model
from providers._anthropic_messages import request_messages
from providers.openai_messages import responses_input

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "provider-streams"
if not FIXTURES.is_dir():
    pytest.skip(f"no provider-stream fixtures at {FIXTURES}", allow_module_level=True)

ADAPTERS = {  # api -> (provider, base-url suffix, request-id header, genai-prices provider)
    "openai-chat": ("openai-chat", "/v1", "x-request-id", "openai"),
    "deepseek-chat": ("openai-chat", "/v1", "x-request-id", "deepseek"),
    "openai-responses": ("openai", "/v1", "x-request-id", "openai"),
    "anthropic-messages": ("anthropic", "", "request-id", "anthropic"),
}


def _conversations() -> list[list[str]]:
    """Fixture base names grouped into conversations (a ``__turnN`` series is one)."""
    out: list[list[str]] = []
    for sidecar in sorted(FIXTURES.glob("*.json")):
        conversation = json.loads(sidecar.read_text()).get("conversation")
        if conversation is None:
            out.append([sidecar.stem])
        elif conversation["turn"] == 1:
            out.append([Path(f).stem for f in conversation["files_in_order"]])
    return out


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Replay:
    """One conversation replayed through the runner; the recorded trace, by turn."""

    def __init__(self, names: list[str], store: TraceStore) -> None:
        self.sidecars = [json.loads((FIXTURES / f"{n}.json").read_text()) for n in names]
        first = self.sidecars[0]
        self.api = first["api"]
        provider, suffix, header, price = ADAPTERS[self.api]
        request = (first.get("request") or {}).get("json") or {}
        model_name = request.get("model") or first["expect"]["model"]
        self.log: list[Any] = []  # "request" markers and raw SDK events, in order
        replies = [Reply(events=events_from_file(FIXTURES / f"{n}.sse")) for n in names]
        with SSEReplayServer(*replies, request_id_header=header) as server:
            model = get_model(
                f"{provider}:{model_name}",
                base_url=server.url + suffix,
                api_key="test-key-not-secret",
                price_provider=price,
                on_event=self.log.append,
            )
            rollout = run_agent_episode(
                env=self._env(request),
                task_id="conformance",
                model_fn=model,
                store=store,
                max_turns=len(names),
                observer=self._observe,
            )
        self.server = server
        self.store = store
        self.episode_id = rollout.episode_id
        self.events = list(store.iter_events(rollout.episode_id))

    def _env(self, request: dict[str, Any]) -> ToolTableEnv:
        answers = {c["name"]: "ok" for s in self.sidecars for c in s["expect"]["tool_calls"]}
        later = (self.sidecars[1:] and (self.sidecars[-1].get("request") or {}).get("json")) or {}
        for item in later.get("input") or []:  # Responses: the recorded tool outputs
            if item.get("type") == "function_call_output":
                answers = dict.fromkeys(answers, item["output"])
        for message in later.get("messages") or []:  # Anthropic: the recorded tool results
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    answers = dict.fromkeys(answers, block["content"][0]["text"])
        messages = request.get("input") or request.get("messages") or []
        prompt = messages[0]["content"] if messages else "Hello"
        if isinstance(prompt, list):
            prompt = prompt[0]["text"]
        return ToolTableEnv(answers, prompt=prompt)

    def _observe(self, seq: int, turn: int, payload: BaseModel) -> None:
        if getattr(payload, "kind", "") == "model.request":
            self.log.append("request")

    def sdk_event_counts(self) -> list[int]:
        counts: list[int] = []
        for entry in self.log:
            if entry == "request":
                counts.append(0)
            else:
                counts[-1] += 1
        return counts

    def of_turn(self, turn: int, kind: str) -> list[dict[str, Any]]:
        return [e.payload for e in self.events if e.turn == turn and e.kind == kind]

    def chunks(self, turn: int, channel: str) -> list[dict[str, Any]]:
        return [c for c in self.of_turn(turn, "model.chunk") if c["channel"] == channel]

    def joined(self, turn: int, channel: str) -> str:
        return "".join(c["text"] for c in self.chunks(turn, channel))


CONVERSATIONS = _conversations()
_REPLAYED: dict[tuple[str, ...], Replay] = {}


def _api(names: list[str]) -> str:
    return str(json.loads((FIXTURES / f"{names[0]}.json").read_text())["api"])


def _cases(api: str | None = None, turns: int = 1) -> Any:
    chosen = [c for c in CONVERSATIONS if (api is None or _api(c) == api) and len(c) >= turns]
    return pytest.mark.parametrize(
        "replay", chosen, ids=[c[0].removesuffix("__turn1") for c in chosen], indirect=True
    )


@pytest.fixture(scope="module", autouse=True)
def _close_stores() -> Iterator[None]:
    yield
    for replayed in _REPLAYED.values():
        replayed.store.close()
    _REPLAYED.clear()


@pytest.fixture
def replay(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Replay:
    """The conversation replayed once per test session (each check reads the same trace)."""
    names = tuple(request.param)
    if names not in _REPLAYED:
        store = TraceStore(tmp_path_factory.mktemp("conformance") / "traces.db")
        _REPLAYED[names] = Replay(list(names), store)
    return _REPLAYED[names]


def _expected_usage(api: str, expect: dict[str, Any]) -> dict[str, int]:
    if api == "anthropic-messages":
        u = expect["usage_merged"]
        read, write = (
            u.get("cache_read_input_tokens") or 0,
            u.get("cache_creation_input_tokens") or 0,
        )
        return {
            "input_tokens": u["input_tokens"] + read + write,
            "output_tokens": u["output_tokens"],
            "cache_read_tokens": read,
            "cache_write_tokens": write,
        }
    u = expect["usage"]
    if api == "openai-responses":
        details = u.get("input_tokens_details") or {}
        return {
            "input_tokens": u["input_tokens"],
            "output_tokens": u["output_tokens"],
            "cache_read_tokens": details.get("cached_tokens", 0),
            "cache_write_tokens": details.get("cache_write_tokens", 0),
            "reasoning_tokens": u["output_tokens_details"]["reasoning_tokens"],
        }
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": u["prompt_tokens"],
        "output_tokens": u["completion_tokens"],
        "cache_read_tokens": cached or u.get("prompt_cache_hit_tokens", 0),
        "reasoning_tokens": (u.get("completion_tokens_details") or {}).get("reasoning_tokens", 0),
    }


def _expected_reasoning(api: str, expect: dict[str, Any]) -> dict[str, Any] | None:
    key = {"anthropic-messages": "thinking", "openai-responses": "reasoning_summary"}
    value: dict[str, Any] | None = expect.get(key.get(api, "reasoning"))
    return value


@_cases()
def test_every_sdk_event_of_each_stream_is_consumed(replay: Replay) -> None:
    counts = [s["expect"]["sdk_event_count"] for s in replay.sidecars]
    assert replay.sdk_event_counts() == counts


@_cases()
def test_text_chunks_and_message_equal_the_streamed_text(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        response = replay.of_turn(turn, "model.response")[0]
        message = replay.store.message(response["message_hash"])
        assert replay.joined(turn, "text") == message.content == sidecar["expect"]["text"]


@_cases()
def test_reasoning_chunks_match_length_and_hash(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expected = _expected_reasoning(replay.api, sidecar["expect"])
        reasoning = replay.joined(turn, "reasoning")
        if expected is None:
            assert reasoning == ""
        else:
            assert (len(reasoning), _sha(reasoning)) == (expected["length"], expected["sha256"])


@_cases()
def test_tool_calls_are_recorded_with_their_full_arguments(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expected = [(c["id"], c["name"], c["arguments"]) for c in sidecar["expect"]["tool_calls"]]
        calls = replay.of_turn(turn, "tool.call")
        assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == expected
        for call_id, _, arguments in expected:
            streamed = [c for c in replay.chunks(turn, "tool_args") if c["tool_call_id"] == call_id]
            assert "".join(c["text"] for c in streamed) == arguments


@_cases()
def test_usage_is_normalised_and_priced(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        usage = replay.of_turn(turn, "usage")[0]
        expected = _expected_usage(replay.api, sidecar["expect"])
        assert {k: usage[k] for k in expected} == expected
        assert usage["cost_usd"] > 0 and usage["price_source"].startswith("genai-prices")


@_cases()
def test_stop_reason_and_request_id_are_recorded(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expect = sidecar["expect"]
        response = replay.of_turn(turn, "model.response")[0]
        stop = expect.get("finish_reason") or expect.get("stop_reason") or expect.get("status")
        assert response["stop_reason"] == stop
        assert response["provider_request_id"] == replay.server.request_ids[turn - 1]


@_cases()
def test_refusal_is_recorded_as_refusal(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        refusal = sidecar["expect"].get("refusal")
        response = replay.of_turn(turn, "model.response")[0]
        assert response["refusal"] == refusal
        assert replay.joined(turn, "refusal") == (refusal or "")


def _opaque(replay: Replay, turn: int, kind: str) -> list[dict[str, Any]]:
    response = replay.of_turn(turn, "model.response")[0]
    return [p["data"] for p in response["opaque"] if p["type"] == kind]


@_cases("openai-responses")
def test_encrypted_reasoning_items_are_kept_verbatim(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expected = [
            (r["id"], r["encrypted_content_length_done"], r["encrypted_content_sha256_done"])
            for r in sidecar["expect"]["reasoning_items"]
        ]
        kept = [
            (r["id"], len(r["encrypted_content"]), _sha(r["encrypted_content"]))
            for r in _opaque(replay, turn, "reasoning")
        ]
        assert kept == expected


@_cases("anthropic-messages")
def test_thinking_signatures_and_redacted_blocks_are_kept_verbatim(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expect = sidecar["expect"]
        signatures = [
            (len(b["signature"]), _sha(b["signature"])) for b in _opaque(replay, turn, "thinking")
        ]
        assert signatures == [
            (b["signature_length"], b["signature_sha256"]) for b in expect["thinking_blocks"]
        ]
        redacted = [
            (len(b["data"]), _sha(b["data"])) for b in _opaque(replay, turn, "redacted_thinking")
        ]
        assert len(redacted) == expect["redacted_thinking_count"]
        assert redacted == [
            (b["data_length"], b["data_sha256"]) for b in expect["redacted_thinking_blocks"]
        ]


@_cases("anthropic-messages")
def test_server_tool_blocks_and_citations_are_kept_verbatim(replay: Replay) -> None:
    for turn, sidecar in enumerate(replay.sidecars, start=1):
        expect = sidecar["expect"]
        uses = [(b["id"], b["name"], b["input"]) for b in _opaque(replay, turn, "server_tool_use")]
        assert uses == [
            (c["id"], c["name"], json.loads(c["arguments"])) for c in expect["server_tool_calls"]
        ]
        response = replay.of_turn(turn, "model.response")[0]
        results = [
            (p["type"], p["data"]["tool_use_id"])
            for p in response["opaque"]
            if p["type"].endswith("_tool_result")
        ]
        assert results == [(r["type"], r["tool_use_id"]) for r in expect["server_tool_results"]]
        citations = sum(len(b.get("citations") or []) for b in _opaque(replay, turn, "text"))
        assert citations == expect["citations_delta_count"]


@_cases(turns=2)
def test_second_request_carries_the_first_turns_opaque_output_verbatim(replay: Replay) -> None:
    sent = replay.server.requests[1].json
    recorded = replay.sidecars[1]["request"]["json"]
    rebuilt = replay.store.reconstruct_request(replay.episode_id, 2).messages
    if replay.api == "openai-responses":
        first = replay.sidecars[0]["expect"]["reasoning_items"][0]
        items = sent["input"]
        reasoning = next(i for i in items if i.get("type") == "reasoning")
        assert (reasoning["id"], _sha(reasoning["encrypted_content"])) == (
            first["id"],
            first["encrypted_content_sha256_done"],
        )
        expected_reasoning = next(i for i in recorded["input"] if i.get("type") == "reasoning")
        assert reasoning["encrypted_content"] == expected_reasoning["encrypted_content"]
        assert [i.get("type", "message") for i in items] == [
            i.get("type", "message") for i in recorded["input"]
        ]
        call = next(i for i in items if i.get("type") == "function_call")
        expected_call = next(i for i in recorded["input"] if i.get("type") == "function_call")
        assert {k: call[k] for k in expected_call} == expected_call
        assert responses_input(rebuilt) == items
    else:
        mine = next(m["content"] for m in sent["messages"] if m["role"] == "assistant")
        theirs = next(m["content"] for m in recorded["messages"] if m["role"] == "assistant")
        assert [b["type"] for b in mine] == [b["type"] for b in theirs]
        for block, expected in zip(mine, theirs, strict=True):
            assert {k: block[k] for k in expected} == expected
        assert request_messages(rebuilt)[1] == sent["messages"]
