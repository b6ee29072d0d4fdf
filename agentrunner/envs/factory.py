"""Building an environment from the ``--env`` value, or again from a recorded spec, through
the kinds in :mod:`agentrunner.envs.registry`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrunner.envs import registry
from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.registry import SANDBOX_OVERRIDE
from agentrunner.values.environment import Environment, SnapshotBackend, UsesStore

__all__ = ["SANDBOX_OVERRIDE", "env_from_spec", "make_env"]


def make_env(
    env: str,
    *,
    tasks_path: Path | None = None,
    sandbox: SandboxConfig | None = None,
) -> Environment:
    """The environment ``--env`` names (``workspace``, an OpenEnv URL, or another kind's)."""
    return registry.from_flag(env, registry.FlagOptions(tasks_path, sandbox))


def env_from_spec(spec: dict[str, Any], store: SnapshotBackend | None = None) -> Environment:
    """Rebuild the environment an episode was recorded with (for resume, fork, replay),
    keeping its snapshots in ``store``."""
    env = registry.from_spec(spec)
    if store is not None and isinstance(env, UsesStore):
        env.bind_store(store)
    return env
