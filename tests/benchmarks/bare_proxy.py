"""A bare aiohttp pass-through proxy (no recording): the baseline of the proxy benchmark.

``python bare_proxy.py PORT UPSTREAM``: ``/anthropic/...`` goes to UPSTREAM, bytes as they come.
"""

import sys

from aiohttp import ClientSession, TCPConnector, web

DROPPED = ("host", "content-length")


async def handle(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED}
    url = sys.argv[2] + request.path.removeprefix("/anthropic")
    async with request.app["session"].post(url, data=body, headers=headers) as upstream:
        out = web.StreamResponse(status=upstream.status)
        out.content_type = upstream.content_type
        await out.prepare(request)
        async for data in upstream.content.iter_any():
            await out.write(data)
        await out.write_eof()
        return out


async def start(app: web.Application) -> None:
    # no cap on connections: aiohttp's default (100) would queue the 101st stream
    app["session"] = ClientSession(auto_decompress=False, connector=TCPConnector(limit=0))


app = web.Application()
app.on_startup.append(start)
app.router.add_route("*", "/{tail:.*}", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
