"""The workspace sandbox: confined file access, masked temp paths, and running commands.

File tools go through :func:`confine`, which refuses absolute paths, ``..`` escapes and
symlinks that resolve outside the workspace. :class:`PathMasker` shows the private sandbox
root as ``/`` (so the workspace reads ``/workspace``) and observations stay deterministic.

:func:`run_command` runs each command in its own session (it and its children form one
process group), with an environment built from a small allowlist (never the parent's
``os.environ``, so provider API keys stay invisible). Output is read without blocking on a
full pipe and capped (head and tail kept, a marker says how many bytes were dropped); the
whole group is SIGKILLed on timeout, on a flood of output, on any exception while waiting
(then re-raised), and when the command returns (so background children never outlive it).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FLOOD_LIMIT = 64 * 1024 * 1024
"""Bytes of output after which a command's process group is killed (``yes`` with no end)."""

_READ_SIZE = 65536
_POLL = 0.02
_GRACE = 0.5
"""Seconds to keep draining the pipe after the group was killed (an escaped child may hold it)."""


class ToolError(Exception):
    """A tool-level failure (bad argument, refused path): shown to the model, never raised on."""


def confine(workspace: Path, path: str) -> Path:
    """``path`` (relative to the workspace root) as a real path inside ``workspace``.

    Raises :class:`ToolError` for absolute paths and for anything that resolves outside
    the workspace, whether through ``..`` or through a symlink.
    """
    if path.startswith(("/", "~")) or os.path.isabs(path):
        raise ToolError(f"absolute paths are refused; give a path relative to /workspace: {path}")
    root = os.path.realpath(workspace)
    lexical = os.path.normpath(os.path.join(root, path))
    if lexical != root and not lexical.startswith(root + os.sep):
        raise ToolError(f"path escapes the workspace: {path}")
    resolved = os.path.realpath(lexical)
    if resolved != root and not resolved.startswith(root + os.sep):
        raise ToolError(f"path resolves outside the workspace through a symlink: {path}")
    return Path(resolved)


class PathMasker:
    """Shows a private sandbox root as ``/`` in text (so its ``workspace`` is ``/workspace``).

    Both the given and the resolved form of the root are masked, so output stays the same
    whichever spelling a command prints (macOS ``/var`` vs ``/private/var``).
    """

    def __init__(self, root: Path) -> None:
        forms = {str(root), os.path.realpath(root)}
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form + "/", "/").replace(form, "/")
        return text


def shown_path(path: str) -> str:
    """How a model-given path is echoed back: normalised, posix, ``.`` for the root."""
    return Path(os.path.normpath(path)).as_posix() if path else "."


def split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only, without the empty piece after a final newline."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def numbered(lines: Sequence[str], start: int, end: int) -> str:
    """Lines ``start..end`` (1-based, inclusive) numbered like ``cat -n``."""
    return "".join(f"{i:6}\t{lines[i - 1]}\n" for i in range(start, end + 1))


def scrubbed_env(
    home: Path, tmpdir: Path, path: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The child environment: an allowlist, plus ``extra``; nothing from ``os.environ``."""
    env = {
        "PATH": path,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TERM": "dumb",
        "TMPDIR": str(tmpdir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class CommandResult:
    """What a finished (or killed) command produced."""

    head: bytes
    tail: bytes
    """The first and last bytes of the merged stdout+stderr; together at most the cap."""
    omitted: int
    """Bytes dropped between ``head`` and ``tail`` (0 when the output fit)."""
    exit_code: int
    """Shell convention: 128 + N when killed by signal N."""
    timed_out: bool
    flooded: bool

    def text(self, mask: Callable[[str], str] = str) -> str:
        """The output as text (each part passed through ``mask``), with the omission marker.

        Bytes that are not UTF-8 and control characters other than tab, newline, carriage
        return and escape show as U+FFFD, so the text never records larger than 3 bytes per
        byte read (JSON would spell a NUL as six)."""
        head = mask(visible(self.head.decode("utf-8", "replace")))
        tail = mask(visible(self.tail.decode("utf-8", "replace")))
        return join_capped(head, tail, self.omitted)


class _CappedBuffer:
    """Keeps the first ``cap // 2`` and last ``cap - cap // 2`` bytes, counts the rest."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_cap > 0:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def result(self) -> tuple[bytes, bytes, int]:
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail_cap else b""
        return bytes(self.head), tail, self.total - len(self.head) - len(tail)


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")


def visible(text: str) -> str:
    """Control characters (but tab, newline, carriage return, escape) as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def cap_text(text: str, cap: int) -> str:
    """``text`` capped to about ``cap`` UTF-8 bytes: head and tail with an omission marker.

    Lone surrogates (names that are not UTF-8) count as the 3 bytes each will record as."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text
    buf = _CappedBuffer(cap)
    buf.add(data)
    head, tail, omitted = buf.result()
    return join_capped(head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"), omitted)


def join_capped(head: str, tail: str, omitted: int) -> str:
    """Head and tail around the visible omission marker (just ``head`` when nothing was cut)."""
    if omitted <= 0:
        return head + tail
    sep = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{sep}[... {omitted} bytes of output omitted ...]\n{tail}"


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _leader_exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the group leader exited, without reaping it (so its pgid stays ours to kill)."""
    if proc.returncode is not None:
        return True
    if hasattr(os, "waitid"):
        try:
            flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
            return os.waitid(os.P_PID, proc.pid, flags) is not None
        except ChildProcessError:
            return True
    return proc.poll() is not None


def run_command(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    output_cap: int,
    flood_limit: int = FLOOD_LIMIT,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    """Run ``argv`` in its own process group with merged, capped output and a hard timeout.

    ``preexec`` runs in the child before exec (limits, cgroup); ``pass_fds`` stay open in it.
    Raises ``OSError`` when the command cannot be started (the caller translates it).
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec,
        pass_fds=tuple(pass_fds),
    )
    try:
        buf, timed_out, flooded = _collect(proc, timeout, output_cap, flood_limit)
        kill_group(proc)  # background children never outlive the command
        proc.wait()
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    code = proc.returncode
    head, tail, omitted = buf.result()
    return CommandResult(
        head=head,
        tail=tail,
        omitted=omitted,
        exit_code=128 - code if code < 0 else code,
        timed_out=timed_out,
        flooded=flooded,
    )


def _collect(
    proc: subprocess.Popen[bytes], timeout: float, cap: int, flood_limit: int
) -> tuple[_CappedBuffer, bool, bool]:
    """Read the pipe until EOF (or a grace period after the group was killed)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    buf = _CappedBuffer(cap)
    deadline = time.monotonic() + timeout
    timed_out = flooded = eof = False
    stop_at: float | None = None  # set once the group is dead or finished: drain, then stop
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if stop_at is None and _leader_exited(proc):
                kill_group(proc)
                stop_at = now + _GRACE
            elif stop_at is None and now >= deadline:
                timed_out = True
                kill_group(proc)
                stop_at = now + _GRACE
            if stop_at is not None and (eof or now >= stop_at):
                break
            if eof:
                time.sleep(_POLL)
                continue
            if not sel.select(timeout=_POLL):
                continue
            try:
                chunk = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                continue
            if not chunk:
                eof = True
                sel.unregister(fd)
                continue
            if buf.total + len(chunk) >= flood_limit:
                buf.add(chunk[: flood_limit - buf.total])
                flooded = True
                kill_group(proc)
                break
            buf.add(chunk)
    return buf, timed_out, flooded


def force_rmtree(path: Path) -> None:
    """Remove a tree even when the agent made parts of it unreadable (``chmod 000``)."""
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        path.unlink()
        return
    with contextlib.suppress(OSError):
        os.chmod(path, stat.S_IRWXU)
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            child = os.path.join(dirpath, name)
            if not os.path.islink(child):
                with contextlib.suppress(OSError):
                    os.chmod(child, stat.S_IRWXU)
    shutil.rmtree(path)
