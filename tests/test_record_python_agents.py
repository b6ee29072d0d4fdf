"""Real Python agent clients recorded by ``agentrunner record``, each configured the way its
users configure it, against a loopback upstream answering scripted calls in a scratch git
repository: mini-swe-agent (its global ``.env`` holding the key, litellm's base URL in the
environment), aider (``.aider.conf.yml`` in the repository, ``OPENAI_API_BASE``) and the OpenAI
Agents SDK (an agent script on the default Responses client, ``OPENAI_BASE_URL``); and, when
its 385 MB wheel is in that venv, a Claude Agent SDK program (two recorder defects it shows are
strict xfails that name them).

The clients live in a venv of their own (``real_clients.AGENTS``); the tests skip, with the
reason, when it cannot be built. Every update check, analytics and trace exporter is off, and
litellm's model table is read from the copy it ships: nothing but the loopback is reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_clients import agent_program, scratch_repo
from record_support import (
    anthropic_text,
    anthropic_tool,
    last_json,
    responses_call,
    responses_text,
)
from sse_replay import Received, Reply, SSEReplayServer, sse

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body
from agentrunner.store.records import EventRow

pytestmark = pytest.mark.slow
NEEDS_AGENTS_VENV = True
"""``conftest.py`` builds the agents' venv at collection when a test of this module runs."""
DRIVERS = Path(__file__).resolve().parent / "record_clients"
COMMAND = "cp notes.txt copy.txt"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
EDIT = "greeting.txt\n```\n<<<<<<< SEARCH\nhello\n=======\nhello world\n>>>>>>> REPLACE\n```\n"


def environment(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any provider's key, base URL or client setting,
    with a home of the test's own and litellm on the model table it ships."""
    home.mkdir(parents=True, exist_ok=True)
    prefixes = ("OPENAI_", "ANTHROPIC_", "AIDER_", "MSWEA_", "LITELLM_", "XDG_CONFIG_")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    environ = {k: v for k, v in environ.items() if "KEY" not in k}
    return {**environ, "HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra}


def record(
    db: Path, repo: Path, env: dict[str, str], *command: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(db), "--json",
         "--", *command],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def recorded(db: Path) -> tuple[list[str], list[EventRow], list[EventRow], list[EventRow]]:
    """Every recorded call's rebuilt body (canonical JSON, sorted), and every episode's model
    responses, tool calls and tool results."""
    bodies: list[str] = []
    responses: list[EventRow] = []
    calls: list[EventRow] = []
    results: list[EventRow] = []
    with TraceStore(db) as store:
        for episode in store.list_episodes():
            eid = episode.episode_id
            for request in store.events(eid, kinds=["model.request"]):
                body = request_body(store, eid, request.turn)
                bodies.append(json.dumps(body, sort_keys=True))
            responses += store.events(eid, kinds=["model.response"])
            calls += store.events(eid, kinds=["tool.call"])
            results += store.events(eid, kinds=["tool.result"])
    return sorted(bodies), responses, calls, results


def received(upstream: SSEReplayServer) -> list[str]:
    """What the upstream received, each body as canonical JSON, sorted."""
    return sorted(json.dumps(json.loads(r.raw), sort_keys=True) for r in upstream.requests)


def assert_no_key(db: Path, key: str) -> None:
    stored = list(db.parent.glob(db.name + "*"))
    assert stored
    for path in stored:
        assert key.encode() not in path.read_bytes(), path.name


def completion(message: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions answer (not streamed) holding ``message``."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def bash_call(call_id: str, command: str) -> Reply:
    function = {"name": "bash", "arguments": json.dumps({"command": command})}
    call = {"id": call_id, "type": "function", "function": function}
    return Reply(body=completion({"role": "assistant", "content": "", "tool_calls": [call]}))


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o",
            "choices": [choice],
        }
    )


def test_mini_swe_agent_configured_by_its_global_env_file_is_recorded_call_by_call(
    tmp_path: Path,
) -> None:
    mini = str(agent_program("mini"))
    key = "sk-mini-swe-agent-test-0123456789"
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "mini notes\n"})
    home = tmp_path / "home"
    dotenv = home / ".config" / "mini-swe-agent" / ".env"  # what `mini-extra config setup` writes
    dotenv.parent.mkdir(parents=True)
    with SSEReplayServer(bash_call("call_1", COMMAND), bash_call("call_2", SUBMIT)) as upstream:
        dotenv.write_text(  # the upstream named only there, as its users set it up
            f"MSWEA_CONFIGURED='true'\nMSWEA_MODEL_NAME='openai/gpt-4o'\nOPENAI_API_KEY='{key}'\n"
            f"OPENAI_BASE_URL='{upstream.url}/v1'\n"
        )
        before = dotenv.read_bytes()
        env = environment(home)
        done = record(tmp_path / "t.db", repo, env, mini, "-t", "copy the notes", "--yolo",
                      "--exit-immediately")  # fmt: skip
        posts = received(upstream)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").read_text() == "mini notes\n" and dotenv.read_bytes() == before
    bodies, _, calls, results = recorded(tmp_path / "t.db")
    assert len(posts) == 2 and bodies == posts
    assert [(c.payload["call_id"], c.payload["parsed"]) for c in calls] == [
        ("call_1", {"command": COMMAND}),
        ("call_2", {"command": SUBMIT}),
    ]
    (result,) = results  # mini-swe-agent stops on the submit command: no call carries its result
    assert result.payload["call_id"] == "call_1"
    assert json.loads(result.payload["observation"])["returncode"] == 0
    assert_no_key(tmp_path / "t.db", key)


def aider_home(home: Path, venv_python: Path) -> None:
    """A home where aider finds litellm's model table fresh in its cache (else it fetches it)."""
    caches = home / ".aider" / "caches"
    caches.mkdir(parents=True)
    found = subprocess.run(
        [str(venv_python), "-c", "import litellm, pathlib; print(pathlib.Path(litellm.__file__).parent)"],  # noqa: E501
        capture_output=True, text=True, check=True, env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    table = Path(found.stdout.strip()) / "model_prices_and_context_window_backup.json"
    shutil.copy(table, caches / "model_prices_and_context_window.json")


def commit_message(request: Received) -> Reply | None:
    """aider's second call, not streamed, asks its weak model for the commit message."""
    if request.json.get("stream"):
        return None
    return Reply(body=completion({"role": "assistant", "content": "feat: greet the world"}))


def test_aider_configured_by_its_conf_file_is_recorded_and_its_edit_applied(
    tmp_path: Path,
) -> None:
    aider = agent_program("aider")
    key = "sk-aider-test-0123456789"
    repo = scratch_repo(tmp_path / "repo", {"greeting.txt": "hello\n"})
    conf = repo / ".aider.conf.yml"
    aider_home(tmp_path / "home", aider.parent / "python")
    answer = [chunk({"role": "assistant", "content": ""}), chunk({"content": EDIT}),
              chunk({}, "stop"), "data: [DONE]"]  # fmt: skip
    with SSEReplayServer(Reply(events=answer), aside=commit_message) as upstream:
        conf.write_text(  # the upstream named only there, as its users set it up
            f"model: openai/gpt-4o\nopenai-api-key: {key}\nyes-always: true\ncheck-update: false\n"
            "show-release-notes: false\nanalytics-disable: true\npretty: false\n"
            f"openai-api-base: {upstream.url}/v1\n"
        )
        before = conf.read_bytes()
        env = environment(tmp_path / "home")
        done = record(tmp_path / "t.db", repo, env, str(aider), "--message",
                      "say hello to the world", "greeting.txt")  # fmt: skip
        posts = received(upstream)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "greeting.txt").read_text() == "hello world\n" and conf.read_bytes() == before
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=repo, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert log.stdout.strip() == "feat: greet the world"
    bodies, responses, calls, results = recorded(tmp_path / "t.db")
    assert len(posts) == 2 and bodies == posts
    assert calls == [] and results == []  # aider edits through its reply's text, not tools
    with TraceStore(tmp_path / "t.db") as store:
        answers = [store.message(r.payload["message_hash"]).content for r in responses]
    assert EDIT in answers
    assert_no_key(tmp_path / "t.db", key)


def test_an_openai_agents_sdk_agent_is_recorded_with_its_function_tool_call_and_result(
    tmp_path: Path,
) -> None:
    python = str(agent_program("python"))
    key = "sk-openai-agents-test-0123456789"
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "agents notes\n"})
    arguments = {"path": "hello.txt", "content": "hello from the agent\n"}
    script = [
        Reply(events=responses_call("call_1", "write_file", arguments)),
        Reply(events=responses_text("Wrote hello.txt.")),
    ]
    with SSEReplayServer(*script) as upstream:
        env = environment(
            tmp_path / "home",
            OPENAI_API_KEY=key,
            OPENAI_BASE_URL=f"{upstream.url}/v1",
            OPENAI_AGENTS_DISABLE_TRACING="1",
        )
        done = record(tmp_path / "t.db", repo, env, python,
                      str(DRIVERS / "openai_agents_writer.py"), "write hello.txt")  # fmt: skip
        posts = received(upstream)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "hello.txt").read_text() == "hello from the agent\n"
    (episode,) = last_json(done.stdout)["episodes"]
    bodies, _, calls, results = recorded(tmp_path / "t.db")
    assert len(posts) == 2 and bodies == posts
    ((call,), (result,)) = calls, results
    assert (call.episode_id, call.payload["name"], call.payload["parsed"]) == (
        episode,
        "write_file",
        arguments,
    )
    assert (result.payload["call_id"], result.payload["observation"]) == (
        "call_1",
        "wrote 21 characters to hello.txt",
    )
    assert_no_key(tmp_path / "t.db", key)


def claude_agent_sdk() -> Path:
    """The agents' venv python with the Claude Agent SDK in it, or skip: its wheel (385 MB, a
    Claude Code build inside) is not among the pinned clients."""
    python = agent_program("python")
    probe = subprocess.run([str(python), "-c", "import claude_agent_sdk"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(
            f"the Claude Agent SDK is not installed in {python.parent.parent}"
            f" ({python.parent / 'pip'} install claude-agent-sdk==0.2.189 runs these tests)"
        )
    return python


def claude_agent_run(tmp: Path, gateway_in_settings: bool) -> dict[str, Any]:
    """The Claude Agent SDK driver recorded against a loopback upstream named in the
    environment, or in ``env`` of ``~/.claude/settings.json`` (a gateway, as its users do)."""
    python = str(claude_agent_sdk())
    key = "sk-ant-claude-agent-sdk-test-0123456789"
    repo = scratch_repo(tmp / "repo", {"notes.txt": "sdk notes\n"})
    home = tmp / "home"
    bash = {"command": COMMAND, "description": "copy the notes"}
    script = [
        Reply(events=anthropic_tool("toolu_1", "Bash", bash)),
        Reply(events=anthropic_text("Copied the notes.")),
    ]
    with SSEReplayServer(*script) as upstream:
        env = environment(home, ANTHROPIC_API_KEY=key, IS_SANDBOX="1", DISABLE_AUTOUPDATER="1",
                          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")  # fmt: skip
        settings = home / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True)
        gateway = {"ANTHROPIC_BASE_URL": upstream.url}
        settings.write_text(json.dumps({"env": gateway if gateway_in_settings else {}}))
        if not gateway_in_settings:
            env.update(gateway)
        before = settings.read_bytes()
        done = record(tmp / "t.db", repo, env, python, str(DRIVERS / "claude_agent_writer.py"),
                      "copy the notes")  # fmt: skip
        posts = received(upstream)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").read_text() == "sdk notes\n" and settings.read_bytes() == before
    return {"db": tmp / "t.db", "posts": posts, "key": key,
            "episodes": last_json(done.stdout)["episodes"]}  # fmt: skip


@pytest.fixture(scope="module")
def claude_agent(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return claude_agent_run(tmp_path_factory.mktemp("claude-agent"), gateway_in_settings=False)


def test_a_claude_agent_sdk_program_is_recorded_call_by_call(claude_agent: dict[str, Any]) -> None:
    bodies, _, calls, _ = recorded(claude_agent["db"])
    assert len(claude_agent["posts"]) == 2 and bodies == claude_agent["posts"]
    (call,) = calls
    assert (call.payload["name"], call.payload["parsed"]["command"]) == ("Bash", COMMAND)
    assert_no_key(claude_agent["db"], claude_agent["key"])


def test_a_claude_agent_sdk_session_is_one_episode_with_its_tool_result_matched(
    claude_agent: dict[str, Any],
) -> None:
    _, _, calls, results = recorded(claude_agent["db"])
    assert len(claude_agent["episodes"]) == 1
    ((call,), (result,)) = calls, results
    assert (result.payload["call_id"], result.payload["name"]) == ("toolu_1", call.payload["name"])


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="recorder defect: a Python program driving the Claude Agent SDK gets the sdk "
    "adapter, which sets ANTHROPIC_BASE_URL in the environment only; the gateway in "
    "~/.claude/settings.json wins over it, so every call goes straight to the gateway",
)
def test_a_claude_agent_sdk_program_behind_a_gateway_in_claude_settings_is_recorded(
    tmp_path: Path,
) -> None:
    run = claude_agent_run(tmp_path, gateway_in_settings=True)
    bodies, _, _, _ = recorded(run["db"])
    assert len(run["posts"]) == 2 and bodies == run["posts"]
