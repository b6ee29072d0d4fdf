"""Live OTLP: a running episode's spans reach an OTLP/HTTP endpoint (a loopback receiver of the
test's, decoding the protobuf with opentelemetry-proto; a real Arize Phoenix server in the
slow test) as each one ends, through the observer the runner already takes; a slow or dead
endpoint never holds or fails the run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli
from otlp_support import own_tool_calls, own_usage, phoenix_server, phoenix_spans, wait_for_spans
from pydantic import BaseModel
from record_support import FIXTURES, fixture_request, record
from sse_replay import Reply, SSEReplayServer, events_from_file

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.errors import BadRequestError
from agentrunner.values.events import ModelChunk, Status
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentTurn
from providers.scripted import ScriptedModel

pytest.importorskip("opentelemetry.proto", reason="the [otlp] extra is not installed")

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.proto.trace.v1.trace_pb2 import Status as SpanStatus

from agentrunner.export.otlp import PROTOBUF
from agentrunner.export.otlp_live import LiveOtlp
from agentrunner.export.otlp_spans import episode_spans

WAIT_S = 120.0
"""A bound on waiting for a condition (spans arriving), never a timing assumption."""


class _Receiver(BaseHTTPRequestHandler):
    """A loopback OTLP/HTTP endpoint: decodes each request's spans; holds every request
    until ``release`` is set."""

    spans: list[Span]
    arrived: threading.Condition
    release: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.release.wait()
        request = ExportTraceServiceRequest.FromString(body)
        with self.arrived:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
            self.arrived.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", PROTOBUF)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type(
        "Handler",
        (_Receiver,),
        {"spans": [], "arrived": threading.Condition(), "release": threading.Event()},
    )
    handler.release.set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    handler.release.set()
    server.shutdown()
    server.server_close()


def value(span: Span, key: str) -> Any:
    found = {kv.key: json_format.MessageToDict(kv.value) for kv in span.attributes}.get(key)
    if found is None:
        return None
    kind, got = next(iter(found.items()))
    return int(got) if kind == "intValue" else got


def _run(store: TraceStore, tmp_path: Path, model: ScriptedModel, observer: Any) -> str:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", seed=0, model_fn=model, store=store, observer=observer
        )
    return rollout.episode_id


class _WaitsForTurnOne(ScriptedModel):
    """The demo agent that, before its third model call, waits until the receiver holds the
    spans of turn 1 (its model call and its tool call): they were sent while it runs."""

    def __init__(self, handler: type[_Receiver]) -> None:
        super().__init__("demo", pace=0)
        self.handler = handler
        self.seen_while_running: list[str] = []

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.turn == 3:
            with self.handler.arrived:
                self.handler.arrived.wait_for(self._turn_one_arrived, timeout=WAIT_S)
                turn_one = [s for s in self.handler.spans if value(s, "agentrunner.turn") == 1]
                self.seen_while_running = sorted(s.name.split()[0] for s in turn_one)
        return super().__call__(context)

    def _turn_one_arrived(self) -> bool:
        names = {s.name.split()[0] for s in self.handler.spans if value(s, "agentrunner.turn") == 1}
        return {"chat", "execute_tool"} <= names


def test_each_span_reaches_the_endpoint_while_the_episode_runs(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    model = _WaitsForTurnOne(handler)
    with TraceStore(tmp_path / "t.db") as store, LiveOtlp(store, url) as live:
        _run(store, tmp_path, model, live.observer())
    assert model.seen_while_running == ["chat", "execute_tool"]
    assert live.report.problem is None and live.report.spans == len(handler.spans)


def test_the_spans_sent_live_are_the_exports_each_sent_once(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    with TraceStore(tmp_path / "t.db") as store:
        with LiveOtlp(store, url) as live:
            episode = _run(store, tmp_path, ScriptedModel("demo", pace=0), live.observer())
        exported = episode_spans(store, episode, content=True)
    received = {s.span_id: s for s in handler.spans}
    assert len(received) == len(handler.spans) == len(exported) == 1 + 7 + 6  # agent, calls, tools
    for span in exported:
        assert received[span.span_id] == span, span.name


def test_the_runs_own_observer_still_sees_every_event(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, _ = receiver
    seen: list[tuple[int, str]] = []
    bound: list[str] = []

    class LiveView:
        def bind_episode(self, episode_id: str) -> None:
            bound.append(episode_id)

        def __call__(self, seq: int, turn: int, payload: BaseModel) -> None:
            seen.append((seq, type(payload).__name__))

    with TraceStore(tmp_path / "t.db") as store, LiveOtlp(store, url) as live:
        episode = _run(store, tmp_path, ScriptedModel("demo", pace=0), live.observer(LiveView()))
        last = store.episode(episode).last_seq
    assert bound == [episode]
    assert [seq for seq, _ in seen] == list(range(1, last + 1))
    assert ModelChunk.__name__ in {kind for _, kind in seen}


def test_an_endpoint_that_holds_every_request_never_holds_the_run(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    handler.release.clear()  # the receiver answers nothing until the run has ended
    with TraceStore(tmp_path / "t.db") as store:
        live = LiveOtlp(store, url, timeout=WAIT_S * 5)
        episode = _run(store, tmp_path, ScriptedModel("demo", pace=0), live.observer())
        ended = store.episode(episode).status
        received_during_run = len(handler.spans)
        handler.release.set()
        report = live.close(wait=WAIT_S * 5)
    assert ended == Status.COMPLETED and received_during_run == 0
    assert report.problem is None and report.spans == len(handler.spans) == 1 + 7 + 6


def test_a_dead_endpoint_loses_spans_never_events_and_is_reported_once(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, _ = receiver
    dead = url.rsplit(":", 1)[0] + ":1"
    with TraceStore(tmp_path / "t.db") as store:
        with LiveOtlp(store, dead) as live:
            episode = _run(store, tmp_path, ScriptedModel("demo", pace=0), live.observer())
        summary = store.episode(episode)
    report = live.report
    assert summary.status == Status.COMPLETED and summary.turns == 7
    assert report.spans == 0 and report.lost_spans == 1 + 7 + 6 and report.failed_requests >= 1
    line = report.line()
    assert "\n" not in line and "cannot send" in line and "14 span(s) not sent" in line
    assert "agentrunner export --format otlp --endpoint" in line


class _Refused(ScriptedModel):
    """A model whose provider refuses the request: the call and the episode fail."""

    def __init__(self) -> None:
        super().__init__("demo", pace=0)

    def __call__(self, context: AgentContext) -> AgentTurn:
        raise BadRequestError("bad request <b>bold</b>")


def test_a_failed_episode_sends_its_error_as_the_export_does(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    with TraceStore(tmp_path / "t.db") as store:
        with LiveOtlp(store, url) as live:
            episode = _run(store, tmp_path, _Refused(), live.observer())
        exported = episode_spans(store, episode, content=True)
    assert sorted(handler.spans, key=lambda s: s.span_id) == sorted(
        exported, key=lambda s: s.span_id
    )
    assert {s.status.code for s in handler.spans} == {SpanStatus.STATUS_CODE_ERROR}


class _StopsAtTurnThree(ScriptedModel):
    def __init__(self) -> None:
        super().__init__("demo", pace=0)
        self.stop = threading.Event()

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.turn == 3:
            self.stop.set()
        return super().__call__(context)


def test_a_resumed_episode_sends_its_new_spans_and_its_whole_agent_span(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    with TraceStore(tmp_path / "t.db") as store:
        model = _StopsAtTurnThree()
        with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
            first = run_agent_episode(
                env=env, task_id="demo-mean", seed=0, model_fn=model, store=store,
                cancel_check=model.stop.is_set,
            )  # fmt: skip
        assert first.stop_reason == "cancelled"
        with LiveOtlp(store, url) as live, WorkspaceEnv(snapshot_dir=tmp_path / "s2") as env:
            resume_episode(
                store, first.episode_id, env=env, model_fn=ScriptedModel("demo", pace=0),
                observer=live.observer(),
            )  # fmt: skip
        exported = {s.span_id: s for s in episode_spans(store, first.episode_id, content=True)}
        (resumed,) = store.events(first.episode_id, kinds=["resume"])
    received = {s.span_id: s for s in handler.spans}
    assert len(received) == len(handler.spans)  # each once
    assert all(exported[i] == s for i, s in received.items())
    agent = next(s for s in exported.values() if not s.parent_span_id)
    new = {i for i, s in exported.items() if (value(s, "agentrunner.seq") or 0) > resumed.seq}
    assert agent.span_id in received and new <= set(received)
    assert len(received) < len(exported)  # the first attempt's ended spans are not sent again


def test_one_exporter_serves_episodes_running_at_once_each_its_own_trace(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    episodes: list[str] = []
    with TraceStore(tmp_path / "t.db") as store:
        with LiveOtlp(store, url) as live:

            def one(n: int) -> None:
                model = ScriptedModel("demo", pace=0)
                episodes.append(_run(store, tmp_path / str(n), model, live.observer()))

            threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        exported = [s for e in episodes for s in episode_spans(store, e, content=True)]
    assert len(set(episodes)) == 3
    assert sorted(handler.spans, key=lambda s: s.span_id) == sorted(
        exported, key=lambda s: s.span_id
    )
    assert len({s.trace_id for s in handler.spans}) == 3


# ------------------------------------------------------------------ a real Phoenix server


class _WaitsForPhoenix(ScriptedModel):
    """The demo agent that, before its third model call, waits until Phoenix's own API lists
    the spans of turn 1 (its model call and its tool call)."""

    def __init__(self, url: str) -> None:
        super().__init__("demo", pace=0)
        self.url = url
        self.seen_while_running: list[str] = []

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.turn == 3:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline and len(self.seen_while_running) < 2:
                self.seen_while_running = sorted(
                    s["span_kind"]
                    for s in phoenix_spans(self.url)
                    if s["attributes"].get("agentrunner.turn") == 1
                )
                time.sleep(0.5)
        return super().__call__(context)


@pytest.mark.slow
def test_phoenix_shows_a_live_runs_spans_while_it_runs(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with phoenix_server(tmp_path) as url, TraceStore(db) as store:
        model = _WaitsForPhoenix(url)
        with LiveOtlp(store, url) as live:
            episode = _run(store, tmp_path, model, live.observer())
        spans = wait_for_spans(url, 1 + 7 + 6)
    assert model.seen_while_running == ["LLM", "TOOL"]
    assert live.report.problem is None and live.report.spans == len(spans) == 1 + 7 + 6
    found = {
        s["attributes"]["agentrunner.call_id"]: (
            s["attributes"].get("llm.token_count.prompt"),
            s["attributes"].get("llm.token_count.completion"),
        )
        for s in spans
        if s["span_kind"] == "LLM"
    }
    assert found == own_usage(db, episode)
    ran = sorted(
        (s for s in spans if s["span_kind"] == "TOOL"),
        key=lambda s: s["attributes"]["agentrunner.seq"],
    )
    named = [(s["attributes"]["tool.id"], s["attributes"]["tool.name"]) for s in ran]
    assert named == own_tool_calls(db, episode)


def test_run_and_batch_send_their_spans_live_from_the_command_line(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    url, handler = receiver
    db = str(tmp_path / "cli.db")
    ran = run_cli("run", "--db", db, "--json", "--otlp-endpoint", url)
    batch = run_cli(
        "batch", "--db", db, "--task", "demo-mean", "--seeds", "0-1", "--otlp-endpoint", url
    )
    assert ran.returncode == 0 and batch.returncode == 0, batch.stderr[-2000:]
    assert "OTLP: sent" in ran.stderr and "OTLP: sent" in batch.stderr
    with TraceStore(db) as store:
        episodes = store.episode_ids()
        expected = sum(len(episode_spans(store, e, content=True)) for e in episodes)
    assert len(episodes) == 3 and len(handler.spans) == expected
    assert len({span.trace_id for span in handler.spans}) == 3  # one trace per episode
    on_ray = run_cli("batch", "--db", db, "--seeds", "0", "--ray", "--otlp-endpoint", url)
    assert on_ray.returncode == 2 and "not on Ray workers" in on_ray.stderr.replace("\n", " ")


def test_a_recorded_agent_sends_its_spans_live(
    receiver: tuple[str, type[_Receiver]], tmp_path: Path
) -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"provider stream fixtures not found at {FIXTURES}")
    url, handler = receiver
    db = tmp_path / "recorded.db"
    name = "anthropic-messages__tool-search-tool-use__turn"
    turns = [Reply(events=events_from_file(FIXTURES / f"{name}{i}.sse")) for i in (1, 2)]
    env = {"TEST_KEY": "sk-ant-test-0000", "TEST_REQUEST": json.dumps(fixture_request(f"{name}1"))}
    with SSEReplayServer(*turns) as upstream:
        done = record(
            "anthropic_two_calls",
            db=db,
            anthropic=upstream.url,
            env=env,
            options=("--otlp-endpoint", url),
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "OTLP: sent" in done.stderr
    (episode,) = json.loads(done.stdout.strip().splitlines()[-1])["episodes"]
    with TraceStore(db) as store:
        expected = episode_spans(store, episode, content=True)
    assert sorted(s.span_id for s in handler.spans) == sorted(s.span_id for s in expected)
    assert sum(1 for s in handler.spans if s.name.startswith("chat")) == 2
