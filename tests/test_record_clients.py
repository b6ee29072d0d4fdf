"""``record --dry-run`` and ``--list-clients``: which adapter a command gets, the upstream it
reads from the client's own configuration, and what it changes (no client is run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from record_support import last_json


def _dry_run(tmp_path: Path, *command: str, env: dict[str, str] | None = None) -> Any:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "OPENAI_",
                "ANTHROPIC_",
                "CODEX_",
                "GOOGLE_",
                "OPENCODE_",
                "AIDER_",
                "MSWEA_",
                "XDG_CONFIG",
            )
        )
    }
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "record", "--dry-run", "--json",
         "--", *command],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**environ, "HOME": str(tmp_path), **(env or {})},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return last_json(done.stdout)


def test_codex_with_the_built_in_provider_is_redirected_through_openai_base_url(
    tmp_path: Path,
) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('openai_base_url = "https://gw.example/v1"\n')
    plan = _dry_run(tmp_path, "codex", "exec", "hi")
    assert plan["client"] == "codex" and plan["upstreams"]["openai"] == "https://gw.example/v1"
    assert plan["command"][:3] == ["codex", "-c", 'openai_base_url="http://127.0.0.1:0/openai"']


def test_codex_takes_the_provider_a_profile_and_a_command_line_override_choose(
    tmp_path: Path,
) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(
        'model_provider = "a"\n[profiles.work]\nmodel_provider = "b"\n'
        '[model_providers.a]\nbase_url = "https://a.example/v1"\n'
        '[model_providers.b]\nbase_url = "https://b.example/v1"\n'
    )
    plan = _dry_run(tmp_path, "codex", "--profile", "work", "exec", "hi")
    assert plan["upstreams"]["openai"] == "https://b.example/v1"
    assert 'model_providers.b.base_url="http://127.0.0.1:0/openai"' in plan["command"]
    override = _dry_run(tmp_path, "codex", "-c", 'model_providers.a.base_url="https://c.example"')
    assert override["upstreams"]["openai"] == "https://c.example"


def test_claude_codes_project_local_settings_win_over_the_users(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    user = {"env": {"ANTHROPIC_BASE_URL": "https://user.example"}}
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(user))
    (tmp_path / ".claude" / "settings.local.json").write_text(
        json.dumps({"env": {"ANTHROPIC_BASE_URL": "https://local.example"}})
    )
    plan = _dry_run(tmp_path, "claude", "-p", "hi")
    assert (
        plan["client"] == "claude-code"
        and plan["upstreams"]["anthropic"] == "https://local.example"
    )
    assert plan["command"][1] == "--settings"
    assert json.loads(plan["command"][2]) == {
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:0/anthropic"}
    }


def test_any_other_program_gets_the_sdk_variables_and_keeps_its_base_urls_as_upstreams(
    tmp_path: Path,
) -> None:
    env = {"OPENAI_API_BASE": "https://llm.example/v1"}
    plan = _dry_run(tmp_path, "my-agent", "--yes", env=env)
    assert plan["client"] == "sdk" and plan["command"] == ["my-agent", "--yes"]
    assert plan["upstreams"] == {
        "anthropic": "https://api.anthropic.com",
        "openai": "https://llm.example/v1",
        "gemini": "https://generativelanguage.googleapis.com",
    }


def test_gemini_cli_records_to_the_upstream_its_env_file_names_and_is_redirected_by_variable(
    tmp_path: Path,
) -> None:
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / ".env").write_text('GOOGLE_GEMINI_BASE_URL="https://gw.example"\n')
    plan = _dry_run(tmp_path, "gemini", "-p", "hi")
    assert plan["client"] == "gemini-cli" and plan["command"] == ["gemini", "-p", "hi"]
    assert plan["upstreams"]["gemini"] == "https://gw.example"
    assert (
        tmp_path / ".gemini" / ".env"
    ).read_text() == 'GOOGLE_GEMINI_BASE_URL="https://gw.example"\n'


def test_opencode_records_to_its_active_providers_base_url_and_overrides_it_inline(
    tmp_path: Path,
) -> None:
    (tmp_path / ".git").mkdir()
    config = {"provider": {"a": {"options": {"baseURL": "https://a.example/v1"}},
                           "b": {"npm": "@ai-sdk/anthropic",
                                 "options": {"baseURL": "https://b.example/v1"}}},
              "model": "a/x"}  # fmt: skip
    (tmp_path / "opencode.json").write_text(json.dumps(config))
    plan = _dry_run(tmp_path, "opencode", "run", "hi", "-m", "b/y")
    assert plan["client"] == "opencode" and plan["upstreams"]["anthropic"] == "https://b.example"
    assert json.loads((tmp_path / "opencode.json").read_text()) == config
    plan = _dry_run(tmp_path, "opencode", "run", "hi")
    assert plan["upstreams"]["openai"] == "https://a.example/v1"
    assert any("OPENCODE_CONFIG_CONTENT" in note for note in plan["changes"])


def test_aider_records_to_the_upstream_its_config_or_command_line_names(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".aider.conf.yml").write_text("openai-api-base: https://conf.example/v1\n")
    plan = _dry_run(tmp_path, "aider", "--yes-always")
    assert plan["client"] == "aider" and plan["upstreams"]["openai"] == "https://conf.example/v1"
    plan = _dry_run(tmp_path, "aider", "--openai-api-base", "https://argv.example/v1")
    assert plan["upstreams"]["openai"] == "https://argv.example/v1"
    assert plan["command"][2].endswith("/openai")  # the value points at the proxy
    assert (
        tmp_path / ".aider.conf.yml"
    ).read_text() == "openai-api-base: https://conf.example/v1\n"


def test_mini_swe_agent_records_to_the_upstream_its_global_env_file_names(tmp_path: Path) -> None:
    dotenv = tmp_path / ".config" / "mini-swe-agent" / ".env"
    dotenv.parent.mkdir(parents=True)
    dotenv.write_text("OPENAI_BASE_URL='https://mini.example/v1'\n")
    plan = _dry_run(tmp_path, "mini", "-t", "task")
    assert plan["client"] == "mini-swe-agent"
    assert plan["upstreams"]["openai"] == "https://mini.example/v1"


def test_list_clients_names_every_adapter() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "record", "--list-clients", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    names = [c["client"] for c in last_json(done.stdout)]
    assert names == [
        "claude-code",
        "codex",
        "gemini-cli",
        "opencode",
        "aider",
        "mini-swe-agent",
        "sdk",
    ]
