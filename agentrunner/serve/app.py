"""The OpenEnv server (aiohttp): the endpoints, JSON shapes and WebSocket session protocol of
``openenv`` 0.10's ``create_app``, serving workspace sessions.

- ``GET /health`` ``{"status": "healthy"}``; ``GET /metadata`` (name, description, version,
  the tasks); ``GET /schema`` (``action``, ``observation``, ``reset_observation``, ``state``).
- ``WS /ws``: one session per connection. ``{"type": "reset", "data": {"task_id"?, "seed"?}}``,
  ``{"type": "step", "data": {action}}``, ``{"type": "state"}``, ``{"type": "close"}``;
  answered with ``observation`` / ``state`` / ``error`` frames (``openenv``'s error codes).
  A refused session gets one ``CAPACITY_REACHED`` frame and is closed.
- ``POST /reset``, ``POST /step``, ``GET /state``: ``openenv``'s bodies. Since a workspace is
  stateful, ``/reset`` opens a session and names it in its ``metadata.session_id``, and
  ``/step`` and ``/state`` take that ``session_id`` (a ``StepRequest`` extra field); an HTTP
  session ends with its episode (submit, step limit) or when idle.
- Reconnecting: a reset whose ``session_id`` names a session that is not open here (its
  connection dropped, it idled out, the server was stopped or killed) continues that
  session's last episode, if it can go on: its workspace restored from the last recorded
  step, its steps counted on (the reset observation's ``step``). Over the WebSocket it is
  the first message of a new connection; ``openenv``'s client sends it as
  ``reset(session_id=...)``.

With a token, every request but ``/health`` must carry ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from agentrunner import __version__
from agentrunner.serve.schema import (
    WorkspaceAction,
    error_frame,
    schemas,
    tools_description,
    validation_errors,
)
from agentrunner.serve.session import Session, SessionProblem, UnknownSession
from agentrunner.serve.sessions import CapacityReached, SessionTable
from agentrunner.values.errors import AgentRunnerError, UsageError

MAX_MESSAGE_BYTES = 8 * 2**20
"""The largest HTTP body or WebSocket message (a step's action: a file written whole)."""
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})
ENV_NAME = "agentrunner-workspace"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class OpenEnvServer:
    """The routes, over one session table; ``url`` is set once the server listens."""

    def __init__(self, table: SessionTable, token: str | None) -> None:
        self.table = table
        self.token = token
        self.url = ""

    def application(self) -> web.Application:
        app = web.Application(
            client_max_size=MAX_MESSAGE_BYTES,
            middlewares=[self._refuse_web_pages, self._check_token],
        )
        app.router.add_get("/health", self.health)
        app.router.add_get("/metadata", self.metadata)
        app.router.add_get("/schema", self.schema)
        app.router.add_get("/state", self.state)
        app.router.add_post("/reset", self.reset)
        app.router.add_post("/step", self.step)
        app.router.add_get("/ws", self.websocket)
        return app

    @web.middleware
    async def _refuse_web_pages(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """What a web page in the user's browser could send is refused: a request naming an
        ``Origin`` (browsers send it; trainers' clients do not), a host name that is not
        loopback's or an address (a DNS-rebound name) when no token guards the server, and a
        body that is not ``application/json`` (a form or ``text/plain`` needs no preflight)."""
        origin = request.headers.get("Origin")
        if origin is not None:
            return _detail(403, f"requests from a web page ({origin[:100]}) are refused")
        host = (request.host or "").rsplit(":", 1)[0].strip("[]").lower()
        if self.token is None and not (host in LOOPBACK_NAMES or _is_address(host)):
            return _detail(403, f"this server answers on loopback only, not as {host[:100]!r}")
        if request.method == "POST" and request.content_type != "application/json":
            return _detail(415, "send the body as application/json")
        return await handler(request)

    @web.middleware
    async def _check_token(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.token is not None and request.path != "/health":
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(errors="replace"), self.token.encode()):
                return _detail(401, "this server needs its token: Authorization: Bearer TOKEN")
        return await handler(request)

    async def health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "healthy"})

    async def metadata(self, _: web.Request) -> web.Response:
        """``openenv``'s ``EnvironmentMetadata`` (no other fields: it forbids them); the
        tasks are listed in ``readme_content``."""
        catalog = self.table.catalog
        tasks = "\n".join(f"- {task_id}" for task_id in catalog.task_ids)
        readme = (
            f"# {ENV_NAME}\n\nTasks ({catalog.source}; reset with `task_id`, default"
            f" {catalog.default_task}):\n{tasks}\n\nAt most {self.table.max_sessions}"
            " sessions at once.\n"
        )
        return web.json_response(
            {
                "name": ENV_NAME,
                "description": "A coding workspace in a sandbox: fix the task's repository"
                " with one tool per step, then submit (hidden tests give the reward).\n"
                + tools_description(),
                "readme_content": readme,
                "version": __version__,
                "author": "agentrunner",
            }
        )

    async def schema(self, _: web.Request) -> web.Response:
        return web.json_response(schemas())

    # -- HTTP sessions ------------------------------------------------------------------

    async def reset(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        session_id = body.get("session_id")
        session = self.table.get(session_id) if isinstance(session_id, str) else None
        if session_id is not None and session is None:
            return await self._rejoin(request, body)
        if session is None:
            try:
                session = self._open(request, "http")
            except CapacityReached as exc:
                return _detail(503, str(exc))
        try:
            return web.json_response(await session.reset(body))
        except (SessionProblem, AgentRunnerError) as exc:
            if session_id is None:
                await self.table.close(session, f"the reset failed: {exc}")
            return _detail(422 if _code(exc) == "VALIDATION_ERROR" else 400, str(exc))
        except Exception:  # its slot is freed whatever failed
            if session_id is None:
                await self.table.close(session, "the reset failed")
            raise

    async def step(self, request: web.Request) -> web.Response:
        body = await _json_body(request)
        if isinstance(body, web.Response):
            return body
        session = self._http_session(body.get("session_id"))
        if isinstance(session, web.Response):
            return session
        try:
            action = WorkspaceAction.model_validate(body.get("action"))
        except ValidationError as exc:
            return web.json_response({"detail": validation_errors(exc)}, status=422)
        try:
            reply = await session.step(action)
        except (SessionProblem, AgentRunnerError) as exc:
            return _detail(400, str(exc))
        if reply["done"]:  # an HTTP session ends with its episode: its slot is free again
            await self.table.close(session, None)
        return web.json_response(reply)

    async def state(self, request: web.Request) -> web.Response:
        session = self._http_session(request.query.get("session_id"))
        if isinstance(session, web.Response):
            return session
        return web.json_response(session.state())

    async def _rejoin(self, request: web.Request, body: dict[str, Any]) -> web.Response:
        """A reset naming a session not open here: continue that session's episode in a
        new HTTP session with its id (or say why it cannot go on)."""
        try:
            _only_session(body)
            session = self._open(request, "http")
        except SessionProblem as exc:
            return _detail(422, str(exc))
        except CapacityReached as exc:
            return _detail(503, str(exc))
        try:
            return web.json_response(await self.table.rejoin(session, body["session_id"]))
        except (SessionProblem, AgentRunnerError) as exc:
            return _detail(_status(exc), str(exc))
        finally:
            if session.episode is None:  # not continued: its slot is free again
                await self.table.close(session, None)

    def _http_session(self, session_id: Any) -> Session | web.Response:
        if not isinstance(session_id, str):
            return _detail(
                400,
                "give the session_id that POST /reset returned (its metadata.session_id);"
                " or run the episode over the WebSocket /ws",
            )
        session = self.table.get(session_id)
        if session is None:
            return _detail(404, f"unknown session_id {session_id!r} (ended, or idle too long)")
        return session

    def _open(self, request: web.Request, transport: str) -> Session:
        client = request.headers.get("User-Agent", "unknown")[:200]
        return self.table.open(self.url, client, request.remote or "unknown", transport)

    # -- WebSocket sessions -------------------------------------------------------------

    async def websocket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES)
        await ws.prepare(request)
        try:
            session = self._open(request, "websocket")
        except CapacityReached as exc:
            extra = {"active_sessions": exc.active, "max_sessions": exc.limit}
            await ws.send_json(error_frame("CAPACITY_REACHED", str(exc), **extra))
            await ws.close()
            return ws
        self.table.hangups[session.id] = ws.close
        why: str | None = "the client disconnected"
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                reply = await answer(self.table, session, message.data)
                if reply is None:
                    why = None
                    break
                try:
                    await ws.send_str(json.dumps(reply))
                except ConnectionResetError:  # gone while its step ran: recorded as gone
                    break
        finally:
            await self.table.close(session, why)
            await ws.close()
        return ws


async def answer(table: SessionTable, session: Session, raw: str) -> dict[str, Any] | None:
    """The reply to one WebSocket message (None: the client closed the session)."""
    try:
        message = json.loads(raw)
    except ValueError as exc:
        return error_frame("INVALID_JSON", f"Invalid JSON: {exc}")
    kind = message.get("type", "") if isinstance(message, dict) else ""
    data = message.get("data") if isinstance(message, dict) else None
    try:
        match kind:
            case "reset":
                data = data if isinstance(data, dict) else {}
                wanted = data.get("session_id")
                if wanted is None or wanted == session.id:
                    observation = await session.reset(data)
                else:  # a client back after its connection, or the server, went away
                    _only_session(data)
                    observation = await table.rejoin(session, wanted)
                return {"type": "observation", "data": observation}
            case "step":
                action = WorkspaceAction.model_validate(data)
                return {"type": "observation", "data": await session.step(action)}
            case "state":
                return {"type": "state", "data": session.state()}
            case "close":
                return None
            case _:
                return error_frame("UNKNOWN_TYPE", f"Unknown message type: {kind}")
    except ValidationError as exc:
        errors = validation_errors(exc)
        return error_frame("VALIDATION_ERROR", "Invalid message", errors=errors)
    except (SessionProblem, AgentRunnerError) as exc:
        return error_frame(_code(exc), str(exc))


def _code(exc: Exception) -> str:
    return exc.code if isinstance(exc, SessionProblem) else "EXECUTION_ERROR"


def _status(exc: Exception) -> int:
    """The HTTP status of a session's refusal."""
    match _code(exc):
        case "VALIDATION_ERROR":
            return 422
        case "SESSION_ERROR":
            return 404 if isinstance(exc, UnknownSession) else 409
        case _:
            return 409 if isinstance(exc, UsageError) else 400


def _only_session(data: dict[str, Any]) -> None:
    """A reset that continues a session names only the session: its task and seed are the
    episode's own."""
    extra = sorted(key for key in data if key not in ("session_id", "metadata"))
    if extra:
        raise SessionProblem(
            f"a reset with a session_id continues that session's episode: leave out"
            f" {', '.join(extra)} (or leave out session_id to start a new episode)",
            "VALIDATION_ERROR",
        )


async def _json_body(request: web.Request) -> dict[str, Any] | web.Response:
    if not request.can_read_body:
        return {}
    try:
        body = await request.json()
    except ValueError as exc:
        return _detail(400, f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _detail(422, "the body must be a JSON object")
    return body


def _detail(status: int, message: str) -> web.Response:
    return web.json_response({"detail": message}, status=status)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
