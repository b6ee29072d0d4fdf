"""Building an environment from the ``--env`` value, or again from a recorded spec."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agentrunner.environment import Environment, SnapshotBackend, UsesStore
from agentrunner.envs import imported
from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.openenv_client import OpenEnvEnv
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.errors import UsageError

SANDBOX_OVERRIDE = "AGENTRUNNER_SANDBOX"
"""Set to ``process`` to resume, fork or replay a bwrap episode where bwrap cannot run."""


def make_env(
    env: str,
    *,
    tasks_path: Path | None = None,
    sandbox: SandboxConfig | None = None,
) -> Environment:
    if env == "workspace":
        return WorkspaceEnv(tasks_path=tasks_path, sandbox=sandbox)
    if env.startswith(("http://", "https://")):
        return OpenEnvEnv(env)
    raise UsageError(
        f"--env must be 'workspace' or an OpenEnv server URL (http://HOST:PORT), not {env!r}"
    )


def env_from_spec(spec: dict[str, Any], store: SnapshotBackend | None = None) -> Environment:
    """Rebuild the environment an episode was recorded with (for resume, fork, replay),
    keeping its snapshots in ``store``."""
    kind = spec.get("kind")
    env: Environment
    if kind == "workspace":
        tasks = spec.get("tasks")
        task = spec.get("task")
        sandbox = SandboxConfig.from_dict(spec.get("sandbox"))
        override = os.environ.get(SANDBOX_OVERRIDE)
        if override:
            sandbox = SandboxConfig(
                mode=override,  # type: ignore[arg-type]
                network=sandbox.network,
                mounts=sandbox.mounts,
                limits=sandbox.limits,
            )
        try:
            env = WorkspaceEnv(
                tasks_path=None if tasks in (None, "bundled", "task") else tasks,
                snapshot_dir=spec.get("snapshot_dir"),
                bash_timeout=spec.get("bash_timeout", 60),
                output_cap=spec.get("output_cap", 100_000),
                verify_timeout=spec.get("verify_timeout", 300),
                task=Task.model_validate(task) if task else None,
                sandbox=sandbox,
                base=spec.get("base"),
            )
        except UsageError as exc:
            if sandbox.mode != "bwrap":
                raise
            raise UsageError(
                f"{exc}; this episode ran in the bwrap sandbox: install bubblewrap here, or set "
                f"{SANDBOX_OVERRIDE}=process to continue it with process confinement only"
            ) from None
    elif kind == "openenv":
        env = OpenEnvEnv(str(spec["url"]))
    elif kind == imported.KIND:
        env = imported.ImportedSession(spec)
    else:
        raise UsageError(
            f"cannot rebuild an environment of kind {kind!r}; pass the environment explicitly"
        )
    if store is not None and isinstance(env, UsesStore):
        env.bind_store(store)
    return env
