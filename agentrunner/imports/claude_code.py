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
as errors; a compaction (a ``compact_boundary`` system record, then the user record with
``isCompactSummary`` holding the summary) as a compaction call (purpose ``compaction``,
covering the history but the messages its metadata says it preserved; its usage is not
recorded, so unknown) answered by the summary, which then begins the history the session went
on from (:attr:`~.items.Said.fresh`), the preserved messages after it. Each subagent is a
session of its own (``<session id>/agent-<agent id>``), linked to its parent session and the
tool call that started it, read from one source: its own file
(``<session id>/subagents/agent-<id>.jsonl``, or ``agent-<id>.jsonl`` beside the main file in
2.0), else the ``agent_progress`` copies of its records in the main file (older logs'
``isSidechain`` lines in a main file are one ``sidechain`` session). Everything else of a file
(hook progress, file-history snapshots, queue operations, other system records, summaries,
lines that are not JSON) is kept raw in the session the file is: a subagent file's in the
subagent's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner.imports.claude_code_files import (
    UUID,
    agent_of,
    main_file,
    own_file,
    session_files,
    spawning_call,
)
from agentrunner.imports.items import (
    Answer,
    Ask,
    BadLine,
    Begin,
    Emit,
    Failure,
    Item,
    Kept,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
    iter_lines,
    jsonl_records,
    text_of,
)
from agentrunner.values.events import COMPACTION
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, OpaquePart
from providers.usage import from_anthropic

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


def companions(path: Path) -> list[Path]:
    """The files of the session ``path`` is part of, main file first: naming any of them (or
    their folder, in any order) imports the same episodes, the subagents' linked to the main
    session's."""
    return session_files(path)


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
    compaction: bool = False
    """The call summarized the history (opened by a compaction boundary)."""

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
        self.messages_of: dict[str, list[str]] = {}
        """A record's uuid -> the history messages it is part of (a call's, a text's, a tool
        result's), for what a compaction preserved."""

    def _part_of(self, record: dict[str, Any], message: str) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str) and message not in self.messages_of.setdefault(uuid, []):
            self.messages_of[uuid].append(message)

    def _kept(self, boundary: dict[str, Any]) -> int | None:
        """How many history messages a compaction boundary says were kept (none when its
        metadata names none; None: it has no metadata)."""
        metadata = boundary.get("compactMetadata")
        if not isinstance(metadata, dict):
            return None
        preserved = metadata.get("preservedMessages")
        uuids = preserved.get("uuids") if isinstance(preserved, dict) else None
        uuids = uuids if isinstance(uuids, list) else []
        return len({m for u in uuids if isinstance(u, str) for m in self.messages_of.get(u, [])})

    def close(self) -> list[Item]:
        call = self.open
        if call is None:
            return []
        self.open = None
        usage = from_anthropic(call.usage) if call.usage else None
        if call.compaction:  # Claude Code records no usage of its compaction calls
            usage = AgentUsage.unknown()
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
        self._part_of(record, f"call:{call.call_id}")
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

    def compaction(self, record: dict[str, Any], ts: str | None) -> list[Item]:
        """A compaction boundary: the call that summarized the history opens (the summary
        record after it answers it)."""
        out = self.close()
        self.calls += 1
        call_id = f"compact-{record.get('uuid') or self.calls}"
        self.open = _Call(call_id, call_id, None, compaction=True)
        return [*out, Ask(call_id, None, ts, purpose=COMPACTION, keeps=self._kept(record))]

    def summary(self, record: dict[str, Any], text: str, ts: str | None) -> list[Item]:
        """The compaction's summary: its call's answer (a call opened here when no boundary
        came first), then the first message of the history the session goes on from."""
        out: list[Item] = []
        if self.open is None or not self.open.compaction:
            out += self.compaction({"uuid": record.get("uuid")}, ts)
        call = self.open
        assert call is not None
        call.text.append(text)
        out += [Piece(call.call_id, "text", text, ts=ts), *self.close()]
        return [*out, Said("user", text, ts, reason=COMPACTION, fresh=True), Kept(call.call_id, ts)]

    def user(self, record: dict[str, Any], ts: str | None) -> list[Item]:
        message = record["message"]
        if record.get("isCompactSummary"):
            return self.summary(record, text_of(message.get("content")), ts)
        results: list[Observed] = []
        texts: list[str] = []
        for block in _blocks(message.get("content")):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = str(block.get("tool_use_id", ""))
                self._part_of(record, f"tool:{call_id}")
                output = text_of(block.get("content"))
                error = (output or "error") if block.get("is_error") else None
                results.append(Observed(call_id, self.names.get(call_id, ""), output, error, ts))
            else:
                texts.append(text_of([block]))
        if texts:
            self._part_of(record, f"said:{record.get('uuid')}")
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
    """Feeds a session file's records to its threads: the main session's, and a subagent's
    per agent. A subagent's own file (:func:`~.claude_code_files.agent_of`) is that
    subagent's session, linked to its parent's; in a main file, the ``agent_progress`` copies
    of a subagent's records are its session only when it has no own file (one source each).
    The session's id is known from the file's name (a main file named by its id) or else from
    the first record that names it: the records before that wait for it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header = _header(path)
        self.agent = agent_of(path) if not self.header.get("main") else None
        self.session: str | None = None
        self.waiting: list[Any] = []
        self.threads: dict[str, _Thread] = {}
        self.own: dict[str, bool] = {}  # agent id -> whether its own file is beside

    def _begin(self, key: str, ts: str | None, parent_call: str | None = None) -> list[Emit]:
        if key in self.threads:
            return []
        self.threads[key] = _Thread(key)
        h = self.header
        mine = str(self.session) if self.agent is None else f"{self.session}/agent-{self.agent}"
        parent_session_id = self.session if self.agent is not None and not key else None
        if parent_session_id is not None:
            main = main_file(self.path, self.session)
            if main is not None and self.agent is not None:
                parent_call = spawning_call(main, self.agent, h.get("prompt"))
        source = Source(
            format=NAME,
            path=str(self.path.resolve()),
            session_id=mine if not key else f"{mine}/{key}",
            agent=AGENT,
            agent_version=h.get("version"),
            model=h.get("model"),
            cwd=h.get("cwd"),
            title=f"subagent {key or self.agent} of {self.session}"
            if key or self.agent
            else h.get("title"),
            parent_session="" if key else None,
            parent_call_id=parent_call,
            parent_session_id=parent_session_id,
            extra={
                "price_provider": "anthropic",
                **({"git_branch": h["git_branch"]} if h.get("git_branch") else {}),
            },
        )
        return [(key, Begin(source, ts))]

    def feed(self, index: int, record: Any) -> list[Emit]:
        if self.session is None:
            self.session = self._named(record)
            if self.session is None:
                self.waiting.append(record)
                return []
            return self._released(record)
        return self._record(record)

    def _named(self, record: Any) -> str | None:
        if self.agent is None and UUID.fullmatch(self.path.stem):
            return self.path.stem
        if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
            return str(record["sessionId"]) or None
        return None

    def _released(self, *more: Any) -> list[Emit]:
        """The records that waited for the session's id (and ``more``), now it is known."""
        records, self.waiting = [*self.waiting, *more], []
        return [emit for record in records for emit in self._record(record)]

    def _record(self, record: Any) -> list[Emit]:
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
            agent = data.get("agentId")
            if agent and self._has_own_file(str(agent)):
                return out  # a copy of a record of the subagent's own file: imported from it
            key = f"agent-{agent or record.get('parentToolUseID')}"
            out.extend(self._begin(key, ts, record.get("parentToolUseID")))
            inner = data["message"]
            return [*out, *self._turn(key, inner, _ts(inner) or ts)]
        if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
            return [*out, *(("", item) for item in self.threads[""].compaction(record, ts))]
        if _conversational(record):
            key = "sidechain" if record.get("isSidechain") and self.agent is None else ""
            if key:
                out.extend(self._begin(key, ts))
            return [*out, *self._turn(key, record, ts)]
        why = f"{record.get('type') or 'untyped'} record: not part of the conversation"
        if record.get("type") in CONVERSATION:
            why = f"{record['type']} record without a readable message"
        return [*out, ("", Unmapped(record, why, ts))]

    def _has_own_file(self, agent: str) -> bool:
        if self.agent is not None or self.session is None:
            return False
        if agent not in self.own:
            self.own[agent] = own_file(self.path, self.session, agent) is not None
        return self.own[agent]

    def _turn(self, key: str, record: dict[str, Any], ts: str | None) -> list[Emit]:
        thread = self.threads[key]
        if record["type"] == "assistant":
            items = thread.assistant(record, ts)
        else:
            items = thread.user(record, ts)
        return [(key, item) for item in items]

    def finish(self) -> list[Emit]:
        out: list[Emit] = []
        if self.session is None and self.waiting:  # no record names the session
            folder = self.path.parent
            self.session = folder.parent.name if folder.name == "subagents" else self.path.stem
            out = self._released()
        return out + [(k, item) for k, thread in self.threads.items() for item in thread.close()]


def parser(path: Path) -> Parser:
    return Parser(path)


def _ts(record: Any) -> str | None:
    if isinstance(record, dict) and isinstance(record.get("timestamp"), str):
        return str(record["timestamp"])
    return None


def _header(path: Path) -> dict[str, Any]:
    """What the session's records say about it (version, cwd, model, title; ``main``: a
    record of the main conversation is in it; ``prompt``: its first user text)."""
    header: dict[str, Any] = {}
    for record in jsonl_records(path, live=True):
        if not isinstance(record, dict):
            continue
        for key, name in (("version", "version"), ("cwd", "cwd"), ("gitBranch", "git_branch")):
            if name not in header and isinstance(record.get(key), str):
                header[name] = record[key]
        if record.get("type") == "summary" and "title" not in header:
            header["title"] = record.get("summary")
        if _conversational(record) and record.get("isSidechain") is False:
            header["main"] = True
        message = record.get("message")
        if "prompt" not in header and record.get("type") == "user" and isinstance(message, dict):
            content = message.get("content")
            header["prompt"] = content if isinstance(content, str) else text_of(content)
        if (
            "model" not in header
            and isinstance(message, dict)
            and isinstance(message.get("model"), str)
            and not message["model"].startswith("<")
        ):
            header["model"] = message["model"]
    return header
