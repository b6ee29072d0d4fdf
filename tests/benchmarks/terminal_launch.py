"""Launch a terminal program in a pseudo-terminal and time it to its first screen, as a
user sees it: from before the process starts until every given text has been drawn.

The program runs as it would in a terminal (its real driver, at a fixed size); what it
writes is read as it comes, escape sequences stripped, until each ``marker`` has appeared.
Then its peak memory so far is read from ``/proc`` (``VmHWM``: its own, see
:mod:`peak_memory`) and it is asked to quit with a key.
"""

from __future__ import annotations

import os
import re
import select
import signal
import struct
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fcntl import ioctl
from termios import TIOCSWINSZ

from peak_memory import peak_rss_mb

_ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=$ ]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|.)")


@dataclass(frozen=True)
class FirstScreen:
    seconds: float  # from before the launch until the last marker was drawn
    peak_rss_mb: float  # the program's own peak up to then


def first_screen(
    argv: Sequence[str],
    markers: Sequence[str],
    *,
    size: tuple[int, int] = (120, 40),
    quit_key: bytes = b"q",
    timeout: float = 60.0,
) -> FirstScreen:
    """Run ``argv`` in a ``size`` (columns, lines) terminal until it has drawn every marker."""
    leader, follower = os.openpty()
    columns, lines = size
    ioctl(follower, TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines)}
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdin=follower, stdout=follower, stderr=follower, env=env, start_new_session=True
    )
    os.close(follower)
    try:
        seconds = _until_drawn(leader, proc, markers, started, timeout)
        peak = peak_rss_mb(proc.pid)
        os.write(leader, quit_key)
        _drain_until_exit(leader, proc, timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(leader)
    return FirstScreen(seconds, peak)


def _read(leader: int, wait: float) -> str | None:
    """What the program wrote (within ``wait`` seconds; "" if nothing); None at its end."""
    ready, _, _ = select.select([leader], [], [], wait)
    if not ready:
        return ""
    try:
        data = os.read(leader, 1 << 16)
    except OSError:  # the program closed the terminal
        return None
    return data.decode("utf-8", "replace") if data else None


def _until_drawn(
    leader: int, proc: subprocess.Popen[bytes], markers: Sequence[str], started: float, limit: float
) -> float:
    missing, tail = set(markers), ""
    while missing:
        if time.perf_counter() - started > limit:
            raise TimeoutError(f"{list(missing)} not drawn within {limit:.0f} s")
        new = _read(leader, 0.5)
        if new is None:
            raise RuntimeError(f"{proc.args!r} ended (exit {proc.wait()}) before its first screen")
        tail = (tail + new)[-(len(new) + 4096) :]
        text = _ESCAPES.sub("", tail)
        missing = {m for m in missing if m not in text}
    return time.perf_counter() - started


def _drain_until_exit(leader: int, proc: subprocess.Popen[bytes], limit: float) -> None:
    deadline = time.perf_counter() + limit
    while proc.poll() is None and time.perf_counter() < deadline:
        if _read(leader, 0.1) is None:
            break
    proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
