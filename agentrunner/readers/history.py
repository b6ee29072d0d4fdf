"""The one reader of an episode's log: a fold over its typed events (across its fork lineage).

Every part of agentrunner that needs to know what happened in an episode (resume's state
rebuild, verifiers, export, ``show``, ``replay``, the TUI) reads it through :func:`fold`, which
``match``es on the event union, so a renamed payload field is a type error, not a silent
``None``. Tool calls are judged per assistant message everywhere: a provider may reuse a
call id on later turns, and each use is its own call, with its own result.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agentrunner.store.records import EventRow
from agentrunner.values.events import (
    COMPACTION,
    EVENT_KINDS,
    Cancel,
    EpisodeEnd,
    EpisodeStart,
    Error,
    MessageEvent,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    Resume,
    StopReason,
    ToolCall,
    ToolResult,
    Usage,
)
from agentrunner.values.types import AgentUsage

NOT_CHUNKS = tuple(kind for kind in EVENT_KINDS if kind != "model.chunk")
"""What a fold needs (chunks only repeat what responses hold): read these kinds."""


class Totals:
    """Running totals over an episode's history: reward, tokens and cost."""

    def __init__(self) -> None:
        self.reward: float | None = 0.0
        """The sum of the rewards steps carried; None when the episode ended on a step
        without one and none carried one (a task nothing judges: unknown, never 0)."""
        self._rewarded = False
        self.tokens = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0}
        self.cost_usd: float | None = None

    def add_usage(self, usage: AgentUsage) -> None:
        # an unknown count (None) adds nothing: the totals are of what is known
        self.tokens["input"] += usage.input_tokens or 0
        self.tokens["output"] += usage.output_tokens or 0
        self.tokens["cache_read"] += usage.cache_read_tokens or 0
        self.tokens["cache_write"] += usage.cache_write_tokens or 0
        self.tokens["reasoning"] += usage.reasoning_tokens or 0
        if usage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd

    def add_result(self, reward: float | None, *, done: bool) -> None:
        """Count one step's result: its reward, or, on a final step without one, that
        nothing judged the episode (unless an earlier step carried a reward)."""
        if reward is not None:
            self.reward = (self.reward or 0.0) + reward
            self._rewarded = True
        elif done and not self._rewarded:
            self.reward = None

    def as_dict(self) -> dict[str, object]:
        return {"tokens": dict(self.tokens), "cost_usd": self.cost_usd, "reward": self.reward}


@dataclass
class ToolUse:
    """One tool call the model made (one entry of an assistant message), and its result."""

    seq: int
    turn: int
    call: ToolCall
    result: ToolResult | None = None
    result_seq: int | None = None

    @property
    def ran(self) -> bool:
        """The environment executed it (a step was taken)."""
        return self.result is not None and self.result.step is not None


@dataclass(frozen=True)
class EnvStep:
    """One recorded environment step, as needed to replay it."""

    seq: int
    step: int
    call_id: str
    name: str
    arguments: dict[str, object]
    observation: str
    reward: float | None
    done: bool
    snapshot: str | None


@dataclass
class History:
    """What an episode's log says, folded event by event."""

    start: EpisodeStart | None = None
    last_seq: int = 0
    turn: int = 0
    tip: str | None = None
    """The message chain's tip: the input of the next model call."""
    totals: Totals = field(default_factory=Totals)
    tool_uses: list[ToolUse] = field(default_factory=list)
    steps: list[EnvStep] = field(default_factory=list)
    open_request: tuple[int, int, ModelRequest] | None = None
    """(seq, turn, request) of a model call that has no complete response."""
    last_assistant: str | None = None
    """Hash of the last assistant message (a response, or an edited one)."""
    current: dict[str, ToolUse] = field(default_factory=dict)
    """The last assistant message's tool calls recorded so far, by call id."""
    answered: set[str] = field(default_factory=set)
    """Which of them have a result."""
    ended: EpisodeEnd | None = None
    """The ``episode.end`` if it is the last event (a resume after it makes it None)."""
    last_error: Error | None = None
    cancels: list[Cancel] = field(default_factory=list)
    resumes: list[Resume] = field(default_factory=list)
    finished: StopReason | None = None
    """``done`` / ``max_steps``: the environment ended the episode (an end may be missing)."""
    observation: str | None = None
    """The last tool result the model saw."""

    def add(self, row: EventRow) -> None:
        """Fold one more event in."""
        self.last_seq, self.turn = row.seq, row.turn
        event = row.typed()
        if not isinstance(event, EpisodeEnd):
            self.ended = None
        match event:
            case EpisodeStart():
                self.start = event
            case ModelRequest():
                self.open_request = (row.seq, row.turn, event)
            case ModelResponse() if event.stop_reason != StopReason.INCOMPLETE:
                compaction = (
                    self.open_request is not None and self.open_request[2].purpose == COMPACTION
                )
                self.open_request = None
                if not compaction:  # a compaction's answer is not part of the history
                    self.tip = self.last_assistant = event.message_hash
                    self._new_assistant_message()
            case Usage():
                self.totals.add_usage(event)
            case ToolCall():
                use = ToolUse(row.seq, row.turn, event)
                self.current[event.call_id] = use
                self.tool_uses.append(use)
            case ToolResult():
                self._result(row, event)
            case MessageEvent():
                self.tip = event.message_hash
                if event.role == "assistant":
                    self.last_assistant = event.message_hash
                    self._new_assistant_message()
            case Error():
                self.last_error = event
            case Cancel():
                self.cancels.append(event)
            case Resume():
                self.resumes.append(event)
            case EpisodeEnd():
                self.ended = event
            case ModelChunk() | ModelResponse():
                pass  # chunks repeat the response; an incomplete response is no answer

    def _new_assistant_message(self) -> None:
        self.current, self.answered = {}, set()  # call ids matter per assistant message

    def _result(self, row: EventRow, event: ToolResult) -> None:
        self.tip = event.message_hash
        self.observation = event.observation
        self.answered.add(event.call_id)
        use = self.current.get(event.call_id)
        if use is not None:  # a re-run after a resume replaces the earlier result
            use.result, use.result_seq = event, row.seq
        self.totals.add_result(event.reward, done=event.done)
        if event.truncated:
            self.finished = StopReason.MAX_STEPS
        elif event.done:
            self.finished = StopReason.DONE
        if event.step is not None:
            self.steps.append(
                EnvStep(
                    seq=row.seq,
                    step=event.step,
                    call_id=event.call_id,
                    name=event.name,
                    arguments=dict(use.call.parsed or {}) if use is not None else {},
                    observation=event.observation,
                    reward=event.reward,
                    done=event.done,
                    snapshot=event.snapshot,
                )
            )


def fold(rows: Iterable[EventRow], *, upto_seq: int | None = None) -> History:
    """The history of an episode from its events in seq order (up to ``upto_seq``)."""
    history = History()
    for row in rows:
        if upto_seq is not None and row.seq > upto_seq:
            break
        history.add(row)
    return history
