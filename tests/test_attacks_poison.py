"""A model's tool-call arguments that escape a lone surrogate (``"\\ud800"`` in the JSON text, as
real providers stream it) never wedge an episode or poison the store.

UTF-8 cannot carry a lone surrogate, so the parsed arguments hold U+FFFD in its place (keys
too) while the raw string stays as the model wrote it (escaped JSON text, which UTF-8 carries).
The tool runs on what is recorded, every event is valid UTF-8 JSON, a resume does not fail
again on the same call, and the whole store exports. The arguments come from the scripted
model (a raw string in its script) and from real provider SDKs reading a loopback SSE server.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sse_replay import Reply, SSEReplayServer, ToolTableEnv, sse

from agentrunner import TraceStore, run_agent_episode
from agentrunner.export import export
from agentrunner.export.writer import RecordableRows, write_jsonl
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.runtime.runner import Rollout
from agentrunner.values.events import ModelResponse
from providers import get_model
from providers.scripted import ScriptedModel

ESCAPED = '{"command": "echo \\ud800"}'
"""Arguments as JSON text: the escape is six ASCII characters, its value a lone surrogate."""
ESCAPED_KEY = '{"\\ud800": "x"}'
REPLACED = {"command": "echo \ufffd"}


def scripted(tmp_path: Path, arguments: str, name: str = "poison") -> ScriptedModel:
    call = {"name": "bash", "arguments": arguments}
    turns = [{"tool_calls": [call]}, {"tool_calls": [{"name": "submit", "arguments": {}}]}]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "episodes": [{"turns": turns}]}))
    return ScriptedModel(str(path), pace=0)


def run(store: TraceStore, model: Any, env: ToolTableEnv, *, seed: int = 0, **kw: Any) -> Rollout:
    kw.setdefault("max_turns", 4)
    return run_agent_episode(env=env, task_id="t", model_fn=model, store=store, seed=seed, **kw)


def tool_calls(store: TraceStore, episode_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.iter_events(episode_id) if e.kind == "tool.call"]


def stored_payloads(db: Path, episode_id: str) -> list[bytes]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT CAST(payload AS BLOB) FROM events WHERE episode_id = ? ORDER BY seq",
            (episode_id,),
        ).fetchall()
    return [bytes(row[0]) for row in rows]


def strict_utf8_json(raw: bytes) -> Any:
    """The payload as JSON, refusing invalid UTF-8 and strings UTF-8 cannot carry."""
    value = json.loads(raw.decode("utf-8"))
    json.dumps(value, ensure_ascii=False).encode("utf-8")
    return value


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "t.db"


@pytest.fixture
def store(db: Path) -> TraceStore:
    return TraceStore(db)


# -- the scripted model


def test_an_escaped_lone_surrogate_in_arguments_runs_the_tool_with_u_fffd_in_its_place(
    store: TraceStore, tmp_path: Path
) -> None:
    env = ToolTableEnv({"bash": "ok"})
    rollout = run(store, scripted(tmp_path, ESCAPED), env)
    assert (rollout.stop_reason, dict(env.steps[0].arguments)) == ("done", REPLACED)


def test_the_tool_call_keeps_the_raw_text_as_written_and_records_the_parsed_form_replaced(
    store: TraceStore, tmp_path: Path
) -> None:
    rollout = run(store, scripted(tmp_path, ESCAPED), ToolTableEnv({"bash": "ok"}))
    call = tool_calls(store, rollout.episode_id)[0]
    assert (call["arguments"], call["parsed"]) == (ESCAPED, REPLACED)


def test_every_event_of_an_episode_with_escaped_surrogates_is_valid_utf8_json(
    store: TraceStore, db: Path, tmp_path: Path
) -> None:
    env = ToolTableEnv({"bash": "ok"})
    rollout = run(store, scripted(tmp_path, ESCAPED_KEY), env)
    payloads = [strict_utf8_json(raw) for raw in stored_payloads(db, rollout.episode_id)]
    assert {"\ufffd": "x"} in [p.get("parsed") for p in payloads]


def test_resuming_an_episode_stopped_before_such_a_call_runs_it_once_and_completes(
    store: TraceStore, tmp_path: Path
) -> None:
    answered: list[int] = []

    def watch(seq: int, turn: int, payload: Any) -> None:
        if isinstance(payload, ModelResponse):
            answered.append(seq)

    model = scripted(tmp_path, ESCAPED)
    first = run(
        store,
        model,
        ToolTableEnv({"bash": "ok"}),
        observer=watch,
        cancel_check=lambda: bool(answered),
    )
    assert (first.stop_reason, tool_calls(store, first.episode_id)) == ("cancelled", [])
    env = ToolTableEnv({"bash": "ok"})
    resumed = resume_episode(store, first.episode_id, env=env, model_fn=model)
    assert resumed.stop_reason == "done"
    assert [dict(s.arguments) for s in env.steps if s.name == "bash"] == [REPLACED]


@pytest.mark.parametrize("fmt", ["sft", "grpo", "kto"])
def test_a_store_with_a_surrogate_in_an_argument_key_exports_every_episode(
    store: TraceStore, tmp_path: Path, fmt: str
) -> None:
    bad = run(store, scripted(tmp_path, ESCAPED_KEY, "bad"), ToolTableEnv({"bash": "ok"}))
    good = run(store, scripted(tmp_path, '{"command": "ls"}', "good"), ToolTableEnv(), seed=1)
    out = tmp_path / f"out.{fmt}.jsonl"
    result = export(store, fmt, out)
    text = out.read_text(encoding="utf-8")
    assert result.rows >= 1 and good.episode_id in text and bad.episode_id in text
    assert "\ufffd" in text


def test_export_rows_holding_a_lone_surrogate_are_written_with_u_fffd_and_noted(
    tmp_path: Path,
) -> None:
    out, recordable = tmp_path / "rows.jsonl", RecordableRows()
    rows: list[dict[str, Any]] = [{"ok": "fine"}, {"bad": "a\ud800b", "\udc00": 1}]
    assert write_jsonl(recordable.rows(rows), out) == 2
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines == [{"ok": "fine"}, {"bad": "a\ufffdb", "\ufffd": 1}]
    assert recordable.notes() == [
        "1 row(s) held text UTF-8 cannot carry (lone surrogates); written with U+FFFD in its place"
    ]


# -- real provider SDKs against a loopback SSE server

KEY = "sk-test-poison-0123456789abcdef"


def openai_chat_turn(arguments: str) -> list[str]:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> str:
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

    function = {"name": "bash", "arguments": ""}
    start = {"index": 0, "id": "call_0", "type": "function", "function": function}
    usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [start]}),
        *(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
            for part in (arguments[:13], arguments[13:])
        ),
        chunk({}, finish="tool_calls"),
        chunk(None, usage=usage),
        "data: [DONE]",
    ]


def anthropic_turn(arguments: str) -> list[str]:
    events = []

    def event(kind: str, **fields: Any) -> None:
        events.append(sse({"type": kind, **fields}, kind))

    usage = {"input_tokens": 5, "output_tokens": 1}
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6"}
    event("message_start", message={**message, "content": [], "stop_reason": None, "usage": usage})
    start = {"type": "tool_use", "id": "toolu_0", "name": "bash", "input": {}}
    event("content_block_start", index=0, content_block=start)
    for part in ("", arguments[:13], arguments[13:]):
        event(
            "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": part}
        )
    event("content_block_stop", index=0)
    event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9})
    event("message_stop")
    return events


PROVIDERS = {
    "openai-chat": (openai_chat_turn, "openai-chat:gpt-4o", "/v1", "x-request-id", "openai"),
    "anthropic": (anthropic_turn, "anthropic:claude-sonnet-4-6", "", "request-id", "anthropic"),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_streamed_tool_call_escaping_a_lone_surrogate_completes_with_valid_events(
    store: TraceStore, db: Path, provider: str
) -> None:
    turn, spec, path, header, prices = PROVIDERS[provider]
    with SSEReplayServer(request_id_header=header) as server:
        server.add(Reply(events=turn(ESCAPED)), Reply(events=turn('{"x": 1}')))
        options = {"api_key": KEY, "retry_delay": 0.001, "price_provider": prices}
        model = get_model(spec, base_url=server.url + path, **options)
        env = ToolTableEnv({"bash": "ok"})
        rollout = run(store, model, env, max_turns=2)
    assert rollout.stop_reason == "max_turns"
    assert dict(env.steps[0].arguments) == REPLACED
    for raw in stored_payloads(db, rollout.episode_id):
        strict_utf8_json(raw)
    assert tool_calls(store, rollout.episode_id)[0]["arguments"] == ESCAPED
