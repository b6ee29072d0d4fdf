"""The event log's twelve kinds, as small tagged payload models in one discriminated union.

The ``events`` table stores ``kind`` in its own column and the rest of the payload as JSON
text; :func:`parse_payload` turns a row back into its typed model. The kind names, statuses and
stop reasons live in :mod:`agentrunner.values.statuses` (no pydantic) and are re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentrunner.values.specs import EnvSpec, ModelSpec, env_spec, model_spec
from agentrunner.values.statuses import COMPACTION as COMPACTION
from agentrunner.values.statuses import EVENT_KINDS as EVENT_KINDS
from agentrunner.values.statuses import STOP_REASON_STATUS as STOP_REASON_STATUS
from agentrunner.values.statuses import Status as Status
from agentrunner.values.statuses import StopReason as StopReason
from agentrunner.values.statuses import status_for as status_for
from agentrunner.values.types import AgentUsage, Channel, OpaquePart

StopReasonText = Annotated[StopReason | str, Field(union_mode="left_to_right")]
"""A recorded stop reason: a :class:`StopReason`, or the text an imported trace gave for one
of its own (an ``episode.end`` with any other reason means ``failed``)."""


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class EpisodeStart(_Payload):
    kind: Literal["episode.start"] = "episode.start"
    task_id: str
    seed: int
    env: dict[str, Any]
    model: dict[str, Any]
    config: dict[str, Any]
    version: str
    max_steps: int | None = None  # the environment's horizon, when it has one

    @property
    def model_spec(self) -> ModelSpec:
        """The recorded ``model``, typed."""
        return model_spec(self.model)

    @property
    def env_spec(self) -> EnvSpec:
        """The recorded ``env``, typed by its kind."""
        return env_spec(self.env)


class ModelRequest(_Payload):
    kind: Literal["model.request"] = "model.request"
    call_id: str
    tip_hash: str
    tools_hash: str
    params: dict[str, Any] = Field(default_factory=dict)
    provider: str
    model: str
    input_tokens_estimate: int | None = None  # the budget's estimate of what this request sends
    context_window: int | None = None  # the window it was checked against (None: unknown)
    masked: int = 0  # tool outputs the context policy replaced by a placeholder
    purpose: Literal["turn", "compaction"] = "turn"
    """``compaction``: a call summarizing the history (its answer is not part of it)."""
    covers: int | None = None  # a compaction's: the history messages its summary stands for


class ModelChunk(_Payload):
    kind: Literal["model.chunk"] = "model.chunk"
    call_id: str
    channel: Channel
    index: int
    text: str
    tool_call_id: str | None = None


class ModelResponse(_Payload):
    kind: Literal["model.response"] = "model.response"
    call_id: str
    message_hash: str
    stop_reason: str | None = None
    provider_request_id: str | None = None
    model: str | None = None  # the model that answered, as the provider named it
    latency_s: float
    refusal: str | None = None
    opaque: tuple[OpaquePart, ...] = ()


class Usage(AgentUsage):
    model_config = ConfigDict(extra="allow", frozen=True)
    kind: Literal["usage"] = "usage"
    call_id: str


class ToolCall(_Payload):
    kind: Literal["tool.call"] = "tool.call"
    call_id: str
    name: str
    arguments: str
    parsed: dict[str, Any] | None = None
    parse_error: str | None = None


class ToolResult(_Payload):
    kind: Literal["tool.result"] = "tool.result"
    call_id: str
    name: str
    observation: str
    reward: float | None = None
    done: bool = False
    error: str | None = None
    duration_s: float = 0.0
    message_hash: str
    snapshot: str | None = None
    step: int | None = None  # the environment step this result came from (None: env not run)
    truncated: bool = False  # the environment's horizon (max_steps) ended the episode here


class MessageEvent(_Payload):
    kind: Literal["message"] = "message"
    role: str
    message_hash: str
    reason: str = "prompt"


class Cancel(_Payload):
    kind: Literal["cancel"] = "cancel"
    where: Literal["generate", "tool", "between_turns"]
    reason: str


class Error(_Payload):
    kind: Literal["error"] = "error"
    where: str
    type: str
    message: str
    retryable: bool = False
    attempt: int = 1


class Resume(_Payload):
    kind: Literal["resume"] = "resume"
    from_seq: int
    env_restore: str
    dangling: list[dict[str, Any]] = Field(default_factory=list)
    reason: Literal["resume", "fork"] = "resume"
    config: dict[str, Any] | None = None  # the runner settings this attempt runs with


class EndTotals(BaseModel):
    """An ``episode.end``'s totals as a typed record: tokens by kind (``input``, ``output``,
    ``cache_read``, ``cache_write``, ``reasoning``), the known cost, the summed reward (what
    :meth:`agentrunner.readers.history.Totals.as_dict` records); other keys an importer wrote
    kept."""

    model_config = ConfigDict(extra="allow", frozen=True)
    tokens: dict[str, int | None] = Field(default_factory=dict)
    cost_usd: float | None = None
    reward: float | None = None


class EpisodeEnd(_Payload):
    kind: Literal["episode.end"] = "episode.end"
    stop_reason: StopReasonText
    turns: int
    total_reward: float | None  # None: nothing judged the episode (no test, no verifier)
    totals: dict[str, Any] = Field(default_factory=dict)  # stored as written: read `spend`

    @property
    def spend(self) -> EndTotals:
        """``totals`` read as a typed record."""
        return EndTotals.model_validate(self.totals)


EventPayload = Annotated[
    EpisodeStart
    | ModelRequest
    | ModelChunk
    | ModelResponse
    | Usage
    | ToolCall
    | ToolResult
    | MessageEvent
    | Cancel
    | Error
    | Resume
    | EpisodeEnd,
    Field(discriminator="kind"),
]

_ADAPTER: TypeAdapter[EventPayload] = TypeAdapter(EventPayload)


def parse_payload(kind: str, payload: dict[str, Any]) -> EventPayload:
    """Validate a stored payload (without its ``kind``) into its typed model."""
    return _ADAPTER.validate_python({**payload, "kind": kind})
