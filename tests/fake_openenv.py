"""A tiny real OpenEnv-speaking loopback server for unit tests of the client's mapping.

One ``websockets.sync.server`` on 127.0.0.1 answers ``GET /health``, ``/metadata`` and
``/schema`` over plain HTTP and runs ``WS /ws``: every message it receives is recorded,
and each non-``close`` message is answered with the next scripted reply. A scripted
``None`` drops the TCP connection without a reply, as a dying server does, and
``SILENCE`` leaves the message unanswered, as a hung server does.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection, serve

ECHO_SCHEMA: dict[str, Any] = {
    "title": "EchoAction",
    "description": "Echo a message.",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "metadata": {"type": "object", "title": "Metadata"},
        "message": {"type": "string", "title": "Message"},
    },
    "required": ["message"],
}
SILENCE: dict[str, Any] = {"type": "__silence__"}
METADATA: dict[str, Any] = {"name": "FakeEcho", "description": "Echoes messages back."}


def observation_reply(
    observation: dict[str, Any],
    *,
    reward: float | None = None,
    done: bool = False,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An OpenEnv ``observation`` reply; ``metadata`` goes to the top level when given."""
    data: dict[str, Any] = {"observation": observation, "reward": reward, "done": done}
    if metadata is not None:
        data["metadata"] = metadata
    return {"type": "observation", "data": data}


def error_reply(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


class FakeOpenEnv:
    """The server's script and what it saw; ``url`` is the base URL to give the client."""

    def __init__(
        self,
        replies: Sequence[dict[str, Any] | None],
        *,
        metadata: dict[str, Any],
        schema: dict[str, Any],
        greeting: dict[str, Any] | None,
    ) -> None:
        self.replies = list(replies)
        self.metadata = metadata
        self.schema = schema
        self.greeting = greeting
        self.received: list[dict[str, Any]] = []
        self.url = ""

    def http(self, connection: ServerConnection, request: Request) -> Response | None:
        bodies = {
            "/health": {"status": "healthy"},
            "/metadata": self.metadata,
            "/schema": {"action": self.schema, "observation": {}, "state": {}},
        }
        path = request.path.split("?")[0]
        if path == "/ws":
            return None
        if path not in bodies:
            return connection.respond(404, "not found")
        body = json.dumps(bodies[path]).encode()
        headers = Headers(
            {
                "Content-Type": "application/json",
                "Content-Length": str(len(body)),
                "Connection": "close",  # websockets ends the connection after a plain response
            }
        )
        return Response(200, "OK", headers, body)

    def session(self, ws: ServerConnection) -> None:
        if self.greeting is not None:  # a refused session: one error frame, then close
            ws.send(json.dumps(self.greeting))
            ws.close()
            return
        for raw in ws:
            message = json.loads(raw)
            self.received.append(message)
            if message.get("type") == "close":
                return
            reply = self.replies.pop(0) if self.replies else error_reply("SESSION_ERROR", "done")
            if reply is None:
                ws.socket.shutdown(socket.SHUT_RDWR)
                return
            if reply is SILENCE:
                continue
            ws.send(json.dumps(reply))


@contextmanager
def fake_openenv(
    replies: Sequence[dict[str, Any] | None] = (),
    *,
    metadata: dict[str, Any] | None = None,
    schema: dict[str, Any] | None = None,
    greeting: dict[str, Any] | None = None,
) -> Iterator[FakeOpenEnv]:
    """Serve a :class:`FakeOpenEnv` on an ephemeral loopback port for the ``with`` block."""
    fake = FakeOpenEnv(
        replies,
        metadata=METADATA if metadata is None else metadata,
        schema=ECHO_SCHEMA if schema is None else schema,
        greeting=greeting,
    )
    with serve(fake.session, "127.0.0.1", 0, process_request=fake.http) as server:
        port = server.socket.getsockname()[1]
        fake.url = f"http://127.0.0.1:{port}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield fake
        finally:
            server.shutdown()
            thread.join(timeout=5)
