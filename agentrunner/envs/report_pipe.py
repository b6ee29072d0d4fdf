"""A test command's JUnit report, taken as it is written rather than read back afterwards.

Before the test command runs, :class:`ReportPipe` puts a named pipe (fifo) at the report's
path in the verification copy and reads it from a thread for the whole run; the command's
JUnit writer opens the path and writes into the pipe as into a file. The report is every
byte that went through the pipe: a conftest or an exit handler that rewrites the report
after the writer closed it adds a second document (which is not XML and scores 0) instead
of replacing the first, and one that replaces the fifo by a file leaves no report at all.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
from pathlib import Path
from types import TracebackType

from agentrunner.envs import paths

_POLL = 0.05
_CHUNK = 65536


class ReportPipe:
    """A fifo at ``rel`` beneath ``root``, read until :meth:`finish` (use as a context)."""

    def __init__(self, root: Path, rel: str, max_bytes: int) -> None:
        """Raises :class:`~agentrunner.envs.sandbox.ToolError` when the path cannot be made."""
        self.rel = rel
        self.max_bytes = max_bytes
        parent, _, self.name = rel.strip("/").rpartition("/")
        paths.plant_bytes(root, rel, b"")  # parent folders made, whatever stood there removed
        self.dir_fd = paths.open_beneath(root, parent or ".", os.O_RDONLY | os.O_DIRECTORY)
        self.fd = -1
        try:
            os.unlink(self.name, dir_fd=self.dir_fd)
            os.mkfifo(self.name, dir_fd=self.dir_fd)
            flags = os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
            self.fd = os.open(self.name, flags, dir_fd=self.dir_fd)
            os.fchmod(self.fd, 0o666)  # the sandbox's user may not be the runner's
            self.inode = os.fstat(self.fd).st_ino
        except OSError:
            self.close()
            raise
        self.data = bytearray()
        self.overflow = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, daemon=True)
        self._thread.start()

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], _POLL)
            if ready:
                self._drain()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                return
            if not chunk:
                return
            room = self.max_bytes + 1 - len(self.data)
            self.data += chunk[: max(room, 0)]
            self.overflow = self.overflow or len(self.data) > self.max_bytes

    def finish(self) -> bytes | str:
        """The report's bytes, or why there is none (the fifo was replaced, or overflowed)."""
        self._stop.set()
        self._thread.join()
        self._drain()
        try:
            st = os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
            still = stat.S_ISFIFO(st.st_mode) and st.st_ino == self.inode
        except OSError:
            still = False
        if not still:
            return f"the JUnit report {self.rel} was replaced during the run"
        if self.overflow:
            return f"the JUnit report {self.rel} is larger than {self.max_bytes} bytes"
        if not self.data:
            return f"no JUnit report was written to {self.rel}"
        return bytes(self.data)

    def close(self) -> None:
        self._stop_thread()
        for fd in (self.fd, self.dir_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self.dir_fd = -1

    def _stop_thread(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
            self._thread.join()

    def __enter__(self) -> ReportPipe:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
