"""Read aider's LLM history (the file ``aider --llm-history-file FILE`` appends to) into
import items.

The layout, as aider 0.86 writes it: each exchange with the model is a block that starts with a
header line, ``TO LLM <ISO time>`` for what was sent and ``LLM RESPONSE <ISO time>`` for the
answer, then the messages, each line prefixed with its role in capitals (``SYSTEM``, ``USER``,
``ASSISTANT``) and a space; ``-------`` separates the messages of a request. The file only grows
(aider appends each block as it is sent or received). It records no usage and no tool calls:
aider edits files through SEARCH/REPLACE blocks in its answer's text, which are kept as text.

Mapping. Each ``TO LLM`` block with the ``LLM RESPONSE`` after it is one model call: the
messages of the request that the history rebuilt so far does not already hold are
:class:`Said` (a system or user message; an assistant message aider put in the request,
such as its canned "Ok, ..." replies, is an assistant message put in the model's place:
:class:`Edited`), then ``Ask``, the answer's text as a ``Piece`` and an
``Answer`` of unknown usage. A request without a response (the last one of a file being
written, or a failed call) waits for the file's end, and is then a call without an answer kept
raw. Lines before the first header are kept raw.

The records fed are the blocks, each a dict of its header, time and messages; since aider
resends the whole conversation with each request, a request's messages are compared with those
of the previous request and only the new ones enter the history.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from agentrunner.imports.files import session_id
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Edited,
    Emit,
    Item,
    Piece,
    Said,
    Source,
    Unmapped,
)
from agentrunner.values.types import AgentTurn, AgentUsage, Message

NAME = "aider"
APPENDS = False
AGENT = "aider"
HEADER = re.compile(r"^(TO LLM|LLM RESPONSE) (\d{4}-\d\d-\d\dT[\d:.]+)$")
SEPARATOR = "-------"
ROLES = ("SYSTEM", "USER", "ASSISTANT")


def sniff(path: Path, head: str) -> bool:
    first = head.split("\n", 1)[0].rstrip("\r")
    return bool(HEADER.match(first))


def records(path: Path, *, live: bool) -> list[Any]:
    """The file's blocks: ``{"header", "ts", "messages": [[role, text], ...]}`` (lines before
    the first header: a block with header None and the lines as its ``text``). With ``live``
    the last block waits for the next header (or the end of following): nothing in the file
    says it is complete."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if live and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]  # the writer is in the middle of a line
    blocks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        found = HEADER.match(line)
        if found:
            current = {"header": found[1], "ts": found[2], "messages": []}
            blocks.append(current)
        elif current is None:
            if not blocks:
                blocks.append({"header": None, "text": ""})
            blocks[0]["text"] += line + "\n"
        else:
            _add_line(current["messages"], line)
    if not any(b["header"] for b in blocks):
        raise ValueError(f"{path}: no 'TO LLM' or 'LLM RESPONSE' block; nothing to import")
    return blocks[:-1] if live else blocks  # aider may be writing the last block still


def _add_line(messages: list[list[str]], line: str) -> None:
    if line == SEPARATOR:
        messages.append(["", ""])  # the next line starts a new message
        return
    role, _, said = line.partition(" ")
    if role not in ROLES:
        role, said = "", line
    if messages and messages[-1][0] in ("", role):
        if messages[-1][0] == "":
            messages[-1] = [role, said]
        else:
            messages[-1][1] += "\n" + said
    else:
        messages.append([role, said])


def parser(path: Path) -> AiderParser:
    return AiderParser(path)


class AiderParser:
    """One LLM history file's blocks, in order, into items of its one session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.begun = False
        self.sent: list[tuple[str, str]] = []
        """The messages of the previous request, followed by its answer."""
        self.asked: dict[str, Any] | None = None
        """The last request with no response yet, and its record index."""
        self.index = 0

    def feed(self, index: int, record: Any) -> list[Emit]:
        out: list[Item] = []
        if not self.begun:
            self.begun = True
            out.append(Begin(self._source(), record.get("ts")))
        header = record.get("header")
        if header is None:
            out.append(Unmapped(record, "lines before the first exchange"))
        elif header == "TO LLM":
            out.extend(self._unanswered())
            out.extend(self._request(record))
            self.asked, self.index = record, index
        elif self.asked is None:
            out.append(Unmapped(record, "a response to no request of this file"))
        else:
            out.extend(self._answer(record))
        return [("", item) for item in out]

    def finish(self) -> list[Emit]:
        out: list[Item] = []
        if not self.begun:
            self.begun = True
            out.append(Begin(self._source()))
        out.extend(self._unanswered())
        return [("", item) for item in out]

    def _source(self) -> Source:
        digest = hashlib.sha256(self.path.name.encode()).hexdigest()[:8]
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(f"aider-{digest}", self.path),
            agent=AGENT,
        )

    def _request(self, record: dict[str, Any]) -> list[Item]:
        """The request's messages that the previous request and answer did not hold."""
        messages = [(role, text) for role, text in record["messages"] if role]
        shared = 0
        while shared < min(len(messages), len(self.sent)) and messages[shared] == self.sent[shared]:
            shared += 1
        out: list[Item] = []
        if shared < len(self.sent):  # aider dropped or rewrote earlier messages
            out.append(Unmapped(record, "a request that no longer holds the earlier history"))
        ts = record["ts"]
        for role, text in messages[shared:]:
            if role == "ASSISTANT":  # aider's own canned reply, not a model's answer
                out.append(Edited(Message(role="assistant", content=text), ts))
            else:
                out.append(Said("system" if role == "SYSTEM" else "user", text, ts))
        self.sent = messages
        return out

    def _answer(self, record: dict[str, Any]) -> list[Item]:
        call = f"call-{self.index}"
        self.asked = None
        text = "\n".join(t for role, t in record["messages"] if role == "ASSISTANT")
        turn = AgentTurn(message=text, usage=AgentUsage.unknown())
        self.sent.append(("ASSISTANT", text))
        pieces = [Piece(call, "text", text)] if text else []
        return [Ask(call, None, record["ts"]), *pieces, Answer(call, turn, record["ts"])]

    def _unanswered(self) -> list[Item]:
        if self.asked is None:
            return []
        asked, self.asked = self.asked, None
        return [Unmapped(asked, "a request with no response in the file")]
