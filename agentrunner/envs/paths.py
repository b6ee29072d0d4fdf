"""Confined file operations: open, read, write and list paths without ever leaving the workspace.

Every path is resolved by the kernel from a file descriptor of the workspace root, never as a
path string that could change between a check and its use. With Linux ``openat2(2)`` and
``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``, symlinks that stay inside are followed while
absolute symlinks and ``..`` escapes are refused, even while another process swaps folders
and symlinks. Without ``openat2`` (old kernels, seccomp filters) the path is walked one
component at a time with ``O_NOFOLLOW`` and every symlink is refused: safe, and stricter.

Reads refuse files with more than one hard link (the other link may be outside). Writes go
to a fresh file in the target folder that is then renamed over the final name, so they never
write through a hard link or through a symlink swapped in later. Errors are
:class:`~agentrunner.envs.sandbox.ToolError` with one line naming the path as it was given.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import platform
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrunner.envs.sandbox import ToolError, shown_path

_O_PATH: int = getattr(os, "O_PATH", 0)
_DIR_FLAGS = os.O_DIRECTORY | (_O_PATH or os.O_RDONLY)
"""How folders used only as anchors (``dir_fd``) are opened."""
_PROBE_FLAGS = _O_PATH or (os.O_RDONLY | os.O_NONBLOCK)
"""How an entry of unknown type is opened without side effects (a fifo must not block)."""
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_SYS_OPENAT2 = 437  # the same number on x86_64 and aarch64
_AT_FDCWD = -100
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_RETRIES = 16
"""``openat2`` answers EAGAIN when a rename raced a ``..`` lookup; it is then simply retried."""
_MAX_LINKS = 40
_CHUNK = 1 << 20

_openat2_ok: bool | None = None
"""Whether ``openat2`` works here: probed on first use (tests reset it to force the fallback)."""

_MESSAGES: dict[int, str] = {
    errno.EISDIR: "{shown} is a directory; use list_files to see what it holds",
    errno.ENOTDIR: "a part of the path is not a directory: {shown}",
    errno.EACCES: "permission denied: {shown}",
    errno.EPERM: "permission denied: {shown}",
    errno.EXDEV: "path resolves outside the workspace through a symlink: {shown}",
    errno.ELOOP: "too many levels of symbolic links: {shown}",
    errno.ENXIO: "{shown} is not a regular file",
    errno.EAGAIN: "{shown} kept changing while it was opened; try again",
    errno.ENAMETOOLONG: "path is too long: {shown}",
    errno.EEXIST: "already exists: {shown}",
}


class _SymlinkRefused(OSError):
    """The fallback walk met a symlink (it cannot follow one safely)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


def open_beneath(root: Path, path: str, flags: int, mode: int = 0o644) -> int:
    """A new (close-on-exec) fd for ``path``, resolved beneath ``root``; the caller closes it.

    Symlinks that stay beneath ``root`` are followed (none are without ``openat2``); any
    other escape raises :class:`ToolError`. ``mode`` only matters with ``O_CREAT``.
    """
    rel = _relative(path)
    try:
        return _open(root, rel, flags, mode)
    except OSError as exc:
        raise _translate(exc, shown_path(path), "open") from None


def read_bytes(root: Path, path: str, max_bytes: int) -> bytes:
    """A regular file's content; refuses folders, fifos, devices, hard links and big files."""
    rel, shown = _relative(path), shown_path(path)
    try:
        with _opened(root, rel, _READ_FLAGS) as fd:
            st = os.fstat(fd)
            _require_regular(st.st_mode, shown)
            if st.st_nlink > 1:
                raise ToolError(
                    f"{shown} has {st.st_nlink} hard links; refused because it may be"
                    " a file outside the workspace"
                )
            data = _read_upto(fd, max_bytes + 1)
    except OSError as exc:
        raise _translate(exc, shown, "read") from None
    if len(data) > max_bytes:
        raise ToolError(f"{shown} is larger than {max_bytes} bytes; use bash (head, sed)")
    return data


def write_bytes(root: Path, path: str, data: bytes) -> None:
    """Create or atomically replace a file, creating its parent folders.

    A symlink as the final component is followed when its target stays beneath ``root``;
    an existing file keeps its permission bits, a new one gets ``0o644`` less the umask.
    """
    rel, shown = _relative(path), shown_path(path)
    try:
        with _root_dir(root) as root_fd:
            _write_at(root_fd, rel, data, shown)
    except OSError as exc:
        raise _translate(exc, shown, "write") from None


def list_tree(root: Path, path: str, skip: frozenset[str]) -> list[str]:
    """Sorted paths (relative to ``root``) under a folder, or the file itself.

    Symlinks show as ``name -> target`` and are never followed, empty folders end in ``/``,
    folders named in ``skip`` are left out.
    """
    rel, shown = _relative(path), shown_path(path)
    try:
        with _opened(root, rel, _PROBE_FLAGS) as fd:
            prefix = _real_relpath(root, fd, rel)
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                return [prefix]
            return _walk(fd, prefix, skip)
    except OSError as exc:
        raise _translate(exc, shown, "list") from None


# -- checks and messages ----------------------------------------------------------------------


def _relative(path: str) -> str:
    """``path`` normalised, after refusing absolute paths, ``..`` escapes and NUL bytes."""
    if path.startswith(("/", "~")) or os.path.isabs(path):
        raise ToolError(f"absolute paths are refused; give a path relative to /workspace: {path}")
    rel = os.path.normpath(path) if path else "."
    if rel == ".." or rel.startswith("../"):
        raise ToolError(f"path escapes the workspace: {path}")
    try:
        os.fsencode(rel)
    except UnicodeEncodeError:
        raise ToolError(f"path holds a lone surrogate: {shown_path(path)!r}") from None
    if "\0" in rel:
        raise ToolError(f"path holds a NUL byte: {shown_path(path)!r}")
    return rel


def _require_regular(mode: int, shown: str) -> None:
    if stat.S_ISDIR(mode):
        raise ToolError(_MESSAGES[errno.EISDIR].format(shown=shown))
    if not stat.S_ISREG(mode):
        raise ToolError(f"{shown} is not a regular file")


def _translate(exc: OSError, shown: str, verb: str) -> ToolError:
    """The one-line message for a failed file operation on ``shown``."""
    if isinstance(exc, _SymlinkRefused):
        return ToolError(f"path goes through a symlink, which is refused without openat2: {shown}")
    if exc.errno == errno.ENOENT:
        return ToolError(f"{'file not found' if verb == 'read' else 'not found'}: {shown}")
    template = _MESSAGES.get(exc.errno or 0)
    if template is None:
        return ToolError(f"cannot {verb} {shown}: {exc.strerror}")
    return ToolError(template.format(shown=shown))


# -- opening beneath the root -----------------------------------------------------------------


@contextlib.contextmanager
def _root_dir(root: Path) -> Iterator[int]:
    fd = os.open(root, _DIR_FLAGS | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _opened(root: Path, rel: str, flags: int, mode: int = 0o644) -> Iterator[int]:
    fd = _open(root, rel, flags, mode)
    try:
        yield fd
    finally:
        os.close(fd)


def _open(root: Path, rel: str, flags: int, mode: int) -> int:
    with _root_dir(root) as root_fd:
        return _open_at(root_fd, rel, flags, mode)


def _open_at(root_fd: int, rel: str, flags: int, mode: int = 0o644) -> int:
    """An fd for ``rel`` beneath the folder ``root_fd``; raises OSError."""
    if _has_openat2():
        return _openat2(root_fd, rel, flags, mode)
    return _open_walk(root_fd, rel, flags, mode)


def _has_openat2() -> bool:
    global _openat2_ok
    if _openat2_ok is None:
        try:
            os.close(_sys_openat2(_AT_FDCWD, b"/", _O_PATH | os.O_CLOEXEC, 0, 0))
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
            inner = _open_component(fd, name, _DIR_FLAGS, 0)
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
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(dir_fd, name):
            raise _SymlinkRefused(errno.ELOOP, "symlink refused", name) from None
        raise
    if flags & _O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):  # O_PATH opens the link itself
        os.close(fd)
        raise _SymlinkRefused(errno.ELOOP, "symlink refused", name)
    return fd


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


# -- reading and writing ----------------------------------------------------------------------


def _read_upto(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, _CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _write_at(root_fd: int, rel: str, data: bytes, shown: str) -> None:
    """Write ``rel``, following final-component symlinks beneath the root (at most 40)."""
    if rel == ".":
        raise ToolError(_MESSAGES[errno.EISDIR].format(shown=shown))
    parent, _, name = rel.rpartition("/")
    parent = parent or "."
    for hop in range(_MAX_LINKS + 1):
        dir_fd = _open_folder(root_fd, parent, create=hop == 0)
        try:
            link = _readlink(dir_fd, name)
            if link is None:
                _replace(dir_fd, name, data, shown)
                return
        finally:
            os.close(dir_fd)
        if not _has_openat2():
            raise _SymlinkRefused(errno.ELOOP, "symlink refused", name)
        parent, name = _link_target(parent, link, shown)
    raise ToolError(_MESSAGES[errno.ELOOP].format(shown=shown))


def _open_folder(root_fd: int, folder: str, *, create: bool) -> int:
    try:
        return _open_at(root_fd, folder, _DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            raise
    parts = folder.split("/")
    fd = _open_at(root_fd, ".", _DIR_FLAGS)
    for i, part in enumerate(parts):
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
        finally:
            os.close(fd)
        fd = _open_at(root_fd, "/".join(parts[: i + 1]), _DIR_FLAGS)
    return fd


def _readlink(dir_fd: int, name: str) -> str | None:
    """The target of ``name`` if it is a symlink, else None (also when it does not exist)."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _link_target(parent: str, link: str, shown: str) -> tuple[str, str]:
    """(folder, name) a symlink in ``parent`` points at; the kernel resolves the folder later."""
    if link.startswith("/"):
        raise ToolError(_MESSAGES[errno.EXDEV].format(shown=shown))
    head, _, name = link.rpartition("/")
    if name in ("", ".", ".."):
        raise ToolError(_MESSAGES[errno.EISDIR].format(shown=shown))
    if not head:
        return parent, name
    return (head if parent == "." else f"{parent}/{head}"), name


def _replace(dir_fd: int, name: str, data: bytes, shown: str) -> None:
    """Write ``data`` to a fresh file in ``dir_fd`` and rename it over ``name``."""
    try:
        old: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None:
        _require_regular(old.st_mode, shown)
    temp = f".agentrunner-{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, _TEMP_FLAGS, 0o644, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- listing ----------------------------------------------------------------------------------


def _real_relpath(root: Path, fd: int, rel: str) -> str:
    """Where ``fd`` really is, relative to ``root`` (``rel`` when /proc cannot say)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return rel
    base = os.path.realpath(root)
    if real == base:
        return "."
    return real[len(base) + 1 :] if real.startswith(base + "/") else rel


def _walk(dir_fd: int, prefix: str, skip: frozenset[str]) -> list[str]:
    entries: list[str] = []
    for dirpath, dirnames, filenames, fd in os.fwalk(".", dir_fd=dir_fd):
        links = [d for d in dirnames if _is_link(fd, d)]
        dirnames[:] = [d for d in dirnames if d not in skip and d not in links]
        here = os.path.normpath(os.path.join(prefix, dirpath))
        if not (dirnames or filenames or links) and dirpath != ".":
            entries.append(here + "/")
        entries += (_entry(fd, name, _join(here, name)) for name in filenames + links)
    return sorted(entries)


def _entry(dir_fd: int, name: str, rel: str) -> str:
    try:
        return f"{rel} -> {os.readlink(name, dir_fd=dir_fd)}"
    except OSError:  # not a symlink (EINVAL) or gone
        return rel


def _join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"
