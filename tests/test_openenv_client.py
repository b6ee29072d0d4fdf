"""OpenEnvEnv against a tiny loopback fake (reply mapping) and a real ``openenv`` server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fake_openenv import ECHO_SCHEMA, SILENCE, error_reply, fake_openenv, observation_reply
from openenv_server import OpenEnvServer, free_port, running_openenv_server

from agentrunner.envs.openenv_client import OpenEnvEnv, render_observation
from agentrunner.values.environment import ToolAction
from agentrunner.values.errors import EnvironmentFailure, UsageError

READY = observation_reply({"status": "ready", "board": [1, 2]}, reward=None)


def echo(message: str) -> ToolAction:
    return ToolAction(name="echo", arguments={"message": message})


# -- reply mapping, against the loopback fake ---------------------------------------------


def test_reset_prompt_renders_the_initial_observation_with_sorted_keys() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        result = env.reset("t1", 7)
        env.close()
    assert result.prompt == "board: [1, 2]\nstatus: ready"


def test_reset_sends_seed_and_task_id() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("task-9", 42)
        env.close()
    assert fake.received[0] == {"type": "reset", "data": {"seed": 42, "task_id": "task-9"}}


def test_reset_system_prompt_comes_from_metadata() -> None:
    with fake_openenv([READY], metadata={"name": "Grid", "description": "Walk a grid."}) as fake:
        env = OpenEnvEnv(fake.url)
        result = env.reset("t", 0)
        env.close()
    assert result.system == "You are acting in the OpenEnv environment Grid. Walk a grid."


def test_reset_max_steps_comes_from_metadata() -> None:
    with fake_openenv([READY], metadata={"name": "Grid", "max_steps": 12}) as fake:
        env = OpenEnvEnv(fake.url)
        result = env.reset("t", 0)
        env.close()
    assert result.max_steps == 12


def test_reset_max_steps_is_none_without_metadata() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        result = env.reset("t", 0)
        env.close()
    assert result.max_steps is None


def test_tool_is_named_after_the_action_class_with_flat_action_fields() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        (tool,) = env.reset("t", 0).tools
        env.close()
    assert tool.name == "echo"
    assert tool.description == "Echo a message."
    assert tool.parameters == {
        "type": "object",
        "properties": {"message": ECHO_SCHEMA["properties"]["message"]},
        "required": ["message"],
        "additionalProperties": False,
    }


def test_step_sends_the_tool_arguments_as_the_action() -> None:
    with fake_openenv([READY, observation_reply({"echoed": "hi"})]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        env.step(echo("hi"))
        env.close()
    assert fake.received[1] == {"type": "step", "data": {"message": "hi"}}


def test_null_reward_maps_to_none() -> None:
    with fake_openenv([READY, observation_reply({"x": 1}, reward=None)]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert result.reward is None


def test_numeric_reward_and_done_are_kept() -> None:
    with fake_openenv([READY, observation_reply({"x": 1}, reward=1, done=True)]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert (result.reward, result.done, result.truncated) == (1.0, True, False)


def test_extra_observation_keys_are_kept_in_the_rendering() -> None:
    reply = observation_reply({"echoed": "a", "zz_extra": {"b": 2, "a": 1}, "n": None})
    with fake_openenv([READY, reply]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert result.observation == 'echoed: a\nn: null\nzz_extra: {"a": 1, "b": 2}'


def test_metadata_nested_in_the_observation_goes_into_info() -> None:
    reply = observation_reply({"echoed": "a", "metadata": {"step": 1}})
    with fake_openenv([READY, reply]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert result.info == {"metadata": {"step": 1}}


def test_metadata_at_the_top_level_goes_into_info() -> None:
    reply = observation_reply({"echoed": "a"}, metadata={"original": "a"})
    with fake_openenv([READY, reply]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert result.info == {"metadata": {"original": "a"}}


def test_observation_fields_at_the_top_level_of_data_are_the_observation() -> None:
    flat = {"type": "observation", "data": {"echoed": "a", "reward": 0.5, "done": False}}
    with fake_openenv([READY, flat]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert (result.observation, result.reward) == ("echoed: a", 0.5)


def test_a_second_reset_reuses_the_session_and_restarts_the_step_count() -> None:
    replies = [READY, observation_reply({"x": 1}), READY, None]
    with fake_openenv(replies) as fake, pytest.raises(EnvironmentFailure, match="during step 1"):
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        env.step(echo("a"))
        env.reset("t", 1)
        env.step(echo("b"))
    assert [m["type"] for m in fake.received] == ["reset", "step", "reset", "step"]


def test_a_server_that_does_not_answer_raises_environment_failure() -> None:
    with fake_openenv([READY, SILENCE]) as fake, pytest.raises(EnvironmentFailure) as info:
        env = OpenEnvEnv(fake.url, timeout=0.5)
        env.reset("t", 0)
        env.step(echo("a"))
    assert str(info.value) == f"OpenEnv server at {fake.url} did not answer step 1 within 0.5s"


def test_validation_error_is_a_tool_level_error() -> None:
    invalid = error_reply(
        "VALIDATION_ERROR",
        "Invalid message",
        errors=[{"loc": ["message"], "msg": "Field required", "type": "missing"}],
    )
    with fake_openenv([READY, invalid]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(ToolAction(name="echo", arguments={}))
        env.close()
    assert result.error == "invalid action: message: Field required"
    assert result.observation == "error: invalid action: message: Field required"


def test_execution_error_is_a_tool_level_error() -> None:
    failed = error_reply("EXECUTION_ERROR", "illegal move")
    with fake_openenv([READY, failed]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(echo("a"))
        env.close()
    assert result.error == "the environment failed on this action: illegal move"


def test_unknown_tool_is_a_tool_level_error_and_is_not_sent() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        result = env.step(ToolAction(name="bash", arguments={"command": "ls"}))
        env.close()
    assert result.error == "unknown tool 'bash'; this environment offers 'echo'"
    assert [m["type"] for m in fake.received] == ["reset", "close"]


def test_capacity_reached_raises_environment_failure_on_reset() -> None:
    full = error_reply("CAPACITY_REACHED", "Server at capacity: 1/1 sessions active.")
    with fake_openenv(greeting=full) as fake, pytest.raises(EnvironmentFailure) as info:
        OpenEnvEnv(fake.url).reset("t", 0)
    assert "refused the session during reset" in str(info.value)
    assert "CAPACITY_REACHED" in str(info.value)


def test_session_error_during_step_raises_environment_failure() -> None:
    broken = error_reply("SESSION_ERROR", "session lost")
    with fake_openenv([READY, broken]) as fake, pytest.raises(EnvironmentFailure) as info:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        env.step(echo("a"))
    assert str(info.value) == (
        f"OpenEnv server at {fake.url} failed during step 1: session lost (SESSION_ERROR)"
    )


def test_dropped_connection_during_step_raises_environment_failure() -> None:
    replies = [READY, observation_reply({"x": 1}), None]
    with fake_openenv(replies) as fake, pytest.raises(EnvironmentFailure) as info:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        env.step(echo("a"))
        env.step(echo("b"))
    assert f"OpenEnv server at {fake.url} closed the connection during step 2" in str(info.value)


def test_step_that_reaches_metadata_max_steps_is_truncated() -> None:
    replies = [READY, observation_reply({"x": 1}), observation_reply({"x": 2})]
    with fake_openenv(replies, metadata={"name": "Grid", "max_steps": 2}) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        first, second = env.step(echo("a")), env.step(echo("b"))
        env.close()
    assert (first.done, first.truncated, second.done, second.truncated) == (
        False,
        False,
        True,
        True,
    )


def test_close_ends_the_session_and_is_idempotent() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url)
        env.reset("t", 0)
        env.close()
        env.close()
    assert fake.received[-1] == {"type": "close"}


def test_step_without_reset_raises_environment_failure() -> None:
    with pytest.raises(EnvironmentFailure, match="call reset"):
        OpenEnvEnv("http://127.0.0.1:9").step(echo("a"))


def test_spec_names_kind_url_and_env_name() -> None:
    with fake_openenv([READY]) as fake:
        env = OpenEnvEnv(fake.url + "/")
        env.reset("t", 0)
        env.close()
    assert env.spec() == {"kind": "openenv", "url": fake.url, "env_name": "FakeEcho"}


def test_dead_url_raises_environment_failure_on_reset() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EnvironmentFailure, match=f"^cannot reach OpenEnv server at {url}: "):
        OpenEnvEnv(url).reset("t", 0)


def test_non_http_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        OpenEnvEnv("localhost:8000")


def test_multiline_strings_render_as_indented_blocks() -> None:
    assert render_observation({"out": "a\nb", "code": 0}) == "code: 0\nout: |\n  a\n  b"


# -- a real OpenEnv server: openenv 0.10's scaffolded echo env ----------------------------


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenEnvServer]:
    with running_openenv_server(tmp_path_factory.mktemp("openenv")) as server:
        yield server


@pytest.fixture
def echo_env(echo_server: OpenEnvServer) -> Iterator[OpenEnvEnv]:
    env = OpenEnvEnv(echo_server.url, timeout=10.0)
    yield env
    env.close()


@pytest.mark.openenv
def test_real_echo_episode_returns_the_servers_observations(echo_env: OpenEnvEnv) -> None:
    reset = echo_env.reset("echo-task", 3)
    results = [echo_env.step(echo(text)) for text in ("hi", "hello", "a longer message")]
    assert reset.prompt.startswith("echoed_message: Echo Env environment ready!\n")
    assert [r.observation.splitlines()[0] for r in results] == [
        "echoed_message: hi",
        "echoed_message: hello",
        "echoed_message: a longer message",
    ]
    assert [r.reward for r in results] == [pytest.approx(0.2), pytest.approx(0.5), 1.0]
    assert [r.info["metadata"]["step"] for r in results] == [1, 2, 3]


@pytest.mark.openenv
def test_real_tool_parameters_equal_the_action_schema_fields(
    echo_server: OpenEnvServer, echo_env: OpenEnvEnv
) -> None:
    action_schema = httpx.get(f"{echo_server.url}/schema").json()["action"]
    (tool,) = echo_env.reset("t", 0).tools
    fields = {k: v for k, v in action_schema["properties"].items() if k != "metadata"}
    assert (tool.name, tool.parameters["properties"], tool.parameters["required"]) == (
        "echo",
        fields,
        action_schema["required"],
    )


@pytest.mark.openenv
def test_real_validation_error_is_tool_level_and_the_episode_continues(
    echo_env: OpenEnvEnv,
) -> None:
    echo_env.reset("t", 0)
    bad = echo_env.step(ToolAction(name="echo", arguments={"mesage": "typo"}))
    good = echo_env.step(echo("fixed"))
    assert bad.error == (
        "invalid action: message: Field required; mesage: Extra inputs are not permitted"
    )
    assert good.error is None
    assert good.observation.startswith("echoed_message: fixed\n")


@pytest.mark.openenv
def test_real_spec_names_the_servers_environment(echo_env: OpenEnvEnv) -> None:
    echo_env.reset("t", 0)
    assert echo_env.spec()["env_name"] == "EchoEnvironment"


@pytest.mark.openenv
def test_real_second_session_at_capacity_raises_environment_failure(
    echo_server: OpenEnvServer, echo_env: OpenEnvEnv
) -> None:
    echo_env.reset("t", 0)
    with pytest.raises(EnvironmentFailure, match="CAPACITY_REACHED"):
        OpenEnvEnv(echo_server.url).reset("t", 0)


@pytest.mark.openenv
def test_real_closed_session_frees_the_slot_for_the_next_client(
    echo_server: OpenEnvServer,
) -> None:
    first = OpenEnvEnv(echo_server.url)
    first.reset("t", 0)
    first.close()
    second = OpenEnvEnv(echo_server.url)
    assert second.reset("t", 1).prompt.startswith("echoed_message: Echo Env environment ready!")
    second.close()


@pytest.mark.openenv
def test_real_server_killed_mid_episode_raises_environment_failure(tmp_path: Path) -> None:
    with running_openenv_server(tmp_path) as server:
        env = OpenEnvEnv(server.url, timeout=10.0)
        env.reset("t", 0)
        env.step(echo("one"))
        env.step(echo("two"))
        server.kill()
        with pytest.raises(EnvironmentFailure) as info:
            env.step(echo("three"))
        env.close()
    assert str(info.value).startswith(
        f"OpenEnv server at {server.url} closed the connection during step 3: "
    )


def test_credentials_in_the_url_never_reach_the_spec() -> None:
    env = OpenEnvEnv("https://user:hf_SECRET@example.org:8443/env/?token=abc")
    assert env.spec()["url"] == "https://example.org:8443/env/"
