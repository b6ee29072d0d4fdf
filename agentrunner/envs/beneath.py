"""Opening a path beneath a folder, so that no symlink or ``..`` leads out of it.

With Linux ``openat2(2)`` and ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`` the kernel resolves
the path from the folder's file descriptor: symlinks that stay inside are followed, absolute
symlinks and escapes fail with EXDEV, even while another process swaps folders and symlinks.
Without ``openat2`` (old kernels, seccomp filters) the path is walked one component at a time
with ``O_NOFOLLOW`` and every symlink is refused (:class:`SymlinkRefused`): safe, and stricter.
Everything here raises ``OSError``; callers translate it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

O_PATH: int = getattr(os, "O_PATH", 0)
DIR_FLAGS = os.O_DIRECTORY | (O_PATH or os.O_RDONLY)
"""How folders used only as anchors (``dir_fd``) are opened."""
_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64
_AT_FDCWD = -100
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_RETRIES = 16
"""``openat2`` answers EAGAIN when a rename raced a ``..`` lookup; it is then simply retried."""

_openat2_ok: bool | None = None
"""Whether ``openat2`` works here: probed on first use (tests reset it to force the fallback)."""


class SymlinkRefused(OSError):
    """The fallback walk met a symlink (it cannot follow one safely)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


@contextlib.contextmanager
def root_dir(root: Path) -> Iterator[int]:
    fd = os.open(root, DIR_FLAGS | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def opened(root: Path, rel: str, flags: int, mode: int = 0o644) -> Iterator[int]:
    fd = open_rel(root, rel, flags, mode)
    try:
        yield fd
    finally:
        os.close(fd)


def open_rel(root: Path, rel: str, flags: int, mode: int) -> int:
    with root_dir(root) as root_fd:
        return open_at(root_fd, rel, flags, mode)


def open_at(root_fd: int, rel: str, flags: int, mode: int = 0o644) -> int:
    """An fd for ``rel`` beneath the folder ``root_fd``; raises OSError."""
    if has_openat2():
        return _openat2(root_fd, rel, flags, mode)
    return _open_walk(root_fd, rel, flags, mode)


def has_openat2() -> bool:
    global _openat2_ok
    if _openat2_ok is None:
        try:
            os.close(_sys_openat2(_AT_FDCWD, b"/", O_PATH | os.O_CLOEXEC, 0, 0))
            _openat2_ok = True
        except OSError:  # ENOSYS (old kernel), EPERM (seccomp), or not Linux
            _openat2_ok = False
    return _openat2_ok


def _sys_openat2(dir_fd: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
    """One raw ``openat2`` system call; raises OSError."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    how = _OpenHow(flags, mode, resolve)
    fd = _syscall()(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dir_fd),
        ctypes.c_char_p(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), os.fsdecode(path))
    return int(fd)


@functools.cache
def _syscall() -> Any:
    """libc's ``syscall(2)``, returning a C long."""
    func = ctypes.CDLL(None, use_errno=True).syscall
    func.restype = ctypes.c_long
    return func


def _openat2(dir_fd: int, rel: str, flags: int, mode: int) -> int:
    tmpfile = getattr(os, "O_TMPFILE", 0)  # includes O_DIRECTORY's bit
    creates = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
    for _ in range(_RETRIES):
        try:
            return _sys_openat2(
                dir_fd, os.fsencode(rel), flags | os.O_CLOEXEC, mode if creates else 0, resolve
            )
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EINTR):
                raise
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), rel)


def _open_walk(root_fd: int, rel: str, flags: int, mode: int) -> int:
    """The fallback: one component at a time with ``O_NOFOLLOW``, refusing every symlink."""
    *folders, last = rel.split("/")
    fd = root_fd
    try:
        for name in folders:
            inner = _open_component(fd, name, DIR_FLAGS, 0)
            if fd != root_fd:
                os.close(fd)
            fd = inner
        return _open_component(fd, last, flags, mode)
    finally:
        if fd != root_fd:
            os.close(fd)


def _open_component(dir_fd: int, name: str, flags: int, mode: int) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and is_link(dir_fd, name):
            raise SymlinkRefused(errno.ELOOP, "symlink refused", name) from None
        raise
    if flags & O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH opens the link itself
        os.close(fd)
        raise SymlinkRefused(errno.ELOOP, "symlink refused", name)
    return fd


def is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
