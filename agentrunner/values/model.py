"""The ``Model`` protocol and the context a model receives for one turn.

A model is any callable ``model_fn(context) -> AgentTurn``. Streaming adapters also hand
each delta to ``context.emit(...)`` as it arrives, which records it at once; they call
``context.check_cancel()`` between deltas (``emit`` does it too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from agentrunner.values.errors import Cancelled, ModelError
from agentrunner.values.types import AgentTurn, Channel, Chunk, Message, ToolSpec


@dataclass
class AgentContext:
    """Everything a model sees for one turn."""

    messages: list[Message]
    tools: list[ToolSpec]
    turn: int
    task_id: str
    seed: int
    observation: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    on_chunk: Callable[[Chunk], None] | None = None
    on_error: Callable[[ModelError, int], None] | None = None
    cancel_reason: Callable[[], str | None] = lambda: None
    sample: int | None = None
    """Set when this call is one of several samples at the same input (a decision point's
    candidate ``sample``): a deterministic model uses it to vary; others sample anyway."""
    purpose: Literal["turn", "compaction"] = "turn"
    """What the call is for: ``"turn"`` (the episode's next turn) or ``"compaction"`` (a
    summary of the older history, :mod:`agentrunner.runtime.context`; ``turn`` is the request's)."""

    @property
    def history(self) -> list[Message]:
        return self.messages

    def check_cancel(self) -> None:
        """Raise :class:`Cancelled` if the episode was asked to stop."""
        reason = self.cancel_reason()
        if reason is not None:
            raise Cancelled(reason)

    def report_error(self, error: ModelError, attempt: int) -> None:
        """Record a failed attempt of this call (e.g. a 429 the adapter is about to retry)."""
        if self.on_error is not None:
            self.on_error(error, attempt)

    def emit(self, channel: Channel, text: str, tool_call_id: str | None = None) -> None:
        """Record one streamed delta as it arrives."""
        self.check_cancel()
        if self.on_chunk is not None and text:
            self.on_chunk(Chunk(channel=channel, text=text, tool_call_id=tool_call_id))


@runtime_checkable
class Model(Protocol):
    """A model adapter: a ``model_fn`` that also names its provider, model and params."""

    provider: str
    model: str

    def __call__(self, context: AgentContext) -> AgentTurn: ...

    def spec(self) -> dict[str, Any]:
        """JSON description recorded in ``episode.start`` (never secrets)."""
        ...


class FunctionModel:
    """Adapts a plain ``model_fn(context) -> AgentTurn`` to the ``Model`` protocol."""

    def __init__(self, fn: Callable[[AgentContext], AgentTurn]) -> None:
        self._fn = fn
        self.provider = "custom"
        self.model = getattr(fn, "__name__", type(fn).__name__)
        self.params: dict[str, Any] = {}

    def __call__(self, context: AgentContext) -> AgentTurn:
        return self._fn(context)

    def spec(self) -> dict[str, Any]:
        return {"spec": f"{self.provider}:{self.model}", "provider": self.provider}


def as_model(model_fn: Callable[[AgentContext], AgentTurn]) -> Model:
    if isinstance(model_fn, Model):
        return model_fn
    return FunctionModel(model_fn)
