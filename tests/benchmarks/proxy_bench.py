"""What the proxy benchmarks share: the streamed answer and the request they send, the proxy
processes they start (the recording one, the bare pass-through) and their CPU time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from record_support import anthropic_text

BARE = Path(__file__).with_name("bare_proxy.py")
API_KEY = "sk-bench-0123456789"


def stream_events(chunks: int) -> list[str]:
    """A Messages stream of ``chunks`` text deltas (with its opening and closing events)."""
    head, block, delta, stop_block, *tail = anthropic_text("x")
    return [
        head,
        block,
        *[delta.replace('"x"', f'"{i:05d} tokens "') for i in range(chunks)],
        stop_block,
        *tail,
    ]


def request_body(text: str, history: Sequence[dict[str, str]] = ()) -> bytes:
    """A streamed Messages request: the user's ``text`` after the ``history`` before it."""
    messages = [*history, {"role": "user", "content": text}]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 9, "stream": True, "messages": messages}
    return json.dumps(body).encode()


def answer_text(chunks: int) -> str:
    """The text :func:`stream_events` answers (what the next request sends back)."""
    return "".join(f"{i:05d} tokens " for i in range(chunks))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(args: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start a server process and wait until it accepts connections on ``port``."""
    proc = subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT)
    while proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"{args[1]} exited: {log.read_text()[-2000:]}")


def recording_proxy(port: int, db: Path, upstream: str, log: Path) -> subprocess.Popen[bytes]:
    """``agentrunner proxy`` recording into ``db``, its Anthropic upstream ``upstream``."""
    return serve(
        [sys.executable, "-m", "agentrunner.cli.main", "proxy", "--port", str(port),
         "--db", str(db), "--upstream-anthropic", upstream],
        port, log,
    )  # fmt: skip


def bare_proxy(port: int, upstream: str, log: Path) -> subprocess.Popen[bytes]:
    return serve([sys.executable, str(BARE), str(port), upstream], port, log)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
