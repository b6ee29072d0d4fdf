"""What an importer reads out of another agent's trace, before it becomes events.

A format module (``claude_code``, ``codex``, ``mini_swe_agent``, ``swe_agent``, ``atif``) turns
the records of one source file into a stream of *items*, each tagged with the key of the
session it belongs to ("" for the file's main session; subagents get their own keys). Items are
close to the event kinds they become:

- :class:`Begin`: a session starts (its :class:`Source`); the importer makes its episode;
- :class:`Said`: a system or user message enters the history (``message``);
- :class:`Edited`: an assistant message a fork put in the model's place (``message``);
- :class:`Ask`: a model call starts, its input the history so far (``model.request``); a
  compaction call (one that summarized the history, its answer not part of it) says so;
- :class:`Piece`: part of its output, in order (``model.chunk``);
- :class:`Answer`: the call's whole answer and usage (``model.response``, ``usage``, then a
  ``tool.call`` per tool call);
- :class:`Observed`: a tool's result (``tool.result``);
- :class:`Kept`: the messages a compaction kept enter the history after its summary
  (``message``);
- :class:`Failure`: an error the source recorded (``error``);
- :class:`Unmapped`: a record the importer keeps raw (an ``error`` event of where ``import``
  whose ``raw`` field holds the record verbatim), never dropped;
- :class:`Ended`: the session ended as the source says (``episode.end``).

A parser is fed the records in order (``feed``) and told when a finished file has no more
(``finish``): it closes what is open then, such as a model call whose last block was the
file's last record. Parsers are deterministic: the same records give the same items, which is
what lets an import continue where an earlier one stopped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agentrunner.values.types import AgentTurn, Channel, Message, ToolSpec


@dataclass(frozen=True)
class Episode:
    """What a source says of the episode it was (agentrunner's own ATIF export, read back):
    the task, seed and model spec it ran with; for a fork the session id (same format) of
    the session it forks and how many of the file's first records are its parent's; for a
    sub-agent the session id of the session that started it (the call: ``parent_call_id``)."""

    task_id: str
    seed: int
    model: dict[str, Any]
    fork_of: str | None = None
    shared: int = 0
    spawned_by: str | None = None


@dataclass(frozen=True)
class Source:
    """Where a session came from (recorded in its ``episode.start``)."""

    format: str
    path: str
    session_id: str
    agent: str
    agent_version: str | None = None
    model: str | None = None
    cwd: str | None = None
    title: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    """The tool definitions the source carries (empty: infer them from the calls made)."""
    parent_session: str | None = None
    parent_call_id: str | None = None
    """For a subagent: its parent's session key and the tool call that started it."""
    parent_session_id: str | None = None
    """For a subagent read from a file of its own: its parent's session id (of the same
    format), whose episode another file's import makes."""
    extra: dict[str, Any] = field(default_factory=dict)
    episode: Episode | None = None


@dataclass(frozen=True)
class Begin:
    source: Source
    ts: str | None = None


@dataclass(frozen=True)
class Said:
    role: Literal["system", "user"]
    text: str
    ts: str | None = None
    marks: dict[str, Any] = field(default_factory=dict)
    """What the source says of this record that the event log has no field for but its
    format gives back on export (ATIF's ``is_copied_context``): kept as ``source_marks``."""
    reason: str | None = None
    """The ``message`` event's reason when the source names one (``fork``, ``continue``,
    ``compaction``); else ``system`` or ``prompt``."""
    fresh: bool = False
    """It begins a new history: the source's agent started the model's context afresh from
    it (after a compaction), so it hangs off no earlier message."""


@dataclass(frozen=True)
class Edited:
    """An assistant message a fork put in the model's place (``message`` of reason ``edit``,
    then a ``tool.call`` per tool call)."""

    message: Message
    ts: str | None = None


@dataclass(frozen=True)
class Ask:
    call_id: str
    model: str | None = None
    ts: str | None = None
    purpose: Literal["turn", "compaction"] = "turn"
    """``compaction``: the call summarized the history; its answer (the summary) is recorded
    as a compaction's, never part of the history."""
    keeps: int | None = None
    """A compaction's: how many of the history's last messages it kept, when the source says
    (its ``covers`` is the rest); None: unknown."""


@dataclass(frozen=True)
class Piece:
    call_id: str
    channel: Channel
    text: str
    tool_call_id: str | None = None
    ts: str | None = None


@dataclass(frozen=True)
class Answer:
    call_id: str
    turn: AgentTurn
    ts: str | None = None
    latency_s: float | None = None
    marks: dict[str, Any] = field(default_factory=dict)
    """As :attr:`Said.marks` (ATIF's ``llm_call_count``, ``is_copied_context``)."""


@dataclass(frozen=True)
class Observed:
    call_id: str
    name: str
    output: str
    error: str | None = None
    ts: str | None = None
    reward: float | None = None
    """What the environment said of the call, when the source records it (an agentrunner
    export does): its reward (None: none), whether it ended the episode, and so on."""
    done: bool = False
    truncated: bool = False
    step: int | None = None
    duration_s: float = 0.0


@dataclass(frozen=True)
class Kept:
    """The messages compaction ``call_id`` kept (its request's last ones, past those it
    ``covers``) enter the history the source went on from, after its summary: ``message``
    events of reason ``compaction``."""

    call_id: str
    ts: str | None = None


@dataclass(frozen=True)
class Failure:
    where: str
    type: str
    message: str
    ts: str | None = None


@dataclass(frozen=True)
class Unmapped:
    record: Any
    why: str
    ts: str | None = None


@dataclass(frozen=True)
class Ended:
    """The session ended as its source says (an agentrunner export's stop reason and total
    reward, an Inspect sample's score): an ``episode.end`` (reward None: nothing judged it)."""

    stop_reason: str
    total_reward: float | None
    ts: str | None = None


Item = Begin | Said | Edited | Ask | Piece | Answer | Observed | Kept | Failure | Unmapped | Ended
Emit = tuple[str, Item]
"""An item and the key of the session it belongs to ("" for the file's main session)."""


class Parser(Protocol):
    """Turns one source file's records into items (one parser per file and import run)."""

    def feed(self, index: int, record: Any) -> list[Emit]: ...

    def finish(self) -> list[Emit]: ...


class Format(Protocol):
    """A format module's interface."""

    NAME: str
    APPENDS: bool
    """The format's files only grow by whole lines (JSONL): a live import reads only what was
    appended since it last looked. Otherwise a file is rewritten whole and read again."""

    def sniff(self, path: Path, head: str) -> bool: ...

    def records(self, path: Path, *, live: bool) -> list[Any]: ...

    def parser(self, path: Path) -> Parser: ...


@dataclass(frozen=True)
class BadLine:
    """A JSONL line that is not JSON (kept raw as text)."""

    text: str
    problem: str


def jsonl_records(path: Path, *, live: bool) -> list[Any]:
    """A JSONL file's records, one per non-blank line (a line that is not JSON is a
    :class:`BadLine`). A last line without its newline is left for a later import when it is
    not JSON, and always with ``live``: the writer may be in the middle of it."""
    with path.open("rb") as f:
        data = f.read()
    whole = data[: data.rfind(b"\n") + 1]
    rest = [] if live else _jsonl(data[len(whole) :])
    return _jsonl(whole) + [r for r in rest if not isinstance(r, BadLine)]


def unfinished(path: Path) -> bool:
    """Whether a JSONL file ends in a line its writer is in the middle of (no newline yet,
    and not JSON): an import leaves that line, and what it would close, for later."""
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return False
    return any(isinstance(r, BadLine) for r in _jsonl(data[data.rfind(b"\n") + 1 :]))


def jsonl_appended(path: Path, offset: int) -> tuple[list[Any], int]:
    """The records of the whole lines written after byte ``offset``, and the offset after
    them (a last line without its newline waits: the writer may be in the middle of it)."""
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    whole = data[: data.rfind(b"\n") + 1]
    return _jsonl(whole), offset + len(whole)


def _jsonl(data: bytes) -> list[Any]:
    out: list[Any] = []
    for raw in data.split(b"\n"):
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        try:
            out.append(json.loads(text))
        except json.JSONDecodeError as exc:
            out.append(BadLine(text, json_problem(exc)))
    return out


def json_problem(exc: json.JSONDecodeError) -> str:
    """Where a text stops being JSON, in words ("Unterminated string starting at char 5",
    not "... starting at at char 5")."""
    at = "" if exc.msg.endswith(" at") else " at"
    return f"{exc.msg}{at} char {exc.pos}"


def iter_lines(head: str) -> Iterator[dict[str, Any]]:
    """The JSON objects among the first lines of ``head`` (for sniffing JSONL formats)."""
    for line in head.splitlines()[:20]:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def text_of(value: Any) -> str:
    """Text content in the shapes agents write it: a string, or a list of blocks with text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                if isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif block.get("type") in ("image", "input_image", "image_url"):
                    parts.append("[image]")
                else:
                    parts.append(json.dumps(block, ensure_ascii=False, sort_keys=True))
        return "\n".join(parts)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
