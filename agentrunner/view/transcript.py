"""An episode's transcript as the page shows it: its typed events folded into blocks.

The fold follows ``show``'s renderer and the TUI: messages that enter the history (system
prompt, task, continuation, injected or edited messages), model turns (reasoning, text,
refusal, usage, the tool calls of their answer and each call's result), errors, cancels,
resumes, the end, decision points at their turn, compaction calls (a ``model.request``
whose purpose is ``compaction``: :mod:`agentrunner.view.context_marks` reads what the log
holds about each) and other compactions (a turn's request whose message chain does not
extend the previous turn's: a context policy masked, removed or replaced messages). Reading
is all it does; :mod:`agentrunner.view.blocks` writes the HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentrunner.lifecycle.decision_log import Decision, read_decisions
from agentrunner.request_diff import Call, RequestDiff, diff
from agentrunner.store import EventRow
from agentrunner.store.records import ModelInput
from agentrunner.values import events as ev
from agentrunner.values.errors import StoreError
from agentrunner.values.formatting import GAVE_UP, KEPT_RAW, MESSAGE_LABELS
from agentrunner.values.types import Message
from agentrunner.view.context_marks import CompactionMark, read_compaction

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


@dataclass
class Prompt:
    """A non-model message that entered the history (task, continuation, injection)."""

    seq: int
    turn: int
    reason: str
    role: str
    message: Message | None

    @property
    def label(self) -> str:
        return MESSAGE_LABELS.get(self.reason, self.reason)


@dataclass
class Step:
    """One tool call of a turn's answer and its result (None: never answered)."""

    seq: int
    call: ev.ToolCall
    result: ev.ToolResult | None = None


@dataclass
class ModelTurn:
    """A model turn (streamed, or a message that stands for one: an edit, an adopted action)."""

    seq: int
    turn: int
    label: str
    """``provider:model`` of a model call; the message's label for an edit or adoption."""
    reasoning: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    response: ev.ModelResponse | None = None
    usage: ev.Usage | None = None
    steps: list[Step] = field(default_factory=list)
    message: Message | None = None
    """The answer as stored (what chunks are missing from: an import without chunks)."""
    masked: int = 0
    """Tool outputs its request sent as a ``mask`` placeholder."""


@dataclass
class Notice:
    """An error, cancel, resume or end (``kind``: its event kind), or a run of records an
    import kept raw (``kept``), as one line."""

    seq: int
    turn: int
    kind: str
    text: str


@dataclass
class DecisionPoint:
    seq: int
    decision: Decision


@dataclass
class Compaction:
    """The request at ``seq`` does not extend the previous one: what its messages lost."""

    seq: int
    turn: int
    change: RequestDiff


@dataclass
class Summarized:
    """A compaction call: its summary, what it replaced, the tokens around it."""

    seq: int
    turn: int
    mark: CompactionMark


Block = Prompt | ModelTurn | Notice | DecisionPoint | Compaction | Summarized


@dataclass
class Transcript:
    episode_id: str
    blocks: list[Block]
    own_from: int
    """The first seq the episode wrote itself (a fork inherits the ones before)."""


class _Folder:
    """Folds one episode's events, in seq order, into blocks."""

    def __init__(
        self, store: StoreBackend, episode_id: str, decisions: list[tuple[str, Decision]]
    ) -> None:
        """``decisions``: (the episode that made it, decision) of the episode's lineage."""
        self.store, self.episode_id = store, episode_id
        self.blocks: list[Block] = []
        self.turn: ModelTurn | None = None
        self.request: tuple[int, ev.ModelRequest] | None = None
        self.summarized = False  # a compaction call since the last turn's request
        self.kept_raw: dict[str, int] = {}
        self.kept_raw_at = (0, 0)
        self.adopted = {(ep, d.adopted_seq): d for ep, d in decisions if d.adopted_seq}
        self.unfinished = {(ep, d.seq): d for ep, d in decisions if d.adopted_seq is None}

    def add(self, row: EventRow) -> None:
        payload = row.typed()
        if isinstance(payload, ev.Error) and (payload.where, payload.type) == KEPT_RAW:
            if not self.kept_raw:
                self.kept_raw_at = (row.seq, row.turn)
            self.kept_raw[payload.message] = self.kept_raw.get(payload.message, 0) + 1
            return
        self._flush_kept_raw()
        self._fold(row, payload)
        unfinished = self.unfinished.pop((row.episode_id, row.seq), None)
        if unfinished is not None:  # a decision point not finished: at its seq
            self.blocks.append(DecisionPoint(row.seq, unfinished))

    def _fold(self, row: EventRow, payload: ev.EventPayload) -> None:
        seq, turn = row.seq, row.turn
        match payload:
            case ev.MessageEvent(role="assistant"):
                self._assistant_message(row, payload)
            case ev.MessageEvent():
                message = self._read(payload.message_hash)
                self.blocks.append(Prompt(seq, turn, payload.reason, payload.role, message))
            case ev.ModelRequest():
                self._request(seq, turn, payload)
            case ev.ModelChunk() if self.turn is not None:
                self._chunk(payload)
            case ev.ModelResponse() if self.turn is not None:
                self.turn.response = payload
                if not (self.turn.text or self.turn.reasoning or self.turn.refusal):
                    self.turn.message = self._read(payload.message_hash)
            case ev.Usage() if self.turn is not None:
                self.turn.usage = payload
            case ev.ToolCall():
                self._tool_call(seq, turn, payload)
            case ev.ToolResult():
                self._tool_result(payload)
            case ev.Cancel() | ev.Error() | ev.Resume() | ev.EpisodeEnd():
                self.blocks.append(Notice(seq, turn, payload.kind, _notice(payload)))

    def _assistant_message(self, row: EventRow, payload: ev.MessageEvent) -> None:
        """An edited turn, or a decision point's adopted action (the decision first: only
        on the episode that made it, whose row it is)."""
        seq, turn = row.seq, row.turn
        decision = self.adopted.get((row.episode_id, seq))
        if decision is not None:
            self.blocks.append(DecisionPoint(seq, decision))
        label = MESSAGE_LABELS.get(payload.reason, payload.reason)
        self.turn = ModelTurn(seq, turn, label, message=self._read(payload.message_hash))
        self.blocks.append(self.turn)

    def _request(self, seq: int, turn: int, payload: ev.ModelRequest) -> None:
        if payload.purpose == ev.COMPACTION:  # its answer is the summary, not a turn's
            mark = read_compaction(self.store, self.episode_id, seq)
            self.blocks.append(Summarized(seq, turn, mark))
            self.turn, self.summarized = None, True
            return
        if self.request is not None and not self.summarized:
            compaction = self._compaction(self.request, (seq, payload), turn)
            if compaction is not None:
                self.blocks.append(compaction)
        self.request, self.summarized = (turn, payload), False
        label = f"{payload.provider}:{payload.model}"
        self.turn = ModelTurn(seq, turn, label, masked=payload.masked)
        self.blocks.append(self.turn)

    def _chunk(self, payload: ev.ModelChunk) -> None:
        assert self.turn is not None
        if payload.channel == "reasoning":
            self.turn.reasoning.append(payload.text)
        elif payload.channel == "text":
            self.turn.text.append(payload.text)
        elif payload.channel == "refusal":
            self.turn.refusal.append(payload.text)

    def _tool_call(self, seq: int, turn: int, payload: ev.ToolCall) -> None:
        if self.turn is None:  # a call with no turn before it (an import): a turn of its own
            self.turn = ModelTurn(seq, turn, "tool calls")
            self.blocks.append(self.turn)
        self.turn.steps.append(Step(seq, payload))

    def _tool_result(self, payload: ev.ToolResult) -> None:
        steps = self.turn.steps if self.turn is not None else []
        for step in reversed(steps):  # a re-run after a resume replaces the earlier result
            if step.call.call_id == payload.call_id:
                step.result = payload
                return

    def _flush_kept_raw(self) -> None:
        """A run of records an import kept raw, as one notice at the first of them."""
        if not self.kept_raw:
            return
        held, self.kept_raw = self.kept_raw, {}
        said = "; ".join(f"{n:,} × {why}" for why, n in sorted(held.items(), key=lambda x: -x[1]))
        text = f"kept raw by the import: {sum(held.values()):,} record(s) ({said})"
        self.blocks.append(Notice(*self.kept_raw_at, "kept", text))

    def finish(self) -> None:
        self._flush_kept_raw()

    def _read(self, message_hash: str) -> Message | None:
        try:
            return self.store.message(message_hash)
        except StoreError:
            return None

    def _compaction(
        self, before: tuple[int, ev.ModelRequest], after: tuple[int, ev.ModelRequest], turn: int
    ) -> Compaction | None:
        """A compaction when ``after``'s chain does not hold ``before``'s tip."""
        (old_turn, old), (seq, new) = before, after
        if self._extends(new.tip_hash, old.tip_hash):
            return None
        change = diff(
            Call(old_turn, old.call_id, self._input(old), self.episode_id),
            Call(turn, new.call_id, self._input(new), self.episode_id),
        )
        return Compaction(seq, turn, change)

    def _extends(self, tip: str, earlier: str) -> bool:
        at: str | None = tip
        while at is not None:
            if at == earlier:
                return True
            at = self.store.message_parent(at)
        return False

    def _input(self, request: ev.ModelRequest) -> ModelInput:
        return ModelInput(
            messages=self.store.message_chain(request.tip_hash),
            tools=self.store.tools(request.tools_hash),
            params=dict(request.params),
            provider=request.provider,
            model=request.model,
            tip_hash=request.tip_hash,
        )


def _notice(payload: ev.Cancel | ev.Error | ev.Resume | ev.EpisodeEnd) -> str:
    match payload:
        case ev.Cancel():
            return f"cancelled during {payload.where}: {payload.reason}"
        case ev.Error():
            retry = " (retryable)" if payload.retryable and GAVE_UP not in payload.message else ""
            return f"error in {payload.where}: {payload.type}: {payload.message}{retry}"
        case ev.Resume():
            what = "forked" if payload.reason == "fork" else "resumed"
            dangling = f"; {len(payload.dangling)} dangling call(s)" if payload.dangling else ""
            return f"{what} from seq {payload.from_seq} ({payload.env_restore}){dangling}"
        case ev.EpisodeEnd():
            reward = "not judged" if payload.total_reward is None else f"{payload.total_reward:g}"
            return f"end: {payload.stop_reason} after {payload.turns} turn(s) · reward {reward}"


def read_transcript(store: StoreBackend, episode_id: str) -> Transcript:
    """The transcript of ``episode_id`` (its inherited history included, from seq 1)."""
    summary = store.episode(episode_id)
    lineage = [summary.episode_id, *store.ancestors(summary.episode_id)]
    decisions = [(ep, d) for ep in lineage for d in read_decisions(store, ep)]
    folder = _Folder(store, summary.episode_id, decisions)
    for row in store.iter_events(summary.episode_id):
        folder.add(row)
    folder.finish()
    return Transcript(summary.episode_id, folder.blocks, (summary.fork_seq or 0) + 1)
