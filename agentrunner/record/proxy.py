"""The recording proxy: aiohttp on both sides, bytes passed through as they arrive.

A model call (``POST`` to an API path a dialect knows) is handed to the journal, which appends
its ``model.request``; once that append is committed the request goes upstream unchanged and
every piece of the answer goes back to the client as it arrives, exactly the upstream's bytes,
and then to the journal (never waited for). Anything else (``GET /``, model lists, token
counts) is forwarded unrecorded. Credentials are forwarded and only ever told to the journal
as secrets to keep out of the store. Routes: ``/anthropic/...``, ``/openai/...`` and
``/gemini/...`` go to the upstream of that API family (clients are pointed at these
prefixes); any other path goes to the Anthropic upstream when it is an Anthropic path
(``/v1/messages``), else is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiohttp
from aiohttp import web

from agentrunner.record.conversations import Conversation
from agentrunner.record.dialects import api_of, dialect, gemini
from agentrunner.record.journal import Call, Journal
from agentrunner.record.replay import Answer, Divergence, Replay, pieces
from agentrunner.values.redaction import public_url

FAMILIES = ("anthropic", "openai", "gemini")
ROUTES = "use /anthropic/..., /openai/... or /gemini/..."
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "x-session-id", "session-id")
PARENT_SESSION_HEADERS = ("x-parent-session-id",)
"""Where a client names the session that started this one (OpenCode's sub-agent sessions)."""
TOKEN_HEADER = "x-agentrunner-token"
NOT_FORWARDED = HOP_BY_HOP | {TOKEN_HEADER}
"""Request headers the upstream never gets (the proxy's own token is the proxy's)."""


@dataclass(frozen=True)
class ProxySettings:
    upstreams: dict[str, str]
    """API family (``anthropic``, ``openai``) -> the base URL its clients would have used."""
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    upstream_timeout_s: float = 600.0
    pace: bool = False
    """Replaying: send a recorded answer's pieces spread over its recorded latency."""


@dataclass(frozen=True)
class ForkPlan:
    """``record --fork``: the recorded call where the agent goes live, and what changes."""

    episode_id: str
    turn: int
    message: str | None = None
    model: str | None = None
    response: tuple[bytes, str] | None = None
    """Call K's answer served from a file instead of the upstream: (its bytes, their type)."""


class Proxy:
    """One aiohttp application recording through one journal.

    With a ``replay``, model calls are answered from that recording until the agent goes live:
    at the ``fork`` plan's call, or at the first request the recording lacks when
    ``on_miss_live`` (else that request is refused and the divergence kept)."""

    def __init__(
        self,
        journal: Journal,
        settings: ProxySettings,
        replay: Replay | None = None,
        *,
        fork: ForkPlan | None = None,
        on_miss_live: bool = False,
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.replay = replay
        self.fork = fork
        self.on_miss_live = on_miss_live
        self.live = replay is None
        self.divergence: Divergence | None = None
        self.went_live: tuple[str, int] | None = None
        """The (episode, call) a replay left to go live, with the fork that continues it."""
        self._model: str | None = None
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.port = settings.port

    # -- serving

    async def start(self) -> int:
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=30, sock_read=self.settings.upstream_timeout_s
        )
        # No cap on upstream connections (aiohttp's default is 100): the 101st call would wait
        # for one, and a hundred stalled clients would hold up everyone else.
        connector = aiohttp.TCPConnector(limit=0)
        self._session = aiohttp.ClientSession(
            auto_decompress=False, timeout=timeout, connector=connector
        )
        app = web.Application(client_max_size=0, middlewares=[self._check_token])
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.host, self.settings.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @web.middleware
    async def _check_token(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None:  # a web page in the user's browser: agents send none
            return web.json_response(
                {"error": {"type": "permission_error", "message": "agentrunner proxy:"
                 f" requests from a web page ({origin[:100]}) are refused"}},
                status=403,
            )  # fmt: skip
        token = self.settings.token
        if token is not None:
            given = request.headers.get(TOKEN_HEADER, "")
            if not hmac.compare_digest(given.encode(errors="replace"), token.encode()):
                return web.json_response(
                    {"error": {"type": "authentication_error", "message": "agentrunner proxy:"
                     f" this proxy needs its token in the {TOKEN_HEADER} header"}},
                    status=401,
                )  # fmt: skip
        return await handler(request)

    def route(self, path: str) -> tuple[str, str] | None:
        """(upstream base URL, the rest of the path) for a request's path."""
        for family in FAMILIES:
            prefix = f"/{family}"
            if path == prefix or path.startswith(prefix + "/"):
                return self.settings.upstreams[family], path[len(prefix) :]
        if path.startswith("/v1/messages"):
            return self.settings.upstreams["anthropic"], path
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("upgrade", "").lower() == "websocket":
            # Refused, so the client falls back to HTTP, which is recorded: nothing flows
            # unrecorded (Codex's built-in provider tries the Responses API over WebSockets
            # first and falls back on a 404).
            return _error(404, "WebSocket upgrades are refused; use HTTP")
        if not self.live and self.replay is not None:
            return await self._serve_recorded(request, self.replay)
        route = self.route(request.path)
        if route is None:
            return _error(
                404, f"no route for {request.path}: use /anthropic/..., /openai/... or /gemini/..."
            )
        body = await request.read()
        if self._model is not None and api_of(request.method, route[1]) is not None:
            route, body = self._retargeted(route, body, self._model)
        call = await self._begin(request, route[1], body)
        return await self._forward(request, route, body, call)

    @staticmethod
    def _retargeted(
        route: tuple[str, str], body: bytes, model: str
    ) -> tuple[tuple[str, str], bytes]:
        """The request asking ``model``: in its path for Gemini, in its body for the others."""
        base, rest = route
        if gemini.model_of(rest) is not None:
            return (base, gemini.retarget(rest, model)), body
        return route, json.dumps({**json.loads(body), "model": model}).encode()

    async def _forward(
        self, request: web.Request, route: tuple[str, str], body: bytes, call: Call | None
    ) -> web.StreamResponse:
        base, rest = route
        url = base.rstrip("/") + rest + (f"?{request.query_string}" if request.query_string else "")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in NOT_FORWARDED}
        if call is not None:  # what is recorded must be readable: no compressed answers
            headers["Accept-Encoding"] = "identity"
        assert self._session is not None
        try:
            upstream = await self._session.request(
                request.method, url, data=body, headers=headers, allow_redirects=False
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = (
                f"the upstream {public_url(base)} could not be reached: {exc or type(exc).__name__}"
            )
            self._tell(call, lambda c: self.journal.broke(c, reason, cancelled=False))
            return _error(502, reason)
        async with upstream:
            return await self._relay(request, upstream, call)

    async def _begin(
        self, request: web.Request, rest: str, body: bytes, into: Conversation | None = None
    ) -> Call | None:
        api = api_of(request.method, rest)
        if api is None:
            return None
        for name in CREDENTIAL_HEADERS:
            value = request.headers.get(name)
            if value:
                secret = value.split(" ", 1)[-1].strip()
                self.journal.submit(
                    partial(self.journal.episodes.learn_secret, f"header {name}", secret)
                )
        if request.query.get("key"):
            key = request.query["key"]
            self.journal.submit(partial(self.journal.episodes.learn_secret, "query key", key))
        session = _header(request, SESSION_HEADERS)
        parent = _header(request, PARENT_SESSION_HEADERS)
        agent = request.headers.get("user-agent")
        where = rest + (f"?{request.query_string}" if request.query_string else "")
        job = partial(
            self.journal.begin, api, body, session, agent, into, where, parent_session=parent
        )
        try:
            return await asyncio.wrap_future(self.journal.submit(job))
        except Exception:  # not a body the dialect reads (reported): forwarded all the same
            return None

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse, call: Call | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for name, value in upstream.headers.items():
            if name.lower() not in HOP_BY_HOP:
                response.headers.add(name, value)
        if call is not None:
            kind = upstream.headers.get("content-type")
            self.journal.submit(partial(self.journal.answered, call, upstream.status, kind))
        try:
            await response.prepare(request)
            async for data in upstream.content.iter_any():
                await response.write(data)
                self._feed(call, data)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):  # reset, or lost while blocked
            self._tell(call, lambda c: self.journal.broke(c, "the client hung up", cancelled=True))
            raise
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = f"the upstream's answer broke off: {exc or type(exc).__name__}"
            self._tell(call, lambda c: self.journal.broke(c, reason, cancelled=False))
            return response
        self._tell(call, self.journal.finish)
        return response

    async def _serve_recorded(self, request: web.Request, replay: Replay) -> web.StreamResponse:
        """A model call answered from the recording, byte for byte (paced as recorded with
        ``pace``); a request the recording does not hold is refused and reported."""
        route = self.route(request.path)
        rest = route[1] if route is not None else request.path
        api = api_of(request.method, rest)
        if api is None:
            return _error(
                404, f"replaying {replay.root}: {request.method} {rest} is not a model call"
            )
        body = await request.read()
        try:
            found = await asyncio.wrap_future(self.journal.submit(partial(replay.find, api, body)))
        except Exception as exc:  # a body the dialect cannot read
            return _error(400, f"replaying {replay.root}: the request cannot be read: {exc}")
        plan = self.fork
        if (
            isinstance(found, Answer)
            and plan
            and (found.episode_id, found.turn)
            == (
                plan.episode_id,
                plan.turn,
            )
        ):
            return await self._go_live(request, api, body, plan.episode_id, plan.turn, plan)
        if isinstance(found, Divergence) and self.on_miss_live:
            return await self._go_live(request, api, body, found.episode_id, found.turn, None)
        # a fork inherits the calls before its fork point: they are served, not recorded again
        call = None if plan else await self._begin(request, rest, body)
        if isinstance(found, Divergence):
            self.divergence = self.divergence or found
            report = found.report()
            self._tell(
                call, lambda c: self.journal.broke(c, report, cancelled=False, kind="replay")
            )
            return _error(400, report)
        return await self._play(request, found, call)

    async def _go_live(
        self,
        request: web.Request,
        api: str,
        body: bytes,
        episode_id: str,
        turn: int,
        plan: ForkPlan | None,
    ) -> web.StreamResponse:
        """From this call on, the agent talks to the upstream, recorded as a fork of the
        recording at this call (``plan``: the fork asked for, with its edits)."""
        self.live = True
        self.went_live = (episode_id, turn)
        session = _header(request, SESSION_HEADERS)
        job = partial(self.journal.episodes.fork, episode_id, turn, session=session)
        conversation = await asyncio.wrap_future(self.journal.submit(job))
        if plan is not None and plan.message is not None:
            edited = dialect(api).with_user_message(json.loads(body), plan.message)
            body = json.dumps(edited).encode()
        route = self.route(request.path)
        if route is None:
            return _error(
                404, f"no route for {request.path}: use /anthropic/..., /openai/... or /gemini/..."
            )
        if plan is not None and plan.model is not None:
            self._model = plan.model
            route, body = self._retargeted(route, body, plan.model)
        call = await self._begin(request, route[1], body, into=conversation)
        if plan is not None and plan.response is not None:  # answered from the file
            data, kind = plan.response
            answer = Answer(episode_id, turn, (), 200, kind, data, 0.0)
            return await self._play(request, answer, call)
        return await self._forward(request, route, body, call)

    async def _play(
        self, request: web.Request, answer: Answer, call: Call | None
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=answer.status)
        if answer.content_type:
            response.content_type = answer.content_type.split(";")[0]
        parts = pieces(answer)
        gap = answer.latency_s / len(parts) if self.settings.pace and parts else 0.0
        if call is not None:
            self.journal.submit(
                partial(self.journal.answered, call, answer.status, answer.content_type)
            )
        try:
            await response.prepare(request)
            for data in parts:
                await response.write(data)
                self._feed(call, data)
                if gap:
                    await asyncio.sleep(gap)
            await response.write_eof()
        except (ConnectionError, asyncio.CancelledError):  # reset, or lost while blocked
            self._tell(call, lambda c: self.journal.broke(c, "the client hung up", cancelled=True))
            raise
        self._tell(call, self.journal.finish)
        return response

    def _feed(self, call: Call | None, data: bytes) -> None:
        if call is not None:
            self.journal.submit(partial(self.journal.feed, call, data), streamed=True)

    def _tell(self, call: Call | None, job: Callable[[Call], Any]) -> None:
        if call is not None:
            self.journal.submit(partial(job, call))


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {
            "type": "error",
            "error": {"type": "proxy_error", "message": f"agentrunner proxy: {message}"},
        },
        status=status,
    )


class ProxyThread:
    """The proxy's event loop in a thread of its own (``agentrunner record`` runs the agent
    in the main thread)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentrunner-proxy")

    def start(self) -> int:
        self._thread.start()
        return asyncio.run_coroutine_threadsafe(self.proxy.start(), self._loop).result()

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.proxy.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _header(request: web.Request, names: tuple[str, ...]) -> str | None:
    """The first of these headers the request has."""
    return next((request.headers[h] for h in names if h in request.headers), None)
