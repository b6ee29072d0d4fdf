"""The OpenEnv schemas of the served workspace: one action (a tool and its parameters, flat),
the observations of a reset and of a step, the session state, and the wire shapes of
``openenv`` 0.10 (``serialize_observation``'s ``{"observation", "reward", "done",
"metadata"}``, WebSocket ``observation`` / ``state`` / ``error`` frames).

The action's parameters are the union of the six workspace tools' parameters (their names
and types are the tools' own, a contract); the environment checks them against the chosen
tool exactly as it does for the runner, so misuse is a tool-level error the model reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrunner.envs.tools import TOOL_SPECS

ToolName = Literal["bash", "read_file", "write_file", "str_replace", "list_files", "submit"]


class WorkspaceAction(BaseModel):
    """One workspace step: ``tool`` names the tool, the other fields are its parameters."""

    model_config = ConfigDict(extra="forbid", title="WorkspaceAction")

    tool: ToolName = Field(description="The workspace tool to run.")
    command: str | None = Field(default=None, description="bash: the command, run with bash -c.")
    timeout: float | None = Field(default=None, description="bash: seconds before it is killed.")
    path: str | None = Field(default=None, description="A path relative to the workspace root.")
    start_line: int | None = Field(default=None, description="read_file: first line (1-based).")
    end_line: int | None = Field(default=None, description="read_file: last line (inclusive).")
    content: str | None = Field(default=None, description="write_file: the whole new content.")
    old_str: str | None = Field(default=None, description="str_replace: text to replace.")
    new_str: str | None = Field(default=None, description="str_replace: replacement text.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Ignored (OpenEnv).")

    def arguments(self) -> dict[str, Any]:
        """The tool's parameters as given (unset and null ones left out)."""
        return self.model_dump(exclude={"tool", "metadata"}, exclude_none=True)


class ResetObservation(BaseModel):
    """What a reset shows: the task, the instructions and the step budget."""

    task_id: str
    prompt: str
    instructions: str | None = None
    max_steps: int | None = None
    episode_id: str
    session_id: str
    step: int = Field(
        default=0,
        description="Steps the episode has taken: 0 after a reset; when a reset with a"
        " session_id continues that session's episode, the steps it had taken.",
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


class StepObservation(BaseModel):
    """What a step shows: the tool's output exactly as the runner's model would see it."""

    output: str
    error: str | None = None
    truncated: bool = False
    step: int
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionState(BaseModel):
    """A session's state (OpenEnv's ``State``: ``episode_id`` and ``step_count``)."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    step_count: int = 0
    task_id: str | None = None
    session_id: str | None = None


def schemas() -> dict[str, Any]:
    """``GET /schema``: the action, observation, reset observation and state schemas."""
    return {
        "action": WorkspaceAction.model_json_schema(),
        "observation": StepObservation.model_json_schema(),
        "reset_observation": ResetObservation.model_json_schema(),
        "state": SessionState.model_json_schema(),
    }


def tools_description() -> str:
    """One line per tool, for ``GET /metadata``."""
    return "\n".join(f"- {spec.name}: {spec.description}" for spec in TOOL_SPECS)


def wire(observation: BaseModel, reward: float | None, done: bool) -> dict[str, Any]:
    """An observation as ``openenv``'s ``serialize_observation`` shapes it."""
    fields = observation.model_dump()
    out: dict[str, Any] = {"observation": fields, "reward": reward, "done": done}
    if fields.get("metadata"):
        out["metadata"] = fields["metadata"]
    return out


def error_frame(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """A WebSocket ``error`` frame (codes are ``openenv``'s ``WSErrorCode`` values)."""
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


def validation_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """A validation error's entries as JSON (``loc``, ``msg``, ``type``), as OpenEnv sends."""
    return [
        {"loc": list(err["loc"]), "msg": err["msg"], "type": err["type"]}
        for err in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
