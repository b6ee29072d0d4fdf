"""Building an environment from the ``--env`` value: ``workspace`` or an OpenEnv URL."""

from __future__ import annotations

from pathlib import Path

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
