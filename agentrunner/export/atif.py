"""ATIF export: an episode's full history as one Agent Trajectory Interchange Format document.

ATIF (Harbor framework, RFC 0001) is the trajectory format other agent tools read. This
writes schema version ``ATIF-v1.7`` (what Harbor's own converters write), one JSON document
per episode, read in one pass over the episode's events through the one fold of the log
(:class:`agentrunner.history.History`; chunks are left out, responses hold what streamed).

Steps, in history order; a fork's history includes what it inherits, those steps marked
``is_copied_context: true``:

- a ``message`` event of role system / user (system prompt, task prompt, continuation, a
  fork's injected message): a ``system`` / ``user`` step;
- a model's answer (a complete ``model.response``): an ``agent`` step with ``message``,
  ``reasoning_content``, ``tool_calls`` (``arguments`` the parsed object, ``{}`` when they do
  not parse), ``model_name`` (the model that answered), ``reasoning_effort`` (when the request
  asked for one), ``metrics`` and ``llm_call_count``: the model calls that led to the answer
  (a broken stream retried on resume is one more; their usage is summed);
- an assistant message a fork put in the model's place (a ``message`` of reason ``edit``):
  an ``agent`` step with ``llm_call_count: 0``, and so no ``metrics``, no
  ``reasoning_content``;
- the results of an agent step's tool calls: its ``observation.results``, each with the
  ``source_call_id`` of its call and the observation exactly as the model saw it;
- model calls after the last answer that never completed (the stream broke and the episode
  stopped): a last ``agent`` step with the partial message and their usage, marked
  ``incomplete``.

Usage: ``prompt_tokens`` = input tokens (cached ones included), ``cached_tokens`` = cache
reads, ``completion_tokens`` = output tokens, ``cost_usd`` when known; ``metrics.extra``
holds ``cache_write_tokens`` and ``reasoning_tokens``. ``final_metrics`` holds the totals
over all steps (``extra``: ``total_cache_write_tokens``, ``total_reasoning_tokens``).
Tool definitions (OpenAI function shape) are ``agent.tool_definitions``.

What ATIF has no field for is under ``extra["agentrunner"]``, with these keys:

- trajectory: ``episode_id``, ``task_id``, ``seed``, ``created_at``, ``status``,
  ``stop_reason``, ``total_reward``, ``turns``, ``attempts``, ``parent_episode_id``,
  ``fork_seq``, ``ancestors`` (parent first), ``fork_group`` (``group_id``, ``candidate``,
  ``sample``, ``proposal``; null outside a fan-out), ``batches`` (batch ids),
  ``verifications`` (newest first: ``verifier``, ``score``, ``passed``, ``details``,
  ``created_at``), and ``resumes`` / ``cancels`` / ``errors``: those events' fields with
  ``episode_id``, ``seq``, ``turn``, ``attempt`` and ``ts``;
- agent: ``model`` and ``env`` (the specs the episode ran with), ``config`` (the runner's);
- every step: ``episode_id`` (the episode whose log holds it: an ancestor for copied steps),
  ``seq``, ``turn``, ``attempt``; a step made from a ``message`` event: ``reason``
  (``system``, ``prompt``, ``continue``, ``fork``, ``edit``); a model's step: ``stop_reason``
  and ``calls`` (per model call: ``call_id``, ``seq``, ``stop_reason``,
  ``provider_request_id``, ``latency_s``); when there is one: ``refusal``, ``opaque``
  (provider-opaque parts, verbatim), ``reasoning`` (of an edited message), ``incomplete``;
- tool call, when its arguments do not parse: ``raw_arguments`` (the string the model
  wrote) and ``parse_error``;
- observation result: ``seq``, ``reward``, ``done``, ``truncated``, ``error``, ``step`` (the
  environment step; null when the environment did not run the call) and ``duration_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentrunner import __version__
from agentrunner.errors import UsageError
from agentrunner.events import (
    Cancel,
    EpisodeStart,
    Error,
    MessageEvent,
    ModelRequest,
    ModelResponse,
    Resume,
    Usage,
)
from agentrunner.export.chat import tool_schemas
from agentrunner.export.writer import RecordableRows, check_output, write_jsonl
from agentrunner.history import NOT_CHUNKS, History, ToolUse
from agentrunner.store import EpisodeSummary, EventRow, TraceStore
from agentrunner.types import AgentToolCall, Message, ToolSpec

SCHEMA_VERSION = "ATIF-v1.7"
AGENT_NAME = "agentrunner"
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
class _Said:
    """A system or user message entering the history."""

    row: EventRow
    event: MessageEvent


@dataclass
class _Answer:
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
class _Read:
    """What one pass over an episode's events gives."""

    history: History = field(default_factory=History)
    entries: list[_Said | _Answer] = field(default_factory=list)
    tools_hashes: list[str] = field(default_factory=list)
    log: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"resumes": [], "cancels": [], "errors": []}
    )


def _where(row: EventRow) -> dict[str, Any]:
    return {"episode_id": row.episode_id, "seq": row.seq, "turn": row.turn, "attempt": row.attempt}


def _read(store: TraceStore, episode_id: str) -> _Read:
    read = _Read()
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
                if event.stop_reason != "incomplete":
                    uses = read.history.current  # the fold's new record of this message's calls
                    read.entries.append(_Answer(row, event.message_hash, pending, uses, request))
                    pending = []
            case Usage():
                _add_usage(read.entries, pending, row, event)
            case MessageEvent(role="assistant"):
                uses = read.history.current
                read.entries.append(_Answer(row, event.message_hash, [], uses, edit=event))
            case MessageEvent():
                read.entries.append(_Said(row, event))
            case Resume() | Cancel() | Error():
                fields = event.model_dump(mode="json", exclude={"kind"})
                read.log[f"{row.kind}s"].append({**_where(row), "ts": row.ts, **fields})
    if pending:  # calls that never completed an answer: the stream broke, the episode stopped
        last = next((c for c in reversed(pending) if c.response is not None), pending[-1])
        digest = last.response.message_hash if last.response is not None else None
        read.entries.append(_Answer(last.row, digest, pending, {}, request, incomplete=True))
    return read


def _add_usage(
    entries: list[_Said | _Answer], pending: list[_Call], row: EventRow, usage: Usage
) -> None:
    """Give a usage event to its model call (recorded just before it)."""
    last = entries[-1].calls if entries and isinstance(entries[-1], _Answer) else []
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


def _said_step(said: _Said, message: Message) -> dict[str, Any]:
    step: dict[str, Any] = {
        "timestamp": said.row.ts,
        "source": "system" if said.event.role == "system" else "user",
        "message": message.content,
        "extra": {NS: {**_where(said.row), "reason": said.event.reason}},
    }
    if _marks(said.event).get("is_copied_context") is True:
        step["is_copied_context"] = True
    return step


def _answer_step(answer: _Answer, message: Message) -> dict[str, Any]:
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
    results = _results(message.tool_calls, answer.uses)
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


def _results(calls: Sequence[AgentToolCall], uses: dict[str, ToolUse]) -> list[dict[str, Any]]:
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
        out.append(
            {"source_call_id": call.call_id, "content": result.observation, "extra": {NS: extra}}
        )
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


# ------------------------------------------------------------------ trajectory


def _atif_header(episode: EpisodeSummary) -> dict[str, Any]:
    """What an imported ATIF trajectory's header said (its ids, notes), for an episode
    imported from one (empty for any other, forks of one included)."""
    env = episode.env
    atif = env.get("kind") == "import" and env.get("format") == "atif"
    header = env.get("extra") if atif and episode.parent_episode_id is None else None
    return header if isinstance(header, dict) else {}


def _identity(episode: EpisodeSummary, start: EpisodeStart | None) -> tuple[str, str, str, str]:
    """The trajectory's session and trajectory ids and its agent's name and version: the
    episode's own, or for an imported session the ones its source gave (so that an ATIF file
    imported and exported again keeps its ids, and a Claude Code session says Claude Code)."""
    own = (episode.episode_id, episode.episode_id)
    env = episode.env
    if env.get("kind") != "import" or episode.parent_episode_id is not None:
        return (*own, AGENT_NAME, start.version if start else __version__)
    source = _atif_header(episode)
    if isinstance(source.get("session_id"), str):
        tid = source.get("trajectory_id")
        ids = (source["session_id"], tid if isinstance(tid, str) else episode.episode_id)
    else:
        ids = (str(env.get("session_id") or episode.episode_id), episode.episode_id)
    return (*ids, str(env.get("agent") or AGENT_NAME), str(env.get("agent_version") or ""))


def _tool_definitions(store: TraceStore, hashes: list[str]) -> list[dict[str, Any]]:
    """Every tool the episode's requests offered (the first definition of each name)."""
    tools: dict[str, ToolSpec] = {}
    for digest in hashes:
        for tool in store.tools(digest):
            tools.setdefault(tool.name, tool)
    return tool_schemas(list(tools.values()))


def _trajectory(store: TraceStore, episode: EpisodeSummary) -> dict[str, Any] | None:
    episode_id = episode.episode_id
    read = _read(store, episode_id)
    hashes = [
        e.event.message_hash if isinstance(e, _Said) else e.message_hash for e in read.entries
    ]
    found = store.messages(h for h in hashes if h is not None)
    steps: list[dict[str, Any]] = []
    for step_id, (entry, digest) in enumerate(zip(read.entries, hashes, strict=True), 1):
        message = Message(role="assistant")
        if digest is not None:
            message = found.get(digest) or store.message(digest)
        step = (
            _said_step(entry, message) if isinstance(entry, _Said) else _answer_step(entry, message)
        )
        extra = step.pop("extra")
        if entry.row.episode_id != episode_id:  # inherited from an ancestor
            step["is_copied_context"] = True
        steps.append({"step_id": step_id, **step, "extra": extra})
    if not steps:
        return None
    start = read.history.start
    session_id, trajectory_id, name, version = _identity(episode, start)
    agent: dict[str, Any] = {"name": name, "version": version}
    model_name = episode.model.get("model") or episode.model.get("spec")
    if isinstance(model_name, str) and model_name:
        agent["model_name"] = model_name
    tools = _tool_definitions(store, read.tools_hashes)
    if tools:
        agent["tool_definitions"] = tools
    agent["extra"] = {
        NS: {"model": episode.model, "env": episode.env, "config": start.config if start else {}}
    }
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": trajectory_id,
        "agent": agent,
        "steps": steps,
    }
    copied = sum(1 for s in steps if s.get("is_copied_context"))
    notes = _atif_header(episode).get("notes")
    if isinstance(notes, str):
        doc["notes"] = notes
    if episode.parent_episode_id is not None:
        doc["notes"] = (
            f"A fork of episode {episode.parent_episode_id} at seq {episode.fork_seq}: its "
            f"first {copied} step(s) are the history it inherits (is_copied_context)."
        )
    totals = read.history.totals
    final: dict[str, Any] = {
        "total_prompt_tokens": totals.tokens["input"],
        "total_completion_tokens": totals.tokens["output"],
        "total_cached_tokens": totals.tokens["cache_read"],
    }
    if totals.cost_usd is not None:
        final["total_cost_usd"] = totals.cost_usd
    final["total_steps"] = len(steps)
    final["extra"] = {
        "total_cache_write_tokens": totals.tokens["cache_write"],
        "total_reasoning_tokens": totals.tokens["reasoning"],
    }
    doc["final_metrics"] = final
    doc["extra"] = {NS: _episode_extra(store, episode, read)}
    return doc


def _episode_extra(store: TraceStore, episode: EpisodeSummary, read: _Read) -> dict[str, Any]:
    episode_id = episode.episode_id
    return {
        "episode_id": episode_id,
        "task_id": episode.task_id,
        "seed": episode.seed,
        "created_at": episode.created_at,
        "status": str(episode.status),
        "stop_reason": episode.stop_reason,
        "total_reward": episode.total_reward,
        "turns": episode.turns,
        "attempts": episode.attempt,
        "parent_episode_id": episode.parent_episode_id,
        "fork_seq": episode.fork_seq,
        "ancestors": store.ancestors(episode_id),
        "fork_group": episode.fork_group.to_dict() if episode.fork_group else None,
        "batches": store.batches_of([episode_id]),
        "verifications": [
            {k: v for k, v in asdict(result).items() if k not in ("id", "episode_id")}
            for result in store.verifications(episode_id)
        ],
        **read.log,
    }


def atif_trajectory(store: TraceStore, episode_id: str) -> dict[str, Any] | None:
    """An episode's full history as an ATIF trajectory (a JSON-ready dict), read from one
    state of the store; None when it has no step yet (ATIF needs at least one)."""
    with store.read_snapshot():
        return _trajectory(store, store.episode(episode_id))


def atif_target(output: Path | None, directory: bool | None = None) -> bool:
    """Whether ``output`` is a directory to write ``<episode_id>.json`` files into (asked
    for with ``directory``, or an existing one) rather than one file; checked before
    anything is read."""
    if output is None:
        if directory:
            raise UsageError("a directory output needs a path: -o DIR/")
        return False
    if directory is None:
        directory = output.is_dir()
    if not directory:
        check_output(output)
    elif output.exists() and not output.is_dir():
        raise UsageError(f"{output} is not a directory: give -o a directory or a file name")
    return directory


def write_atif(
    store: TraceStore, episodes: Sequence[EpisodeSummary], output: Path | None, *, directory: bool
) -> tuple[int, list[str]]:
    """Write one trajectory per episode: to ``output`` (a file, or stdout when None; one
    episode only) or into the directory ``output`` as ``<episode_id>.json``. Returns how many
    were written and notes on the episodes left out."""
    if not directory and len(episodes) > 1:
        where = "stdout" if output is None else f"one file ({output})"
        raise UsageError(
            f"{len(episodes)} episodes selected, but ATIF is one JSON document per trajectory "
            f"and {where} holds one: give -o DIR/ to write <episode_id>.json for each, or "
            "select one episode"
        )
    if directory:
        assert output is not None
        try:
            output.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create directory {output}: {exc.strerror or exc}") from None
    written, notes, recordable = 0, [], RecordableRows()
    for episode in episodes:
        doc = atif_trajectory(store, episode.episode_id)
        if doc is None:
            notes.append(f"episode {episode.episode_id} has no steps yet: left out")
            continue
        path = output / f"{episode.episode_id}.json" if directory and output else output
        write_jsonl(recordable.rows([doc]), path)
        written += 1
    return written, [*notes, *recordable.notes()]
