"""Where an episode stands, rebuilt from the store alone: history, totals, dangling work.

``rebuild`` folds the episode's full history (a fork's inherited events included, chunks
left out) with :func:`agentrunner.readers.history.fold` and
says exactly where it stands: the message
chain (so the next request is byte for byte what it would have been), the totals, the
environment steps to replay, and what a crash or cancel left open: a ``model.request``
without a response (to be re-issued) and tool calls of the last assistant message without
results (to be run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentrunner.readers.history import NOT_CHUNKS, EnvStep, History, Totals, fold
from agentrunner.store import EpisodeSummary
from agentrunner.values.errors import StoreError
from agentrunner.values.events import EpisodeEnd, EpisodeStart, Error, StopReason
from agentrunner.values.types import AgentToolCall, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

__all__ = ["EnvStep", "EpisodeState", "PendingCall", "Totals", "describe_dangling", "rebuild"]


@dataclass
class PendingCall:
    """A tool call of the last assistant message that has no result yet.

    ``recorded`` says its ``tool.call`` is already in the log (a dangling call, re-run
    without a second ``tool.call``); otherwise it is recorded before it runs.
    """

    call: AgentToolCall
    recorded: bool


@dataclass
class EpisodeState:
    """Where an episode stands, rebuilt from its log."""

    episode: EpisodeSummary
    start: EpisodeStart
    messages: list[Message]
    tip: str | None
    turn: int
    last_seq: int
    totals: Totals
    env_steps: list[EnvStep]
    open_request: dict[str, Any] | None = None
    pending: list[PendingCall] = field(default_factory=list)
    needs_continue: bool = False
    ended: EpisodeEnd | None = None
    last_error: Error | None = None
    finished: StopReason | None = None  # done / max_steps: the env ended it, no end recorded
    observation: str | None = None  # the last tool result the model saw


def rebuild(store: StoreBackend, episode_id: str, *, upto_seq: int | None = None) -> EpisodeState:
    """The state of ``episode_id`` after its last event (or after ``upto_seq``)."""
    episode = store.episode(episode_id)
    history = fold(store.iter_events(episode.episode_id, kinds=NOT_CHUNKS), upto_seq=upto_seq)
    if history.start is None:
        raise StoreError(f"episode {episode.episode_id} has no episode.start event")
    open_request = None
    if history.open_request is not None:
        seq, turn, request = history.open_request
        open_request = {**request.model_dump(exclude={"kind"}), "seq": seq, "turn": turn}
    state = EpisodeState(
        episode=episode,
        start=history.start,
        messages=store.message_chain(history.tip),
        tip=history.tip,
        turn=history.turn,
        last_seq=history.last_seq,
        totals=history.totals,
        env_steps=history.steps,
        open_request=open_request,
        ended=history.ended,
        last_error=history.last_error,
        finished=history.finished,
        observation=history.observation,
    )
    if history.open_request is None and history.last_assistant is not None:
        _pending_work(state, store.message(history.last_assistant), history)
    return state


def _pending_work(state: EpisodeState, assistant: Message, history: History) -> None:
    if assistant.tool_calls:
        state.pending = [
            PendingCall(call, recorded=call.call_id in history.current)
            for call in assistant.tool_calls
            if call.call_id not in history.answered
        ]
    else:
        state.needs_continue = state.tip == history.last_assistant


def describe_dangling(state: EpisodeState, store: StoreBackend) -> list[dict[str, Any]]:
    """What the ``resume`` event says about the work a previous attempt left open."""
    out: list[dict[str, Any]] = []
    if state.open_request is not None:
        req = state.open_request
        chunks = store.count_chunks(state.episode.episode_id, str(req["call_id"]))
        out.append(
            {
                "kind": "model.request",
                "seq": req["seq"],
                "call_id": req["call_id"],
                "turn": req["turn"],
                "partial_chunks": chunks,
                "action": "reissued; its partial chunks were interrupted",
            }
        )
    for pending in state.pending:
        out.append(
            {
                "kind": "tool.call",
                "call_id": pending.call.call_id,
                "name": pending.call.name,
                "action": "re-run" if pending.recorded else "run (never started)",
            }
        )
    if state.needs_continue:
        out.append({"kind": "message", "action": "continuation message added"})
    return out
