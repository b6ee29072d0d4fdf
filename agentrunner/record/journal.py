"""The proxy's one writer: every recorded event is appended by this thread, in arrival order.

The proxy hands it work and goes on forwarding bytes: a request is appended before it is
forwarded (the proxy waits for that one append), chunks, answers, tool calls, errors and
cancels are appended off the forwarding path. Parsing (bodies, SSE, the dialects' folds)
happens here too, never in the proxy's event loop. Between jobs it refreshes the writer
leases of the open episodes, so a proxy that dies leaves them ``interrupted``. With a
folder to snapshot (``record --snapshots``), a request's snapshot is taken here too, before
the request is recorded (see :mod:`agentrunner.record.snapshots`).
"""

from __future__ import annotations

import hashlib
import json
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.record.conversations import Conversation, keys, spawned
from agentrunner.record.dialects import dialect
from agentrunner.record.dialects.base import Dialect, SseDecoder, builder, stream_events
from agentrunner.record.episodes import Episodes, Origin, chain_of
from agentrunner.record.snapshots import FolderSnapshots
from agentrunner.store import TraceStore
from agentrunner.store.control import HEARTBEAT_INTERVAL_S
from agentrunner.values import events as ev
from agentrunner.values.errors import EnvironmentFailure
from agentrunner.values.redaction import scrub
from agentrunner.values.types import Chunk, Message
from providers.streaming import StreamFailure
from providers.turn_builder import TurnBuilder
from providers.usage import priced

if TYPE_CHECKING:
    from agentrunner.runtime.recorder import Observer
    from agentrunner.store.protocol import StoreBackend

_Job = tuple[Callable[[], Any], "Future[Any]", bool]
"""A job for the writer thread, its result, and whether it only appends streamed pieces."""
BATCH = 512
"""Jobs taken from the queue at once (streamed pieces among them share a commit)."""
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
ERROR_TEXT_LIMIT = 4000


@dataclass
class Call:
    """One model call passing through the proxy (touched by the journal's thread only)."""

    api: Dialect
    conversation: Conversation
    call_id: str
    turn: int
    stream: bool
    model: str
    fold: Any
    builder: TurnBuilder
    chunks: list[Chunk]
    started: float = field(default_factory=time.monotonic)
    decoder: SseDecoder = field(default_factory=SseDecoder)
    body: list[bytes] = field(default_factory=list)
    """The answer's bytes as they passed (kept whole: a replay serves them back)."""
    status: int = 200
    content_type: str | None = None
    chunk_index: int = 0
    failure: str | None = None
    done: bool = False


class Journal:
    """The writer thread and what it knows: the store, the conversations, the secrets."""

    def __init__(
        self,
        location: str,
        origin: Origin,
        *,
        folder: Path | None = None,
        observer_factory: Callable[[], Observer] | None = None,
    ) -> None:
        self.location = location
        self.origin = origin
        self.folder = folder  # the agent's working folder, snapshotted at each request
        self.observer_factory = observer_factory
        """Gives each recorded episode an observer of its events (live OTLP export)."""
        self._snapshots: FolderSnapshots | None = None
        self.problems: list[str] = []
        self._episodes: Episodes | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._store: StoreBackend | None = None
        self._opened: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name="agentrunner-journal", daemon=True)

    # -- the thread

    def start(self) -> None:
        """Open the store in the writer thread; raises what opening it raised."""
        self._thread.start()
        self._opened.result()

    def submit(self, job: Callable[[], Any], *, streamed: bool = False) -> Future[Any]:
        """Hand the thread a job; ``streamed``: it only records pieces of an answer, which
        may share a commit with the pieces around them."""
        future: Future[Any] = Future()
        self._jobs.put((job, future, streamed))
        return future

    def close(self, stop_reason: str = "done", **end: Any) -> None:
        """End every open episode and stop the thread (after the jobs already handed in)."""
        if not self._thread.is_alive():
            return
        self.submit(lambda: self.episodes.end_all(stop_reason, end)).result()
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        try:
            self._store = TraceStore(self.location)
        except BaseException as exc:
            self._opened.set_exception(exc)
            return
        self._episodes = Episodes(
            self._store, self.origin, self._problem, observer_factory=self.observer_factory
        )
        if self.folder is not None:
            self._snapshots = FolderSnapshots(self.folder, self._store, self._problem)
        try:
            self.episodes.reload()
        except Exception as exc:  # a store it cannot read back: recording goes on all the same
            self._problem(f"reading back interrupted recordings: {exc}")
        self._opened.set_result(None)
        beat = time.monotonic()
        try:
            while True:
                try:
                    jobs = [self._jobs.get(timeout=HEARTBEAT_INTERVAL_S)]
                except queue.Empty:
                    jobs = []
                while jobs and jobs[-1] is not None and len(jobs) < BATCH:
                    try:
                        jobs.append(self._jobs.get_nowait())
                    except queue.Empty:
                        break
                self._work([job for job in jobs if job is not None])
                if jobs and jobs[-1] is None:
                    return
                if time.monotonic() - beat >= HEARTBEAT_INTERVAL_S:
                    beat = time.monotonic()
                    self.episodes.heartbeat()
        finally:
            self._store.close()

    def _work(self, jobs: list[_Job]) -> None:
        """Run the jobs in order; a run of streamed pieces (``feed``) shares one commit, the
        rest commit as they go (a request before it is forwarded, an answer with its usage)."""
        i = 0
        while i < len(jobs):
            j = i
            while j < len(jobs) and jobs[j][2]:
                j += 1
            if j > i + 1:
                try:
                    with self.store.atomic():
                        done = [self._do(job) for job in jobs[i:j]]
                except Exception as exc:  # the shared commit failed: those pieces are lost
                    self._problem(f"{type(exc).__name__}: {exc}")
                    done = [(None, exc)] * (j - i)
                for (_, future, _), result in zip(jobs[i:j], done, strict=True):
                    _settle(future, result)
                i = j
            else:
                _settle(jobs[i][1], self._do(jobs[i]))
                i += 1

    def _do(self, job: _Job) -> tuple[Any, BaseException | None]:
        try:
            return job[0](), None
        except Exception as exc:  # a recording problem never stops the proxy
            self._problem(f"{type(exc).__name__}: {exc}")
            return None, exc

    @property
    def store(self) -> StoreBackend:
        assert self._store is not None, "the journal's thread has not opened the store"
        return self._store

    @property
    def episodes(self) -> Episodes:
        assert self._episodes is not None, "the journal's thread has not opened the store"
        return self._episodes

    def _problem(self, text: str) -> None:
        self.problems.append(text)
        print(f"agentrunner record: could not record: {text}", file=sys.stderr)

    # -- calls (each runs in the thread, through submit)

    def prime(self) -> EnvironmentFailure | None:
        """The folder's first snapshot, before the agent runs; what stops it is returned
        (for the caller to raise), not reported as a recording problem."""
        if self._snapshots is not None:
            try:
                self._snapshots.take(self.episodes.secrets, strict=True)
            except EnvironmentFailure as exc:
                return exc
        return None

    def begin(
        self,
        api: str,
        body: bytes,
        session: str | None,
        agent: str | None,
        into: Conversation | None = None,
        path: str = "",
        *,
        parent_session: str | None = None,
    ) -> Call:
        """Append what a request adds (tool results, messages) and its ``model.request``, in
        the conversation it continues (``into``: a fork made for it); ``path`` is the
        request's path and query (where Gemini names the model); ``parent_session``: the
        session the client names as the one that started this one (a sub-agent's)."""
        wire = dialect(api)
        split = wire.split(json.loads(body), path)
        book = self.episodes
        snaps = self._snapshots  # the folder after the tools whose results the request carries
        snapshot = snaps.take(book.secrets) if snaps is not None else None
        messages = [book.scrub(m, deep=bool(wire.tool_outputs(m))) for m in split.messages]
        redactor = book.redactor
        chain = chain_of(messages)
        compared = keys(messages)
        conversation = (
            into
            or self.episodes.conversations.find(session, compared)
            or self.episodes.wake(session, compared)
        )
        if conversation is None:
            conversation = self.episodes.open(
                wire,
                split.model,
                session,
                agent,
                messages,
                snapshot=snapshot,
                parent_session=parent_session,
            )
        rec = conversation.recorder
        stored = _shared_prefix(conversation.chain, chain)
        parent = chain[stored - 1] if stored else None
        for m, digest in zip(messages[stored:], chain[stored:], strict=True):
            self.store.put_message(parent, m)
            parent = digest
        known = _shared_prefix(conversation.keys, compared)
        added = messages[known:]
        self._added(conversation, wire, added, chain[known:], first=not known, snapshot=snapshot)
        rec.tip = chain[-1] if chain else None
        self.episodes.conversations.advance(conversation, chain, compared)
        conversation.calls += 1
        rec.turn = conversation.calls
        tools = [t.model_copy(update={"raw": scrub(t.raw, redactor)[0]}) for t in split.tools]
        call_id = f"call-{conversation.calls}-{uuid.uuid4().hex[:12]}"  # unique: retries too
        rec.chunk_index = 0
        rec.record(
            ev.ModelRequest.model_validate(
                {
                    "call_id": call_id,
                    "tip_hash": rec.tip or self.store.put_message(None, Message(role="user")),
                    "tools_hash": self.store.put_tools(tools),
                    "params": scrub(split.params, redactor)[0],
                    "provider": wire.provider,
                    "model": split.model,
                    "api": wire.api,  # the wire API, which rebuilds the exact body
                }
            )
        )
        chunks: list[Chunk] = []
        return Call(
            api=wire,
            conversation=conversation,
            call_id=call_id,
            turn=conversation.calls,
            stream=split.stream,
            model=split.model,
            fold=wire.new_fold(),
            builder=builder(wire.provider, split.model, chunks),
            chunks=chunks,
        )

    def _added(
        self,
        conversation: Conversation,
        wire: Dialect,
        messages: list[Message],
        hashes: list[str],
        *,
        first: bool,
        snapshot: str | None = None,
    ) -> None:
        """Events for the messages a request adds: the results of the model's tool calls
        (``tool.result``, in the turn that made the calls) and any other message the client
        put in (``message``); the model's own answer was recorded as it came. The folder's
        ``snapshot`` goes on the last tool result, or on the last message of a request that
        carries none (an agent that acts on the model's words, not through tool calls)."""
        rec = conversation.recorder
        every = [wire.tool_outputs(m) for m in messages]
        last = next((out[-1] for out in reversed(every) if out), None)
        said = [  # the messages recorded as ``message`` events
            not (m.role == "assistant" and not first) and not (outputs and not m.content)
            for m, outputs in zip(messages, every, strict=True)
        ]
        after = None
        if last is None and not first and snapshot and any(said):
            after = len(said) - 1 - said[::-1].index(True)
        for i, (m, digest, outputs) in enumerate(zip(messages, hashes, every, strict=True)):
            for out in outputs:
                name = conversation.open_calls.pop(out.call_id, None)
                spawn = conversation.prompts.get(out.call_id)
                if spawn is not None and not spawn.detached:  # the sub-agent has ended
                    del conversation.prompts[out.call_id]
                rec.record(
                    ev.ToolResult(
                        call_id=out.call_id,
                        name=name or "unknown",
                        observation=out.text,
                        error="the tool reported an error" if out.is_error else None,
                        message_hash=digest,
                        snapshot=snapshot if out is last else None,
                    )
                )
            if not said[i]:
                continue  # the model's own answer (recorded as it came), or only tool results
            folder: dict[str, Any] = {"snapshot": snapshot} if i == after else {}
            rec.record(
                ev.MessageEvent(
                    role=m.role, message_hash=digest, reason="prompt" if first else "user", **folder
                )
            )

    def answered(self, call: Call, status: int, content_type: str | None) -> None:
        """The upstream's answer began: its status and the type of its body."""
        call.status, call.content_type = status, content_type

    def feed(self, call: Call, data: bytes) -> None:
        """Bytes of the answer as they passed to the client."""
        call.body.append(data)
        if call.stream and call.status < 400:  # an error's body is JSON, not a stream
            self._fold(call, stream_events(call.decoder.feed(data)))

    def _kept(self, call: Call) -> dict[str, Any]:
        """The answer's bytes stored as a blob (known secrets replaced): how a replay finds them."""
        redactor = call.conversation.recorder.redactor
        text = b"".join(call.body).decode("utf-8", "surrogateescape")
        data = redactor.text(text).encode("utf-8", "surrogateescape")
        digest = hashlib.sha256(data).hexdigest()
        self.store.put_blobs([(digest, [data])])
        return {
            "status": call.status,
            "content_type": call.content_type,
            "body": digest,
            "bytes": len(data),
        }

    def _fold(self, call: Call, events: list[dict[str, Any]]) -> None:
        rec = call.conversation.recorder
        rec.turn = call.turn
        for event in events:
            if call.failure is not None:
                return
            try:
                call.fold.feed(event, call.builder)
            except StreamFailure as exc:
                call.failure = str(exc)
            finally:
                rec.chunk_index = call.chunk_index
                for chunk in call.chunks:
                    rec.chunk(call.call_id, chunk)
                call.chunk_index = rec.chunk_index
                call.chunks.clear()

    def finish(self, call: Call) -> None:
        """The answer ended: record it, its usage and the tool calls it makes (or the error)."""
        if call.done:
            return
        call.done = True
        rec = call.conversation.recorder
        rec.turn = call.turn
        if call.status >= 400:
            text = b"".join(call.body).decode("utf-8", "replace")
            rec.tag = {"answer": self._kept(call)}
            try:
                rec.failure(
                    "generate",
                    f"HTTP {call.status}",
                    f"the upstream answered {call.status}: {text[:ERROR_TEXT_LIMIT]}",
                    retryable=call.status in RETRYABLE_STATUS,
                )
            finally:
                rec.tag = {}
            return
        if call.stream:
            self._fold(call, stream_events(call.decoder.close()))
        else:
            try:
                answer = json.loads(b"".join(call.body))
            except json.JSONDecodeError as exc:
                rec.failure("generate", "malformed answer", f"the answer is not JSON: {exc}")
                return
            if isinstance(answer, list):  # a stream sent as one JSON array of its chunks
                self._fold(call, [event for event in answer if isinstance(event, dict)])
            else:
                self._fold(call, call.api.whole(answer) if isinstance(answer, dict) else [])
        turn = call.fold.turn(call.builder)
        usage = priced(turn.usage, turn.model or call.model, provider_id=call.api.provider)
        turn = rec.response(
            call.call_id,
            turn.model_copy(update={"usage": usage}),
            time.monotonic() - call.started,
            answer=self._kept(call),
        )
        for tool_call in turn.tool_calls:
            try:
                parsed, problem = tool_call.parsed_arguments(), None
            except ValueError as exc:
                parsed, problem = None, str(exc)
            rec.tool_call(tool_call, parsed, problem)
            call.conversation.open_calls[tool_call.call_id] = tool_call.name
            spawn = spawned(tool_call.name, tool_call.arguments)
            if spawn is not None:
                call.conversation.prompts[tool_call.call_id] = spawn
        if call.failure is not None:
            rec.failure("generate", "stream error", call.failure, retryable=True)
        elif turn.stop_reason is None:
            rec.failure(
                "generate", "incomplete", "the stream ended without a finish reason", retryable=True
            )

    def broke(self, call: Call, reason: str, *, cancelled: bool, kind: str = "upstream") -> None:
        """The call did not end well: the client hung up (a cancel), the upstream failed
        (retryable), or a replay had no answer for it (``kind`` ``replay``: not retryable)."""
        if call.done:
            return
        call.done = True
        rec = call.conversation.recorder
        rec.turn = call.turn
        if cancelled:
            rec.cancel("generate", reason)
        else:
            rec.failure("generate", kind, reason, retryable=kind == "upstream")


def _shared_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _settle(future: Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    result, error = outcome
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
