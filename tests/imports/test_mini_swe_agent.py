"""The mini-swe-agent importer: the sample trajectories (v1, the legacy list, and v2 written
by mini-swe-agent 2.4.6 with text-based actions, tool calls and the Responses API), and small
v2 trajectories written here for the shapes the samples do not have."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import mini_swe_agent
from agentrunner.imports.importer import import_file, positioned
from providers.openai_messages import responses_input
from tests.imports.conftest import (
    FIXTURES,
    fixture_files,
    head,
    kinds,
    needs,
    only_episode,
    payloads,
)

SAMPLES = fixture_files("mini-swe-agent", "*.traj.json")
OTHERS = [
    path
    for folder in (sorted(FIXTURES.iterdir()) if FIXTURES.is_dir() else [])
    if folder.is_dir() and folder.name != "mini-swe-agent"
    for path in fixture_files(folder.name)
]
BLOCK = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)


def sample(name: str) -> Path:
    return next(p for p in SAMPLES if name in p.name)


def messages_of(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    messages: list[dict[str, Any]] = data if isinstance(data, list) else data["messages"]
    return messages


def command(message: dict[str, Any]) -> str | None:
    """The one bash block of a text-based assistant message (None for none or several, and
    for a message that made tool calls)."""
    text_based = message.get("role") == "assistant" and not message.get("tool_calls")
    found = BLOCK.findall(message["content"]) if text_based else []
    return found[0].strip() if len(found) == 1 else None


def answers_a_command(messages: list[dict[str, Any]], i: int) -> bool:
    return messages[i].get("role") == "user" and i > 0 and command(messages[i - 1]) is not None


def text(content: Any) -> str:
    """A message's content: a string, or Responses blocks (``input_text``) with a text each."""
    return content if isinstance(content, str) else "\n".join(b["text"] for b in content)


Call = tuple[str, str, Any]


def answer(messages: list[dict[str, Any]], i: int) -> tuple[str, tuple[Call, ...]] | None:
    """The text and tool calls of a model's answer, read from the JSON alone (None when
    ``messages[i]`` is none): a Responses object's ``output_text`` parts and ``function_call``
    items; an assistant message's content and its ``tool_calls``, or its one bash block as a
    call ``bash-<index>``."""
    m = messages[i]
    if m.get("object") == "response":
        items = m["output"]
        said = "".join(
            p["text"]
            for item in items
            if item["type"] == "message"
            for p in item["content"]
            if p["type"] == "output_text"
        )
        made = [item for item in items if item["type"] == "function_call"]
        return said, tuple((c["call_id"], c["name"], json.loads(c["arguments"])) for c in made)
    if m.get("role") != "assistant":
        return None
    if m.get("tool_calls"):
        made = [(c["id"], c["function"]) for c in m["tool_calls"]]
        return m["content"], tuple((i, f["name"], json.loads(f["arguments"])) for i, f in made)
    found = command(m)
    return m["content"], ((f"bash-{i}", "bash", {"command": found}),) if found is not None else ()


def result(messages: list[dict[str, Any]], i: int) -> tuple[str, str] | None:
    """The call id and text of a tool's result (None when ``messages[i]`` is none): a
    ``tool`` message, a ``function_call_output`` item, or the user message after a bash
    block."""
    m = messages[i]
    if m.get("role") == "tool":
        return m["tool_call_id"], m["content"]
    if m.get("type") == "function_call_output":
        return m["call_id"], m["output"]
    return (f"bash-{i - 1}", m["content"]) if answers_a_command(messages, i) else None


def answers(messages: list[dict[str, Any]]) -> list[int]:
    return [i for i in range(len(messages)) if answer(messages, i) is not None]


def tool_calls(messages: list[dict[str, Any]]) -> list[Call]:
    return [c for i in range(len(messages)) for c in (answer(messages, i) or ("", ()))[1]]


def usages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["extra"]["response"]["usage"]
        for m in messages
        if m.get("role") == "assistant" and "usage" in m.get("extra", {}).get("response", {})
    ]


def recorded_costs(messages: list[dict[str, Any]]) -> list[float]:
    """The cost each answer recorded: v2's ``extra.cost``, else its usage's ``cost``
    (OpenRouter's); a 0 is no recorded cost (mini-swe-agent writes 0 when it could not price
    a call)."""
    costs = []
    for i in answers(messages):
        extra = messages[i].get("extra", {})
        usage = extra.get("response", {}).get("usage", {})
        cost = extra.get("cost") or usage.get("cost")
        if cost:
            costs.append(cost)
    return costs


def only(store: TraceStore, path: Path) -> str:
    return only_episode(store, path, mini_swe_agent)


# -- the samples


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_messages_calls_and_results_its_json_has(
    store: TraceStore, path: Path
) -> None:
    messages = messages_of(path)
    episode = only(store, path)
    roles = Counter(m["role"] for m in payloads(store, episode, "message"))
    counts = kinds(store, episode)
    results = sum(result(messages, i) is not None for i in range(len(messages)))
    users = sum(m.get("role") == "user" for m in messages) - sum(
        answers_a_command(messages, i) for i in range(len(messages))
    )
    assert roles == {"system": 1, "user": users}
    assert counts["model.request"] == len(answers(messages))
    assert counts["tool.call"] == len(tool_calls(messages))
    assert counts["tool.result"] == results
    # every message of the samples is mapped, but v2's exit marker, kept raw
    assert counts["error"] == sum(m.get("role") == "exit" for m in messages)


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_sample_has_the_token_totals_and_cost_its_calls_have(
    store: TraceStore, path: Path
) -> None:
    messages = messages_of(path)
    used = usages(messages)
    episode = store.episode(only(store, path))
    assert episode.tokens["input"] == sum(u["prompt_tokens"] for u in used)
    assert episode.tokens["output"] == sum(u["completion_tokens"] for u in used)
    assert episode.tokens["cache_read"] == sum(
        u["prompt_tokens_details"]["cached_tokens"] for u in used
    )
    assert episode.tokens["reasoning"] == sum(
        u["completion_tokens_details"]["reasoning_tokens"] for u in used
    )
    costs = recorded_costs(messages)
    if costs:
        assert episode.cost_usd == pytest.approx(sum(costs))
    else:
        assert episode.cost_usd is None


@needs("mini-swe-agent")
def test_the_cost_of_the_calls_is_the_runs_recorded_cost(store: TraceStore) -> None:
    path = sample("django")
    stats = json.loads(path.read_text())["info"]["model_stats"]
    episode = store.episode(only(store, path))
    assert episode.cost_usd == pytest.approx(stats["instance_cost"])
    assert kinds(store, episode.episode_id)["model.request"] == stats["api_calls"]


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_importing_a_sample_twice_adds_nothing(store: TraceStore, path: Path) -> None:
    episode = only(store, path)
    before = sum(kinds(store, episode).values())
    [again] = import_file(store, path, mini_swe_agent)
    assert (again.episode_id, again.created, again.events) == (episode, False, 0)
    assert sum(kinds(store, episode).values()) == before


def history(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The history the messages make, read from the JSON alone (see :func:`answer` and
    :func:`result`)."""
    out: list[tuple[Any, ...]] = []
    for i, m in enumerate(messages):
        said, done = answer(messages, i), result(messages, i)
        if said is not None:
            out.append(("assistant", said[0], None, said[1]))
        elif done is not None:
            out.append(("tool", done[1], done[0], ()))
        else:
            out.append((m["role"], text(m["content"]), None, ()))
    return out


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_request_of_a_middle_turn_is_the_history_before_its_call(
    store: TraceStore, path: Path
) -> None:
    messages = messages_of(path)
    calls = answers(messages)
    middle = len(calls) // 2
    request = store.reconstruct_request(only(store, path), middle + 1)
    got = [
        (
            m.role,
            m.content,
            m.tool_call_id,
            tuple((c.call_id, c.name, json.loads(c.arguments)) for c in m.tool_calls),
        )
        for m in request.messages
    ]
    assert got == history(messages[: calls[middle]])


@needs("mini-swe-agent")
def test_the_episode_start_keeps_the_runs_info(store: TraceStore) -> None:
    path = sample("django")
    info = json.loads(path.read_text())["info"]
    episode = store.episode(only(store, path))
    extra = episode.env["extra"]
    assert (episode.task_id, episode.model["model"]) == (
        "django__django-16255",
        info["config"]["model"]["model_name"],
    )
    assert (extra["exit_status"], extra["submission"]) == (info["exit_status"], info["submission"])
    assert extra["model_stats"] == info["model_stats"]
    assert (extra["price_provider"], episode.env["agent_version"]) == ("openrouter", "1.15.0")


@needs("mini-swe-agent")
def test_two_runs_of_one_instance_are_two_episodes(store: TraceStore, tmp_path: Path) -> None:
    for run in ("run-a", "run-b"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "t.traj.json").write_bytes(sample("django").read_bytes())
    first = only(store, tmp_path / "run-a" / "t.traj.json")
    second = only(store, tmp_path / "run-b" / "t.traj.json")
    assert first != second
    assert kinds(store, first) == kinds(store, second)


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_the_parser_gives_the_same_items_for_the_same_records(path: Path) -> None:
    records = mini_swe_agent.records(path, live=False)
    first = positioned(records, mini_swe_agent.parser(path), finish=True)
    assert first == positioned(records, mini_swe_agent.parser(path), finish=True)


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_sniff_knows_a_sample_from_its_head(path: Path) -> None:
    assert mini_swe_agent.sniff(path, head(path))


@needs("mini-swe-agent")
def test_sniff_finds_the_format_v1_names_at_the_end_of_its_file() -> None:
    path = sample("django")
    assert "trajectory_format" not in head(path)[:300]
    assert mini_swe_agent.sniff(path, head(path)[:300])


@needs("mini-swe-agent")
@pytest.mark.parametrize("path", OTHERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_says_no_to_other_formats_and_to_the_schema(path: Path) -> None:
    assert not mini_swe_agent.sniff(path, head(path))


@needs("mini-swe-agent")
def test_a_file_cut_short_is_a_clear_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.traj.json"
    cut.write_bytes(sample("django").read_bytes()[:20_000])
    with pytest.raises(ValueError, match="not complete JSON"):
        mini_swe_agent.records(cut, live=False)


# -- v2 trajectories (trajectory_format mini-swe-agent-1.1) written here

TASK = [
    {"role": "system", "content": "You run bash."},
    {"role": "user", "content": "Make hello.txt"},
]


def write_v2(tmp_path: Path, messages: list[dict[str, Any]], **config: Any) -> Path:
    doc = {
        "info": {
            "model_stats": {"instance_cost": 0.0, "api_calls": 0},
            "config": {"model": {"model_name": "anthropic/claude-sonnet-4-5-20250929", **config}},
            "mini_version": "2.1.0",
            "exit_status": "Submitted",
            "submission": "",
        },
        "messages": [*TASK, *messages],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    path = tmp_path / f"t{len(list(tmp_path.glob('t*.traj.json')))}.traj.json"
    path.write_text(json.dumps(doc))
    return path


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


EXIT = {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}


def test_v2_tool_calls_pair_with_their_tool_messages(store: TraceStore, tmp_path: Path) -> None:
    call = {"id": "toolu_1", "type": "function"}
    call["function"] = {"name": "bash", "arguments": '{"command": "touch hello.txt"}'}
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call],
            "extra": {"actions": [{"command": "touch hello.txt", "tool_call_id": "toolu_1"}]},
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "<returncode>0</returncode>"},
        EXIT,
    ]
    episode = only(store, write_v2(tmp_path, messages))
    [made] = payloads(store, episode, "tool.call")
    [result] = payloads(store, episode, "tool.result")
    assert (made["call_id"], made["parsed"]) == ("toolu_1", {"command": "touch hello.txt"})
    assert (result["call_id"], result["observation"]) == ("toolu_1", "<returncode>0</returncode>")


def test_v2_costs_and_times_are_each_calls_own(store: TraceStore, tmp_path: Path) -> None:
    messages = [
        {
            "role": "assistant",
            "content": "```mswea_bash_command\nls\n```",
            "extra": {
                "actions": [{"command": "ls"}],
                "cost": 0.25,
                "timestamp": 1_750_000_000.5,
                "response": usage(100, 10),
            },
        },
        {"role": "user", "content": "<returncode>0</returncode>", "extra": {"returncode": 0}},
    ]
    episode = only(store, write_v2(tmp_path, messages))
    [used] = payloads(store, episode, "usage")
    assert (used["input_tokens"], used["output_tokens"], used["cost_usd"]) == (100, 10, 0.25)
    [response] = [r for r in store.iter_events(episode) if r.kind == "model.response"]
    assert response.ts.startswith("2025-06-15T15:06:40")


def test_a_call_without_a_cost_is_priced_by_its_providers_name(
    store: TraceStore, tmp_path: Path
) -> None:
    answer = {"role": "assistant", "content": "```mswea_bash_command\nls\n```"}
    answer["extra"] = {"actions": [{"command": "ls"}], "cost": 0.0, "response": usage(1000, 100)}
    messages = [answer, {"role": "user", "content": "<returncode>0</returncode>"}]
    episode = only(store, write_v2(tmp_path, messages))  # anthropic/claude-sonnet-4-5-...
    [used] = payloads(store, episode, "usage")
    assert used["cost_usd"] is not None and used["cost_usd"] > 0
    assert used["price_source"].startswith("genai-prices")
    assert "anthropic/claude" in used["price_source"]


def test_a_rejected_answer_is_a_call_and_its_error_a_user_message(
    store: TraceStore, tmp_path: Path
) -> None:
    rejected = {
        "role": "user",
        "content": "Please always provide EXACTLY ONE action.",
        "extra": {
            "interrupt_type": "FormatError",
            "model_response": "I will think first.",
            "cost": 0.5,
            "response": usage(50, 5),
        },
    }
    episode = only(store, write_v2(tmp_path, [rejected]))
    counts = kinds(store, episode)
    users = [m for m in payloads(store, episode, "message") if m["role"] == "user"]
    assert (counts["model.request"], counts["tool.call"], len(users)) == (1, 0, 2)
    assert store.episode(episode).cost_usd == 0.5
    request = store.reconstruct_request(episode, 1)
    assert request.messages[-1].content == "Make hello.txt"


def test_the_exit_message_is_kept_raw(store: TraceStore, tmp_path: Path) -> None:
    episode = only(store, write_v2(tmp_path, [EXIT]))
    [kept] = payloads(store, episode, "error")
    assert (kept["where"], kept["type"], kept["raw"]) == ("import", "unmapped", EXIT)


def test_a_key_in_the_config_does_not_reach_the_store(store: TraceStore, tmp_path: Path) -> None:
    path = write_v2(tmp_path, [EXIT], model_kwargs={"api_key": "sk-live-1234", "temperature": 0})
    episode = only(store, path)
    config = store.episode(episode).env["extra"]["config"]["model"]["model_kwargs"]
    assert config == {"api_key": "[masked]", "temperature": 0}
    assert "sk-live-1234" not in json.dumps(payloads(store, episode, "episode.start"))


# -- v2 trajectories of a Responses-API model, written here

REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "Look first."}],
    "encrypted_content": "gAAAA-opaque",
}
SAID = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Listing.", "annotations": []}],
}
LS = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "bash",
    "arguments": '{"command": "ls"}',
}


def response(*output: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_750_000_000,
        "status": "completed",
        "model": "gpt-5-mini-2025-08-07",
        "output": list(output),
        "usage": {
            "input_tokens": 1200,
            "input_tokens_details": {"cached_tokens": 1000},
            "output_tokens": 300,
            "output_tokens_details": {"reasoning_tokens": 250},
        },
        "extra": extra,
    }


OUTPUT = {
    "type": "function_call_output",
    "call_id": "call_1",
    "output": "<returncode>0</returncode>",
}


def test_a_responses_answer_has_its_usage_and_recorded_cost(
    store: TraceStore, tmp_path: Path
) -> None:
    answer = response(REASONING, SAID, LS, actions=[{"command": "ls"}], cost=0.125)
    episode = only(store, write_v2(tmp_path, [answer, OUTPUT]))
    [used] = payloads(store, episode, "usage")
    tokens = [used[k] for k in ("input_tokens", "cache_read_tokens", "reasoning_tokens")]
    assert (tokens, used["output_tokens"], used["cost_usd"]) == ([1200, 1000, 250], 300, 0.125)


def test_a_responses_answer_is_sent_again_as_its_output_items(
    store: TraceStore, tmp_path: Path
) -> None:
    answer = response(REASONING, SAID, LS, actions=[{"command": "ls"}], cost=0.125)
    episode = only(store, write_v2(tmp_path, [answer, OUTPUT, response(SAID)]))
    request = store.reconstruct_request(episode, 2)
    assert responses_input(request.messages)[2:] == [REASONING, SAID, LS, OUTPUT]


def test_a_rejected_responses_answer_is_a_call_whose_function_calls_are_kept_raw(
    store: TraceStore, tmp_path: Path
) -> None:
    wrong = {**LS, "name": "python"}
    rejected = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Unknown tool 'python'."}],
        "extra": {"interrupt_type": "FormatError", "response": response(SAID, wrong)},
    }
    episode = only(store, write_v2(tmp_path, [rejected]))
    counts = kinds(store, episode)
    [kept] = [e for e in payloads(store, episode, "error") if e["type"] == "unmapped"]
    assert (counts["model.request"], counts["tool.call"], kept["raw"]) == (1, 0, [wrong])
    assert store.reconstruct_request(episode, 1).messages[-1].content == "Make hello.txt"


def test_a_trajectory_without_a_conversation_is_refused(store: TraceStore, tmp_path: Path) -> None:
    path = tmp_path / "t.traj.json"
    doc = {"info": {"mini_version": "2.4.6"}, "messages": [EXIT]}
    path.write_text(json.dumps({**doc, "trajectory_format": "mini-swe-agent-1.1"}))
    with pytest.raises(ValueError, match="holds no conversation"):
        import_file(store, path, mini_swe_agent)
    assert store.list_episodes() == []
