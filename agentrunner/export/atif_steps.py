"""ATIF export, steps: one episode's events read in one pass (:func:`read_episode`) and
each entry of its history made into an ATIF step (:func:`said_step`, :func:`answer_step`);
what the steps are is described in :mod:`agentrunner.export.atif`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.readers.history import NOT_CHUNKS, History, ToolUse
from agentrunner.store import EventRow
from agentrunner.values.events import (
    Cancel,
    EpisodeEnd,
    Error,
    MessageEvent,
    ModelRequest,
    ModelResponse,
    Resume,
    StopReason,
    ToolResult,
    Usage,
)
from agentrunner.values.types import AgentToolCall, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

NS = "agentrunner"
"""The key of agentrunner's own data in every ``extra``."""


@dataclass
class _Call:
    """One model call that answered (fully or not), and what it cost."""

    row: EventRow  # its response, else its usage
    call_id: str
    response: ModelResponse | None = None
    usage: Usage | None = None


@dataclass
class Said:
    """A system or user message entering the history."""

    row: EventRow
    event: MessageEvent


@dataclass
class Answer:
    """An assistant message: a model's answer (and the calls that led to it), or an edit a
    fork put in its place. ``uses`` is the fold's record of its tool calls and results."""

    row: EventRow
    message_hash: str | None
    calls: list[_Call]
    uses: dict[str, ToolUse]
    request: ModelRequest | None = None
    edit: MessageEvent | None = None
    incomplete: bool = False


@dataclass
class Read:
    """What one pass over an episode's events gives."""

    history: History = field(default_factory=History)
    entries: list[Said | Answer] = field(default_factory=list)
    tools_hashes: list[str] = field(default_factory=list)
    log: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"resumes": [], "cancels": [], "errors": []}
    )
    judged: bool = False
    """The episode's own events hold a reward (an ``episode.end``, a tool result with one);
    else its reward is unknown (an imported session, a run with no test), never 0."""


def _where(row: EventRow) -> dict[str, Any]:
    return {"episode_id": row.episode_id, "seq": row.seq, "turn": row.turn, "attempt": row.attempt}


def read_episode(store: StoreBackend, episode_id: str) -> Read:
    read = Read()
    pending: list[_Call] = []  # model calls since the last answer
    request: ModelRequest | None = None
    for row in store.iter_events(episode_id, kinds=NOT_CHUNKS):
        read.history.add(row)
        event = row.typed()
        match event:
            case ModelRequest():
                request = event
                if event.tools_hash not in read.tools_hashes:
                    read.tools_hashes.append(event.tools_hash)
            case ModelResponse():
                pending.append(_Call(row, event.call_id, response=event))
                if event.stop_reason != StopReason.INCOMPLETE:
                    uses = read.history.current  # the fold's new record of this message's calls
                    read.entries.append(Answer(row, event.message_hash, pending, uses, request))
                    pending = []
            case Usage():
                _add_usage(read.entries, pending, row, event)
            case MessageEvent(role="assistant"):
                uses = read.history.current
                read.entries.append(Answer(row, event.message_hash, [], uses, edit=event))
            case MessageEvent():
                read.entries.append(Said(row, event))
            case ToolResult(reward=reward) if reward is not None and row.episode_id == episode_id:
                read.judged = True
            case EpisodeEnd() if row.episode_id == episode_id:
                read.judged = True
            case Resume() | Cancel() | Error():
                fields = event.model_dump(mode="json", exclude={"kind"})
                read.log[f"{row.kind}s"].append({**_where(row), "ts": row.ts, **fields})
    if pending:  # calls that never completed an answer: the stream broke, the episode stopped
        last = next((c for c in reversed(pending) if c.response is not None), pending[-1])
        digest = last.response.message_hash if last.response is not None else None
        read.entries.append(Answer(last.row, digest, pending, {}, request, incomplete=True))
    return read


def _add_usage(
    entries: list[Said | Answer], pending: list[_Call], row: EventRow, usage: Usage
) -> None:
    """Give a usage event to its model call (recorded just before it)."""
    last = entries[-1].calls if entries and isinstance(entries[-1], Answer) else []
    for call in reversed([*last, *pending]):
        if call.call_id == usage.call_id and call.usage is None:
            call.usage = usage
            return
    pending.append(_Call(row, usage.call_id, usage=usage))


# ------------------------------------------------------------------ steps


def _marks(event: MessageEvent | ModelResponse | None) -> dict[str, Any]:
    """What an imported trajectory said of a step that the log keeps only for ATIF to give
    back (``source_marks``: ``is_copied_context``, ``llm_call_count``)."""
    marks = (event.model_extra or {}).get("source_marks") if event is not None else None
    return marks if isinstance(marks, dict) else {}


def said_step(said: Said, message: Message) -> dict[str, Any]:
    step: dict[str, Any] = {
        "timestamp": said.row.ts,
        "source": "system" if said.event.role == "system" else "user",
        "message": message.content,
        "extra": {NS: {**_where(said.row), "reason": said.event.reason}},
    }
    if _marks(said.event).get("is_copied_context") is True:
        step["is_copied_context"] = True
    return step


def answer_step(
    answer: Answer, message: Message, links: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """An assistant message as an agent step; ``links``: the sub-agent references of the
    results of the calls that started sub-agents, by call id."""
    step: dict[str, Any] = {"timestamp": answer.row.ts, "source": "agent"}
    own: dict[str, Any] = _where(answer.row)
    responses = [c.response for c in answer.calls if c.response is not None]
    marks = _marks(responses[-1] if responses else None)
    count = marks.get("llm_call_count", len(answer.calls))
    count = count if isinstance(count, int) and not isinstance(count, bool) else len(answer.calls)
    if answer.edit is not None:
        own["reason"] = answer.edit.reason
    else:
        own["stop_reason"] = responses[-1].stop_reason if responses else None
        own["calls"] = [_call(c) for c in answer.calls]
    if answer.edit is None and count > 0:  # agent-only fields: a step a model made
        request = answer.request
        name = responses[-1].model if responses else None
        if not name and request is not None:
            name = request.model
        if name:
            step["model_name"] = name
        effort = request.params.get("reasoning_effort") if request is not None else None
        if isinstance(effort, str | int | float) and not isinstance(effort, bool):
            step["reasoning_effort"] = effort
    step["message"] = message.content
    if message.reasoning:
        if count > 0:
            step["reasoning_content"] = message.reasoning
        else:  # ATIF: a step no model made has no reasoning_content
            own["reasoning"] = message.reasoning
    if message.tool_calls:
        step["tool_calls"] = [_tool_call(c, answer.uses.get(c.call_id)) for c in message.tool_calls]
    results = _results(message.tool_calls, answer.uses, links)
    if results:
        step["observation"] = {"results": results}
    metrics = _metrics([c.usage for c in answer.calls if c.usage is not None])
    if metrics is not None and count > 0:
        step["metrics"] = metrics
    step["llm_call_count"] = count
    if marks.get("is_copied_context") is True:
        step["is_copied_context"] = True
    if message.refusal:
        own["refusal"] = message.refusal
    if message.opaque:
        own["opaque"] = [part.model_dump(mode="json") for part in message.opaque]
    if answer.incomplete:
        own["incomplete"] = True
    step["extra"] = {NS: own}
    return step


def _call(call: _Call) -> dict[str, Any]:
    response = call.response
    return {
        "call_id": call.call_id,
        "seq": call.row.seq,
        "stop_reason": response.stop_reason if response is not None else None,
        "provider_request_id": response.provider_request_id if response is not None else None,
        "latency_s": response.latency_s if response is not None else None,
    }


def _tool_call(call: AgentToolCall, use: ToolUse | None) -> dict[str, Any]:
    """A tool call as the model wrote it (the recorded ``tool.call`` says whether its
    arguments parsed; a call the runner never recorded is parsed here the same way)."""
    parsed: dict[str, Any] | None
    if use is not None:
        parsed, problem = use.call.parsed, use.call.parse_error
    else:
        parsed, problem = call.checked_arguments()
    out: dict[str, Any] = {
        "tool_call_id": call.call_id,
        "function_name": call.name,
        "arguments": parsed if parsed is not None else {},
    }
    if parsed is None:
        out["extra"] = {NS: {"raw_arguments": call.arguments, "parse_error": problem}}
    return out


def _results(
    calls: Sequence[AgentToolCall],
    uses: dict[str, ToolUse],
    links: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for call in calls:
        use = uses.get(call.call_id)
        if use is None or use.result is None or call.call_id in seen:
            continue
        seen.add(call.call_id)
        result = use.result
        extra = {
            "seq": use.result_seq,
            "reward": result.reward,
            "done": result.done,
            "truncated": result.truncated,
            "error": result.error,
            "step": result.step,
            "duration_s": result.duration_s,
        }
        out.append({"source_call_id": call.call_id, "content": result.observation})
        if call.call_id in links:
            out[-1]["subagent_trajectory_ref"] = links[call.call_id]
        out[-1]["extra"] = {NS: extra}
    return out


def _metrics(usages: list[Usage]) -> dict[str, Any] | None:
    usages = [u for u in usages if u.input_tokens is not None or u.output_tokens is not None]
    if not usages:  # none, or only calls whose usage is unknown: no metrics, never zeros
        return None
    out: dict[str, Any] = {
        "prompt_tokens": sum(u.input_tokens or 0 for u in usages),
        "completion_tokens": sum(u.output_tokens or 0 for u in usages),
        "cached_tokens": sum(u.cache_read_tokens or 0 for u in usages),
    }
    costs = [u.cost_usd for u in usages if u.cost_usd is not None]
    if costs:
        out["cost_usd"] = sum(costs)
    out["extra"] = {
        "cache_write_tokens": sum(u.cache_write_tokens or 0 for u in usages),
        "reasoning_tokens": sum(u.reasoning_tokens or 0 for u in usages),
    }
    return out
