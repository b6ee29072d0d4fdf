"""Read aider's chat history (the ``.aider.chat.history.md`` it writes beside the repository,
or the file ``--chat-history-file`` names) into import items.

The layout, as aider 0.86 writes it: each run appends a header line ``# aider chat started at
<YYYY-MM-DD HH:MM:SS>``, then, in the order they happened, what the user typed (each line
prefixed ``#### ``; an empty input is ``#### <blank>``), what aider told the user (its notes:
each note's text prefixed ``> `` and ended by two spaces, its token counts and cost among
them) and each answer of the model, as plain markdown after a blank line. The file only grows.
It records neither what aider sent the model besides the user's words (its system prompt, the
repository map, the files' contents) nor usage: the notes' token counts are rounded ("2.5k
sent"), so usage is unknown.

Mapping. Each run is a session of its own (key: the index of its header's record). A user's
input is :class:`Said` (an aider command, a line starting ``/``, is not sent to the model and
is kept raw, except ``/ask``, ``/code`` and ``/architect``, whose text is); each answer is one
model call (``Ask``, its text as a ``Piece``, an ``Answer`` of unknown usage). A run of notes
is kept raw (:class:`Unmapped`): the model is not sent them; so are lines before the first
header. A line of an answer that starts with ``#### `` or ``> `` cannot be told from an input
or a note: aider's format does not mark where an answer ends.

The records are the file's blocks in order: ``{"kind": "start" | "user" | "note" | "answer" |
"preamble", "text", "line"}`` (``line``: the block's first line, from 1).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from agentrunner.imports.files import session_id
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Emit,
    Item,
    Piece,
    Said,
    Source,
    Unmapped,
)
from agentrunner.values.types import AgentTurn, AgentUsage

NAME = "aider-chat"
APPENDS = False
AGENT = "aider"
START = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
USER = "#### "
NOTE = "> "
SENT_COMMANDS = re.compile(r"^/(ask|code|architect)\s+")
"""The commands whose text aider sends the model (in the mode they name)."""


def sniff(path: Path, head: str) -> bool:
    lines = [line for line in head.splitlines()[:5] if line.strip()]
    return bool(lines) and bool(START.match(lines[0]))


def records(path: Path, *, live: bool) -> list[Any]:
    """The file's blocks (see the module's docstring). With ``live`` the last block waits
    for the next one (or the end of following): nothing in the file says it is complete."""
    text = path.read_text(encoding="utf-8", errors="replace")
    blocks: list[dict[str, Any]] = []
    gap = False  # a blank line since the last block's last line
    for number, line in enumerate(text.split("\n"), 1):
        last = blocks[-1] if blocks else None
        kind = _kind(line, None if last is None else last, gap=gap)
        if kind is None:  # a blank line: part of an answer, else between blocks
            gap = True
            if last is not None and last["kind"] == "answer":
                last["text"] += "\n"
            continue
        if last is not None and _joins(last["kind"], kind, gap=gap):
            last["text"] += "\n" + line
        else:
            blocks.append({"kind": kind, "text": line, "line": number})
        gap = False
    for block in blocks:
        block["text"] = _content(block)
    if not any(b["kind"] == "start" for b in blocks):
        raise ValueError(f"{path}: no '# aider chat started at' line; nothing to import")
    return blocks[:-1] if live else blocks


def _joins(before: str, kind: str, *, gap: bool) -> bool:
    """Whether a line of ``kind`` continues the block before it: an input's or a note's next
    line (no blank line between: each input and each run of notes is written after one), or
    an answer's (which may hold blank lines)."""
    if kind != before or kind == "start":
        return False
    return not gap or kind in ("answer", "preamble")


def _kind(line: str, last: dict[str, Any] | None, *, gap: bool) -> str | None:
    """The kind of block a line belongs to (None: a blank line); ``gap``: a blank line came
    between it and the last block."""
    if START.match(line):
        return "start"
    if line.startswith(USER) or line.rstrip() == "####":
        return "user"
    if line.startswith(NOTE) or line.rstrip() == ">":
        return "note"
    if not line.strip():
        return None
    if last is None:
        return "preamble"
    if last["kind"] == "note" and not gap and not last["text"].endswith("  "):
        return "note"  # a note of several lines: only its first has the "> "
    return "preamble" if last["kind"] == "preamble" else "answer"


def _content(block: dict[str, Any]) -> str:
    """A block's text as it was written: the prefixes and line-end spaces taken off."""
    text: str = block["text"]
    if block["kind"] == "user":
        lines = [line.removeprefix("####").removeprefix(" ").rstrip() for line in text.split("\n")]
        said = "\n".join(lines)
        return "" if said == "<blank>" else said
    if block["kind"] == "note":
        return "\n".join(line.removeprefix(">").strip() for line in text.split("\n"))
    return text.strip("\n")


def parser(path: Path) -> AiderChatParser:
    return AiderChatParser(path)


class AiderChatParser:
    """One chat history file's blocks, in order, into items of one session per run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.key: str | None = None
        """The current run's session key (None before the first header)."""
        self.ts: str | None = None

    def feed(self, index: int, record: Any) -> list[Emit]:
        kind = record.get("kind")
        if kind == "start":
            self.key = f"run-{index}"
            self.ts = _iso(record["text"])
            return [(self.key, Begin(self._source(index), self.ts))]
        out: list[Emit] = []
        if self.key is None:  # lines before the first run: a session for them alone
            self.key = ""
            out.append(("", Begin(self._source(None))))
        out.extend((self.key, item) for item in self._items(index, record))
        return out

    def finish(self) -> list[Emit]:
        if self.key is None:
            self.key = ""
            return [("", Begin(self._source(None)))]
        return []

    def _source(self, index: int | None) -> Source:
        name = f"aider-chat-{index}" if index is not None else "aider-chat-preamble"
        return Source(
            format=NAME,
            path=str(self.path),
            session_id=session_id(name, self.path),
            agent=AGENT,
            cwd=str(self.path.resolve().parent),
        )

    def _items(self, index: int, record: dict[str, Any]) -> list[Item]:
        kind, text = record.get("kind"), record.get("text", "")
        if kind == "user":
            if not text.startswith("/"):
                return [Said("user", text, self.ts)]
            sent = SENT_COMMANDS.match(text)
            if sent is None:
                return [Unmapped(record, "an aider command, which the model is not sent")]
            return [Said("user", text[sent.end() :], self.ts)]
        if kind == "answer":
            call = f"call-{index}"
            turn = AgentTurn(message=text, usage=AgentUsage.unknown())
            return [Ask(call, None, self.ts), Piece(call, "text", text), Answer(call, turn)]
        if kind == "note":
            return [Unmapped(record, "aider's note to the user, which the model is not sent")]
        return [Unmapped(record, "lines before the first run's header")]


def _iso(header: str) -> str | None:
    found = START.match(header)
    if found is None:
        return None
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S").isoformat()
