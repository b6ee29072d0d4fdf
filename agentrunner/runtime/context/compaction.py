"""Compaction calls: a model call that summarizes the older part of an episode's history,
recorded like any call (``model.request`` with ``purpose="compaction"``, its chunks, its
``model.response`` and ``usage``) but never part of the history: the response's message
hangs off the compaction request's own chain, and the history's tip does not move.

A compaction is read back from the log (:func:`recorded_compaction`), so a resumed run or a
fork after it sends the same compacted view, and a fork before it never sees it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agentrunner.runtime import interrupts
from agentrunner.runtime.context.budget import Budget
from agentrunner.runtime.context.policies import Compaction
from agentrunner.runtime.recorder import Recorder
from agentrunner.values.events import COMPACTION, ModelRequest, ModelResponse, Usage
from agentrunner.values.model import AgentContext, Model
from agentrunner.values.types import AgentTurn, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


class Caller(Protocol):
    """The run making the compaction call (the runner's loop): its recorder, the task and
    seed its model calls name, and its cancel check."""

    rec: Recorder
    task_id: str
    seed: int
    cancel_reason: Callable[[], str | None]


def compact(
    run: Caller,
    model: Model,
    budget: Budget,
    request: list[Message],
    covers: int,
    turn: int,
) -> Compaction:
    """Send ``request`` to ``model`` as a compaction call recorded at ``turn``; its answer's
    text is the summary standing for the history's first ``covers`` messages."""
    rec, store = run.rec, run.rec.store
    call_id = f"compact-{turn}-{rec.writer.attempt}"
    tip: str | None = None
    for message in request:
        tip = store.put_message(tip, message)
    assert tip is not None, "a compaction request has messages"
    params = dict(getattr(model, "params", {}) or {})
    recorded_turn, rec.turn = rec.turn, turn
    try:
        rec.chunk_index = 0
        rec.record(
            ModelRequest(
                call_id=call_id,
                tip_hash=tip,
                tools_hash=store.put_tools([]),
                params=params,
                provider=model.provider,
                model=model.model,
                input_tokens_estimate=budget.estimate(request),
                context_window=budget.window,
                purpose=COMPACTION,
                covers=covers,
            )
        )
        context = AgentContext(
            messages=list(request),
            tools=[],
            turn=turn,
            task_id=run.task_id,
            seed=run.seed,
            params=params,
            on_chunk=lambda chunk: rec.chunk(call_id, chunk),
            on_error=lambda exc, attempt: rec.error(
                "generate", exc, retryable=exc.retryable, attempt=attempt
            ),
            cancel_reason=run.cancel_reason,
            purpose=COMPACTION,
        )
        started = time.monotonic()
        answer = model(context)
        if not isinstance(answer, AgentTurn):
            raise TypeError(f"model_fn must return an AgentTurn, got {type(answer).__name__}")
        with interrupts.critical:  # the summary, its usage and the totals: all or nothing
            seq, summary = _record_answer(rec, call_id, tip, answer, time.monotonic() - started)
    finally:
        rec.turn = recorded_turn
    return Compaction(summary, covers, turn, seq)


def _record_answer(
    rec: Recorder, call_id: str, tip: str, answer: AgentTurn, latency_s: float
) -> tuple[int, str]:
    """Record a compaction's answer and usage (the history's tip stays); its seq and text."""
    answer, replaced = rec.scrub_turn(answer)
    rec.redactor.end_streams(f"{call_id}/")
    message = answer.to_message()
    response = ModelResponse(
        call_id=call_id,
        message_hash=rec.store.put_message(tip, message),
        stop_reason=answer.stop_reason,
        provider_request_id=answer.provider_request_id,
        model=answer.model,
        latency_s=round(latency_s, 6),
        refusal=answer.refusal,
        opaque=answer.opaque,
    )
    if replaced:  # as the recorder marks a response whose text UTF-8 could not carry
        response = response.model_copy(update={"replaced_chars": replaced})
    usage = Usage(call_id=call_id, **answer.usage.model_dump())
    seqs = rec.writer.append_together(rec.turn, [response, usage])
    rec.totals.add_usage(answer.usage)
    rec.checkpoint = (seqs[-1], rec.totals.as_dict())
    for seq, payload in zip(seqs, (response, usage), strict=True):
        rec.announce(seq, payload)
    return seqs[0], message.content


class RecordedCompactions:
    """Reads an episode's compactions from its log as it grows (inherited ones too: a
    fork's, a resumed run's); ``last`` is the latest."""

    def __init__(self) -> None:
        self.last: Compaction | None = None
        self._read_seq = 0
        self._open: dict[str, ModelRequest] = {}
        self._turns: dict[str, int] = {}

    def read(self, store: StoreBackend, episode_id: str) -> Compaction | None:
        kinds = ["model.request", "model.response"]
        while page := store.events(episode_id, after_seq=self._read_seq, kinds=kinds):
            for row in page:
                self._read_seq = row.seq
                event = row.typed()
                if isinstance(event, ModelRequest) and event.purpose == COMPACTION:
                    self._open[event.call_id] = event
                    self._turns[event.call_id] = row.turn
                elif isinstance(event, ModelResponse) and event.call_id in self._open:
                    request = self._open.pop(event.call_id)
                    text = store.message(event.message_hash).content
                    turn = self._turns.pop(event.call_id)
                    self.last = Compaction(text, request.covers or 0, turn, row.seq)
        return self.last
