"""Rebuilding an episode's state from the store alone: history, totals, dangling work.

``rebuild`` reads the episode's full history (a fork's inherited events included) once,
without its chunk rows, and says exactly where it stands: the message chain (so the next
request is byte for byte what it would have been), the totals, the environment steps to
replay, and what a crash or cancel left open: a ``model.request`` without a response (to be
re-issued) and tool calls of the last assistant message without results (to be run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrunner.errors import StoreError
from agentrunner.events import EVENT_KINDS, EpisodeEnd, EpisodeStart
from agentrunner.recorder import Totals
from agentrunner.runner import PendingCall
from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.types import AgentUsage, Message

_NOT_CHUNKS = tuple(kind for kind in EVENT_KINDS if kind != "model.chunk")


@dataclass(frozen=True)
class EnvStep:
    """One recorded environment step, as needed to replay it."""

    seq: int
    step: int
    call_id: str
    name: str
    arguments: dict[str, Any]
    observation: str
    reward: float | None
    done: bool
    snapshot: str | None


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
    last_error: dict[str, Any] | None = None
    finished: str | None = None  # "done" / "max_steps": the env ended it, no end recorded
    observation: str | None = None  # the last tool result the model saw


def rebuild(store: TraceStore, episode_id: str, *, upto_seq: int | None = None) -> EpisodeState:
    """The state of ``episode_id`` after its last event (or after ``upto_seq``)."""
    episode = store.episode(episode_id)
    start: EpisodeStart | None = None
    tip: str | None = None
    turn = 0
    last_seq = 0
    totals = Totals()
    steps: list[EnvStep] = []
    calls: dict[str, dict[str, Any]] = {}
    results: set[str] = set()
    open_request: dict[str, Any] | None = None
    last_assistant: str | None = None
    ended: EpisodeEnd | None = None
    last_error: dict[str, Any] | None = None
    finished: str | None = None
    observation: str | None = None
    for row in store.iter_events(episode.episode_id, kinds=_NOT_CHUNKS):
        if upto_seq is not None and row.seq > upto_seq:
            break
        p = row.payload
        last_seq, turn, ended = row.seq, row.turn, None
        kind = row.kind
        if kind == "episode.start":
            start = EpisodeStart.model_validate(p)
        elif kind == "model.request":
            open_request = {**p, "seq": row.seq, "turn": row.turn}
        elif kind == "model.response" and p.get("stop_reason") != "incomplete":
            open_request = None
            tip = last_assistant = p["message_hash"]
            calls, results = {}, set()  # call ids matter per assistant message (they repeat)
        elif kind == "usage":
            totals.add_usage(
                AgentUsage.model_validate({k: v for k, v in p.items() if k != "call_id"})
            )
        elif kind == "tool.call":
            calls[p["call_id"]] = p
        elif kind == "tool.result":
            tip = p["message_hash"]
            observation = p["observation"]
            results.add(p["call_id"])
            if p.get("reward") is not None:
                totals.reward += p["reward"]
            if p.get("truncated"):
                finished = "max_steps"
            elif p.get("done"):
                finished = "done"
            if p.get("step") is not None:
                call = calls.get(p["call_id"], {})
                steps.append(
                    EnvStep(
                        seq=row.seq,
                        step=p["step"],
                        call_id=p["call_id"],
                        name=p["name"],
                        arguments=call.get("parsed") or {},
                        observation=p["observation"],
                        reward=p.get("reward"),
                        done=p.get("done", False),
                        snapshot=p.get("snapshot"),
                    )
                )
        elif kind == "message":
            tip = p["message_hash"]
            if p["role"] == "assistant":
                last_assistant = tip
                calls, results = {}, set()
        elif kind == "error":
            last_error = p
        elif kind == "episode.end":
            ended = EpisodeEnd.model_validate(p)
    if start is None:
        raise StoreError(f"episode {episode.episode_id} has no episode.start event")
    messages = store.message_chain(tip)
    state = EpisodeState(
        episode=episode,
        start=start,
        messages=messages,
        tip=tip,
        turn=turn,
        last_seq=last_seq,
        totals=totals,
        env_steps=steps,
        open_request=open_request,
        ended=ended,
        last_error=last_error,
        finished=finished,
        observation=observation,
    )
    if open_request is None and last_assistant is not None:
        _pending_work(state, store.message(last_assistant), last_assistant, calls, results)
    return state


def _pending_work(
    state: EpisodeState,
    assistant: Message,
    assistant_hash: str,
    calls: dict[str, dict[str, Any]],
    results: set[str],
) -> None:
    if assistant.tool_calls:
        state.pending = [
            PendingCall(call, recorded=call.call_id in calls)
            for call in assistant.tool_calls
            if call.call_id not in results
        ]
    else:
        state.needs_continue = state.tip == assistant_hash


def describe_dangling(state: EpisodeState, store: TraceStore) -> list[dict[str, Any]]:
    """What the ``resume`` event says about the work a previous attempt left open."""
    out: list[dict[str, Any]] = []
    if state.open_request is not None:
        req = state.open_request
        chunks = store.conn.execute(
            "SELECT count(*) FROM events WHERE episode_id = ? AND kind = 'model.chunk'"
            " AND json_extract(payload, '$.call_id') = ?",
            (state.episode.episode_id, req["call_id"]),
        ).fetchone()[0]
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
