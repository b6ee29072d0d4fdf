"""Test support for provider adapters: a loopback SSE replay server, and a tiny tool env.

:class:`SSEReplayServer` is a real HTTP server on 127.0.0.1 (ephemeral port) that replays
scripted SSE bodies to the real provider SDK clients pointed at it by base URL. Each POST
takes the next scripted :class:`Reply` (a status, headers and either SSE events sent one
chunk at a time or a plain body) and records what it received (method, path, headers, JSON
body). It notices when the client closes the connection mid-stream, which is how a
cancellation test sees the adapter hang up. :class:`ToolTableEnv` is an environment whose
tools answer from a table, so that a provider episode needs no workspace.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.types import ToolSpec


def sse(data: dict[str, Any] | str, event: str | None = None) -> str:
    """One SSE event (without its terminating blank line)."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return (f"event: {event}\n" if event else "") + f"data: {text}"


def events_from_text(text: str) -> list[str]:
    """Split an SSE body into its events, exactly as written (blank-line separated)."""
    return [part for part in text.split("\n\n") if part.strip()]


def events_from_file(path: Path) -> list[str]:
    return events_from_text(path.read_text(encoding="utf-8"))


@dataclass
class Reply:
    """What the server answers to one request.

    ``events``: SSE events written one chunk each (``delay`` seconds apart). ``cut_after``:
    after that many events the socket is closed without the final chunk (a dropped stream).
    ``hold``: after the events, keep the stream open up to that many seconds, waiting for
    the client to hang up. ``body``: a plain (JSON) body instead of a stream.
    """

    status: int = 200
    events: list[str] = field(default_factory=list)
    body: dict[str, Any] | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    cut_after: int | None = None
    hold: float = 0.0


@dataclass
class Received:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.raw) if self.raw else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        """Any GET (a model list, a WebSocket upgrade) is kept apart and answered 404."""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.owner.gets.append(Received(self.command, self.path, headers, b""))
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner = self.server.owner
        received = Received(self.command, self.path, headers, raw)
        owner.requests.append(received)
        reply = owner.reply_for(received)
        try:
            self._answer(reply, owner)
        except (BrokenPipeError, ConnectionResetError):
            owner.client_closed.set()
            self.close_connection = True

    def _answer(self, reply: Reply, owner: SSEReplayServer) -> None:
        self.send_response(reply.status)
        request_id = reply.headers.get(owner.request_id_header, f"req_{uuid.uuid4().hex}")
        owner.request_ids.append(request_id)
        self.send_header(owner.request_id_header, request_id)
        for name, value in reply.headers.items():
            if name.lower() != owner.request_id_header:
                self.send_header(name, value)
        if reply.body is not None or (not reply.events and reply.status != 200):
            body = reply.body if reply.body is not None else {"error": {"message": "scripted"}}
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        for i, event in enumerate(reply.events):
            if reply.cut_after is not None and i >= reply.cut_after:
                self._drop()
                return
            self._chunk((event + "\n\n").encode())
            if reply.delay:
                time.sleep(reply.delay)
        if reply.hold and self._wait_for_hangup(reply.hold):
            owner.client_closed.set()
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the socket without the terminating chunk: the stream is cut off."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _wait_for_hangup(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
        return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: SSEReplayServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # keep-alive resets when a client drops its pooled connection


class SSEReplayServer:
    """Loopback server on 127.0.0.1 (ephemeral port) replaying scripted replies in order."""

    def __init__(
        self,
        *replies: Reply,
        request_id_header: str = "x-request-id",
        aside: Callable[[Received], Reply | None] | None = None,
    ) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.aside = aside
        """Answers the requests it returns a reply for (a client's side calls, such as a
        title to name its session), leaving the scripted replies to the others."""
        self.request_id_header = request_id_header
        self.requests: list[Received] = []
        self.gets: list[Received] = []
        self.request_ids: list[str] = []
        self.client_closed = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def reply_for(self, received: Received) -> Reply:
        answer = self.aside(received) if self.aside is not None else None
        return answer if answer is not None else self.next_reply()

    def next_reply(self) -> Reply:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        return Reply(status=500, body={"error": {"message": "no scripted reply left"}})

    def start(self) -> SSEReplayServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SSEReplayServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ToolTableEnv:
    """An environment whose tools answer from a table; ``submit`` ends the episode."""

    def __init__(self, answers: dict[str, str] | None = None, prompt: str = "Do the task.") -> None:
        self.answers = dict(answers or {})
        self.prompt = prompt
        self.steps: list[ToolAction] = []

    def spec(self) -> dict[str, Any]:
        return {"kind": "tool-table", "tools": sorted(self.answers)}

    def reset(self, task_id: str, seed: int) -> ResetResult:
        names = [*sorted(self.answers), "submit"]
        tools = tuple(
            ToolSpec(
                name=name,
                description=f"the {name} tool",
                parameters={"type": "object", "properties": {}, "additionalProperties": True},
            )
            for name in names
        )
        return ResetResult(prompt=self.prompt, tools=tools)

    def step(self, action: ToolAction) -> StepResult:
        self.steps.append(action)
        if action.name == "submit":
            return StepResult(observation="submitted", reward=1.0, done=True)
        return StepResult(observation=self.answers.get(action.name, "ok"))

    def close(self) -> None:
        pass
