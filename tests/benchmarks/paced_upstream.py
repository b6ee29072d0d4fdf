"""A loopback model API pacing its SSE events like a real model: the upstream of the proxy load
benchmark, in a process of its own.

``python paced_upstream.py PORT EVENTS_FILE RATE``: every ``POST`` answers the events of
EVENTS_FILE (blank-line separated), the first at once and then RATE a second on a fixed
schedule; it keeps, under the request's ``x-bench-call`` header, when the request arrived and
when its first event was sent (``time.monotonic``, one clock for every process of the machine).
``GET /times`` hands over (and forgets) what it kept.
"""

import asyncio
import sys
import time
from pathlib import Path

from aiohttp import web

EVENTS = [
    (part + "\n\n").encode()
    for part in Path(sys.argv[2]).read_text(encoding="utf-8").split("\n\n")
    if part.strip()
]
GAP = 1 / float(sys.argv[3])
TIMES: dict[str, tuple[float, float]] = {}


async def answer(request: web.Request) -> web.StreamResponse:
    arrived = time.monotonic()
    await request.read()
    out = web.StreamResponse(headers={"content-type": "text/event-stream; charset=utf-8"})
    await out.prepare(request)
    first = time.monotonic()
    for i, event in enumerate(EVENTS):
        wait = first + i * GAP - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await out.write(event)
    await out.write_eof()
    TIMES[request.headers.get("x-bench-call", "")] = (arrived, first)
    return out


async def times(request: web.Request) -> web.Response:
    kept = dict(TIMES)
    TIMES.clear()
    return web.json_response(kept)


app = web.Application()
app.router.add_post("/{tail:.*}", answer)
app.router.add_get("/times", times)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
