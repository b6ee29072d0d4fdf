"""``Recorder``: turns what happens in one episode into appended events.

It owns the episode's writer, the message chain's tip and the running totals, and tells an
optional observer about every event it commits (the CLI's live view, the TUI). Every text it
writes (chunks, messages, tool arguments and results, errors) is first made recordable and
cleared of known secrets (:mod:`agentrunner.values.redaction`); a payload whose text had characters
UTF-8 cannot carry says how many in ``replaced_chars``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic_core import to_json

from agentrunner.readers.history import Totals
from agentrunner.runtime import interrupts
from agentrunner.values import events as ev
from agentrunner.values.redaction import Redactor, recordable, scrub
from agentrunner.values.types import AgentToolCall, AgentTurn, Chunk, Message

if TYPE_CHECKING:
    from agentrunner.store.protocol import EventWriter, StoreBackend

Observer = Callable[[int, int, BaseModel], None]


class Recorder:
    """Appends one episode's events; keeps the chain tip and totals."""

    def __init__(
        self,
        store: StoreBackend,
        writer: EventWriter,
        *,
        secrets: dict[str, str],
        tip: str | None = None,
        observer: Observer | None = None,
    ) -> None:
        self.store = store
        self.writer = writer
        self.secrets = secrets
        self.redactor = Redactor(secrets)
        self.tip = tip
        self.messages: list[Message] = []
        self.totals = Totals()
        self.observer = observer
        bind = getattr(observer, "bind_episode", None)
        if callable(bind):  # an observer that shows the episode's id (the CLI's live view)
            bind(writer.episode_id)
        self.halt: str | None = None
        """Set when the run must stop (its observer's output was closed): a cancel reason."""
        self.turn = 0
        self.tag: dict[str, Any] = {}
        """Fields added to every event's payload (an importer's position in its source)."""
        self.chunk_index = 0
        """The next chunk's index in the current model call (set when continuing one)."""
        # (seq, totals) right after the last event that changed the totals: read by the
        # heartbeat thread (one attribute, so it is always a consistent pair).
        self.checkpoint: tuple[int, dict[str, Any]] | None = None

    @property
    def episode_id(self) -> str:
        return self.writer.episode_id

    def _append(self, payload: BaseModel) -> int:
        # Ctrl-C is deferred until the observer has seen the committed event.
        if self.tag:
            payload = payload.model_copy(update=self.tag)
        with interrupts.critical:
            seq = self.writer.append_deferred(self.turn, payload)
            if self.observer is not None:
                self._show(seq, payload)
        return seq

    def _show(self, seq: int, payload: BaseModel) -> None:
        if self.observer is not None:
            try:
                self.observer(seq, self.turn, payload)
            except OSError as exc:  # `run | head`: nobody watches any more
                self.observer = None
                self.halt = f"the live view's output was closed ({exc.strerror or exc})"

    def _extend_chain(self, message: Message) -> str:
        self.tip = self.store.put_message(self.tip, message)
        self.messages.append(message)
        return self.tip

    def _text(self, text: str) -> tuple[str, int]:
        """Text as it may be recorded: lone surrogates replaced (counted), secrets redacted."""
        clean, replaced = recordable(text)
        return self.redactor.text(clean), replaced

    def _walk(self, value: Any, *, redact: bool) -> tuple[Any, int]:
        return scrub(value, self.redactor if redact else None)

    def scrub_turn(self, turn: AgentTurn) -> tuple[AgentTurn, int]:
        """A model's turn as it will be recorded and acted on (the runner executes exactly
        what is recorded): secrets redacted, lone surrogates replaced; and how many were.
        Provider-opaque parts are kept verbatim (signed reasoning must not change), only made
        recordable."""
        data = turn.model_dump()
        opaque = data.pop("opaque")
        cleaned, replaced = self._walk(data, redact=True)
        opaque_clean, opaque_replaced = self._walk(opaque, redact=False)
        scrubbed = AgentTurn.model_validate({**cleaned, "opaque": opaque_clean})
        return scrubbed, replaced + opaque_replaced

    def _message(self, message: Message) -> Message:
        data = message.model_dump()
        opaque = data.pop("opaque")
        cleaned, _ = self._walk(data, redact=True)
        opaque_clean, _ = self._walk(opaque, redact=False)
        return Message.model_validate({**cleaned, "opaque": opaque_clean})

    # -- events, in the order an episode produces them

    def start(self, **fields: Any) -> None:
        self._append(ev.EpisodeStart(**fields))

    def record(self, payload: BaseModel) -> int:
        """Append an event made elsewhere (an ``episode.start``)."""
        return self._append(payload)

    def announce(self, seq: int, payload: BaseModel) -> None:
        """Tell the observer about an event the store wrote itself (with the episode)."""
        self._show(seq, payload)

    def resume(self, **fields: Any) -> None:
        self._append(ev.Resume(**fields))

    def message(self, message: Message, reason: str) -> None:
        digest = self._extend_chain(self._message(message))
        self._append(ev.MessageEvent(role=message.role, message_hash=digest, reason=reason))

    def request(
        self, call_id: str, tools_hash: str, provider: str, model: str, params: dict[str, Any]
    ) -> None:
        self.chunk_index = 0
        assert self.tip is not None, "a model request needs at least one message"
        self._append(
            ev.ModelRequest(
                call_id=call_id,
                tip_hash=self.tip,
                tools_hash=tools_hash,
                params=params,
                provider=provider,
                model=model,
            )
        )

    def chunk(self, call_id: str, chunk: Chunk) -> None:
        text, replaced = recordable(chunk.text)
        if self.redactor:
            text = self.redactor.stream(f"{call_id}/{chunk.channel}/{chunk.tool_call_id}", text)
        # The hot path (most events are chunks): the payload is ModelChunk's fields in its
        # order, serialised by pydantic-core as model_dump_json would; a test checks they match.
        fields: dict[str, Any] = {
            "call_id": call_id,
            "channel": chunk.channel,
            "index": self.chunk_index,
            "text": text,
            "tool_call_id": chunk.tool_call_id,
        }
        if replaced:
            fields["replaced_chars"] = replaced
        if self.tag:
            fields.update(self.tag)
        with interrupts.critical:
            seq = self.writer.append_json(self.turn, "model.chunk", to_json(fields).decode())
            if self.observer is not None:
                self._show(seq, ev.ModelChunk(**fields))
        self.chunk_index += 1

    def response(self, call_id: str, turn: AgentTurn, latency_s: float, **fields: Any) -> AgentTurn:
        """Record a model's answer and its usage; return the turn as recorded (scrubbed),
        which is what the runner acts on. ``fields`` are added to the ``model.response``
        (the recording proxy's ``answer``: how the answer's bytes were kept)."""
        with interrupts.critical:  # the response, its usage and the totals: all or nothing
            return self._response(call_id, turn, latency_s, fields)

    def _response(
        self, call_id: str, turn: AgentTurn, latency_s: float, fields: dict[str, Any]
    ) -> AgentTurn:
        turn, replaced = self.scrub_turn(turn)
        self.redactor.end_streams(f"{call_id}/")
        message = turn.to_message()
        digest = self._extend_chain(message)
        response = ev.ModelResponse(
            call_id=call_id,
            message_hash=digest,
            stop_reason=turn.stop_reason,
            provider_request_id=turn.provider_request_id,
            model=turn.model,
            latency_s=round(latency_s, 6),
            refusal=turn.refusal,
            opaque=turn.opaque,
            **_replaced(replaced),
            **fields,
        )
        usage = ev.Usage(call_id=call_id, **turn.usage.model_dump())
        if self.tag:
            response = response.model_copy(update=self.tag)
            usage = usage.model_copy(update=self.tag)
        # One transaction: a crash never keeps the answer and loses what it cost.
        seqs = self.writer.append_together(self.turn, [response, usage])
        self.totals.add_usage(turn.usage)
        self.checkpoint = (seqs[-1], self.totals.as_dict())
        for seq, payload in zip(seqs, (response, usage), strict=True):
            self._show(seq, payload)
        return turn

    def tool_call(
        self, call: AgentToolCall, parsed: dict[str, Any] | None, error: str | None
    ) -> None:
        self._append(
            ev.ToolCall(
                call_id=call.call_id,
                name=call.name,
                arguments=call.arguments,
                parsed=parsed,
                parse_error=error,
            )
        )

    def tool_result(
        self,
        call: AgentToolCall,
        observation: str,
        *,
        reward: float | None = None,
        done: bool = False,
        error: str | None = None,
        duration_s: float = 0.0,
        snapshot: str | None = None,
        step: int | None = None,
        truncated: bool = False,
    ) -> str:
        """Record a result and its tool message; return the observation as recorded (cleared
        of known secrets in their costlier forms too, the rest of one the previous result cut)."""
        observation, replaced = recordable(observation)
        observation = self.redactor.result(observation)
        if error is not None:
            error = self.redactor.deep(recordable(error)[0])
        message = Message(
            role="tool", content=observation, tool_call_id=call.call_id, name=call.name
        )
        digest = self._extend_chain(message)
        self.totals.add_result(reward, done=done)
        seq = self._append(
            ev.ToolResult(
                call_id=call.call_id,
                name=call.name,
                observation=observation,
                reward=reward,
                done=done,
                error=error,
                duration_s=round(duration_s, 6),
                message_hash=digest,
                snapshot=snapshot,
                step=step,
                truncated=truncated,
                **_replaced(replaced),
            )
        )
        self.checkpoint = (seq, self.totals.as_dict())
        return observation

    def cancel(self, where: str, reason: str) -> None:
        self._append(ev.Cancel(where=where, reason=self._text(reason)[0]))  # type: ignore[arg-type]

    def error(
        self, where: str, exc: BaseException, *, retryable: bool = False, attempt: int = 1
    ) -> None:
        name = type(exc).__name__
        self.failure(where, name, str(exc) or name, retryable=retryable, attempt=attempt)

    def failure(
        self,
        where: str,
        kind: str,
        message: str,
        *,
        retryable: bool = False,
        attempt: int = 1,
        raw: Any = None,
    ) -> None:
        """An ``error`` event; ``raw`` keeps a record verbatim (an importer's unmapped
        record), made recordable and cleared of known secrets like every other text."""
        extra = {} if raw is None else {"raw": self._walk(raw, redact=True)[0]}
        self._append(
            ev.Error(
                where=where,
                type=kind,
                message=self._text(message)[0],
                retryable=retryable,
                attempt=attempt,
                **extra,
            )
        )

    def end(self, stop_reason: str, turns: int) -> None:
        self._append(
            ev.EpisodeEnd(
                stop_reason=stop_reason,
                turns=turns,
                total_reward=self.totals.reward,
                totals=self.totals.as_dict(),
            )
        )


def _replaced(count: int) -> dict[str, Any]:
    """The payload field saying how many characters UTF-8 could not carry (only when some)."""
    return {"replaced_chars": count} if count else {}
