"""What an ``episode.start`` says of its model and its environment, read as typed records.

The store keeps both as the JSON the episode recorded (``episode.start.model`` and ``.env``,
and the episode row's copies); these models read that JSON back without changing it: every
field a record holds that is not named here is kept (``extra="allow"``), and nothing here is
ever written. ``model_spec`` and ``env_spec`` read a recorded dict; an imported session's
record holds what its source said, so a field whose value is not of its type is left out of
the read (the record itself keeps it) rather than make the episode unreadable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, TypeAdapter, ValidationError

from agentrunner.values.spec_text import UNKNOWN as UNKNOWN

T = TypeVar("T")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ModelSpec(_Spec):
    """The model an episode ran (``scripted:demo``), as its ``episode.start`` recorded it."""

    spec: str = UNKNOWN
    """``provider:model``, or an imported agent's name when its session named no model."""
    provider: str | None = None
    model: str | None = None
    """The model's own name (the provider's, or the one an imported session named)."""
    agent: str | None = None
    """The agent an imported session came from."""
    base_url: str | None = None
    api: str | None = None
    options: dict[str, Any] | None = None

    @property
    def named(self) -> bool:
        """Whether the record names its model (a model can be built again from it)."""
        return self.spec not in ("", UNKNOWN)


class SpawnedBy(_Spec):
    """The episode (and its call) that started a sub-agent's session."""

    episode_id: str | None = None
    call_id: str | None = None


class WorkspaceSpec(_Spec):
    """The bundled workspace environment (a task's repository in a sandbox)."""

    kind: Literal["workspace"] = "workspace"
    tasks: str | None = None
    """``bundled``, ``task`` (one task given inline) or the tasks file's path."""
    base: dict[str, Any] | None = None
    """The tree the workspace started from, when it was not a bundled task's own."""


class OpenEnvSpec(_Spec):
    """An OpenEnv server the runner talked to."""

    kind: Literal["openenv"] = "openenv"
    url: str | None = None
    env_name: str | None = None


class ImportedSpec(_Spec):
    """A session imported from another agent's trace: there is no environment to run."""

    kind: Literal["import"] = "import"
    format: str | None = None
    path: str | None = None
    session_id: str | None = None
    agent: str | None = None
    agent_version: str | None = None
    extra: dict[str, Any] | None = None
    """What the source said of itself beyond the session (an ATIF trajectory's header)."""
    parent_episode: str | None = None
    """The episode of the session that started this one (a sub-agent's)."""
    parent_call_id: str | None = None
    spawned_by: SpawnedBy | None = None


class RecordedSpec(_Spec):
    """An agent recorded through the proxy (``replay``: one served a recording back)."""

    kind: Literal["recorded", "replay"] = "recorded"
    agent: str | None = None
    session_id: str | None = None
    record_run: str | None = None
    spawned_by: SpawnedBy | None = None
    base: dict[str, Any] | None = None
    """The agent's folder as its first request arrived (``record --snapshots``)."""


class OtherSpec(_Spec):
    """An environment of the caller's own (its spec is whatever it recorded)."""

    kind: str | None = None


_TAGS = {"workspace": "workspace", "openenv": "openenv", "import": "import"}


def _tag(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if kind in ("recorded", "replay"):
        return "recorded"
    return _TAGS.get(kind, "other") if isinstance(kind, str) else "other"


EnvSpec = Annotated[
    Annotated[WorkspaceSpec, Tag("workspace")]
    | Annotated[OpenEnvSpec, Tag("openenv")]
    | Annotated[ImportedSpec, Tag("import")]
    | Annotated[RecordedSpec, Tag("recorded")]
    | Annotated[OtherSpec, Tag("other")],
    Discriminator(_tag),
]

_ENV: TypeAdapter[EnvSpec] = TypeAdapter(EnvSpec)
_MODEL: TypeAdapter[ModelSpec] = TypeAdapter(ModelSpec)


def _read(adapter: TypeAdapter[T], recorded: dict[str, Any]) -> T:
    try:
        return adapter.validate_python(recorded)
    except ValidationError as exc:  # leave out the fields that are not of their type
        wrong = {key for e in exc.errors() for key in e["loc"] if key in recorded}
        return adapter.validate_python({k: v for k, v in recorded.items() if k not in wrong})


def model_spec(recorded: dict[str, Any]) -> ModelSpec:
    """The model record an episode holds (``episode.start.model``), typed."""
    return _read(_MODEL, recorded)


def env_spec(recorded: dict[str, Any]) -> EnvSpec:
    """The environment record an episode holds (``episode.start.env``), typed by its kind."""
    return _read(_ENV, recorded)
