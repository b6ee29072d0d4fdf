"""Live OTLP: the spans of running episodes sent to an OTLP/HTTP endpoint as each one ends.

The store stays the source of truth; this is a view of it sent while it is written. The
spans are the export's (:mod:`agentrunner.export.otlp_spans`: same mapping, same ids), so
``agentrunner export --format otlp --endpoint`` afterwards updates what was sent live and
sends what it missed. A model call's span goes when its answer and usage are in, a tool
call's when its result is, the episode's agent span when the episode ends (or, ended or not,
when the exporter is closed).

:class:`LiveOtlp` is one exporter for a run or a batch: :meth:`LiveOtlp.observer` gives the
runner an observer (:data:`agentrunner.runtime.recorder.Observer`) for one episode, which only
queues the seq of each committed event it is told about (chunks are left out) and returns.
One background thread reads the new events from the store (its own connection), folds them
into spans and posts them. So a slow or dead endpoint never slows or fails a run: what could
not be sent is counted, and :meth:`LiveOtlp.close` reports it once (:class:`LiveReport`).

    with LiveOtlp(store, "http://127.0.0.1:6006") as live:
        run_agent_episode(..., store=store, observer=live.observer())
    print(live.report.line())
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx
from pydantic import BaseModel

from agentrunner.export.otlp import (
    PROTOBUF,
    in_requests,
    post_request,
    require_otlp,
    traces_url,
)
from agentrunner.readers.history import NOT_CHUNKS
from agentrunner.runtime.recorder import Observer
from agentrunner.values.events import ModelChunk
from agentrunner.values.redaction import public_url
from agentrunner.values.specs import ImportedSpec, RecordedSpec

if TYPE_CHECKING:
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from agentrunner.export.otlp_spans import OpenSpan, Walk
    from agentrunner.store.protocol import StoreBackend

CLOSE_WAIT_S = 30.0
"""How long :meth:`LiveOtlp.close` waits for the spans still queued to be sent (a bound on a
slow endpoint, after the run has ended; a dead one answers at once)."""
REQUEST_TIMEOUT_S = 10.0
PAGE = 1000
"""Events read from the store at a time."""


@dataclass
class LiveReport:
    """What a live export sent, and what it could not (``problem``: the first reason)."""

    endpoint: str
    spans: int = 0
    requests: int = 0
    lost_spans: int = 0
    failed_requests: int = 0
    problem: str | None = None
    unfinished: bool = False
    """The exporter was closed before it had read or sent everything it was told about."""

    def failed(self, problem: str) -> None:
        self.problem = self.problem or problem

    def line(self) -> str:
        """One line for the end of a run: how many spans went, or what went wrong."""
        sent = f"{self.spans} span(s) in {self.requests} request(s)"
        if self.problem is None and not self.unfinished:
            return f"OTLP: sent {sent} to {self.endpoint}"
        missed = f"{self.lost_spans} span(s) not sent"
        if self.unfinished:
            missed += ", and the last events' spans not sent in time"
        why = f" (first problem: {self.problem})" if self.problem else ""
        return (
            f"OTLP endpoint {self.endpoint}: {missed}{why}; sent {sent}. The store has every"
            f" event: `agentrunner export --format otlp --endpoint {self.endpoint} EP` sends"
            " them again (what was sent is updated, not duplicated)"
        )


class _EpisodeObserver:
    """The observer of one episode: tells ``inner`` (the live view, if any) first, then
    queues the event's seq for the exporter."""

    def __init__(self, queued: queue.SimpleQueue[tuple[str, int] | None], inner: Observer | None):
        self._queued = queued
        self._inner = inner
        self._episode_id: str | None = None

    def bind_episode(self, episode_id: str) -> None:
        self._episode_id = episode_id
        bind = getattr(self._inner, "bind_episode", None)
        if callable(bind):
            bind(episode_id)

    def __call__(self, seq: int, turn: int, payload: BaseModel) -> None:
        if self._inner is not None:
            self._inner(seq, turn, payload)
        if self._episode_id is not None and not isinstance(payload, ModelChunk):
            self._queued.put((self._episode_id, seq))


class _LiveEpisode:
    """One episode's spans as its events arrive: a span is ready once an event after the one
    that ended it leaves it unchanged (a model call's usage follows its answer; a broken
    stream's error follows both)."""

    def __init__(self, store: StoreBackend, episode_id: str, content: bool, first_seq: int):
        from agentrunner.export.otlp_spans import Walk

        self.store = store
        self.walk: Walk = Walk(store, store.episode(episode_id), content)
        self.first_seq = first_seq
        """Spans that ended before it (an earlier attempt's) are not sent again."""
        self.after = 0
        self.pending: list[OpenSpan] = []
        self.sent: set[int] = set()
        self.ended = False

    def advance(self) -> list[Span]:
        """The spans that are ready after the events written since the last call."""
        from agentrunner.export.otlp_spans import child_span

        episode_id = self.walk.episode.episode_id
        ready: list[OpenSpan] = []
        while not self.ended:
            rows = self.store.events(episode_id, after_seq=self.after, limit=PAGE, kinds=NOT_CHUNKS)
            for row in rows:
                self.walk.take(row)
                self.after = row.seq
                if row.seq < self.first_seq:
                    continue
                now = [s for s in self.walk.closable() if s.end is row and s.start is not row]
                ready.extend(s for s in self.pending if not any(s is n for n in now))
                self.pending = now
                if row.kind == "episode.end" and row.episode_id == episode_id:
                    self.ended = True
                    break
            if len(rows) < PAGE:
                break
        return [child_span(self.walk, s) for s in self._unsent(ready)]

    def finish(self) -> list[Span]:
        """The rest: spans ended or still open, and the agent span (the episode as it is)."""
        from agentrunner.export.otlp_spans import agent_span, child_span, spawners_of

        if self.walk.first is None:
            return []
        rest = [*self.pending, *(s for s in self.walk.spans if s.start.seq >= self.first_seq)]
        self.pending = []
        episode = self.store.episode(self.walk.episode.episode_id)
        # only an imported or recorded session can be a sub-agent: no read of every episode
        # for the runner's own
        spawned = isinstance(episode.env_spec, ImportedSpec | RecordedSpec)
        spawners = spawners_of(self.store) if spawned else {}
        root = agent_span(self.store, episode, self.walk, spawners)
        return [*(child_span(self.walk, s) for s in self._unsent(rest)), root]

    def _unsent(self, spans: list[OpenSpan]) -> list[OpenSpan]:
        out = []
        for span in spans:
            if span.start.seq not in self.sent:
                self.sent.add(span.start.seq)
                out.append(span)
        return out


class LiveOtlp:
    """Sends the spans of the episodes it observes to an OTLP/HTTP endpoint, from a thread of
    its own; never raises into a run. ``content``: as the export's (messages, arguments and
    results); ``headers`` go to the endpoint only."""

    def __init__(
        self,
        store: StoreBackend,
        endpoint: str,
        *,
        content: bool = True,
        headers: Mapping[str, str] | None = None,
        timeout: float = REQUEST_TIMEOUT_S,
    ) -> None:
        require_otlp()
        self.url = traces_url(endpoint)
        self.store = store
        self.content = content
        self.headers = {**(headers or {}), "Content-Type": PROTOBUF}
        self.timeout = timeout
        self.report = LiveReport(public_url(self.url))
        self._ended: dict[str, int] = {}
        """Each finished episode's last seq read (what was queued up to it is done with)."""
        self._queued: queue.SimpleQueue[tuple[str, int] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="agentrunner-otlp", daemon=True)
        self._thread.start()

    def observer(self, inner: Observer | None = None) -> Observer:
        """An observer for one episode's run (one per episode: a batch asks for one each);
        ``inner``, the run's own observer if it has one, is told first."""
        return _EpisodeObserver(self._queued, inner)

    def close(self, wait: float = CLOSE_WAIT_S) -> LiveReport:
        """Send what is left (every observed episode's agent span among it), waiting at most
        ``wait`` seconds; the report."""
        if self._thread.is_alive():
            self._queued.put(None)
            self._thread.join(wait)
            self.report.unfinished = self._thread.is_alive()
        return self.report

    def __enter__(self) -> LiveOtlp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _work(self) -> None:
        episodes: dict[str, _LiveEpisode] = {}
        with httpx.Client(timeout=self.timeout) as client:
            stopping = False
            while not stopping:
                told = [self._queued.get()]
                while not self._queued.empty():
                    told.append(self._queued.get())
                stopping = None in told
                firsts: dict[str, int] = {}
                for item in told:
                    if item is not None and item[1] > self._ended.get(item[0], 0):
                        firsts.setdefault(*item)
                spans = self._read(episodes, firsts)
                if stopping:
                    spans += self._finish(episodes, list(episodes))
                self._send(client, spans)
        self.store.done_in_this_thread()

    def _read(self, episodes: dict[str, _LiveEpisode], firsts: dict[str, int]) -> list[Span]:
        """The spans made ready by the new events of each episode in ``firsts`` (its id ->
        the first seq observed); an episode that ended is finished and forgotten."""
        spans: list[Span] = []
        for episode_id, first_seq in firsts.items():
            try:
                live = episodes.get(episode_id)
                if live is None:
                    live = _LiveEpisode(self.store, episode_id, self.content, first_seq)
                    episodes[episode_id] = live
                spans += live.advance()
            except Exception as exc:  # never into the run: counted, reported at the end
                self.report.failed(f"cannot read episode {episode_id}: {exc}")
                continue
            if live.ended:
                spans += self._finish(episodes, [episode_id])
        return spans

    def _finish(self, episodes: dict[str, _LiveEpisode], ids: list[str]) -> list[Span]:
        spans: list[Span] = []
        for episode_id in ids:
            live = episodes.pop(episode_id)
            self._ended[episode_id] = live.after
            try:
                spans += live.finish()
            except Exception as exc:  # never into the run
                self.report.failed(f"cannot read episode {episode_id}: {exc}")
        return spans

    def _send(self, client: httpx.Client, spans: list[Span]) -> None:
        for request in in_requests(spans):
            count = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            problem = post_request(client, self.url, request.SerializeToString(), self.headers)
            if problem is None:
                self.report.requests += 1
                self.report.spans += count
            else:
                self.report.failed_requests += 1
                self.report.lost_spans += count
                self.report.failed(problem)
