"""The environment kinds, one entry each: the spec an episode records of its environment (a
typed model, read from ``episode.start.env``), the builder that makes the environment again
from that spec (resume, fork, replay, verifiers), and the ``--env`` value that asks for it.

:mod:`agentrunner.envs.factory` builds every environment through :data:`KINDS`. A new
environment takes two files: its module (the ``Environment``, a spec model, the builder and its
:class:`EnvKind`) and one entry in :data:`KINDS`. The spec models are those of
:mod:`agentrunner.values.specs` (the workspace's with the fields its builder reads); the builders of
the kinds below live here until their own modules hold them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agentrunner.envs import imported
from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.openenv_client import OpenEnvEnv
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values import specs
from agentrunner.values.environment import Environment
from agentrunner.values.errors import UsageError

SANDBOX_OVERRIDE = "AGENTRUNNER_SANDBOX"
"""Set to ``process`` to resume, fork or replay a bwrap episode where bwrap cannot run."""


SpecT = TypeVar("SpecT", bound=BaseModel)


@dataclass(frozen=True)
class FlagOptions:
    """What the command line gives beside ``--env``: a tasks file, the sandbox settings."""

    tasks_path: Path | None = None
    sandbox: SandboxConfig | None = None


@dataclass(frozen=True)
class EnvFlag:
    """How ``--env VALUE`` asks for a kind: ``value`` says how to write it (for help and
    errors), ``matches`` tells whether a value is one, ``build`` makes the environment from it;
    ``help`` (optional) says what it gives."""

    value: str
    matches: Callable[[str], bool]
    build: Callable[[str, FlagOptions], Environment]
    help: str = ""


@dataclass(frozen=True)
class EnvKind(Generic[SpecT]):
    """One environment kind: its recorded spec's model, the builder from that spec, and the
    ``--env`` value that asks for it (None: the command line never makes one)."""

    name: str
    spec: type[SpecT]
    build: Callable[[SpecT], Environment]
    flag: EnvFlag | None = None

    def from_spec(self, recorded: dict[str, Any]) -> Environment:
        """The environment ``recorded`` (an ``episode.start.env``) describes."""
        try:
            spec = self.spec.model_validate(recorded)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "spec"
            raise UsageError(
                f"the recorded {self.name} environment does not read ({where}: {problem['msg']})"
            ) from None
        return self.build(spec)


class WorkspaceSpec(specs.WorkspaceSpec):
    """The workspace's spec with the fields its builder reads (``episode.start`` records them
    all; :class:`agentrunner.values.specs.WorkspaceSpec` names those its readers use)."""

    task: dict[str, Any] | None = None
    """The one task the workspace ran, inline (``tasks`` is then ``task``)."""
    sandbox: dict[str, Any] | None = None
    snapshot_dir: str | None = None
    bash_timeout: float = 60
    output_cap: int = 100_000
    verify_timeout: float = 300


def _workspace(spec: WorkspaceSpec) -> Environment:
    sandbox = SandboxConfig.from_dict(spec.sandbox)
    override = os.environ.get(SANDBOX_OVERRIDE)
    if override:
        sandbox = SandboxConfig(
            mode=override,  # type: ignore[arg-type]
            network=sandbox.network,
            mounts=sandbox.mounts,
            limits=sandbox.limits,
        )
    try:
        return WorkspaceEnv(
            tasks_path=None if spec.tasks in (None, "bundled", "task") else spec.tasks,
            snapshot_dir=spec.snapshot_dir,
            bash_timeout=spec.bash_timeout,
            output_cap=spec.output_cap,
            verify_timeout=spec.verify_timeout,
            task=Task.model_validate(spec.task) if spec.task else None,
            sandbox=sandbox,
            base=spec.base,
        )
    except UsageError as exc:
        if sandbox.mode != "bwrap":
            raise
        raise UsageError(
            f"{exc}; this episode ran in the bwrap sandbox: install bubblewrap here, or set "
            f"{SANDBOX_OVERRIDE}=process to continue it with process confinement only"
        ) from None


WORKSPACE = EnvKind(
    "workspace",
    WorkspaceSpec,
    _workspace,
    EnvFlag(
        "'workspace'",
        lambda value: value == "workspace",
        lambda _, given: WorkspaceEnv(tasks_path=given.tasks_path, sandbox=given.sandbox),
        help="the coding workspace, default",
    ),
)
OPENENV = EnvKind(
    "openenv",
    specs.OpenEnvSpec,
    lambda spec: OpenEnvEnv(str(spec.url)),
    EnvFlag(
        "an OpenEnv server URL (http://HOST:PORT)",
        lambda value: value.startswith(("http://", "https://")),
        lambda url, _: OpenEnvEnv(url),
    ),
)
IMPORTED = EnvKind(
    imported.KIND,
    specs.ImportedSpec,
    lambda spec: imported.ImportedSession(spec.model_dump(exclude_unset=True)),
)

KINDS: dict[str, EnvKind[Any]] = {kind.name: kind for kind in (WORKSPACE, OPENENV, IMPORTED)}


def flags() -> list[EnvFlag]:
    """The ``--env`` values the command line takes, in the order they are tried."""
    return [kind.flag for kind in KINDS.values() if kind.flag is not None]


def flag_help() -> str:
    """What ``--env`` takes, for a command's help."""
    return " or ".join(f"{f.value} ({f.help})" if f.help else f.value for f in flags())


def from_flag(value: str, given: FlagOptions) -> Environment:
    """The environment ``--env VALUE`` asks for."""
    for flag in flags():
        if flag.matches(value):
            return flag.build(value, given)
    known = " or ".join(flag.value for flag in flags())
    raise UsageError(f"--env must be {known}, not {value!r}")


def from_spec(recorded: dict[str, Any]) -> Environment:
    """The environment an episode recorded (``episode.start.env``), built again."""
    name = recorded.get("kind")
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise UsageError(
            f"cannot rebuild an environment of kind {name!r}; pass the environment explicitly"
        )
    return kind.from_spec(recorded)
