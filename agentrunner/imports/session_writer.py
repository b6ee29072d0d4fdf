"""Imports, one session: append one imported session's items to its episode from where it
stopped (:class:`SessionWriter`), creating the episode on first sight; the orchestration over a
file's sessions is :mod:`agentrunner.imports.importer`, which describes the ``src`` positions.

A compaction the source recorded is written as agentrunner writes its own
(:mod:`agentrunner.runtime.context.compaction`): a ``model.request`` of purpose
``compaction`` (``covers``: the history messages its summary stands for, when known), its
chunks, and a ``model.response`` whose message hangs off the request's chain without moving
the history's tip (it is made at the turn after the last one, and is not a turn of its own, as
a native one); the context the agent went on from starts a chain of its own
(:attr:`~agentrunner.imports.items.Said.fresh`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner import __version__
from agentrunner.envs import imported
from agentrunner.imports.files import one_extends
from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Edited,
    Ended,
    Failure,
    Kept,
    Observed,
    Piece,
    Said,
    Source,
    Unmapped,
)
from agentrunner.imports.pricing import with_cost
from agentrunner.readers.history import NOT_CHUNKS, History
from agentrunner.runtime.recorder import Recorder
from agentrunner.store.eventlog import stored_time
from agentrunner.store.leases import Leases
from agentrunner.store.records import EventRow
from agentrunner.values import events as ev
from agentrunner.values.errors import UsageError
from agentrunner.values.formatting import KEPT_RAW
from agentrunner.values.redaction import Redactor, known_secrets, mask_secret_fields, scrub
from agentrunner.values.specs import ImportedSpec
from agentrunner.values.types import AgentToolCall, AgentTurn, Chunk, Message, ToolSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

FINISH_PART = 1_000_000
"""Parts an import adds when it closes a finished file are numbered from here on its last
record, so that records the file gains later still come after them."""

UNRECORDED = "unrecorded"
"""The stop reason of an imported model call whose source did not record one."""

MAX_SLOT = 1 << 30
"""Above any slot an item's events take (see :meth:`SessionWriter.write`)."""


@dataclass
class SessionReport:
    """What one import did to one session."""

    episode_id: str
    source: Source
    created: bool
    events: int = 0
    kept_raw: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "format": self.source.format,
            "session_id": self.source.session_id,
            "agent": self.source.agent,
            "path": self.source.path,
            "created": self.created,
            "events_added": self.events,
            "kept_raw": self.kept_raw,
            "parent_session": self.source.parent_session,
        }


def source_key(source: Source) -> str:
    """The key an imported session is found by again: its format and its session id."""
    return f"{source.format}:{source.session_id}"


def being_written(episode_id: str, source: str | None = None) -> UsageError:
    """The refusal of an episode whose writer lease another process holds."""
    named = f"{episode_id} ({source})" if source is not None else episode_id
    return UsageError(
        f"episode {named} is being written by another process"
        " (another import, or `import --follow`); wait for it or stop it"
    )


def episode_of(store: StoreBackend, source: Source) -> str | None:
    return store.imported_episode(source_key(source))


def stamp(ts: str | None) -> int | None:
    """An ISO 8601 time as µs since the epoch (UTC when it names no zone); None when absent
    or unreadable."""
    return (stored_time(ts) or None) if ts else None


class SessionWriter:
    """Appends one imported session's items to its episode, from where it stopped."""

    def __init__(
        self,
        store: StoreBackend,
        source: Source,
        *,
        tools: list[ToolSpec],
        digest: str,
        parent_episode: str | None,
        first_ts: int | None = None,
        held: Leases,
    ) -> None:
        self.store = store
        self.source = source
        self.tools = list(source.tools) or tools
        self.tools_from = "source" if source.tools else "calls"
        self.tools_hash = store.put_tools(self.tools)
        self.secrets = known_secrets()
        existing = episode_of(store, source)
        self.created = existing is None
        if existing is not None:
            _check_continues(store, existing, source)
        if existing is None:
            existing = self._create(digest, parent_episode)
            held.hold(existing, claimed=True)  # created claimed
        else:
            held.hold(existing, refused=being_written(existing, source_key(source)))
        self.episode_id = existing
        self.report = SessionReport(existing, source, self.created)
        self.done: tuple[int, ...] = (-1, -1, -1)
        self._at: tuple[int, int] = (-1, -1)
        self._slot = 0
        self.answered: set[str] = set()
        self.open_calls: dict[str, str] = {}  # the source's call id -> the call id recorded
        self.compactions: dict[str, tuple[str | None, int | None]] = {}
        """Compaction calls: recorded call id -> its request's tip and ``covers``."""
        self.continued: Counter[str] = Counter()
        self.names: dict[str, str] = {}  # tool call id -> tool name
        self.closed: list[Any] = []
        """What the import that last finished this file wrote when closing it, and which the
        file, grown since, now gives again further on: not written twice."""
        writer = store.writer(existing)
        if first_ts is not None:  # items before the first timed one take its time
            writer.clock = lambda: first_ts
        self.rec = Recorder(store, writer, secrets=self.secrets)
        self._catch_up()

    def _create(self, digest: str, parent_episode: str | None) -> str:
        """The session's episode, its ``episode.start`` naming the source (what the source
        says about itself is recorded like any other text: recordable, known secrets out, and
        values under secret-looking keys masked)."""
        s = self.source
        told = s.episode  # the episode the source was (an agentrunner export read back)
        if parent_episode is None and told is not None and told.spawned_by is not None:
            parent_episode = self.store.imported_episode(f"{s.format}:{told.spawned_by}")
        env: dict[str, Any] = {
            "kind": imported.KIND,
            "format": s.format,
            "path": s.path,
            "session_id": s.session_id,
            "agent": s.agent,
            "agent_version": s.agent_version,
            "sha256": digest,
            "cwd": s.cwd,
            "title": s.title,
            "parent_call_id": s.parent_call_id,
            "parent_episode": parent_episode,
            **(
                {"spawned_by": {"episode_id": parent_episode, "call_id": s.parent_call_id}}
                if s.parent_session is not None or s.parent_session_id is not None
                else {}
            ),
            "tools": [t.model_dump() for t in self.tools],
            "tools_from": self.tools_from,
            **({"extra": s.extra} if s.extra else {}),
        }
        model = {"spec": f"{s.agent}:{s.model}" if s.model else s.agent, "agent": s.agent}
        if s.model:
            model["model"] = s.model
        model = dict(told.model) if told is not None else model
        redactor = Redactor(self.secrets)
        env = scrub(mask_secret_fields(env), redactor)[0]
        model = scrub(model, redactor)[0]
        start = ev.EpisodeStart(
            task_id=told.task_id if told else s.title or f"{s.agent} {s.session_id}",
            seed=told.seed if told else 0,
            env=env,
            model=model,
            config={"imported_by": f"agentrunner {__version__}"},
            version=__version__,
        )
        fork = _fork_point(self.store, s)
        if fork is not None:  # its own rows start after the records it shares with its parent
            start = start.model_copy(update={"src": [fork[3] - 1, FINISH_PART - 1, MAX_SLOT]})
        return self.store.create_episode(
            task_id=start.task_id,
            seed=start.seed,
            env=env,
            model=model,
            parent_episode_id=fork[0] if fork else None,
            fork_seq=fork[1] if fork else None,
            first_event=(fork[2] if fork else 0, start),
            import_key=source_key(s),
            claim=True,
        )

    def _catch_up(self) -> None:
        """Where the episode stopped: its last position, chain tip, turn and open calls
        (chunks are not read: only the last event's position and a count of them matter)."""
        last = self.store.last_events(self.episode_id, 1)
        if last:
            position = _position(last[-1])
            if position is not None:
                self.done = position
            self.rec.turn = last[-1].turn
        for row in self.store.iter_events(self.episode_id, kinds=NOT_CHUNKS):
            match row.typed():
                case ev.MessageEvent(message_hash=tip):
                    self.rec.tip = tip
                case ev.ToolResult(message_hash=tip):
                    self.rec.tip = tip
                case ev.ModelRequest(call_id=call, purpose=purpose):
                    self.open_calls[_continuation(call)[0]] = call
                    if purpose == ev.COMPACTION:
                        self.compactions[call] = (
                            row.payload["tip_hash"],
                            row.payload.get("covers"),
                        )
                case ev.ModelResponse(call_id=call, message_hash=tip):
                    if call not in self.compactions:  # a summary is not part of the history
                        self.rec.tip = tip
                    source_call, n = _continuation(call)
                    self.open_calls.pop(source_call, None)
                    self.answered.add(source_call)
                    self.continued[source_call] = max(self.continued[source_call], n)
                case ev.ToolCall(call_id=call, name=name):
                    self.names[call] = name
        for call in self.open_calls.values():
            self.rec.chunk_index = self.store.count_chunks(self.episode_id, call)
        answered = last and last[-1].kind in ("model.response", "usage")
        if answered and last[-1].payload.get("call_id") in self.compactions:
            self.rec.turn -= 1  # a compaction is made at the next turn, not as one

    def write(self, index: int, part: int, item: Any) -> None:
        """Append the events of one item that the episode does not have yet.

        Each event is tagged ``src`` = [record index, part, slot]; an item's events have fixed
        slots (opening a call takes slots 0 and 1 whether or not it needs to), so an import
        killed between two events of one item continues with the second.
        """
        if (index, part, MAX_SLOT) <= self.done:
            return
        if item in self.closed:  # written when an earlier import closed the file
            self.closed.remove(item)
            return
        self._at, self._slot = (index, part), 0
        moment = stamp(getattr(item, "ts", None))
        if moment is not None:  # an item without a time keeps the time of the one before
            self.rec.writer.clock = lambda: moment
        before = self.rec.writer.next_seq
        self._item(item)
        self.report.events += self.rec.writer.next_seq - before
        self.done = max(self.done, (index, part, MAX_SLOT))

    def _due(self) -> bool:
        """Take the item's next slot; whether its event is still to be written."""
        position = (*self._at, self._slot)
        self._slot += 1
        if position <= self.done:
            return False
        self.rec.tag = {"src": list(position)}
        return True

    def _call(self, source_call: str, model: str | None, ask: Ask | None = None) -> str:
        """The recorded call id for a source call (slots 0 and 1: opening it when it is not
        open, as ``ask`` says: a compaction call is marked so; a call whose answer an earlier
        import recorded at the end of the file continues as a new call)."""
        first, request = self._due(), self._due()
        if source_call in self.open_calls:
            return self.open_calls[source_call]
        call = source_call
        if source_call in self.answered:
            self.continued[source_call] += 1
            call = f"{source_call}+{self.continued[source_call]}"
        if self.rec.tip is None and first:  # a call before any message: the history is empty
            self.rec.message(Message(role="user", content=""), "prompt")
        if request:
            self.rec.turn += 1
            self.rec.tag["tools_from"] = self.tools_from
            if ask is not None and ask.purpose == ev.COMPACTION:
                self._compaction(call, ask.keeps)
            elif any(_continuation(c)[0] == source_call for c in self.compactions):
                self._compaction(call, None)  # a compaction's answer goes on
            model = model or self.source.model or "unknown"
            self.rec.request(call, self.tools_hash, self.source.agent, model, {})
        self.open_calls[source_call] = call
        return call

    def _compaction(self, call: str, keeps: int | None) -> None:
        """Mark the request about to be written as a compaction's, with what it covers: the
        history but the last ``keeps`` messages (None: unknown)."""
        self.rec.tag["purpose"] = ev.COMPACTION
        covers = None
        if keeps is not None:
            length, at = 0, self.rec.tip
            while at is not None:
                length, at = length + 1, self.store.message_parent(at)
            covers = self.rec.tag["covers"] = max(length - keeps, 0)
        self.compactions[call] = (self.rec.tip, covers)

    def _kept(self, source_call: str) -> None:
        """The messages the source's compaction call kept, again after its summary (one slot
        each; none when what it covers is unknown)."""
        for recorded, (tip, covers) in reversed(self.compactions.items()):
            if _continuation(recorded)[0] == source_call and covers is not None:
                for message in self.store.message_chain(tip)[covers:]:
                    if self._due():
                        self.rec.message(message, ev.COMPACTION)
                return

    def _mark(self, marks: dict[str, Any]) -> None:
        """Keep a source's marks on the event about to be written (``source_marks``)."""
        if marks:
            self.rec.tag["source_marks"] = marks

    def _item(self, item: Any) -> None:
        match item:
            case Begin():
                pass
            case Said(role=role, text=text, marks=marks, reason=told):
                if self._due():
                    self._mark(marks)
                    if item.fresh:  # the context the agent went on from: a chain of its own
                        self.rec.tip = None
                    reason = told or ("system" if role == "system" else "prompt")
                    self.rec.message(Message(role=role, content=text), reason)
            case Edited(message=message):
                if self._due():
                    self.rec.turn += 1
                    self.rec.message(message, "edit")
                for made in message.tool_calls:
                    if self._due():
                        self._tool_call(made)
            case Ask(call_id=call, model=model):
                self._call(call, model, item)
            case Piece(call_id=call, channel=channel, text=text, tool_call_id=tool_call):
                recorded = self._call(call, None)
                if self._due():
                    chunk = Chunk(channel=channel, text=text, tool_call_id=tool_call)
                    self.rec.chunk(recorded, chunk)
            case Answer(call_id=call, turn=turn, latency_s=latency):
                if call in self.answered or call in self.continued:
                    # a continued call answers only with the tool calls not recorded yet
                    fresh = tuple(c for c in turn.tool_calls if c.call_id not in self.names)
                    turn = turn.model_copy(update={"tool_calls": fresh})
                if (*self._at, 2) > self.done:  # its response is not in the log yet
                    recorded = self._call(call, turn.model)
                    self._due()
                    self._mark(item.marks)
                    turn = self._priced(turn)
                    tip = self.rec.tip
                    self.rec.response(recorded, turn, latency or 0.0)
                    if recorded in self.compactions:  # the history's tip and turn stay
                        self.rec.tip = tip
                        self.rec.turn -= 1
                    self.open_calls.pop(call, None)
                    self.answered.add(call)
                self._slot = 3
                for made in turn.tool_calls:
                    if self._due():
                        self._tool_call(made)
            case Observed(call_id=call, name=name, output=output, error=error):
                if self._due():
                    known = self.names.get(call) or name
                    self.rec.tool_result(
                        AgentToolCall(call_id=call, name=known),
                        output,
                        error=error,
                        reward=item.reward,
                        done=item.done,
                        truncated=item.truncated,
                        step=item.step,
                        duration_s=item.duration_s,
                    )
            case Ended(stop_reason=stop_reason, total_reward=reward):
                if self._due():
                    history = History()
                    for row in self.store.iter_events(self.episode_id, kinds=NOT_CHUNKS):
                        history.add(row)
                    end = ev.EpisodeEnd(
                        stop_reason=stop_reason,
                        turns=self.rec.turn,
                        total_reward=reward,
                        totals=history.totals.as_dict(),
                    )
                    self.rec.record(end)
            case Kept(call_id=call):
                self._kept(call)
            case Failure(where=where, type=kind, message=message):
                if self._due():
                    self.rec.failure(where, kind, message)
            case Unmapped(record=record, why=why):
                if self._due():
                    self.rec.failure(*KEPT_RAW, why, raw=_jsonable(record))
                    self.report.kept_raw += 1

    def _tool_call(self, call: AgentToolCall) -> None:
        self.names[call.call_id] = call.name
        self.rec.tool_call(call, *call.checked_arguments())

    def _priced(self, turn: AgentTurn) -> AgentTurn:
        """The answer as recorded: a stop reason saying the source gave none (not "the
        stream broke"), and a cost from genai-prices when the source recorded none."""
        if turn.stop_reason is None:
            turn = turn.model_copy(update={"stop_reason": UNRECORDED})
        hint = self.source.extra.get("price_provider")
        usage = with_cost(
            turn.usage, turn.model or self.source.model, hint if isinstance(hint, str) else None
        )
        return turn.model_copy(update={"usage": usage})


def _check_continues(store: StoreBackend, episode_id: str, source: Source) -> None:
    """A session already imported from another file continues only from a file that one
    is a byte prefix of, or that is a prefix of it (snapshots of one growing session): the
    positions an import continues from are that file's."""
    spec = store.episode(episode_id).env_spec
    before = spec.path if isinstance(spec, ImportedSpec) else None
    if before is None or before == source.path:
        return
    if not Path(before).is_file() or one_extends(Path(before), Path(source.path)):
        return
    raise ValueError(
        f"its session {source.session_id} was imported (episode {episode_id}) from"
        f" {before}, which this file neither continues nor is the start of"
    )


def _fork_point(store: StoreBackend, source: Source) -> tuple[str, int, int, int] | None:
    """Where a session that forks another imported one branches off it: the parent's
    episode, the seq of the last event its shared records gave, that event's turn, and how
    many records they share; None when the parent session is not imported (then the session
    is imported whole)."""
    told = source.episode
    if told is None or told.fork_of is None or told.shared < 1:
        return None
    parent = store.imported_episode(f"{source.format}:{told.fork_of}")
    if parent is None:
        return None
    point: tuple[str, int, int, int] | None = None
    for row in store.iter_events(parent, kinds=NOT_CHUNKS):
        src = _position(row)
        if src is not None and src[0] >= told.shared:
            break
        if src is not None and src[1] < FINISH_PART:
            point = (parent, row.seq, row.turn, told.shared)
    return point


def _continuation(recorded: str) -> tuple[str, int]:
    """The source's call id of a recorded call id, and which continuation of it the recorded
    call is (``id+2``: the second; 0 for the call itself)."""
    base, plus, n = recorded.rpartition("+")
    return (base, int(n)) if plus and n.isdigit() else (recorded, 0)


def _jsonable(record: Any) -> Any:
    """A record as JSON data (a :class:`BadLine` as its fields)."""
    return asdict(record) if is_dataclass(record) and not isinstance(record, type) else record


def _position(row: EventRow) -> tuple[int, int, int] | None:
    """Where in its source file an imported event came from: its ``src`` tag (record index,
    part, slot), or None for an event that has none."""
    src = row.payload.get("src")
    if isinstance(src, list) and len(src) == 3 and all(isinstance(v, int) for v in src):
        return src[0], src[1], src[2]
    return None
