"""Read a conversation the OpenHands SDK persisted (``base_state.json`` and ``events/``: see
:mod:`.openhands_files`) into import items.

An event is JSON with ``kind``, ``id``, ``timestamp`` (local time, no zone: read as UTC) and
``source`` (``agent``, ``user``, ``environment``). ``SystemPromptEvent`` holds the system
prompt (``system_prompt``, ``dynamic_context``) and the tools' names and descriptions (not
their parameters). ``MessageEvent`` holds an ``llm_message`` (``role``, ``content`` blocks,
``reasoning_content``, ``thinking_blocks``); an agent's is a model answer, named by its
``llm_response_id``. ``ActionEvent`` is one tool call of a model answer (``tool_call``: ``id``,
``name``, ``arguments``; ``llm_response_id``); an answer with several tool calls is several
action events in a row, the first holding its text (``thought``) and reasoning.
``ObservationEvent`` is a tool's result (``observation.content``, ``observation.is_error``),
``AgentErrorEvent`` a call the agent could not run (``error``), ``UserRejectObservation`` one
the user refused (``rejection_reason``); each names its ``tool_call_id``.
``ConversationErrorEvent`` (``code``, ``detail``) is a run that broke off.

Mapping. The conversation is an episode: the system prompt a system :class:`Said`, a user's
message a user :class:`Said`, each model answer one model call (``Ask``, its reasoning, text
and tool arguments as ``Piece``s, then ``Answer`` with a tool call per action event), each
result :class:`Observed`, a conversation error a :class:`Failure`. Usage and latency come from
the state's metrics for the answer's ``response_id`` (``prompt_tokens`` counts the cached
ones, ``completion_tokens`` the reasoning ones, as the recorder counts); an answer they do not
name has unknown usage. Every other event (state updates, pauses, condensations, hooks,
security analyses) is kept raw (:class:`Unmapped`). A conversation grows by new event files, so
``--follow`` re-reads it as it changes and imports the events that are new.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict
from agentrunner.imports.files import session_id
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Emit,
    Failure,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
    text_of,
)
from agentrunner.imports.openhands_files import (
    STATE,
    change_mark,
    conversation_of,
    conversation_records,
    looks_like_state,
)
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage

NAME = "openhands"
APPENDS = False
AGENT = "openhands"
RESULTS = ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")

__all__ = ["APPENDS", "NAME", "change_mark", "companions", "parser", "records", "sniff"]


def sniff(path: Path, head: str) -> bool:
    state = conversation_of(path)
    if state is None:
        return False
    if path.name != STATE:  # an event file: its conversation's state says
        try:
            with state.open(encoding="utf-8", errors="replace") as f:
                head = f.read(len(head) or 65536)
        except OSError:
            return False
    return looks_like_state(head)


def companions(path: Path) -> list[Path]:
    """The file that stands for ``path``'s conversation: its ``base_state.json``."""
    state = conversation_of(path)
    return [state] if state is not None else [path]


def records(path: Path, *, live: bool) -> list[Any]:
    state = conversation_of(path)
    if state is None:
        raise ValueError(f"not a conversation OpenHands persisted (no {STATE} beside events/)")
    return conversation_records(state, live=live)


def parser(path: Path) -> OpenHandsParser:
    return OpenHandsParser(conversation_of(path) or path)


def usage_of(metrics: dict[str, Any] | None) -> AgentUsage:
    """An answer's usage from its ``token_usages`` entry (unknown without one)."""
    usage = as_dict((metrics or {}).get("usage"))
    if _number(usage.get("prompt_tokens")) is None:
        return AgentUsage.unknown()

    def count(key: str) -> int:
        value = _number(usage.get(key))
        return int(value) if value is not None else 0

    return AgentUsage(
        input_tokens=count("prompt_tokens"),
        output_tokens=count("completion_tokens"),
        cache_read_tokens=count("cache_read_tokens"),
        cache_write_tokens=count("cache_write_tokens"),
        reasoning_tokens=count("reasoning_tokens"),
    )


class OpenHandsParser:
    """A conversation's records, in order, into the items of its one session. The action
    events of one answer are held until a record of another comes (or the records end)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.open: list[dict[str, Any]] = []
        """The records of the answer being read (its action events so far)."""
        self.last_ts: str | None = None

    def feed(self, index: int, record: Any) -> list[Emit]:
        if "state" in record:
            return [("", Begin(self._source(as_dict(record["state"]))))]
        event = as_dict(record.get("event"))
        response = event.get("llm_response_id")
        if self.open and (event.get("kind") != "ActionEvent" or response != self._response()):
            out = self._close()
        else:
            out = []
        if event.get("kind") == "ActionEvent":
            self.open.append(record)
            return out
        out.extend(("", item) for item in self._items(record, event))
        self.last_ts = _text(event.get("timestamp")) or self.last_ts
        return out

    def finish(self) -> list[Emit]:
        return self._close() if self.open else []

    def _response(self) -> Any:
        return as_dict(self.open[0].get("event")).get("llm_response_id")

    def _source(self, state: dict[str, Any]) -> Source:
        conversation = str(state.get("id") or self.path.parent.name)
        llm = as_dict(as_dict(state.get("agent")).get("llm"))
        model = llm.get("model")
        workspace = as_dict(state.get("workspace")).get("working_dir")
        extra = {"agent_kind": as_dict(state.get("agent")).get("kind")}
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(conversation, self.path),
            agent=AGENT,
            model=model if isinstance(model, str) else None,
            cwd=workspace if isinstance(workspace, str) else None,
            title=_text(as_dict(state.get("tags")).get("title")),
            extra={k: v for k, v in extra.items() if v is not None},
        )

    def _items(self, record: dict[str, Any], event: dict[str, Any]) -> list[Item]:
        kind, ts = event.get("kind"), _text(event.get("timestamp"))
        if kind == "SystemPromptEvent":
            parts = [text_of(event.get("system_prompt")), text_of(event.get("dynamic_context"))]
            return [Said("system", "\n\n".join(p for p in parts if p), ts)]
        if kind == "MessageEvent" and event.get("source") == "user":
            message = as_dict(event.get("llm_message"))
            parts = [text_of(message.get("content")), text_of(event.get("extended_content"))]
            return [Said("user", "\n\n".join(p for p in parts if p), ts)]
        if kind == "MessageEvent" and event.get("source") == "agent":
            return self._call([record])
        if kind in RESULTS:
            return [_result(event)]
        if kind == "ConversationErrorEvent":
            detail = str(event.get("detail") or "the conversation broke off")
            return [Failure("openhands", str(event.get("code") or "error"), detail, ts)]
        why = f"OpenHands' {kind!r} event (from {event.get('source')!r}): no event kind for it"
        return [Unmapped(event, why, ts)]

    def _close(self) -> list[Emit]:
        held, self.open = self.open, []
        out: list[Emit] = [("", item) for item in self._call(held)]
        self.last_ts = _text(as_dict(held[-1].get("event")).get("timestamp")) or self.last_ts
        return out

    def _call(self, answer: list[dict[str, Any]]) -> list[Item]:
        """One model answer: its message event, or its action events."""
        first = as_dict(answer[0].get("event"))
        metrics = answer[0].get("metrics")
        call = str(first.get("llm_response_id") or first.get("id"))
        message = as_dict(first.get("llm_message"))
        text = text_of(first.get("thought") or message.get("content"))
        reasoning = _reasoning(first) or _reasoning(message)
        calls = [_tool_call(as_dict(r.get("event"))) for r in answer if "tool_call" in r["event"]]
        model = as_dict(metrics).get("model") or as_dict(as_dict(metrics).get("usage")).get("model")
        turn = AgentTurn(
            message=text,
            reasoning=reasoning or None,
            tool_calls=tuple(calls),
            usage=usage_of(metrics),
            model=model if isinstance(model, str) else None,
        )
        pieces: list[Item] = []
        if reasoning:
            pieces.append(Piece(call, "reasoning", reasoning))
        if text:
            pieces.append(Piece(call, "text", text))
        pieces.extend(Piece(call, "tool_args", c.arguments, c.call_id) for c in calls)
        latency = as_dict(metrics).get("latency")
        done = _text(first.get("timestamp"))
        return [
            Ask(call, turn.model, self.last_ts or done),
            *pieces,
            Answer(call, turn, done, _number(latency)),
        ]


def _tool_call(event: dict[str, Any]) -> AgentToolCall:
    call = as_dict(event.get("tool_call"))
    arguments = call.get("arguments", "{}")
    return AgentToolCall(
        call_id=str(call.get("id") or event.get("tool_call_id") or event.get("id")),
        name=str(call.get("name") or event.get("tool_name") or "unknown"),
        arguments=arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, ensure_ascii=False, sort_keys=True),
    )


def _result(event: dict[str, Any]) -> Observed:
    call_id, name = str(event.get("tool_call_id")), str(event.get("tool_name"))
    ts = _text(event.get("timestamp"))
    if event.get("kind") == "ObservationEvent":
        observation = as_dict(event.get("observation"))
        output = text_of(observation.get("content"))
        return Observed(call_id, name, output, output if observation.get("is_error") else None, ts)
    problem = event.get("error") or event.get("rejection_reason") or "the call was not run"
    return Observed(call_id, name, str(problem), str(problem), ts)


def _reasoning(holder: dict[str, Any]) -> str:
    """An answer's reasoning: its ``reasoning_content``, else its thinking blocks' text."""
    content = holder.get("reasoning_content")
    if isinstance(content, str) and content:
        return content
    blocks = [as_dict(b).get("thinking") for b in holder.get("thinking_blocks") or []]
    return "\n\n".join(b for b in blocks if isinstance(b, str) and b)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
