"""The command line as a new user meets it: ids, hints, prompts, seeds and model options.

Commands run in-process through ``main`` (or as a subprocess where a signal is needed) on a
real store file, with the scripted model or the real provider SDKs pointed at the loopback
SSE replay server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sse_replay import Reply, SSEReplayServer, ToolTableEnv, sse

from agentrunner import TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.cli.seeds import parse_seeds
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.readers.state import rebuild
from agentrunner.values.errors import UsageError
from agentrunner.values.formatting import unique_prefixes
from providers import get_model

KEY = "sk-test-0123456789abcdef"
FIX = {
    "name": "str_replace",
    "arguments": {"path": "stats.py", "old_str": "(len(values) - 1)", "new_str": "len(values)"},
}


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # no wrapped lines in what the tests read


@pytest.fixture
def server() -> Any:
    with SSEReplayServer() as srv:
        yield srv


@pytest.fixture
def anthropic_server() -> Any:
    with SSEReplayServer(request_id_header="request-id") as srv:
        yield srv


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``agentrunner ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def last_json(stdout: str) -> Any:
    return json.loads(stdout.strip().splitlines()[-1])


def demo_episode(capsys: pytest.CaptureFixture[str], db: Path, *extra: str) -> str:
    code, out, _ = cli(capsys, "run", "--db", str(db), "--json", *extra)
    assert code == 0
    return str(last_json(out)["episode_id"])


def script(tmp_path: Path, turns: list[dict[str, Any]], name: str = "script") -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "episodes": [{"match": "", "turns": turns}]}))
    return path


def requests_params(db: Path, episode_id: str) -> list[dict[str, Any]]:
    with TraceStore(db) as store:
        return [e.payload["params"] for e in store.iter_events(episode_id, kinds=["model.request"])]


# -- provider streams (the documented wire shapes, just enough for one tool call)


def chat_call(name: str, arguments: str = "{}") -> list[str]:
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

    call = {"index": 0, "id": f"call_{name}", "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    return [
        chunk({"role": "assistant", "tool_calls": [call]}),
        chunk({}, "tool_calls"),
        chunk(None, usage=usage),
        "data: [DONE]",
    ]


def responses_call(name: str) -> list[str]:
    events: list[str] = []

    def event(kind: str, **fields: Any) -> None:
        events.append(sse({"type": kind, **fields, "sequence_number": len(events)}, kind))

    item = {"id": "fc_0", "type": "function_call", "call_id": f"call_{name}", "name": name}
    response = {"id": "resp_1", "object": "response", "created_at": 1700000000, "model": "gpt-5"}
    event("response.created", response={**response, "status": "in_progress", "output": []})
    added = {**item, "status": "in_progress", "arguments": ""}
    event("response.output_item.added", output_index=0, item=added)
    event("response.function_call_arguments.done", item_id="fc_0", output_index=0, arguments="{}")
    done = {**item, "status": "completed", "arguments": "{}"}
    event("response.output_item.done", output_index=0, item=done)
    usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
    event(
        "response.completed",
        response={**response, "status": "completed", "output": [done], "usage": usage},
    )
    return events


def anthropic_call(name: str) -> list[str]:
    events: list[str] = []

    def event(kind: str, **fields: Any) -> None:
        events.append(sse({"type": kind, **fields}, kind))

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    event("message_start", message=message)
    block = {"type": "tool_use", "id": f"toolu_{name}", "name": name, "input": {}}
    event("content_block_start", index=0, content_block=block)
    event("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": "{}"})
    event("content_block_stop", index=0)
    delta = {"stop_reason": "tool_use", "stop_sequence": None}
    event("message_delta", delta=delta, usage={"output_tokens": 10})
    event("message_stop")
    return events


def rate_limited(times: int) -> list[Reply]:
    """``times`` 429 answers that ask for no wait: the adapter retries at once."""
    return [Reply(status=429, headers={"retry-after": "0"}) for _ in range(times)]


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def chat_run(
    capsys: pytest.CaptureFixture[str], db: Path, server: SSEReplayServer, *extra: str
) -> tuple[int, str, str]:
    base = ("--model", "openai-chat:gpt-4o", "--base-url", server.url + "/v1")
    return cli(capsys, "run", "--db", str(db), *base, *extra)


# -- 9: short ids are the shortest unique prefixes


def _batch_ids(stdout: str, task: str) -> list[str]:
    return [line.split()[2] for line in stdout.splitlines() if line.startswith(task)]


def test_batch_table_prints_an_episode_alone_in_the_store_as_8_characters(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    code, out, _ = cli(capsys, "batch", "--db", str(db_path), "--task", "demo-mean", "--seeds", "0")
    with TraceStore(db_path) as store:
        (episode_id,) = store.episode_ids()
    assert code == 0 and _batch_ids(out, "demo-mean") == [episode_id[:8]]


def test_batch_table_prints_episodes_made_together_as_their_unique_prefixes(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    args = ("batch", "--db", str(db_path), "--task", "demo-mean", "--seeds", "0-2")
    code, out, _ = cli(capsys, *args, "--concurrency", "3")
    with TraceStore(db_path) as store:
        short = unique_prefixes(store.episode_ids())
        expected = [short[store.episode(i).episode_id] for i in _ids_by_seed(store)]
    assert code == 0 and _batch_ids(out, "demo-mean") == expected


def _ids_by_seed(store: TraceStore) -> list[str]:
    return [e.episode_id for e in sorted(store.list_episodes(), key=lambda e: e.seed)]


def test_fork_run_prints_each_fork_as_its_unique_prefix(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    parent = demo_episode(capsys, db_path)
    code, out, _ = cli(
        capsys, "fork", parent, "--turn", "3", "-n", "2", "--run", "--db", str(db_path)
    )
    with TraceStore(db_path) as store:
        short = unique_prefixes(store.episode_ids())
        forks = store.children(parent)
    outcome_lines = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert code == 0 and sorted(outcome_lines) == sorted(short[f] for f in forks)


# -- 14: ids, hints, prompts


def test_fork_without_run_names_the_fork_in_its_resume_hint(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    parent = demo_episode(capsys, db_path)
    code, out, _ = cli(capsys, "fork", parent, "--turn", "3", "--db", str(db_path))
    with TraceStore(db_path) as store:
        (fork_id,) = store.children(parent)
    assert code == 0 and f"run it with: agentrunner resume {fork_id}" in out


def test_cancelled_run_prints_how_to_resume_it(db_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db_path)],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.02", "COLUMNS": "250"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    episode_id = _wait_for_a_chunk(db_path)
    runner.send_signal(signal.SIGINT)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130
    assert f"resume it with: agentrunner resume {episode_id}" in out


def _wait_for_a_chunk(db_path: Path, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db_path.exists():
            with TraceStore(db_path) as store:
                for episode in store.list_episodes():
                    if store.events(episode.episode_id, kinds=["model.chunk"]):
                        return episode.episode_id
        time.sleep(0.05)
    raise AssertionError("the run recorded no chunk")


def test_live_view_header_shows_the_episode_id(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    code, out, err = cli(capsys, "run", "--db", str(db_path), "--json")
    header = next(line for line in err.splitlines() if line.startswith("episode "))
    assert code == 0 and header.startswith(f"episode {last_json(out)['episode_id']} · task")


def test_live_view_shows_the_task_prompt(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    _, _, err = cli(capsys, "run", "--db", str(db_path))
    assert "The reporting job computes wrong averages." in err


def test_one_turn_episode_says_1_turn(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path
) -> None:
    one = script(tmp_path, [{"tool_calls": [{"name": "submit", "arguments": {}}]}])
    code, out, err = cli(capsys, "run", "--db", str(db_path), "--model", f"scripted:{one}")
    assert code == 0 and " · 1 turn · " in out and "after 1 turn · " in err


def test_tasks_verbose_shows_whole_prompts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    prompt = "Fix the parser. " * 12 + "THE-LAST-WORDS."
    tasks_file = tmp_path / "tasks.json"
    task = {"task_id": "long", "prompt": prompt, "files": {"a.py": "x = 1\n"}}
    tasks_file.write_text(json.dumps([{**task, "hidden_files": {"test_hidden_a.py": ""}}]))
    code, out, _ = cli(capsys, "tasks", "--tasks", str(tasks_file), "-v")
    assert code == 0 and "THE-LAST-WORDS." in out


def test_connection_error_names_the_custom_server_it_tried(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = get_model("openai-chat:llama3", api_key=KEY, base_url=url, max_retries=0)
    with TraceStore(tmp_path / "t.db") as store:
        rollout = run_agent_episode(env=ToolTableEnv(), task_id="t", model_fn=model, store=store)
    assert rollout.error is not None
    assert rollout.error.startswith(f"cannot reach the OpenAI-compatible server at {url}: ")


def test_http_error_names_the_custom_server_that_answered(
    tmp_path: Path, server: SSEReplayServer
) -> None:
    server.add(Reply(status=400, body={"error": {"message": "bad tools"}}))
    url = server.url + "/v1"
    model = get_model("openai-chat:llama3", api_key=KEY, base_url=url)
    with TraceStore(tmp_path / "t.db") as store:
        rollout = run_agent_episode(env=ToolTableEnv(), task_id="t", model_fn=model, store=store)
    assert rollout.error is not None
    assert rollout.error.startswith(f"the OpenAI-compatible server at {url} (HTTP 400) rejected")


def test_an_error_given_up_on_is_not_also_called_retryable(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(*rate_limited(5))
    code, _, err = chat_run(capsys, db_path, server)
    (gave_up,) = [line for line in err.splitlines() if "gave up after 5 attempts" in line]
    assert code == 1 and "retryable" not in gave_up


def test_a_run_that_gave_up_retrying_prints_how_to_resume_it(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(*rate_limited(5))
    code, out, _ = chat_run(capsys, db_path, server)
    with TraceStore(db_path) as store:
        (episode_id,) = store.episode_ids()
    assert code == 1 and f"resume it with: agentrunner resume {episode_id}" in out


# -- 16: fan-out output and help


def _fanout_two_long_candidates(capsys: pytest.CaptureFixture[str], db: Path) -> str:
    parent = demo_episode(capsys, db)
    text = "I have read the module and the tests carefully; " * 3
    plain = {"message": text, "tool_calls": [{"name": "submit"}]}
    fixed = {"message": text, "tool_calls": [FIX, {"name": "submit"}]}
    args = ("fanout", parent, "--turn", "4", "--db", str(db))
    code, out, _ = cli(capsys, *args, "--action", json.dumps(plain), "--action", json.dumps(fixed))
    assert code == 0
    return out


def test_fanout_ranking_shows_each_candidates_tool_calls(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    out = _fanout_two_long_candidates(capsys, db_path)
    actions = [line for line in out.splitlines() if line.strip().startswith("action:")]
    assert "str_replace(" in actions[0] and "submit()" in actions[0]
    assert "str_replace(" not in actions[1] and "submit()" in actions[1]


def test_fanout_prints_the_forks_of_each_candidate(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    out = _fanout_two_long_candidates(capsys, db_path)
    with TraceStore(db_path) as store:
        short = unique_prefixes(store.episode_ids())
        parent = store.list_episodes()[-1].episode_id
        forks = store.children(parent)
    assert len(forks) == 2 and all(short[f] in out for f in forks)


def test_fanout_help_shows_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["fanout", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default 1)" in out and "(default: to the end)" in out and "(default 4)" in out


# -- 17: resume --all, seed ranges, the scripted judge


def _cancelled_episode_whose_script_is_gone(db: Path, tmp_path: Path) -> str:
    path = script(tmp_path, [], name="gone")
    model = get_model(f"scripted:{path}")
    model.model = "gone"  # recorded as a bundled script's name (a file's content is recorded)
    env = WorkspaceEnv()
    try:
        with TraceStore(db) as store:
            rollout = run_agent_episode(
                env=env,
                task_id="demo-mean",
                model_fn=model,
                store=store,
                cancel_check=lambda: True,
            )
    finally:
        env.close()
    path.unlink()
    assert rollout.status == "cancelled"
    return rollout.episode_id


def test_resume_all_names_each_skipped_episode_and_why(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path
) -> None:
    episode_id = _cancelled_episode_whose_script_is_gone(db_path, tmp_path)
    _, out, _ = cli(capsys, "resume", "--all", "--db", str(db_path))
    (line,) = [line for line in out.splitlines() if "no script" in line]
    assert line.split()[0] == episode_id[:8]


def test_resume_all_that_resumed_nothing_it_was_asked_to_exits_1(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path
) -> None:
    _cancelled_episode_whose_script_is_gone(db_path, tmp_path)
    code, _, _ = cli(capsys, "resume", "--all", "--db", str(db_path))
    assert code == 1


def test_resume_all_with_nothing_to_resume_says_so_and_exits_0(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    demo_episode(capsys, db_path)
    code, out, _ = cli(capsys, "resume", "--all", "--db", str(db_path))
    assert code == 0 and out.startswith("nothing to resume")


def test_resume_all_leaves_a_non_retryable_failure_alone(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(status=400, body={"error": {"message": "bad request"}}))
    chat_run(capsys, db_path, server)
    code, out, _ = cli(capsys, "resume", "--all", "--db", str(db_path), "--json")
    result = last_json(out)
    assert code == 0 and (result["resumed"], result["skipped"]) == ([], [])
    assert len(result["not_resumable"]) == 1


def test_a_reversed_seed_range_is_named(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    code, _, err = cli(capsys, "batch", "--db", str(db_path), "--seeds", "5-2")
    assert code == 2 and "5-2 is a reversed range" in err and "write 2-5" in err


def test_seeds_read_negative_ranges_written_with_dots() -> None:
    assert parse_seeds("-3..-1,4") == [-3, -2, -1, 4]


def test_batch_runs_a_negative_seed_range_given_with_equals(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    code, out, _ = cli(
        capsys, "batch", "--db", str(db_path), "--task", "demo-mean", "--seeds=-3..-1", "--json"
    )
    assert code == 0 and [e["seed"] for e in last_json(out)["episodes"]] == [-3, -2, -1]


def test_verify_help_explains_the_scripted_judge(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--judge scripted:judge.json" in out and '"text": "Fixed and tested. SCORE: 0.9"' in out


def test_the_documented_scripted_judge_scores_an_episode(
    capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path
) -> None:
    episode_id = demo_episode(capsys, db_path)
    judge = tmp_path / "judge.json"
    judge.write_text(
        '{"episodes": [{"match": "", "turns": [{"text": "Fixed and tested. SCORE: 0.9"}]}]}'
    )
    args = ("verify", episode_id, "--judge", f"scripted:{judge}", "--rubric", "fixes the mean")
    code, out, _ = cli(capsys, *args, "--db", str(db_path), "--json")
    assert code == 0 and last_json(out)["results"][0]["score"] == 0.9


# -- 18: model options


def test_temperature_and_max_output_tokens_reach_the_request_and_its_record(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=chat_call("submit")))
    code, out, _ = chat_run(
        capsys, db_path, server, "--temperature", "0.2", "--max-output-tokens", "50", "--json"
    )
    (params,) = requests_params(db_path, last_json(out)["episode_id"])
    sent = server.requests[0].json
    assert code == 0 and (sent["temperature"], sent["max_completion_tokens"]) == (0.2, 50)
    assert (params["temperature"], params["max_completion_tokens"]) == (0.2, 50)


def test_reasoning_effort_reaches_the_responses_request(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=responses_call("submit")))
    base = ("--model", "openai:gpt-5", "--base-url", server.url + "/v1")
    code, _, _ = cli(capsys, "run", "--db", str(db_path), *base, "--reasoning-effort", "high")
    assert code == 0 and server.requests[0].json["reasoning"]["effort"] == "high"


def test_thinking_budget_reaches_the_anthropic_request(
    capsys: pytest.CaptureFixture[str],
    db_path: Path,
    anthropic_server: SSEReplayServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    anthropic_server.add(Reply(events=anthropic_call("submit")))
    base = ("--model", "anthropic:claude-sonnet-4-5", "--base-url", anthropic_server.url)
    code, _, _ = cli(capsys, "run", "--db", str(db_path), *base, "--thinking", "2048")
    sent = anthropic_server.requests[0].json["thinking"]
    assert code == 0 and sent == {"type": "enabled", "budget_tokens": 2048}


def test_thinking_for_an_openai_model_is_refused_naming_the_flag_to_use(
    capsys: pytest.CaptureFixture[str], db_path: Path, openai_key: None
) -> None:
    args = ("run", "--db", str(db_path), "--model", "openai:gpt-5", "--thinking", "2048")
    code, _, err = cli(capsys, *args)
    assert code == 2 and "--thinking: not an option of openai models" in err
    assert "--reasoning-effort" in err


def test_scripted_model_warns_that_it_ignores_model_options(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    code, _, err = cli(capsys, "run", "--db", str(db_path), "--temperature", "0.5")
    assert code == 0 and "--temperature ignored by the scripted model" in err


def test_price_provider_prices_a_local_servers_usage(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=chat_call("submit")))
    code, out, _ = chat_run(capsys, db_path, server, "--price-provider", "openai", "--json")
    cost = last_json(out)["cost_usd"]
    assert code == 0 and cost is not None and cost > 0


def test_resume_builds_the_model_again_with_its_recorded_options(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(*rate_limited(5), Reply(events=chat_call("submit")))
    chat_run(capsys, db_path, server, "--temperature", "0.3")
    with TraceStore(db_path) as store:
        (episode_id,) = store.episode_ids()
    code, _, _ = cli(capsys, "resume", episode_id, "--db", str(db_path))
    assert code == 0 and server.requests[-1].json["temperature"] == 0.3


def test_fork_run_samples_with_the_given_temperature(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=chat_call("list_files")), Reply(events=chat_call("submit")))
    _, out, _ = chat_run(capsys, db_path, server, "--json")
    parent = last_json(out)["episode_id"]
    server.add(Reply(events=chat_call("submit")))
    args = ("fork", parent, "--turn", "2", "--run", "--temperature", "0.7")
    code, _, _ = cli(capsys, *args, "--db", str(db_path))
    assert code == 0 and server.requests[-1].json["temperature"] == 0.7


def test_fork_model_options_without_run_are_refused(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    parent = demo_episode(capsys, db_path)
    args = ("fork", parent, "--turn", "2", "--temperature", "0.7", "--db", str(db_path))
    code, _, err = cli(capsys, *args)
    assert code == 2 and "add --run" in err


def test_fanout_continuations_sample_with_the_given_temperature(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=chat_call("list_files")), Reply(events=chat_call("submit")))
    _, out, _ = chat_run(capsys, db_path, server, "--json")
    parent = last_json(out)["episode_id"]
    server.add(Reply(events=chat_call("submit")))
    args = ("fanout", parent, "--turn", "1", "--action", '{"name": "list_files"}')
    code, _, _ = cli(capsys, *args, "--temperature", "0.9", "--db", str(db_path))
    assert code == 0 and server.requests[-1].json["temperature"] == 0.9


def test_batch_passes_model_options_to_its_episodes(
    capsys: pytest.CaptureFixture[str], db_path: Path, server: SSEReplayServer, openai_key: None
) -> None:
    server.add(Reply(events=chat_call("submit")))
    base = ("--model", "openai-chat:gpt-4o", "--base-url", server.url + "/v1")
    args = ("batch", "--db", str(db_path), *base, "--task", "demo-mean", "--seeds", "0")
    code, _, _ = cli(capsys, *args, "--temperature", "0.4")
    assert code == 0 and server.requests[0].json["temperature"] == 0.4


def _system_prompt(db: Path, episode_id: str) -> str:
    with TraceStore(db) as store:
        first = rebuild(store, episode_id).messages[0]
    assert first.role == "system"
    return first.content


def test_system_prompt_is_added_after_the_environments_own(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    episode_id = demo_episode(capsys, db_path, "--system-prompt", "Answer in French.")
    system = _system_prompt(db_path, episode_id)
    assert system.startswith("You are working in a code repository")
    assert system.endswith("\n\nAnswer in French.")


def test_a_fork_keeps_the_added_system_prompt(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    parent = demo_episode(capsys, db_path, "--system-prompt", "Answer in French.")
    _, out, _ = cli(capsys, "fork", parent, "--turn", "3", "--run", "--db", str(db_path), "--json")
    (fork_id,) = last_json(out)["forks"]
    assert _system_prompt(db_path, fork_id).endswith("\n\nAnswer in French.")


def test_batch_adds_the_system_prompt_to_each_episode(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    args = ("batch", "--db", str(db_path), "--task", "demo-mean", "--seeds", "0-1", "--json")
    code, out, _ = cli(capsys, *args, "--system-prompt", "Be brief.")
    ids = [e["episode_id"] for e in last_json(out)["episodes"]]
    assert code == 0 and all(_system_prompt(db_path, i).endswith("\n\nBe brief.") for i in ids)


# -- R7: seeds the store cannot keep


def test_run_refuses_a_seed_beyond_64_bits_as_bad_usage(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--db", str(db_path), "--seed", "9223372036854775808"])
    assert exit_.value.code == 2 and "a seed is between" in capsys.readouterr().err


def test_batch_refuses_a_seed_beyond_64_bits_as_bad_usage(
    capsys: pytest.CaptureFixture[str], db_path: Path
) -> None:
    code, _, err = cli(capsys, "batch", "--db", str(db_path), "--seeds", "9223372036854775808")
    assert code == 2 and "is not between" in err


def test_parse_seeds_refuses_a_seed_beyond_64_bits() -> None:
    with pytest.raises(UsageError, match="is not between"):
        parse_seeds("0,9223372036854775808")
