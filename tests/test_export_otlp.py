"""OTLP export: episodes as OpenTelemetry GenAI traces, in an OTLP JSON file and to an
OTLP/HTTP endpoint (a loopback server of the test's; a real Arize Phoenix server in the
slow test)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from otlp_support import (
    failed_episode,
    fanout_episodes,
    fork_episode,
    imported_episode,
    imported_subagent,
    native_episode,
    own_tool_calls,
    own_usage,
    phoenix_server,
    wait_for_spans,
)

from agentrunner.export.otlp import (
    OtlpEndpointError,
    parse_request_json,
    send_otlp,
    traces_url,
    write_otlp_file,
)
from agentrunner.store import TraceStore
from agentrunner.values.errors import AgentRunnerError

pytest.importorskip("opentelemetry.proto", reason="the [otlp] extra is not installed")

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A store with a native demo episode and a fork of it at turn 3 that ran."""
    db = tmp_path_factory.mktemp("otlp") / "t.db"
    parent = native_episode(db)
    return db, parent, fork_episode(db, parent)


def exported(db: Path, episodes: list[str], path: Path, *, content: bool = True) -> list[Span]:
    """Export to an OTLP JSON file; every span it holds, read back with json_format."""
    with TraceStore(db) as store:
        write_otlp_file(store, episodes, path, content=content)
    spans: list[Span] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        request = parse_request_json(json.loads(line))
        spans.extend(s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans)
    return spans


def attrs(span: Span) -> dict[str, Any]:
    return {kv.key: json_format.MessageToDict(kv.value) for kv in span.attributes}


def value(span: Span, key: str) -> Any:
    """One attribute's value (an int64 as an int, where json_format writes a string)."""
    found = attrs(span).get(key)
    if found is None:
        return None
    kind, got = next(iter(found.items()))
    return int(got) if kind == "intValue" else got


def of_episode(spans: list[Span], episode: str, name: str) -> list[Span]:
    return [
        s
        for s in spans
        if s.name.startswith(name) and value(s, "agentrunner.episode_id") == episode
    ]


def test_each_line_of_the_file_is_an_export_request_json_format_parses(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    path = tmp_path / "traces.jsonl"
    exported(db, [parent], path)
    for line in path.read_text(encoding="utf-8").splitlines():
        document = json.loads(line)
        request = json_format.Parse(line, ExportTraceServiceRequest())
        ids = [s.trace_id for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
        assert ids and document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        assert all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)  # hex


def test_every_model_call_is_one_chat_span_with_the_usage_events_token_counts(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    spans = exported(db, [parent], tmp_path / "t.jsonl")
    chats = of_episode(spans, parent, "chat ")
    found = {
        value(s, "agentrunner.call_id"): (
            value(s, "gen_ai.usage.input_tokens"),
            value(s, "gen_ai.usage.output_tokens"),
        )
        for s in chats
    }
    assert len(chats) == len(found) == 7
    assert found == own_usage(db, parent)
    for span in chats:
        assert value(span, "gen_ai.operation.name") == "chat"
        assert value(span, "openinference.span.kind") == "LLM"
        assert value(span, "llm.token_count.prompt") == value(span, "gen_ai.usage.input_tokens")
        assert span.name == f"chat {value(span, 'gen_ai.request.model')}"


def test_every_tool_call_is_one_execute_tool_span_with_its_name(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    spans = exported(db, [parent], tmp_path / "t.jsonl")
    tools = of_episode(spans, parent, "execute_tool ")
    found = [(value(s, "gen_ai.tool.call.id"), value(s, "gen_ai.tool.name")) for s in tools]
    assert found == own_tool_calls(db, parent)
    assert all(value(s, "tool.name") == value(s, "gen_ai.tool.name") for s in tools)
    assert all(s.name == f"execute_tool {value(s, 'tool.name')}" for s in tools)


def test_one_trace_per_episode_under_one_agent_span_timed_by_the_recorded_events(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    spans = exported(db, [parent], tmp_path / "t.jsonl")
    (agent,) = [s for s in spans if not s.parent_span_id]
    assert agent.name == "invoke_agent agentrunner"
    assert {s.trace_id for s in spans} == {agent.trace_id}
    assert all(s.parent_span_id == agent.span_id for s in spans if s is not agent)
    assert all(agent.start_time_unix_nano <= s.start_time_unix_nano for s in spans)
    assert all(
        s.start_time_unix_nano <= s.end_time_unix_nano <= agent.end_time_unix_nano for s in spans
    )
    assert agent.status.code == Status.STATUS_CODE_OK  # the episode completed


def test_a_second_export_names_the_same_traces_and_spans(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, fork = family
    first = exported(db, [parent, fork], tmp_path / "a.jsonl")
    second = exported(db, [parent, fork], tmp_path / "b.jsonl")
    assert [(s.trace_id, s.span_id) for s in first] == [(s.trace_id, s.span_id) for s in second]
    assert len({s.span_id for s in first}) == len(first)


def test_a_fork_is_its_own_trace_linked_to_the_parents_span_at_the_fork_point(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, fork = family
    spans = exported(db, [parent, fork], tmp_path / "t.jsonl")
    (parent_agent,) = of_episode(spans, parent, "invoke_agent")
    (fork_agent,) = of_episode(spans, fork, "invoke_agent")
    assert fork_agent.trace_id != parent_agent.trace_id
    (link,) = fork_agent.links
    target = next(s for s in spans if s.span_id == link.span_id)
    assert link.trace_id == parent_agent.trace_id == target.trace_id
    with TraceStore(db) as store:
        fork_seq = store.episode(fork).fork_seq
    # the last span the parent opened before the fork point: turn 2's read_file call
    opened = [s for s in spans if s.trace_id == parent_agent.trace_id and s is not parent_agent]
    before = [s for s in opened if value(s, "agentrunner.seq") <= fork_seq]
    assert target is max(before, key=lambda s: value(s, "agentrunner.seq"))
    assert target.name == "execute_tool read_file"
    # the fork's trace holds only the calls it made itself
    assert len(of_episode(spans, fork, "chat ")) == len(own_usage(db, fork))


def test_without_content_no_message_argument_or_result_is_exported(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    spans = exported(db, [parent], tmp_path / "t.jsonl", content=False)
    content_keys = (
        "gen_ai.input",
        "gen_ai.output",
        "llm.input_messages",
        "llm.output_messages",
        "input.value",
        "output.value",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    )
    assert not [k for s in spans for k in attrs(s) if k.startswith(content_keys)]
    assert of_episode(spans, parent, "execute_tool read_file")  # names stay


def test_with_content_the_model_input_and_answer_are_span_attributes(
    family: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, parent, _ = family
    spans = exported(db, [parent], tmp_path / "t.jsonl")
    first = of_episode(spans, parent, "chat ")[0]
    given = json.loads(value(first, "gen_ai.input.messages"))
    assert [m["role"] for m in given] == ["system", "user"]
    answer = json.loads(value(first, "gen_ai.output.messages"))[0]
    assert answer["finish_reason"] == "tool_use"
    assert [p["type"] for p in answer["parts"]] == ["reasoning", "text", "tool_call"]
    assert value(first, "llm.output_messages.0.message.tool_calls.0.tool_call.function.name") == (
        "list_files"
    )


def test_an_imported_session_exports_as_a_trace(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    episode = imported_episode(db)
    spans = exported(db, [episode], tmp_path / "t.jsonl")
    chats = of_episode(spans, episode, "chat ")
    assert len(chats) == len(own_usage(db, episode)) > 0
    names = [value(s, "gen_ai.tool.name") for s in of_episode(spans, episode, "execute_tool ")]
    assert names == [name for _, name in own_tool_calls(db, episode)]


def test_a_sub_agent_is_its_own_trace_linked_to_the_tool_call_that_started_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    parent, child = imported_subagent(db)
    spans = exported(db, [parent, child], tmp_path / "t.jsonl")
    (agent,) = of_episode(spans, child, "invoke_agent")
    (link,) = agent.links
    (task,) = [s for s in of_episode(spans, parent, "execute_tool ") if s.span_id == link.span_id]
    assert link.trace_id == task.trace_id != agent.trace_id
    assert value(task, "gen_ai.tool.name") == "Task"


def test_a_failed_model_call_and_episode_carry_the_error_as_their_status(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    episode = failed_episode(db)
    spans = exported(db, [episode], tmp_path / "t.jsonl")
    (agent,) = of_episode(spans, episode, "invoke_agent")
    (chat,) = of_episode(spans, episode, "chat ")
    assert chat.status.code == agent.status.code == Status.STATUS_CODE_ERROR
    assert chat.status.message.startswith("ProviderServerError: cannot reach")
    assert agent.status.message.startswith("failed: error (ProviderServerError")
    assert [e.name for e in chat.events] == ["exception"] * 5  # each attempt


# ------------------------------------------------------------------ to an endpoint


class _Collector(BaseHTTPRequestHandler):
    """A loopback OTLP/HTTP endpoint: keeps each body; answers 503 from the
    ``fail_from``-th request on."""

    bodies: list[bytes]
    fail_from: int

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        failing = len(self.bodies) + 1 >= self.fail_from
        if not failing:
            self.bodies.append(body)
        self.send_response(503 if failing else 200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"overloaded" if failing else b"")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Handler", (_Collector,), {"bodies": [], "fail_from": 10**9})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_spans_go_to_the_endpoint_as_protobuf_in_bounded_requests_of_several_episodes(
    family: tuple[Path, str, str], collector: tuple[str, type[_Collector]]
) -> None:
    db, parent, fork = family
    url, handler = collector
    with TraceStore(db) as store:
        sent = send_otlp(store, [parent, fork], url)
        small = send_otlp(store, [parent, fork], url, content=False, max_bytes=2_000)
    first = ExportTraceServiceRequest.FromString(handler.bodies[0])
    traces = {s.trace_id for r in first.resource_spans for ss in r.scope_spans for s in ss.spans}
    assert sent.requests == 1 and len(traces) == 2 and sent.episodes == 2
    assert small.requests > 1 and small.spans == sent.spans
    later = [ExportTraceServiceRequest.FromString(b) for b in handler.bodies[1:]]
    assert all(r.ByteSize() <= 2_000 + 500 for r in later)  # spans, plus resource and framing


def test_a_secret_known_at_export_time_never_reaches_the_endpoint(
    family: tuple[Path, str, str],
    collector: tuple[str, type[_Collector]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, parent, _ = family
    url, handler = collector
    secret = "test_mean_of_three"  # in a tool result of the demo, recorded before it was known
    monkeypatch.setenv("DEMO_API_KEY", secret)
    with TraceStore(db) as store:
        send_otlp(store, [parent], url)
    (body,) = handler.bodies
    assert secret.encode() not in body and b"[redacted:DEMO_API_KEY]" in body


def test_a_dead_endpoint_is_a_one_line_error_saying_nothing_was_sent(
    family: tuple[Path, str, str], collector: tuple[str, type[_Collector]]
) -> None:
    db, parent, _ = family
    url, _ = collector
    dead = url.rsplit(":", 1)[0] + ":1"
    with TraceStore(db) as store, pytest.raises(OtlpEndpointError) as caught:
        send_otlp(store, [parent], dead)
    message = str(caught.value)
    assert "\n" not in message and "cannot send" in message
    assert "sent before it: 0 request(s), 0 span(s)" in message
    assert isinstance(caught.value, AgentRunnerError) and caught.value.exit_code == 1


def test_a_failing_endpoint_stops_the_export_and_says_how_much_was_sent(
    family: tuple[Path, str, str], collector: tuple[str, type[_Collector]]
) -> None:
    db, parent, fork = family
    url, handler = collector
    handler.fail_from = 2
    with TraceStore(db) as store, pytest.raises(OtlpEndpointError) as caught:
        send_otlp(store, [parent, fork], url, max_bytes=8_000)
    sent = ExportTraceServiceRequest.FromString(handler.bodies[0])
    count = sum(len(ss.spans) for r in sent.resource_spans for ss in r.scope_spans)
    assert "answered 503 Service Unavailable: overloaded" in str(caught.value)
    assert f"sent before it: 1 request(s), {count} span(s)" in str(caught.value)


def test_a_base_endpoint_gets_the_traces_path_and_a_full_one_is_kept() -> None:
    assert traces_url("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert traces_url("https://x.example/api/otel/v1/traces") == (
        "https://x.example/api/otel/v1/traces"
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_export_command_writes_the_file_and_sends_to_an_endpoint(
    family: tuple[Path, str, str], collector: tuple[str, type[_Collector]], tmp_path: Path
) -> None:
    db, parent, fork = family
    url, handler = collector
    path = tmp_path / "traces.jsonl"
    wrote = _cli("export", "--db", str(db), "--format", "otlp", parent, fork, "-o", str(path),
                 "--json")  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    spans = exported(db, [parent, fork], tmp_path / "direct.jsonl")
    assert json.loads(wrote.stdout.splitlines()[-1])["rows"] == len(spans)
    assert path.read_text() == (tmp_path / "direct.jsonl").read_text()
    sent = _cli("export", "--db", str(db), "--format", "otlp", parent, "--endpoint", url,
                "--no-content")  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert f"to {url}/v1/traces" in sent.stderr and len(handler.bodies) == 1
    secret = url.replace("http://", "http://user:hunter2@") + "/v1/traces?api_key=s3cret"
    hidden = _cli("export", "--db", str(db), "--format", "otlp", parent, "--endpoint", secret,
                  "--json")  # fmt: skip
    assert hidden.returncode == 0, hidden.stderr
    assert "hunter2" not in hidden.stdout + hidden.stderr
    assert "s3cret" not in hidden.stdout + hidden.stderr
    dead = _cli("export", "--db", str(db), "--format", "otlp", parent, "--endpoint",
                url.rsplit(":", 1)[0] + ":1")  # fmt: skip
    assert dead.returncode == 1 and len(dead.stderr.strip().splitlines()) == 1
    both = _cli("export", "--db", str(db), "--format", "otlp", parent, "--endpoint", url,
                "-o", str(path))  # fmt: skip
    other = _cli("export", "--db", str(db), "--format", "sft", "--endpoint", url)
    assert both.returncode == other.returncode == 2


# ------------------------------------------------------------------ a real Phoenix server


@pytest.mark.slow
def test_phoenix_receives_a_native_episode_a_fork_a_fanout_and_an_imported_session(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    parent = native_episode(db)
    episodes = [parent, fork_episode(db, parent), *fanout_episodes(db, parent)]
    episodes.append(imported_episode(db))
    calls = {e: own_usage(db, e) for e in episodes}
    tools = {e: own_tool_calls(db, e) for e in episodes}
    expected = len(episodes) + sum(len(c) for c in calls.values())
    expected += sum(len(t) for t in tools.values())
    with phoenix_server(tmp_path) as url, TraceStore(db) as store:
        sent = send_otlp(store, episodes, url)
        send_otlp(store, episodes, url)  # a second export updates, never duplicates
        spans = wait_for_spans(url, expected)
    assert sent.spans == expected, (sent, expected)
    assert len(spans) == expected, (len(spans), (tmp_path / "phoenix.log").read_text()[-3000:])
    for episode in episodes:
        mine = [s for s in spans if s["attributes"].get("agentrunner.episode_id") == episode]
        found = {
            s["attributes"]["agentrunner.call_id"]: (
                s["attributes"].get("llm.token_count.prompt"),
                s["attributes"].get("llm.token_count.completion"),
            )
            for s in mine
            if s["span_kind"] == "LLM"
        }
        assert found == calls[episode], episode
        ran = sorted(
            (s for s in mine if s["span_kind"] == "TOOL"),
            key=lambda s: s["attributes"]["agentrunner.seq"],
        )
        named = [(s["attributes"]["tool.id"], s["attributes"]["tool.name"]) for s in ran]
        assert named == tools[episode], episode
