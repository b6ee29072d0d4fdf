"""Read Gemini CLI chat sessions (``~/.gemini/tmp/<project>/chats/session-*.jsonl``) into
import items.

The layout, as Gemini CLI 0.61 writes it: a JSONL file whose first line is the session's header
(``sessionId``, ``projectHash``, ``startTime``, ``kind``), then one line per message (``id``,
``timestamp``, ``type``: ``user``, ``gemini``, ``info``, ``warning``, ``error``; ``content``, a
string or a list of Gemini parts) and ``{"$set": {...}}`` lines that update the session's
metadata (``lastUpdated``; the first one also sets ``messages``, the session context the CLI
sends before the prompt). A message is written again, whole, under the same ``id`` when it
changes: an answer is first written with its text and ``tokens``, then again with its
``toolCalls`` (each with its ``result``) once they ran. The file only grows by lines.

Mapping. A ``user`` message of text (and each message a ``$set`` sets) is :class:`Said`; a
``user`` message of ``functionResponse`` parts is the result of the calls it names
(:class:`Observed`, one per part). A ``gemini`` message is one model call (``Ask``, its
thoughts and text as ``Piece``s, ``Answer`` with a tool call per ``toolCalls`` entry); since
it may be written again, it is emitted once a line for another message follows it (or the
file ends), in its last version. Usage comes from ``tokens`` (``input`` includes ``cached``,
``output`` gets ``thoughts`` added as the recorder counts Gemini's usage); an answer without
``tokens`` has unknown usage. An ``error`` message is a :class:`Failure`; the ``$set`` lines
that only update metadata, ``info`` and ``warning`` messages and anything else are kept raw
(:class:`Unmapped`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentrunner.imports.chat import as_dict, is_number
from agentrunner.imports.files import session_id
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
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage

NAME = "gemini-cli"
APPENDS = True
AGENT = "gemini-cli"


def sniff(path: Path, head: str) -> bool:
    for record in iter_lines(head):
        return "sessionId" in record and "projectHash" in record
    return False


def records(path: Path, *, live: bool) -> list[Any]:
    return jsonl_records(path, live=live)


def parser(path: Path) -> GeminiCliParser:
    return GeminiCliParser(path)


def usage_of(tokens: Any) -> AgentUsage:
    """A call's usage from a message's ``tokens`` (unknown when the message has none)."""
    if not isinstance(tokens, dict) or not is_number(tokens.get("input")):
        return AgentUsage.unknown()

    def count(key: str) -> int:
        value = tokens.get(key)
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0

    thoughts = count("thoughts")
    return AgentUsage(
        input_tokens=count("input") + count("tool"),
        output_tokens=count("output") + thoughts,
        cache_read_tokens=count("cached"),
        cache_write_tokens=None,
        reasoning_tokens=thoughts,
    )


class GeminiCliParser:
    """One session file's lines, in order, into items of its one session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.begun = False
        self.held: dict[str, Any] | None = None
        """The last ``gemini`` message read, in its latest version, not yet emitted."""
        self.pending: dict[str, str] = {}
        """Tool calls waiting for their result: id to name."""

    def feed(self, index: int, record: Any) -> list[Emit]:
        out: list[Item] = []
        if not self.begun:
            self.begun = True
            header = record if isinstance(record, dict) and "sessionId" in record else {}
            out.append(Begin(self._source(header), _text(header.get("startTime"))))
            if header:
                return [("", item) for item in out]
        if isinstance(record, dict) and self.held is not None:
            if record.get("id") == self.held.get("id"):
                self.held = record  # the same answer written again
                return [("", item) for item in out]
            if "$set" not in record:
                out.extend(self._flush())
        out.extend(self._items(index, record))
        return [("", item) for item in out]

    def finish(self) -> list[Emit]:
        out: list[Item] = []
        if not self.begun:
            self.begun = True
            out.append(Begin(self._source({})))
        out.extend(self._flush())
        return [("", item) for item in out]

    def _source(self, header: dict[str, Any]) -> Source:
        sid = header.get("sessionId")
        extra = {k: v for k, v in header.items() if k != "sessionId"}
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(sid if isinstance(sid, str) else None, self.path),
            agent=AGENT,
            extra=extra,
        )

    def _items(self, index: int, record: Any) -> list[Item]:
        if isinstance(record, BadLine):
            return [Unmapped(record.text, f"not JSON: {record.problem}")]
        if not isinstance(record, dict):
            return [Unmapped(record, "not a JSON object")]
        if "$set" in record:
            return self._set(record)
        ts = _text(record.get("timestamp"))
        kind = record.get("type")
        if kind == "gemini":
            self.held = record
            return []
        if kind == "user":
            return self._user(record, ts)
        if kind == "error":
            return [Failure("gemini-cli", "error", text_of(record.get("content")), ts)]
        return [Unmapped(record, f"a {kind!r} message, which the model is not sent", ts)]

    def _set(self, record: dict[str, Any]) -> list[Item]:
        update = as_dict(record.get("$set"))
        messages = update.get("messages")
        if not isinstance(messages, list):
            return [Unmapped(record, "an update of the session's metadata")]
        out: list[Item] = []
        for message in messages:
            out.extend(self._items(-1, message))
        return out

    def _user(self, record: dict[str, Any], ts: str | None) -> list[Item]:
        content = record.get("content")
        parts = content if isinstance(content, list) else [content]
        responses = [as_dict(as_dict(p).get("functionResponse")) for p in parts]
        if not any(responses):
            return [Said("user", text_of(content), ts)]
        out: list[Item] = []
        for part, response in zip(parts, responses, strict=True):
            call_id = str(response.get("id", ""))
            if not response or call_id not in self.pending:
                out.append(Unmapped(part, "a part of a tool result for no pending call", ts))
                continue
            name = self.pending.pop(call_id)
            output = response.get("response")
            text = output.get("output") if isinstance(output, dict) else None
            if not isinstance(text, str):
                text = json.dumps(output, ensure_ascii=False, sort_keys=True)
            error = as_dict(output).get("error")
            out.append(Observed(call_id, name, text, str(error) if error else None, ts))
        return out

    def _flush(self) -> list[Item]:
        """The held answer as one model call."""
        if self.held is None:
            return []
        record, self.held = self.held, None
        call = f"call-{record.get('id')}"
        ts = _text(record.get("timestamp"))
        model = _text(record.get("model"))
        thoughts = record.get("thoughts")
        reasoning = "\n\n".join(
            f"{as_dict(t).get('subject', '')}: {as_dict(t).get('description', '')}"
            for t in (thoughts if isinstance(thoughts, list) else [])
        )
        text = text_of(record.get("content"))
        calls = tuple(
            AgentToolCall(
                call_id=str(as_dict(c).get("id")),
                name=str(as_dict(c).get("name") or "unknown"),
                arguments=json.dumps(as_dict(c).get("args"), ensure_ascii=False, sort_keys=True),
            )
            for c in (record.get("toolCalls") or [])
        )
        self.pending.update((c.call_id, c.name) for c in calls)
        turn = AgentTurn(
            message=text,
            reasoning=reasoning or None,
            tool_calls=calls,
            usage=usage_of(record.get("tokens")),
            model=model,
        )
        pieces = [Piece(call, "reasoning", reasoning)] if reasoning else []
        if text:
            pieces.append(Piece(call, "text", text))
        pieces.extend(Piece(call, "tool_args", c.arguments, c.call_id) for c in calls)
        return [Ask(call, model, ts), *pieces, Answer(call, turn, ts)]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
