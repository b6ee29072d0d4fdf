"""Read opencode's sessions (its database ``opencode.db``: see :mod:`.opencode_db`) into
import items.

A message is ``{"role": "user" | "assistant", "time", "modelID", "providerID", "tokens",
"cost", "error", ...}`` and its parts are typed: ``text``, ``reasoning``, ``tool`` (``callID``,
``tool``, ``state``: ``{"status": "pending" | "running" | "completed" | "error", "input",
"output", "error", "metadata"}``), ``step-start`` and ``step-finish`` (one model call between
them; the finish carries the call's ``tokens`` and ``cost``), and opencode's bookkeeping
(``patch``, ``snapshot``, ``file``, ``agent``, ``subtask``, ``compaction``, ``retry``). A
sub-agent that the ``task`` tool starts runs in a session of its own whose ``parent_id`` names
the session that started it.

Mapping. Each session is an episode (a sub-agent's under its parent's). A user message's text
parts are one :class:`Said`; each step of an assistant message is one model call (``Ask``, its
reasoning, text and tool arguments as ``Piece``s, ``Answer`` with a tool call per ``tool`` part,
then each finished tool's result as :class:`Observed`). Usage comes from the step's
``step-finish`` (opencode's ``input`` leaves out the cached tokens and its ``output`` the
reasoning ones: they are added back, as the recorder counts usage); a step without one has
unknown usage; its stop reason is the step's ``reason`` (``tool-calls``, ``stop``). A
message's ``error`` is a :class:`Failure`. Every other part is kept raw (:class:`Unmapped`).
The database holds neither the system prompt opencode sends nor its tools' definitions: a
rebuilt request holds the conversation, and the tools are inferred from the calls made.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict, is_number, with_recorded_cost
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
)
from agentrunner.imports.opencode_db import is_opencode_db, message_records
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage

NAME = "opencode"
APPENDS = False
AGENT = "opencode"
CALL_PARTS = ("text", "reasoning", "tool", "step-start", "step-finish")
"""The parts of an assistant message that make its model calls."""


def sniff(path: Path, head: str) -> bool:
    return is_opencode_db(path, head)


def records(path: Path, *, live: bool) -> list[Any]:
    return message_records(path, live=live)


def parser(path: Path) -> OpencodeParser:
    return OpencodeParser(path)


def usage_of(tokens: Any, cost: Any) -> AgentUsage:
    """A call's usage from a ``step-finish``'s ``tokens`` (unknown when it has none)."""
    if not isinstance(tokens, dict) or not is_number(tokens.get("input")):
        return AgentUsage.unknown()
    cache = as_dict(tokens.get("cache"))

    def count(where: dict[str, Any], key: str) -> int:
        value = where.get(key)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    read, write = count(cache, "read"), count(cache, "write")
    reasoning = count(tokens, "reasoning")
    counted = AgentUsage(
        input_tokens=count(tokens, "input") + read + write,
        output_tokens=count(tokens, "output") + reasoning,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
    )
    return with_recorded_cost(counted, None, cost)


class OpencodeParser:
    """The database's messages, in order, into items of their sessions (keyed by id)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.begun: set[str] = set()
        self.spawned: dict[str, str] = {}
        """Sub-agent session id to the ``task`` call that started it."""

    def feed(self, index: int, record: Any) -> list[Emit]:
        session = as_dict(record.get("session"))
        key = str(session.get("id"))
        out: list[Emit] = []
        if key not in self.begun:
            self.begun.add(key)
            out.append((key, Begin(self._source(session), _iso(session.get("time_created")))))
        message = as_dict(record.get("message"))
        parts = [as_dict(p) for p in record.get("parts", [])]
        if message.get("role") == "user":
            items = _user(message, parts)
        elif message.get("role") == "assistant":
            items = self._assistant(message, parts)
        else:
            items = [Unmapped(record, f"a message of role {message.get('role')!r}")]
        out.extend((key, item) for item in items)
        return out

    def finish(self) -> list[Emit]:
        return []

    def _source(self, session: dict[str, Any]) -> Source:
        sid = str(session.get("id"))
        parent = session.get("parent_id")
        model = as_dict(_loads(session.get("model"))).get("id")
        extra: dict[str, Any] = {k: session[k] for k in ("slug", "agent") if k in session}
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(sid, self.path),
            agent=AGENT,
            agent_version=session.get("version"),
            model=model if isinstance(model, str) else None,
            cwd=session.get("directory"),
            title=session.get("title"),
            parent_session=parent if parent in self.begun else None,
            parent_call_id=self.spawned.get(sid) if parent in self.begun else None,
            parent_session_id=None if parent is None or parent in self.begun else parent,
            extra=extra,
        )

    def _assistant(self, message: dict[str, Any], parts: list[dict[str, Any]]) -> list[Item]:
        out: list[Item] = []
        steps: list[list[dict[str, Any]]] = []  # each from its step-start (or first part) on
        for part in parts:
            if part.get("type") == "step-start" or not steps:
                steps.append([part])
            else:
                steps[-1].append(part)
        calls = sum(any(p.get("type") in CALL_PARTS for p in step) for step in steps)
        for number, step in enumerate(steps):
            if any(p.get("type") in CALL_PARTS for p in step):
                out.extend(self._call(message, step, number, alone=calls == 1))
            out.extend(
                Unmapped(p, f"opencode's {p.get('type')!r} part, which the model is not sent")
                for p in step
                if p.get("type") not in CALL_PARTS
            )
        error = as_dict(message.get("error"))
        if error:
            text = as_dict(error.get("data")).get("message") or json.dumps(error, sort_keys=True)
            out.append(Failure("opencode", str(error.get("name", "error")), str(text)))
        return out

    def _call(
        self, message: dict[str, Any], step: list[dict[str, Any]], number: int, *, alone: bool
    ) -> list[Item]:
        """One step of an assistant message: a model call, then its tools' results."""
        call = f"{message.get('id')}-{number}"
        model = message.get("modelID")
        ts = _iso(step[0].get("time_created"))
        pieces: list[Item] = []
        texts: list[str] = []
        reasoning: list[str] = []
        calls: list[AgentToolCall] = []
        results: list[Item] = []
        finish: dict[str, Any] = {}
        for part in step:
            kind, text = part.get("type"), part.get("text")
            if kind in ("text", "reasoning") and isinstance(text, str) and text:
                (texts if kind == "text" else reasoning).append(text)
                pieces.append(Piece(call, "text" if kind == "text" else "reasoning", text))
            elif kind == "tool":
                tool_call, result = self._tool(part)
                calls.append(tool_call)
                pieces.append(Piece(call, "tool_args", tool_call.arguments, tool_call.call_id))
                results.extend(result)
            elif kind == "step-finish":
                finish = part
        if finish:
            usage = usage_of(finish.get("tokens"), finish.get("cost"))
        elif alone:  # no step-finish: the message's totals are the call's when it is its one
            usage = usage_of(message.get("tokens"), message.get("cost"))
        else:
            usage = AgentUsage.unknown()
        turn = AgentTurn(
            message="\n\n".join(texts),
            reasoning="\n\n".join(reasoning) or None,
            tool_calls=tuple(calls),
            usage=usage,
            model=model if isinstance(model, str) else None,
            provider=_text(message.get("providerID")),
            stop_reason=_text(finish.get("reason"))
            or (_text(message.get("finish")) if alone else None),
        )
        done = _iso(finish.get("time_created")) if finish else None
        answer = Answer(call, turn, done or _iso(as_dict(message.get("time")).get("completed")))
        return [Ask(call, turn.model, ts), *pieces, answer, *results]

    def _tool(self, part: dict[str, Any]) -> tuple[AgentToolCall, list[Item]]:
        """A ``tool`` part's call, and its result when the tool finished."""
        state = as_dict(part.get("state"))
        call_id, name = str(part.get("callID") or part.get("id")), str(part.get("tool"))
        arguments = json.dumps(state.get("input", {}), ensure_ascii=False, sort_keys=True)
        spawned = as_dict(state.get("metadata")).get("sessionId")
        if name == "task" and isinstance(spawned, str):
            self.spawned[spawned] = call_id
        tool_call = AgentToolCall(call_id=call_id, name=name, arguments=arguments)
        ended = _iso(as_dict(state.get("time")).get("end"))
        if state.get("status") == "completed":
            output = state.get("output")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            return tool_call, [Observed(call_id, name, text, None, ended)]
        if state.get("status") == "error":
            error = str(state.get("error") or "the tool failed")
            return tool_call, [Observed(call_id, name, error, error, ended)]
        return tool_call, []  # pending or running when the database was read


def _user(message: dict[str, Any], parts: list[dict[str, Any]]) -> list[Item]:
    ts = _iso(message.get("time_created"))
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    out: list[Item] = [Said("user", "\n\n".join(texts), ts)] if texts else []
    for part in parts:
        if part.get("type") != "text":
            why = f"opencode's {part.get('type')!r} part of a prompt"
            out.append(Unmapped(part, why, ts))
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _loads(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return None


def _iso(ms: Any) -> str | None:
    """A time in ms since the epoch (as opencode stores times) as ISO 8601 UTC."""
    if not is_number(ms) or ms <= 0:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()
