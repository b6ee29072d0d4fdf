"""The ATIF importer: Harbor's sample trajectories, and small trajectories written here."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import atif
from agentrunner.imports.importer import import_file
from tests.imports.conftest import (
    FIXTURES,
    fixture_files,
    head,
    kinds,
    needs,
    only_episode,
    payloads,
)

SAMPLES = fixture_files("atif", "harbor-*.json")
OTHERS = [
    path
    for folder in (sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else [])
    if folder.is_dir() and folder.name != "atif"
    for path in fixture_files(folder.name)
] + fixture_files("atif", "*.schema.json")


def sample(name: str) -> Path:
    return next(p for p in SAMPLES if name in p.name)


def steps_of(path: Path) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = json.loads(path.read_text())["steps"]
    return steps


def results(step: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (step.get("observation") or {}).get("results", [])
    return found


def metric(steps: list[dict[str, Any]], name: str) -> int:
    return sum((s.get("metrics") or {}).get(name) or 0 for s in steps)


def write(tmp_path: Path, steps: list[dict[str, Any]], **header: Any) -> Path:
    doc = {
        "schema_version": "ATIF-v1.7",
        "session_id": "s-1",
        "agent": {"name": "tester", "version": "1", "model_name": "gpt-4o"},
        "steps": [{"step_id": i + 1, **step} for i, step in enumerate(steps)],
        **header,
    }
    path = tmp_path / f"t{len(list(tmp_path.glob('t*.json')))}.json"
    path.write_text(json.dumps(doc))
    return path


def only(store: TraceStore, path: Path) -> str:
    return only_episode(store, path, atif)


def kept_raw(store: TraceStore, episode: str) -> list[dict[str, Any]]:
    return [p["raw"] for p in payloads(store, episode, "error") if p["type"] == "unmapped"]


TASK = {"source": "user", "message": "make hello.txt"}


def agent_step(**fields: Any) -> dict[str, Any]:
    call = {"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "ls"}}
    return {"source": "agent", "message": "", "tool_calls": [call], **fields}


# -- the samples


@needs("atif")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_messages_calls_and_results_its_json_has(
    store: TraceStore, path: Path
) -> None:
    steps = steps_of(path)
    episode = only(store, path)
    roles = Counter(m["role"] for m in payloads(store, episode, "message"))
    counts = kinds(store, episode)
    assert roles["user"] == sum(s["source"] == "user" for s in steps)
    assert roles["system"] == sum(s["source"] == "system" for s in steps)
    assert counts["model.request"] == sum(s["source"] == "agent" for s in steps)
    assert counts["tool.call"] == sum(len(s.get("tool_calls") or []) for s in steps)
    assert counts["tool.result"] == sum(len(results(s)) for s in steps)


@needs("atif")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_token_totals_its_steps_have(store: TraceStore, path: Path) -> None:
    steps = steps_of(path)
    usage = payloads(store, only(store, path), "usage")
    assert sum(u["input_tokens"] for u in usage) == metric(steps, "prompt_tokens")
    assert sum(u["output_tokens"] for u in usage) == metric(steps, "completion_tokens")
    assert sum(u["cache_read_tokens"] for u in usage) == metric(steps, "cached_tokens")


@needs("atif")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_importing_a_sample_twice_adds_nothing(store: TraceStore, path: Path) -> None:
    episode = only(store, path)
    before = sum(kinds(store, episode).values())
    [again] = import_file(store, path, atif)
    assert (again.episode_id, again.created, again.events) == (episode, False, 0)
    assert sum(kinds(store, episode).values()) == before


def history(steps: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The messages the steps put into the history, read from the JSON alone."""
    out: list[tuple[Any, ...]] = []
    for step in steps:
        if step["source"] != "agent":
            out.append((step["source"], step["message"], None, None, ()))
            continue
        calls = [
            (c["tool_call_id"], c["function_name"], c["arguments"]) for c in step["tool_calls"]
        ]
        out.append(
            ("assistant", step["message"], step.get("reasoning_content"), None, tuple(calls))
        )
        for i, result in enumerate(results(step)):
            # terminus-2 leaves the id out of the one result of its one call
            call = result.get("source_call_id") or calls[i][0]
            out.append(("tool", result["content"], None, call, ()))
    return out


@needs("atif")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_request_of_a_middle_turn_is_the_history_before_its_step(
    store: TraceStore, path: Path
) -> None:
    steps = steps_of(path)
    agent = [i for i, s in enumerate(steps) if s["source"] == "agent"]
    middle = len(agent) // 2
    request = store.reconstruct_request(only(store, path), middle + 1)
    got = [
        (
            m.role,
            m.content,
            m.reasoning,
            m.tool_call_id,
            tuple((c.call_id, c.name, json.loads(c.arguments)) for c in m.tool_calls),
        )
        for m in request.messages
    ]
    assert got == history(steps[: agent[middle]])


@needs("atif")
def test_the_requests_offer_the_tools_the_trajectory_defines(store: TraceStore) -> None:
    path = sample("openhands")
    defined = [d["function"] for d in json.loads(path.read_text())["agent"]["tool_definitions"]]
    request = store.reconstruct_request(only(store, path), 1)
    assert [(t.name, t.description, t.parameters) for t in request.tools] == [
        (d["name"], d["description"], d["parameters"]) for d in defined
    ]


@needs("atif")
def test_the_episode_start_keeps_the_trajectory_header(store: TraceStore) -> None:
    path = sample("atif2otel")
    doc = json.loads(path.read_text())
    [start] = payloads(store, only(store, path), "episode.start")
    env = start["env"]
    assert (env["format"], env["agent"], env["agent_version"]) == ("atif", "claude-code", "2.1.178")
    assert start["model"]["model"] == "claude-opus-4-6"
    assert env["extra"]["final_metrics"] == doc["final_metrics"]
    assert env["extra"]["schema_version"] == "ATIF-v1.7"
    assert env["extra"]["session_id"] == doc["session_id"]


@needs("atif")
def test_each_model_call_carries_its_steps_time(store: TraceStore) -> None:
    path = sample("atif2otel")
    stamps = [s["timestamp"] for s in steps_of(path) if s["source"] == "agent"]
    episode = only(store, path)
    rows = [r.ts for r in store.iter_events(episode) if r.kind == "model.request"]
    moment = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in stamps]
    assert [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in rows] == moment


@needs("atif")
def test_a_cost_the_steps_state_is_the_cost_recorded(store: TraceStore) -> None:
    path = sample("terminus_2")
    usage = payloads(store, only(store, path), "usage")
    assert [u["price_source"] for u in usage] == ["source"] * 3
    assert sum(u["cost_usd"] for u in usage) == pytest.approx(
        sum(s["metrics"]["cost_usd"] for s in steps_of(path) if "metrics" in s)
    )


@needs("atif")
def test_steps_without_a_cost_are_priced_from_their_model(store: TraceStore) -> None:
    usage = payloads(store, only(store, sample("atif2otel")), "usage")
    assert all(u["cost_usd"] > 0 for u in usage)
    assert all(u["price_source"].startswith("genai-prices") for u in usage)


@needs("atif")
def test_a_result_without_a_call_id_answers_its_steps_one_call(store: TraceStore) -> None:
    path = sample("terminus_2")
    calls = [s["tool_calls"][0]["tool_call_id"] for s in steps_of(path) if "tool_calls" in s]
    answered = [r["call_id"] for r in payloads(store, only(store, path), "tool.result")]
    assert answered == calls


@needs("atif")
def test_two_files_with_one_session_id_become_two_episodes(store: TraceStore) -> None:
    first, second = sample("openhands"), sample("terminus_2")
    assert (
        json.loads(first.read_text())["session_id"] == json.loads(second.read_text())["session_id"]
    )
    one, two = only(store, first), only(store, second)
    assert one != two
    assert kinds(store, one)["model.request"] == 2
    assert kinds(store, two)["model.request"] == 3


@needs("atif")
def test_what_a_step_has_beyond_the_log_is_kept_raw(store: TraceStore) -> None:
    path = sample("terminus_2")
    raw = kept_raw(store, only(store, path))
    metrics = [s["metrics"] for s in steps_of(path) if "metrics" in s]
    assert [r["metrics"]["prompt_token_ids"] for r in raw] == [
        m["prompt_token_ids"] for m in metrics
    ]
    assert [r["metrics"]["logprobs"] for r in raw] == [m["logprobs"] for m in metrics]


@needs("atif")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sniff_knows_an_atif_sample_from_its_head(path: Path) -> None:
    assert atif.sniff(path, head(path))
    assert atif.sniff(path, head(path)[:300])  # cut short of the whole document


@needs("atif")
@pytest.mark.parametrize("path", OTHERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_says_no_to_other_formats_and_to_the_schema(path: Path) -> None:
    assert not atif.sniff(path, head(path))


@needs("atif")
def test_a_file_cut_short_is_a_clear_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(sample("openhands").read_bytes()[:5000])
    with pytest.raises(ValueError, match="not complete JSON"):
        atif.records(cut, live=False)


# -- trajectories written here, for what the samples do not have


def test_a_step_without_a_model_call_is_marked_and_costs_nothing(
    store: TraceStore, tmp_path: Path
) -> None:
    scripted = agent_step(
        llm_call_count=0, observation={"results": [{"source_call_id": "c1", "content": "ok"}]}
    )
    episode = only(store, write(tmp_path, [TASK, scripted]))
    [response] = payloads(store, episode, "model.response")
    [usage] = payloads(store, episode, "usage")
    assert response["source_marks"] == {"llm_call_count": 0}
    assert response["opaque"] == []
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (0, 0, 0.0)
    assert kinds(store, episode)["model.chunk"] == 0
    assert [r["observation"] for r in payloads(store, episode, "tool.result")] == ["ok"]


def test_copied_context_is_marked_and_keeps_the_metrics_it_carries(
    store: TraceStore, tmp_path: Path
) -> None:
    metrics = {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.5}
    copied = agent_step(is_copied_context=True, metrics=metrics)
    copied_task = {**TASK, "is_copied_context": True}
    episode = only(store, write(tmp_path, [copied_task, copied]))
    [response] = payloads(store, episode, "model.response")
    [usage] = payloads(store, episode, "usage")
    [message] = payloads(store, episode, "message")
    assert response["source_marks"] == {"is_copied_context": True}
    assert message["source_marks"] == {"is_copied_context": True}
    assert (usage["input_tokens"], usage["output_tokens"], usage["cost_usd"]) == (100, 10, 0.5)
    assert kept_raw(store, episode) == []


def test_usage_takes_cache_writes_and_reasoning_from_the_metrics_extra(
    store: TraceStore, tmp_path: Path
) -> None:
    extra = {"cache_creation_input_tokens": 40, "reasoning_tokens": 7, "latency_ms": 900}
    metrics = {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 30, "extra": extra}
    episode = only(store, write(tmp_path, [TASK, agent_step(metrics=metrics)]))
    [usage] = payloads(store, episode, "usage")
    assert (usage["input_tokens"], usage["cache_read_tokens"]) == (100, 30)
    assert (usage["cache_write_tokens"], usage["reasoning_tokens"]) == (40, 7)
    assert kept_raw(store, episode) == [{"step_id": 2, "metrics": {"extra": {"latency_ms": 900}}}]


def test_a_prefixed_model_name_is_priced_by_its_provider(store: TraceStore, tmp_path: Path) -> None:
    metrics = {"prompt_tokens": 1000, "completion_tokens": 100}
    step = agent_step(model_name="openai/gpt-4o", metrics=metrics)
    [usage] = payloads(store, only(store, write(tmp_path, [TASK, step])), "usage")
    assert usage["price_source"].endswith("openai/gpt-4o")
    assert usage["cost_usd"] > 0


def test_a_result_that_names_no_call_enters_the_history_as_a_user_message(
    store: TraceStore, tmp_path: Path
) -> None:
    two = {"tool_call_id": "c2", "function_name": "bash", "arguments": {}}
    step = agent_step(observation={"results": [{"content": "both ran"}]})
    step["tool_calls"].append(two)
    episode = only(store, write(tmp_path, [TASK, step, {"source": "agent", "message": "done"}]))
    request = store.reconstruct_request(episode, 2)
    assert [(m.role, m.content) for m in request.messages][-1] == ("user", "both ran")
    assert kinds(store, episode)["tool.result"] == 0


def test_content_parts_keep_their_text_and_are_kept_raw(store: TraceStore, tmp_path: Path) -> None:
    image = {"type": "image", "source": {"media_type": "image/png", "path": "shot.png"}}
    parts = [{"type": "text", "text": "the screen:"}, image]
    step = agent_step(observation={"results": [{"source_call_id": "c1", "content": parts}]})
    episode = only(store, write(tmp_path, [TASK, step]))
    [result] = payloads(store, episode, "tool.result")
    assert result["observation"] == "the screen:\n[image]"
    assert kept_raw(store, episode) == [
        {"step_id": 2, "observation": {"results": [{"index": 0, "content": parts}]}}
    ]


def test_step_and_tool_call_extras_are_kept_raw(store: TraceStore, tmp_path: Path) -> None:
    step = agent_step(extra={"turn": 3}, reasoning_effort="high")
    step["tool_calls"][0]["extra"] = {"timeout": 30}
    episode = only(store, write(tmp_path, [{**TASK, "extra": {"origin": "cli"}}, step]))
    assert kept_raw(store, episode) == [
        {"step_id": 1, "extra": {"origin": "cli"}},
        {
            "step_id": 2,
            "extra": {"turn": 3},
            "reasoning_effort": "high",
            "tool_calls": [{"tool_call_id": "c1", "extra": {"timeout": 30}}],
        },
    ]


REF = {"trajectory_id": "sub-1", "session_id": "s-1"}
SUBAGENT = {
    "schema_version": "ATIF-v1.7",
    "trajectory_id": "sub-1",
    "agent": {"name": "searcher", "version": "1"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "find it"},
        {"step_id": 2, "source": "agent", "message": "found it"},
    ],
}


def delegating(tmp_path: Path, *subagents: dict[str, Any]) -> Path:
    result = {"source_call_id": "c1", "content": "found it", "subagent_trajectory_ref": [REF]}
    step = agent_step(observation={"results": [result]})
    return write(tmp_path, [TASK, step], subagent_trajectories=list(subagents))


def test_an_embedded_subagent_is_a_session_started_by_its_call(
    store: TraceStore, tmp_path: Path
) -> None:
    parent, child = import_file(store, delegating(tmp_path, SUBAGENT), atif)
    assert (child.source.parent_session, child.source.parent_call_id) == ("", "c1")
    assert child.source.agent == "searcher"
    [start] = payloads(store, child.episode_id, "episode.start")
    assert start["env"]["parent_episode"] == parent.episode_id
    assert kinds(store, child.episode_id)["model.request"] == 1
    assert kept_raw(store, parent.episode_id) == [
        {"step_id": 2, "observation": {"results": [{"index": 0, "subagent_trajectory_ref": [REF]}]}}
    ]


def test_an_embedded_subagent_no_result_names_is_still_imported(
    store: TraceStore, tmp_path: Path
) -> None:
    other = {**SUBAGENT, "trajectory_id": "sub-2"}
    root, unnamed, named = import_file(store, delegating(tmp_path, SUBAGENT, other), atif)
    assert unnamed.source.session_id == f"{root.source.session_id}/sub-2"
    assert (unnamed.source.parent_session, unnamed.source.parent_call_id) == ("", None)
    assert named.source.session_id == f"{root.source.session_id}/sub-1"


def test_importing_a_trajectory_with_subagents_twice_adds_nothing(
    store: TraceStore, tmp_path: Path
) -> None:
    path = delegating(tmp_path, SUBAGENT, {**SUBAGENT, "trajectory_id": "sub-2"})
    first = import_file(store, path, atif)
    again = import_file(store, path, atif)
    assert [r.episode_id for r in again] == [r.episode_id for r in first]
    assert [r.events for r in again] == [0, 0, 0]
