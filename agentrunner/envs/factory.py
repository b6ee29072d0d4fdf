"""Building an environment from the ``--env`` value: ``workspace`` or an OpenEnv URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrunner.environment import Environment
from agentrunner.errors import UsageError


def make_env(
    env: str, *, tasks_path: Path | None = None, snapshot_dir: Path | None = None
) -> Environment:
    if env == "workspace":
        from agentrunner.envs.workspace import WorkspaceEnv

        return WorkspaceEnv(tasks_path=tasks_path, snapshot_dir=snapshot_dir)
    if env.startswith(("http://", "https://")):
        from agentrunner.envs.openenv_client import OpenEnvEnv

        return OpenEnvEnv(env)
    raise UsageError(
        f"--env must be 'workspace' or an OpenEnv server URL (http://HOST:PORT), not {env!r}"
    )


def env_from_spec(spec: dict[str, Any]) -> Environment:
    """Rebuild the environment an episode was recorded with (for resume, fork, replay)."""
    kind = spec.get("kind")
    if kind == "workspace":
        from agentrunner.envs.workspace import WorkspaceEnv

        tasks = spec.get("tasks")
        return WorkspaceEnv(
            tasks_path=None if tasks in (None, "bundled") else tasks,
            snapshot_dir=spec.get("snapshot_dir"),
            bash_timeout=spec.get("bash_timeout", 60),
            output_cap=spec.get("output_cap", 100_000),
            verify_timeout=spec.get("verify_timeout", 300),
        )
    if kind == "openenv":
        from agentrunner.envs.openenv_client import OpenEnvEnv

        return OpenEnvEnv(str(spec["url"]))
    raise UsageError(
        f"cannot rebuild an environment of kind {kind!r}; pass the environment explicitly"
    )
