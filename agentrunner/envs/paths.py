"""Confined file operations: open, read, write, plant, remove and list paths without ever
leaving the workspace.

Every path is resolved by the kernel from a file descriptor of the workspace root, never as a
path string that could change between a check and its use (see
:mod:`agentrunner.envs.beneath`): symlinks that stay inside are followed, escapes refused.

Reads refuse files with more than one hard link (the other link may be outside). Writes go
to a fresh file in the target folder that is then renamed over the final name, so they never
write through a hard link or through a symlink swapped in later. Errors are
:class:`~agentrunner.envs.sandbox.ToolError` with one line naming the path as it was given.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from pathlib import Path

from agentrunner.envs.beneath import (
    DIR_FLAGS,
    O_PATH,
    SymlinkRefused,
    has_openat2,
    is_link,
    open_at,
    open_rel,
    opened,
    root_dir,
)
from agentrunner.envs.sandbox import ToolError, shown_path

_PROBE_FLAGS = O_PATH or (os.O_RDONLY | os.O_NONBLOCK)
"""How an entry of unknown type is opened without side effects (a fifo must not block)."""
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_MAX_LINKS = 40
_CHUNK = 1 << 20

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


def open_beneath(root: Path, path: str, flags: int, mode: int = 0o644) -> int:
    """A new (close-on-exec) fd for ``path``, resolved beneath ``root``; the caller closes it.

    Symlinks that stay beneath ``root`` are followed (none are without ``openat2``); any
    other escape raises :class:`ToolError`. ``mode`` only matters with ``O_CREAT``.
    """
    rel = _relative(path)
    try:
        return open_rel(root, rel, flags, mode)
    except OSError as exc:
        raise _translate(exc, shown_path(path), "open") from None


def read_bytes(root: Path, path: str, max_bytes: int) -> bytes:
    """A regular file's content; refuses folders, fifos, devices, hard links and big files."""
    rel, shown = _relative(path), shown_path(path)
    try:
        with opened(root, rel, _READ_FLAGS) as fd:
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
        with root_dir(root) as root_fd:
            _write_at(root_fd, rel, data, shown)
    except OSError as exc:
        raise _translate(exc, shown, "write") from None


def plant_bytes(root: Path, path: str, data: bytes) -> None:
    """Put a new file at ``path`` whatever stands there (a file, a link, a fifo, a folder is
    removed first), never writing through a link: for files the runner lays over the
    workspace for a moment, such as a task's hidden tests."""
    rel, shown = _relative(path), shown_path(path)
    parent, _, name = rel.rpartition("/")
    try:
        with root_dir(root) as root_fd:
            dir_fd = _open_folder(root_fd, parent or ".", create=True)
            try:
                _remove_at(dir_fd, name)
                fd = os.open(name, _TEMP_FLAGS, 0o644, dir_fd=dir_fd)
                try:
                    _write_all(fd, data)
                finally:
                    os.close(fd)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise _translate(exc, shown, "write") from None


def remove(root: Path, path: str) -> None:
    """Remove whatever is at ``path`` (a folder with its contents; nothing there is fine)."""
    rel, shown = _relative(path), shown_path(path)
    if rel == ".":
        raise ToolError(f"refusing to remove the workspace itself: {shown}")
    parent, _, name = rel.rpartition("/")
    try:
        with root_dir(root) as root_fd:
            try:
                dir_fd = _open_folder(root_fd, parent or ".", create=False)
            except FileNotFoundError:
                return
            try:
                _remove_at(dir_fd, name)
            finally:
                os.close(dir_fd)
    except OSError as exc:
        raise _translate(exc, shown, "remove") from None


def _remove_at(dir_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dir_fd)  # fd-based: safe against symlink swaps
    else:
        os.unlink(name, dir_fd=dir_fd)


def list_tree(root: Path, path: str, skip: frozenset[str]) -> list[str]:
    """Sorted paths (relative to ``root``) under a folder, or the file itself.

    Symlinks show as ``name -> target`` and are never followed, empty folders end in ``/``,
    folders named in ``skip`` are left out.
    """
    rel, shown = _relative(path), shown_path(path)
    try:
        with opened(root, rel, _PROBE_FLAGS) as fd:
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
    if isinstance(exc, SymlinkRefused):
        return ToolError(f"path goes through a symlink, which is refused without openat2: {shown}")
    if exc.errno == errno.ENOENT:
        return ToolError(f"{'file not found' if verb == 'read' else 'not found'}: {shown}")
    template = _MESSAGES.get(exc.errno or 0)
    if template is None:
        return ToolError(f"cannot {verb} {shown}: {exc.strerror}")
    return ToolError(template.format(shown=shown))


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
        if not has_openat2():
            raise SymlinkRefused(errno.ELOOP, "symlink refused", name)
        parent, name = _link_target(parent, link, shown)
    raise ToolError(_MESSAGES[errno.ELOOP].format(shown=shown))


def _open_folder(root_fd: int, folder: str, *, create: bool) -> int:
    try:
        return open_at(root_fd, folder, DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            raise
    parts = folder.split("/")
    fd = open_at(root_fd, ".", DIR_FLAGS)
    for i, part in enumerate(parts):
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
        finally:
            os.close(fd)
        fd = open_at(root_fd, "/".join(parts[: i + 1]), DIR_FLAGS)
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
        links = [d for d in dirnames if is_link(fd, d)]
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
