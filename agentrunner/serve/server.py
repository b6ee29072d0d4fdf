"""Starting and stopping the OpenEnv server: listen, reap idle sessions, and on stop end every
open session's episode (recorded as stopped by the server) before the sockets close."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from agentrunner.serve.app import OpenEnvServer
from agentrunner.serve.catalog import Catalog
from agentrunner.serve.sessions import SessionTable

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


@dataclass(frozen=True)
class ServeSettings:
    """What ``agentrunner serve-env`` serves, where, and within which bounds."""

    catalog: Catalog
    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 8
    idle_timeout: float = 600.0
    token: str | None = None


async def serve(
    settings: ServeSettings,
    store: StoreBackend,
    stop: asyncio.Event,
    on_ready: Callable[[str], None] = lambda url: None,
) -> None:
    """Serve until ``stop`` is set; ``on_ready`` gets the server's URL once it listens."""
    table = SessionTable(store, settings.catalog, settings.max_sessions, settings.idle_timeout)
    server = OpenEnvServer(table, settings.token)
    runner = web.AppRunner(server.application(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        port = runner.addresses[0][1]
        host = f"[{settings.host}]" if ":" in settings.host else settings.host
        server.url = f"http://{host}:{port}"
        reaper = asyncio.create_task(table.reap())
        on_ready(server.url)
        try:
            await stop.wait()
        finally:
            reaper.cancel()
            await table.close_all("the server stopped")
    finally:
        await runner.cleanup()


def run_server(
    settings: ServeSettings, store: StoreBackend, on_ready: Callable[[str], None]
) -> None:
    """Serve until SIGINT or SIGTERM."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await serve(settings, store, stop, on_ready)

    asyncio.run(main())
