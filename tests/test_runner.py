"""The runner: one scripted episode on the real workspace env into a real store file."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

import pytest

from agentrunner import (
    AgentContext,
    AgentToolCall,
    AgentTurn,
    TraceStore,
    arun_agent_episode,
    run_agent_episode,
)
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.errors import (
    ContextOverflowError,
    IncompleteStreamError,
    ProviderAuthError,
    RateLimitError,
    UsageError,
)
from providers import get_model


def _run(store: TraceStore, env: WorkspaceEnv, model: Any, **kw: Any):  # type: ignore[no-untyped-def]
    return run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store, **kw)


def _kinds(store: TraceStore, ep: str) -> list[str]:
    return [e.kind for e in store.iter_events(ep)]


def test_demo_episode_completes_with_reward_one(store: TraceStore, env: WorkspaceEnv) -> None:
    rollout = _run(store, env, get_model("scripted:demo"))
    assert (rollout.status, rollout.stop_reason, rollout.total_reward) == ("completed", "done", 1.0)


def test_demo_episode_is_listed_as_completed(store: TraceStore, env: WorkspaceEnv) -> None:
    rollout = _run(store, env, get_model("scripted:demo"))
    summary = store.episode(rollout.episode_id)
    assert (summary.status, summary.total_reward, summary.turns) == ("completed", 1.0, 7)


def test_episode_log_starts_with_start_and_prompt_and_ends_with_end(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    kinds = _kinds(store, _run(store, env, get_model("scripted:demo")).episode_id)
    assert kinds[:3] == ["episode.start", "message", "message"]
    assert kinds[-1] == "episode.end"


def test_model_request_is_recorded_before_its_chunks_and_response(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    ep = _run(store, env, get_model("scripted:demo")).episode_id
    first_seen: dict[tuple[str, str], int] = {}
    for e in store.iter_events(ep):
        call = e.payload.get("call_id")
        if e.kind.startswith("model.") and call:
            first_seen.setdefault((call, e.kind), e.seq)
    for (call, kind), seq in first_seen.items():
        if kind != "model.request":
            assert first_seen[(call, "model.request")] < seq


def test_every_tool_call_is_recorded_before_its_result(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    ep = _run(store, env, get_model("scripted:demo")).episode_id
    calls = {e.payload["call_id"]: e.seq for e in store.iter_events(ep) if e.kind == "tool.call"}
    results = {
        e.payload["call_id"]: e.seq for e in store.iter_events(ep) if e.kind == "tool.result"
    }
    assert calls.keys() == results.keys() and all(calls[c] < results[c] for c in calls)


def test_streamed_chunks_add_up_to_the_recorded_message(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    ep = _run(store, env, get_model("scripted:demo")).episode_id
    streamed: dict[tuple[str, str], str] = defaultdict(str)
    for e in store.iter_events(ep, kinds=["model.chunk"]):
        streamed[(e.payload["call_id"], e.payload["channel"])] += e.payload["text"]
    for e in store.iter_events(ep, kinds=["model.response"]):
        message = store.message(e.payload["message_hash"])
        call = e.payload["call_id"]
        assert streamed.get((call, "text"), "") == message.content
        assert streamed.get((call, "reasoning"), "") == (message.reasoning or "")


def test_turn_without_tool_call_continues_with_a_recorded_message(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    ep = _run(store, env, get_model("scripted:demo")).episode_id
    reasons = [e.payload["reason"] for e in store.iter_events(ep, kinds=["message"])]
    assert reasons == ["system", "prompt", "continue"]


def test_reconstruct_request_gives_exactly_what_the_model_received(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    inner = get_model("scripted:demo")
    seen: dict[int, tuple[list[Any], list[Any]]] = {}

    def model(context: AgentContext) -> AgentTurn:
        seen[context.turn] = (list(context.messages), list(context.tools))
        return inner(context)

    ep = _run(store, env, model).episode_id
    assert len(seen) == 7
    for turn, (messages, tools) in seen.items():
        rebuilt = store.reconstruct_request(ep, turn)
        assert (rebuilt.messages, rebuilt.tools) == (messages, tools)


def test_same_seed_records_the_same_message_chain(tmp_path: Any, store: TraceStore) -> None:
    tips = []
    for i in range(2):
        with WorkspaceEnv(snapshot_dir=tmp_path / f"s{i}") as env:
            ep = _run(store, env, get_model("scripted:demo"), seed=7).episode_id
        tips.append([e.payload["tip_hash"] for e in store.iter_events(ep, kinds=["model.request"])])
    assert tips[0] == tips[1]


def test_unknown_tool_becomes_an_error_observation(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    model = script(
        [{"tool_calls": [{"name": "rm_rf", "arguments": {}}]}, {"tool_calls": [{"name": "submit"}]}]
    )
    ep = _run(store, env, model).episode_id
    result = store.events(ep, kinds=["tool.result"])[0].payload
    assert "unknown tool 'rm_rf'" in result["observation"] and result["error"]


def test_unknown_tool_does_not_end_the_episode(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    model = script(
        [{"tool_calls": [{"name": "rm_rf", "arguments": {}}]}, {"tool_calls": [{"name": "submit"}]}]
    )
    assert _run(store, env, model).stop_reason == "done"


def test_malformed_arguments_are_recorded_raw_and_reported(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    model = script([{"tool_calls": [{"name": "read_file", "arguments": '{"path": "stats.py"'}]}])
    ep = _run(store, env, model, max_turns=1).episode_id
    call = store.events(ep, kinds=["tool.call"])[0].payload
    result = store.events(ep, kinds=["tool.result"])[0].payload
    assert call["arguments"] == '{"path": "stats.py"' and call["parsed"] is None
    assert result["observation"].startswith("error: arguments are not valid JSON")


def test_max_turns_is_the_runner_limit(store: TraceStore, env: WorkspaceEnv, script: Any) -> None:
    model = script([{"text": "thinking"}] * 5)
    rollout = _run(store, env, model, max_turns=3)
    assert (rollout.stop_reason, rollout.turns_completed, rollout.status) == (
        "max_turns",
        3,
        "completed",
    )


def test_max_turns_above_500_is_refused(store: TraceStore, env: WorkspaceEnv) -> None:
    with pytest.raises(UsageError, match="between 1 and 500"):
        _run(store, env, get_model("scripted:demo"), max_turns=501)


def test_tool_calls_after_the_episode_ended_are_recorded_as_not_run(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    model = script([{"tool_calls": [{"name": "submit"}, {"name": "list_files"}]}])
    ep = _run(store, env, model).episode_id
    results = [e.payload for e in store.events(ep, kinds=["tool.result"])]
    assert [r["name"] for r in results] == ["submit", "list_files"]
    assert results[1]["observation"].startswith("not run")


def test_cancel_check_mid_stream_records_a_cancel_in_generate(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    stop = threading.Event()
    chunks = 0

    def model(context: AgentContext) -> AgentTurn:
        nonlocal chunks
        for _ in range(100):
            context.emit("text", "x")
            chunks += 1
            if chunks == 5:
                stop.set()
        return AgentTurn(message="never")

    rollout = _run(store, env, model, cancel_check=stop.is_set)
    cancel = store.events(rollout.episode_id, kinds=["cancel"])[0].payload
    assert (rollout.status, cancel["where"]) == ("cancelled", "generate")


def test_cancel_mid_stream_keeps_the_partial_chunks(store: TraceStore, env: WorkspaceEnv) -> None:
    stop = threading.Event()

    def model(context: AgentContext) -> AgentTurn:
        for i in range(100):
            if i == 3:
                stop.set()
            context.emit("text", f"{i} ")
        return AgentTurn(message="never")

    ep = _run(store, env, model, cancel_check=stop.is_set).episode_id
    texts = [e.payload["text"] for e in store.events(ep, kinds=["model.chunk"])]
    assert texts == ["0 ", "1 ", "2 "] and store.events(ep, kinds=["model.response"]) == []


def test_cancel_before_a_tool_step_is_recorded_in_tool(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    stop = threading.Event()
    inner = script([{"tool_calls": [{"name": "list_files"}]}] * 3)

    def model(context: AgentContext) -> AgentTurn:
        turn = inner(context)
        stop.set()
        return turn

    rollout = _run(store, env, model, cancel_check=stop.is_set)
    cancel = store.events(rollout.episode_id, kinds=["cancel"])[0].payload
    assert cancel["where"] == "tool" and rollout.turns_completed == 1


def test_cancel_request_from_the_store_is_honoured_within_a_second(
    store: TraceStore, env: WorkspaceEnv, script: Any
) -> None:
    model = script([{"text": "slow " * 400}], pace=0.01)
    result: dict[str, Any] = {}

    def run() -> None:
        with TraceStore(store.path) as own:
            result["rollout"] = _run(own, env, model)

    worker = threading.Thread(target=run)
    worker.start()
    while not store.list_episodes():
        threading.Event().wait(0.05)
    ep = store.list_episodes()[0].episode_id
    store.request_cancel(ep, "from the test")
    worker.join(timeout=5)
    assert not worker.is_alive()
    cancel = store.events(ep, kinds=["cancel"])[0].payload
    assert "from the test" in cancel["reason"] and result["rollout"].status == "cancelled"


def test_known_secret_in_an_observation_is_redacted(
    store: TraceStore, env: WorkspaceEnv, script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    model = script(
        [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {
                            "path": "leak.txt",
                            "content": "key=sk-test-0123456789abcdef",
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "leak.txt"}}]},
        ]
    )
    ep = _run(store, env, model, max_turns=2).episode_id
    observation = store.events(ep, kinds=["tool.result"])[1].payload["observation"]
    assert "[redacted:OPENAI_API_KEY]" in observation
    dump = "".join(
        r[0]
        for r in store.raw_connection().execute(
            "SELECT payload FROM events WHERE kind = 'tool.result'"
        )
    )
    assert "sk-test-0123456789abcdef" not in dump


def test_plain_model_fn_is_recorded_as_custom_provider(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    def my_policy(context: AgentContext) -> AgentTurn:
        return AgentTurn(message="done", tool_calls=({"call_id": "a", "name": "submit"},))  # type: ignore[arg-type]

    ep = _run(store, env, my_policy).episode_id
    request = store.events(ep, kinds=["model.request"])[0].payload
    assert (request["provider"], request["model"]) == ("custom", "my_policy")


def test_async_twin_runs_an_async_model_fn(store: TraceStore, env: WorkspaceEnv) -> None:
    inner = get_model("scripted:demo")

    async def model(context: AgentContext) -> AgentTurn:
        await asyncio.sleep(0)
        return inner(context)

    rollout = asyncio.run(
        arun_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store)
    )
    assert rollout.total_reward == 1.0


def test_usage_totals_are_summed_in_the_end_event(store: TraceStore, env: WorkspaceEnv) -> None:
    ep = _run(store, env, get_model("scripted:demo")).episode_id
    usage_in = sum(e.payload["input_tokens"] for e in store.events(ep, kinds=["usage"]))
    end = store.events(ep, kinds=["episode.end"])[0].payload
    assert end["totals"]["tokens"]["input"] == usage_in > 0


def test_retry_reported_by_an_adapter_leaves_an_error_event(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    def model(context: AgentContext) -> AgentTurn:
        if context.turn == 1:
            context.report_error(RateLimitError("429 slow down"), attempt=1)
        return AgentTurn(tool_calls=(AgentToolCall(call_id="s", name="submit"),))

    ep = _run(store, env, model).episode_id
    error = store.events(ep, kinds=["error"])[0].payload
    assert (error["type"], error["retryable"], error["attempt"]) == ("RateLimitError", True, 1)


def test_model_error_fails_the_episode_with_a_recorded_error(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    def model(context: AgentContext) -> AgentTurn:
        raise ProviderAuthError("invalid API key")

    rollout = _run(store, env, model)
    error = store.events(rollout.episode_id, kinds=["error"])[0].payload
    assert (rollout.status, rollout.stop_reason, error["where"]) == ("failed", "error", "generate")


def test_incomplete_stream_records_partial_response_and_error(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    def model(context: AgentContext) -> AgentTurn:
        context.emit("text", "half a tho")
        raise IncompleteStreamError("stream ended early", partial=AgentTurn(message="half a tho"))

    rollout = _run(store, env, model)
    response = store.events(rollout.episode_id, kinds=["model.response"])[0].payload
    kinds = _kinds(store, rollout.episode_id)
    assert response["stop_reason"] == "incomplete" and rollout.stop_reason == "incomplete"
    assert kinds[-2:] == ["error", "episode.end"]


def test_context_overflow_ends_with_a_stop_reason_that_says_what_to_do(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    def model(context: AgentContext) -> AgentTurn:
        raise ContextOverflowError("prompt is too long: 210000 tokens > 200000")

    rollout = _run(store, env, model)
    assert rollout.stop_reason == "context_overflow" and "fork" in (rollout.error or "")


def test_cancelling_the_async_twin_records_a_cancel_and_an_end(
    store: TraceStore, env: WorkspaceEnv
) -> None:
    started = threading.Event()

    async def slow_model(context: AgentContext) -> AgentTurn:
        started.set()
        await asyncio.sleep(30)
        return AgentTurn(message="never")

    async def main() -> None:
        task = asyncio.ensure_future(
            arun_agent_episode(env=env, task_id="demo-mean", model_fn=slow_model, store=store)
        )
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (episode,) = store.list_episodes()
    kinds = [e.kind for e in store.iter_events(episode.episode_id)]
    assert episode.status == "cancelled" and kinds[-2:] == ["cancel", "episode.end"]
