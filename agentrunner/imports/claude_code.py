"""Claude Code session logs (``~/.claude/projects/<encoded cwd>/<session id>.jsonl``).

One JSON record per line, threaded by ``uuid``/``parentUuid``. ``user`` records carry the
user's text or tool results; ``assistant`` records carry one Anthropic Messages API message,
often written as several lines (one per content block, the same ``message.id``) with tool
results of its parallel calls written in between. So one model call is every assistant line of
one ``message.id``: it opens at its first line and closes at the next assistant message, the
next user text, or the end of a finished file; tool results that arrive while it is open are
held until it closes (a ``tool.result`` never comes before its ``tool.call``).

Mapped: user text (``isMeta`` caveats included: the model reads them) as user messages; text,
thinking and tool_use blocks as chunks of the call (thinking signatures and redacted thinking
kept verbatim as opaque parts); usage (Anthropic's: input without cache, cache reads and writes
apart) from the message's last line; tool results; API error messages (``isApiErrorMessage``)
as errors. Subagents (``progress`` records of type ``agent_progress``, and older logs'
``isSidechain`` lines) become their own sessions, linked to the tool call that started them.
Everything else (hook progress, file-history snapshots, queue operations, system records,
summaries, lines that are not JSON) is kept raw.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner.imports.items import (
    Answer,
    Ask,
    BadLine,
    Begin,
    Emit,
    Failure,
    Item,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
    iter_lines,
    jsonl_records,
    text_of,
)
from agentrunner.types import AgentToolCall, AgentTurn, OpaquePart
from providers._usage import from_anthropic

NAME = "claude-code"
APPENDS = True
AGENT = "claude-code"
CONVERSATION = ("user", "assistant")


def sniff(path: Path, head: str) -> bool:
    for record in iter_lines(head):
        if record.get("type") in CONVERSATION and isinstance(record.get("message"), dict):
            return "sessionId" in record or "parentUuid" in record
        if record.get("type") == "progress" and "sessionId" in record:
            return True
    return False


def records(path: Path, *, live: bool) -> list[Any]:
    return jsonl_records(path, live=live)


@dataclass
class _Call:
    message_id: str
    call_id: str
    model: str | None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[AgentToolCall] = field(default_factory=list)
    opaque: list[OpaquePart] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    request_id: str | None = None
    held: list[Item] = field(default_factory=list)
    """Tool results that came while the call was open."""

    @property
    def tool_ids(self) -> set[str]:
        return {c.call_id for c in self.tool_calls}


class _Thread:
    """One conversation (the main session or a subagent's): its open call and tool names."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.open: _Call | None = None
        self.calls = 0
        self.names: dict[str, str] = {}
        self.seen_messages: set[str] = set()

    def close(self) -> list[Item]:
        call = self.open
        if call is None:
            return []
        self.open = None
        usage = from_anthropic(call.usage) if call.usage else None
        turn = AgentTurn(
            message="".join(call.text),
            reasoning="".join(call.reasoning) or None,
            tool_calls=tuple(call.tool_calls),
            usage=usage if usage is not None else AgentTurn().usage,
            provider="anthropic",
            model=call.model,
            provider_request_id=call.request_id,
            stop_reason=call.stop_reason,
            opaque=tuple(call.opaque),
        )
        return [Answer(call.call_id, turn), *call.held]

    def assistant(self, record: dict[str, Any], ts: str | None) -> list[Item]:
        message = record["message"]
        out: list[Item] = []
        if record.get("isApiErrorMessage"):
            text = text_of(message.get("content"))
            return [*self.close(), Failure("generate", "api_error", text or "API error", ts)]
        message_id = str(message.get("id") or record.get("uuid") or "")
        if self.open is not None and self.open.message_id != message_id:
            out.extend(self.close())
        if self.open is None:
            self.calls += 1
            call_id = message_id or f"call-{self.calls}"
            if call_id in self.seen_messages:  # an id written again later: a new call
                call_id = f"{call_id}#{self.calls}"
            self.seen_messages.add(message_id)
            self.open = _Call(message_id, call_id, message.get("model"))
            out.append(Ask(call_id, message.get("model"), ts))
        call = self.open
        call.usage = message.get("usage") or call.usage
        call.stop_reason = message.get("stop_reason") or call.stop_reason
        call.request_id = record.get("requestId") or call.request_id
        for block in _blocks(message.get("content")):
            out.extend(self._block(call, block, ts))
        return out

    def _block(self, call: _Call, block: Any, ts: str | None) -> list[Item]:
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(block, str) or kind == "text":
            text = block if isinstance(block, str) else str(block.get("text", ""))
            call.text.append(text)
            return [Piece(call.call_id, "text", text, ts=ts)]
        if kind == "thinking":
            text = str(block.get("thinking", ""))
            call.reasoning.append(text)
            call.opaque.append(OpaquePart(provider="anthropic", type="thinking", data=block))
            return [Piece(call.call_id, "reasoning", text, ts=ts)]
        if kind == "redacted_thinking":
            call.opaque.append(OpaquePart(provider="anthropic", type=kind, data=block))
            return []
        if kind in ("tool_use", "server_tool_use"):
            tool_id = str(block.get("id") or f"{call.call_id}-tool-{len(call.tool_calls)}")
            name = str(block.get("name", ""))
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            call.tool_calls.append(AgentToolCall(call_id=tool_id, name=name, arguments=arguments))
            self.names[tool_id] = name
            return [Piece(call.call_id, "tool_args", arguments, tool_call_id=tool_id, ts=ts)]
        call.opaque.append(OpaquePart(provider="anthropic", type=str(kind), data=block))
        return []

    def user(self, record: dict[str, Any], ts: str | None) -> list[Item]:
        message = record["message"]
        results: list[Observed] = []
        texts: list[str] = []
        for block in _blocks(message.get("content")):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id", ""))
                output = text_of(block.get("content"))
                error = (output or "error") if block.get("is_error") else None
                results.append(Observed(call_id, self.names.get(call_id, ""), output, error, ts))
            else:
                texts.append(text_of([block]))
        out: list[Item] = []
        if texts:  # the user spoke: the open call is over
            out.extend(self.close())
            out.append(Said("user", "\n".join(texts), ts))
        for result in results:  # a result of the open call waits until the call is recorded
            if self.open is not None and result.call_id in self.open.tool_ids:
                self.open.held.append(result)
            else:
                out.append(result)
        return out


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _conversational(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") in CONVERSATION
        and isinstance(record.get("message"), dict)
        and "content" in record["message"]
    )


class Parser:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.header = _header(path)
        self.threads: dict[str, _Thread] = {}

    def _begin(self, key: str, ts: str | None, parent_call: str | None = None) -> list[Emit]:
        if key in self.threads:
            return []
        self.threads[key] = _Thread(key)
        h = self.header
        session = h["session_id"] if not key else f"{h['session_id']}/{key}"
        source = Source(
            format=NAME,
            path=str(self.path.resolve()),
            session_id=session,
            agent=AGENT,
            agent_version=h.get("version"),
            model=h.get("model"),
            cwd=h.get("cwd"),
            title=h.get("title") if not key else f"subagent {key} of {h['session_id']}",
            parent_session="" if key else None,
            parent_call_id=parent_call,
            extra={
                "price_provider": "anthropic",
                **({"git_branch": h["git_branch"]} if h.get("git_branch") else {}),
            },
        )
        return [(key, Begin(source, ts))]

    def feed(self, index: int, record: Any) -> list[Emit]:
        if index == 0:
            self.header["session_id"] = _session_id(self.path, record)
        out = self._begin("", _ts(record))
        if isinstance(record, BadLine):
            return [*out, ("", Unmapped(record.text, f"not JSON: {record.problem}"))]
        if not isinstance(record, dict):
            return [*out, ("", Unmapped(record, "not a JSON object"))]
        ts = _ts(record)
        data = record.get("data")
        if (
            record.get("type") == "progress"
            and isinstance(data, dict)
            and data.get("type") == "agent_progress"
            and _conversational(data.get("message"))
        ):
            key = f"agent-{data.get('agentId') or record.get('parentToolUseID')}"
            out.extend(self._begin(key, ts, record.get("parentToolUseID")))
            inner = data["message"]
            return [*out, *self._turn(key, inner, _ts(inner) or ts)]
        if _conversational(record):
            key = "sidechain" if record.get("isSidechain") else ""
            if key:
                out.extend(self._begin(key, ts))
            return [*out, *self._turn(key, record, ts)]
        why = f"{record.get('type') or 'untyped'} record: not part of the conversation"
        if record.get("type") in CONVERSATION:
            why = f"{record['type']} record without a readable message"
        return [*out, ("", Unmapped(record, why, ts))]

    def _turn(self, key: str, record: dict[str, Any], ts: str | None) -> list[Emit]:
        thread = self.threads[key]
        if record["type"] == "assistant":
            items = thread.assistant(record, ts)
        else:
            items = thread.user(record, ts)
        return [(key, item) for item in items]

    def finish(self) -> list[Emit]:
        return [(key, item) for key, thread in self.threads.items() for item in thread.close()]


def parser(path: Path) -> Parser:
    return Parser(path)


def _ts(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("timestamp"), str):
        return str(record["timestamp"])
    return None


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _session_id(path: Path, first: Any) -> str:
    """Claude Code names a session's file by its id; a file named otherwise (a copy) is the
    session its first line names, else its name. Only the first line counts, so that a file
    read as it grows and read whole agree."""
    if _UUID.fullmatch(path.stem) is None and isinstance(first, dict):
        named = first.get("sessionId")
        if isinstance(named, str) and named:
            return named
    return path.stem


def _header(path: Path) -> dict[str, Any]:
    """What the session's records say about it (version, cwd, model, title; its id comes
    from the name or the first line: :func:`_session_id`)."""
    header: dict[str, Any] = {"session_id": path.stem}
    for record in jsonl_records(path, live=True):
        if not isinstance(record, dict):
            continue
        for key, name in (("version", "version"), ("cwd", "cwd"), ("gitBranch", "git_branch")):
            if name not in header and isinstance(record.get(key), str):
                header[name] = record[key]
        if record.get("type") == "summary" and "title" not in header:
            header["title"] = record.get("summary")
        message = record.get("message")
        if (
            "model" not in header
            and isinstance(message, dict)
            and isinstance(message.get("model"), str)
            and not message["model"].startswith("<")
        ):
            header["model"] = message["model"]
    return header
