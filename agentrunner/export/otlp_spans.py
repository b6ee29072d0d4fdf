"""OTLP export, spans: one episode as one OpenTelemetry trace (GenAI conventions plus the
OpenInference attributes Arize Phoenix reads), as ``opentelemetry-proto`` ``Span`` messages.

- one ``invoke_agent {agent}`` span for the episode (OpenInference kind ``AGENT``), the parent
  of every other span of the trace, from its first own event to its last; its status the
  episode's (failed or cancelled: ``ERROR`` with the reason; completed: ``OK``; running,
  pending or interrupted: unset);
- one ``chat {model}`` span per model call (``LLM``), from its ``model.request`` to its
  response (or its last event: a broken stream, an error, a cancel): provider, requested
  model and parameters, response id and model, finish reason, the call's ``usage`` event as
  input / output / cache-read / cache-write / reasoning tokens and its cost when known;
  errors during the call as ``exception`` span events, the last one (or a cancel) its status;
- one ``execute_tool {name}`` span per tool call (``TOOL``), from its ``tool.call`` to its
  ``tool.result``: name, call id, reward, environment step; an error or a cancel its status.

Message content (the messages, tool arguments and results, the task and the final answer) is
written only with ``content=True`` (:mod:`agentrunner.export.otlp_content`).

Identity is derived, never random, so a second export of the same episode names the same
spans (a backend updates them instead of adding copies): the trace id hashes the episode id,
a span id hashes the episode id and the seq of the event that opens it (0 for the agent span).
A fork is its own trace, made of its own events (what it inherits is in its ancestors'
traces); its agent span links to the span at the fork point (the last span its inherited
history opened, in the trace of the episode that holds it), and a sub-agent's to the tool
call that started it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from openinference.semconv.trace import OpenInferenceSpanKindValues as Kind
from openinference.semconv.trace import SpanAttributes as OI
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from agentrunner.export.atif import sub_agents
from agentrunner.export.otlp_attrs import (
    Attributes,
    key_values,
    provider_name,
    request_parameters,
    usage_attributes,
)
from agentrunner.export.otlp_content import chat_input, chat_output, tool_content
from agentrunner.readers.history import NOT_CHUNKS
from agentrunner.store import EpisodeSummary, EventRow
from agentrunner.values.errors import EpisodeNotFoundError
from agentrunner.values.events import (
    Cancel,
    Error,
    MessageEvent,
    ModelRequest,
    ModelResponse,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.values.events import (
    Status as EpisodeStatus,
)
from agentrunner.values.redaction import Redactor
from agentrunner.values.specs import ImportedSpec, RecordedSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

AGENT_NAME = "agentrunner"
Spawners = Mapping[str, tuple[str, str | None]]
"""A sub-agent's episode id -> the episode that started it and the tool call that did."""


def trace_id(episode_id: str) -> bytes:
    """The 16-byte trace id of an episode's trace."""
    return hashlib.sha256(f"agentrunner.trace:{episode_id}".encode()).digest()[:16]


def span_id(episode_id: str, seq: int) -> bytes:
    """The 8-byte id of the span opened by event ``seq`` of ``episode_id`` (0: the agent's)."""
    return hashlib.sha256(f"agentrunner.span:{episode_id}:{seq}".encode()).digest()[:8]


def nanos(ts: str) -> int:
    """A recorded timestamp (ISO 8601) in nanoseconds since the epoch."""
    moment = datetime.fromisoformat(ts)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


@dataclass
class OpenSpan:
    """A span being built from the events that make it."""

    start: EventRow
    end: EventRow
    name: str
    kind: Span.SpanKind.ValueType
    attributes: Attributes
    events: list[Span.Event] = field(default_factory=list)
    status: Status | None = None

    def close(self, row: EventRow) -> None:
        self.end = row


def _exception(row: EventRow, error: Error, redactor: Redactor) -> Span.Event:
    """An ``error`` event as an OpenTelemetry ``exception`` span event."""
    return Span.Event(
        time_unix_nano=nanos(row.ts),
        name="exception",
        attributes=key_values(
            {
                "exception.type": error.type,
                "exception.message": error.message,
                "agentrunner.error.where": error.where,
                "agentrunner.error.retryable": error.retryable,
            },
            redactor,
        ),
    )


def _cancelled(cancel: Cancel) -> Status:
    return Status(code=Status.STATUS_CODE_ERROR, message=f"cancelled: {cancel.reason}")


@dataclass
class Walk:
    """One pass over an episode's events, folding them into spans."""

    store: StoreBackend
    episode: EpisodeSummary
    content: bool
    spans: list[OpenSpan] = field(default_factory=list)
    call: OpenSpan | None = None
    answered: bool = False
    tools: dict[str, OpenSpan] = field(default_factory=dict)
    agent_events: list[Span.Event] = field(default_factory=list)
    fork_point: tuple[str, int] | None = None
    first: EventRow | None = None
    last: EventRow | None = None
    prompt: str | None = None
    answer: str | None = None
    redactor: Redactor = field(default_factory=Redactor)

    def inherited(self, row: EventRow) -> None:
        """An event the fork inherits: only where its spans begin matters (the fork point)."""
        if row.kind in ("model.request", "tool.call"):
            self.fork_point = (row.episode_id, row.seq)
        elif self.fork_point is None:
            self.fork_point = (row.episode_id, 0)

    def note_prompt(self, row: EventRow) -> None:
        """With content: the first user message of the history is the agent's input."""
        if self.content and self.prompt is None and row.kind == "message":
            said = row.typed()
            if isinstance(said, MessageEvent) and said.role == "user":
                self.prompt = self.store.message(said.message_hash).content

    def take(self, row: EventRow) -> None:
        """The next event of the episode's history (chunks left out: :data:`NOT_CHUNKS`)."""
        self.note_prompt(row)
        if row.episode_id != self.episode.episode_id:
            self.inherited(row)
        else:
            self.add(row)

    def closable(self) -> list[OpenSpan]:
        """The spans an event can still end: the current model call and its tool calls."""
        return [s for s in (self.call, *self.tools.values()) if s is not None]

    def add(self, row: EventRow) -> None:
        self.first = self.first or row
        self.last = row
        event = row.typed()
        match event:
            case ModelRequest():
                self._request(row, event)
            case ModelResponse():
                self._response(row, event)
            case Usage():
                self._usage(row, event)
            case ToolCall():
                self._tool_call(row, event)
            case ToolResult():
                self._tool_result(row, event)
            case Error():
                self._error(row, event)
            case Cancel():
                self._cancel(row, event)

    def _request(self, row: EventRow, request: ModelRequest) -> None:
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(request.provider),
            "gen_ai.system": provider_name(request.provider),
            "gen_ai.request.model": request.model,
            "gen_ai.conversation.id": self.episode.episode_id,
            OI.OPENINFERENCE_SPAN_KIND: Kind.LLM.value,
            OI.LLM_MODEL_NAME: request.model,
            OI.LLM_PROVIDER: request.provider,
            OI.LLM_INVOCATION_PARAMETERS: json.dumps(request.params, ensure_ascii=False),
            "agentrunner.call_id": request.call_id,
            **request_parameters(request.params),
            **self._where(row),
        }
        if self.content:
            inputs = self.store.message_chain(request.tip_hash)
            attributes.update(chat_input(inputs))
        self.call = OpenSpan(row, row, f"chat {request.model}", Span.SPAN_KIND_CLIENT, attributes)
        self.answered = False
        self.spans.append(self.call)

    def _call_for(self, call_id: str) -> OpenSpan | None:
        """The current chat span, if it is model call ``call_id``'s."""
        call = self.call
        return call if call and call.attributes["agentrunner.call_id"] == call_id else None

    def _usage(self, row: EventRow, usage: Usage) -> None:
        call = self._call_for(usage.call_id)
        if call is not None:
            call.attributes.update(usage_attributes(usage))
            call.close(row)

    def _response(self, row: EventRow, response: ModelResponse) -> None:
        call = self._call_for(response.call_id)
        if call is None:
            return
        call.close(row)
        attributes = call.attributes
        if response.provider_request_id:
            attributes["gen_ai.response.id"] = response.provider_request_id
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        if response.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        attributes["agentrunner.latency_s"] = response.latency_s
        if response.stop_reason == StopReason.INCOMPLETE:
            call.status = Status(
                code=Status.STATUS_CODE_ERROR, message="the stream ended without a finish reason"
            )
        else:
            self.answered, self.tools = True, {}
            call.status = None  # an error retried before this answer is no longer the outcome
        if self.content:
            output = self.store.message(response.message_hash)
            attributes.update(chat_output(output, response.stop_reason))
            if output.content:
                self.answer = output.content

    def _tool_call(self, row: EventRow, call: ToolCall) -> None:
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            OI.OPENINFERENCE_SPAN_KIND: Kind.TOOL.value,
            OI.TOOL_NAME: call.name,
            OI.TOOL_ID: call.call_id,
            **self._where(row),
        }
        if call.parse_error:
            attributes["agentrunner.parse_error"] = call.parse_error
        if self.content:
            attributes.update(tool_content(call.arguments, None))
        span = OpenSpan(row, row, f"execute_tool {call.name}", Span.SPAN_KIND_INTERNAL, attributes)
        self.tools[call.call_id] = span
        self.spans.append(span)

    def _tool_result(self, row: EventRow, result: ToolResult) -> None:
        span = self.tools.get(result.call_id)
        if span is None:
            return
        span.close(row)
        attributes = span.attributes
        attributes["agentrunner.duration_s"] = result.duration_s
        attributes["agentrunner.done"] = result.done
        if result.reward is not None:
            attributes["agentrunner.reward"] = result.reward
        if result.step is not None:
            attributes["agentrunner.step"] = result.step
        if result.error:
            span.status = Status(code=Status.STATUS_CODE_ERROR, message=result.error)
        else:
            span.status = None  # a re-run after a resume replaces an earlier outcome
        if self.content:
            arguments = str(attributes.get("gen_ai.tool.call.arguments", ""))
            attributes.update(tool_content(arguments, result.observation))

    def _open_call(self) -> OpenSpan | None:
        """The model call still waiting for its answer, if any."""
        return self.call if self.call is not None and not self.answered else None

    def _error(self, row: EventRow, error: Error) -> None:
        call = self._open_call()
        if call is None:
            self.agent_events.append(_exception(row, error, self.redactor))
            return
        call.close(row)
        call.events.append(_exception(row, error, self.redactor))
        call.status = Status(
            code=Status.STATUS_CODE_ERROR, message=f"{error.type}: {error.message}"
        )

    def _cancel(self, row: EventRow, cancel: Cancel) -> None:
        target = self._open_call() if cancel.where == "generate" else None
        if cancel.where == "tool":
            unanswered = [s for s in self.tools.values() if s.end is s.start]
            target = unanswered[-1] if unanswered else None
        if target is None:
            return
        target.close(row)
        target.status = _cancelled(cancel)

    def _where(self, row: EventRow) -> Attributes:
        return {
            "agentrunner.episode_id": row.episode_id,
            "agentrunner.seq": row.seq,
            "agentrunner.turn": row.turn,
            "agentrunner.attempt": row.attempt,
        }


def _agent_status(episode: EpisodeSummary, walk: Walk) -> Status | None:
    match episode.status:
        case EpisodeStatus.COMPLETED:
            return Status(code=Status.STATUS_CODE_OK)
        case EpisodeStatus.CANCELLED:
            return Status(code=Status.STATUS_CODE_ERROR, message="cancelled")
        case EpisodeStatus.FAILED:
            errors = [*walk.agent_events, *(e for s in walk.spans for e in s.events)]
            last = max(errors, key=lambda e: e.time_unix_nano, default=None)
            message = f"failed: {episode.stop_reason or 'error'}"
            if last is not None:
                found = {kv.key: kv.value.string_value for kv in last.attributes}
                message += f" ({found.get('exception.type')}: {found.get('exception.message')})"
            return Status(code=Status.STATUS_CODE_ERROR, message=message)
    return None


def _agent_name(episode: EpisodeSummary) -> str:
    """agentrunner, or for an imported or recorded session the agent that wrote it."""
    env = episode.env_spec
    agent = env.agent if isinstance(env, ImportedSpec | RecordedSpec) else None
    return agent or AGENT_NAME


def _agent_attributes(store: StoreBackend, episode: EpisodeSummary, walk: Walk) -> Attributes:
    model = episode.model_spec
    ancestors = store.ancestors(episode.episode_id)
    group = episode.fork_group
    attributes: Attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": _agent_name(episode),
        "gen_ai.agent.id": episode.episode_id,
        "gen_ai.conversation.id": episode.episode_id,
        "gen_ai.provider.name": provider_name(model.provider or "") or None,
        "gen_ai.request.model": model.model or (model.spec if model.named else None),
        OI.OPENINFERENCE_SPAN_KIND: Kind.AGENT.value,
        OI.AGENT_NAME: _agent_name(episode),
        OI.SESSION_ID: ancestors[-1] if ancestors else episode.episode_id,
        "agentrunner.episode_id": episode.episode_id,
        "agentrunner.kind": episode.env_spec.kind,
        "agentrunner.task_id": episode.task_id,
        "agentrunner.seed": episode.seed,
        "agentrunner.status": str(episode.status),
        "agentrunner.stop_reason": episode.stop_reason,
        "agentrunner.turns": episode.turns,
        "agentrunner.attempts": episode.attempt,
        "agentrunner.total_reward": episode.total_reward,
        "agentrunner.parent_episode_id": episode.parent_episode_id,
        "agentrunner.fork_seq": episode.fork_seq,
        "agentrunner.fork_group.id": group.group_id if group else None,
        "agentrunner.fork_group.candidate": group.candidate if group else None,
        "agentrunner.fork_group.sample": group.sample if group else None,
    }
    if walk.content:
        attributes[OI.INPUT_VALUE] = walk.prompt
        attributes[OI.OUTPUT_VALUE] = walk.answer
    return attributes


def _spawning_span(store: StoreBackend, spawner: str, call_id: str | None) -> tuple[str, int]:
    """The span that started a sub-agent: its spawner's tool call ``call_id`` (the first
    that carries that id), else the spawner's agent span."""
    if call_id is not None:
        for row in store.iter_events(spawner, kinds=["tool.call"]):
            if row.typed().call_id == call_id:  # type: ignore[union-attr]
                return row.episode_id, row.seq
    return spawner, 0


def _links(
    store: StoreBackend, episode: EpisodeSummary, walk: Walk, spawners: Spawners
) -> list[Span.Link]:
    """The agent span's links: to the span at the fork point (a fork), to the tool call that
    started it (a sub-agent)."""
    targets: list[tuple[str, int, str]] = []
    if episode.parent_episode_id is not None:
        owner, seq = walk.fork_point or (episode.parent_episode_id, 0)
        targets.append((owner, seq, "fork_of"))
    spawner = spawners.get(episode.episode_id)
    if spawner is not None:
        with contextlib.suppress(EpisodeNotFoundError):
            owner, seq = _spawning_span(store, store.resolve(spawner[0]), spawner[1])
            targets.append((owner, seq, "spawned_by"))
    return [
        Span.Link(
            trace_id=trace_id(owner),
            span_id=span_id(owner, seq),
            attributes=key_values({"agentrunner.link": why, "agentrunner.episode_id": owner}),
        )
        for owner, seq, why in targets
    ]


def _span(episode_id: str, built: OpenSpan, parent: bytes, redactor: Redactor) -> Span:
    return Span(
        trace_id=trace_id(episode_id),
        span_id=span_id(episode_id, built.start.seq),
        parent_span_id=parent,
        name=built.name,
        kind=built.kind,
        start_time_unix_nano=nanos(built.start.ts),
        end_time_unix_nano=nanos(built.end.ts),
        attributes=key_values(built.attributes, redactor),
        events=built.events,
        status=built.status,
    )


def episode_spans(
    store: StoreBackend, episode_id: str, *, content: bool, spawners: Spawners | None = None
) -> list[Span]:
    """An episode's trace: its agent span first, then a span per model call and tool call,
    read from one state of the store (empty when the episode has no event of its own yet).
    ``content``: write the messages, tool arguments and results. ``spawners``: every
    sub-agent's spawner (:func:`spawners_of`), when the caller exports many (read here
    otherwise)."""
    with store.read_snapshot():
        episode = store.episode(episode_id)
        walk = Walk(store, episode, content)
        for row in store.iter_events(episode.episode_id, kinds=NOT_CHUNKS):
            walk.take(row)
        if walk.first is None:
            return []
        found = spawners_of(store) if spawners is None else spawners
        root = agent_span(store, episode, walk, found)
        return [root, *(child_span(walk, built) for built in walk.spans)]


def agent_span(
    store: StoreBackend, episode: EpisodeSummary, walk: Walk, spawners: Spawners
) -> Span:
    """The episode's agent span, from the events ``walk`` has taken (at least one of its
    own); ``episode``: its summary now (its status and totals)."""
    assert walk.first is not None and walk.last is not None
    agent = OpenSpan(
        walk.first,
        walk.last,
        f"invoke_agent {_agent_name(episode)}",
        Span.SPAN_KIND_INTERNAL,
        _agent_attributes(store, episode, walk),
        walk.agent_events,
        _agent_status(episode, walk),
    )
    root = _span(episode.episode_id, agent, b"", walk.redactor)
    root.span_id = span_id(episode.episode_id, 0)
    root.links.extend(_links(store, episode, walk, spawners))
    return root


def child_span(walk: Walk, built: OpenSpan) -> Span:
    """A model call's or tool call's span, as its events made it so far."""
    episode_id = walk.episode.episode_id
    return _span(episode_id, built, span_id(episode_id, 0), walk.redactor)


def spawners_of(store: StoreBackend) -> dict[str, tuple[str, str | None]]:
    """Every sub-agent episode's spawner: the episode that started it and the tool call that
    did (None when unknown), as the ATIF export finds them."""
    return {
        child.episode_id: (parent, call)
        for parent, children in sub_agents(store).items()
        for call, child in children
    }
