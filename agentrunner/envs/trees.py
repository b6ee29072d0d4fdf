"""Removing a workspace tree of any depth or path length, without recursion.

A model can build a folder chain deeper than Python's recursion limit, or whose paths are
longer than ``PATH_MAX``: :func:`remove_tree` removes it anyway. It never follows a link and
never needs a long path: each folder met below the top one is first moved up into the top
folder (a rename through descriptors), so every folder is emptied one level below the top,
with three descriptors open at most. Folders the agent locked (``chmod 000``) are opened to
their owner first.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: Path) -> None:
    """Remove ``path`` (a file, a link, or a folder and everything under it) when it exists."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    parent = os.open(path.parent, _DIR_FLAGS)
    try:
        top = _open_folder(parent, path.name)
        try:
            _empty(top)
        finally:
            os.close(top)
        os.rmdir(path.name, dir_fd=parent)
    finally:
        os.close(parent)


def _empty(top: int) -> None:
    """Remove everything in the folder open as ``top``."""
    tag = f".ar-rm-{secrets.token_hex(4)}-"
    moved = 0
    queue: list[str] = []
    for name, is_dir in _children(top):
        if is_dir:
            queue.append(name)
        else:
            os.unlink(name, dir_fd=top)
    while queue:
        current = queue.pop()
        fd = _open_folder(top, current)
        try:
            for name, is_dir in _children(fd):
                if is_dir:  # moved up into the top folder: never more than one level deep
                    moved += 1
                    queue.append(f"{tag}{moved}")
                    os.rename(name, queue[-1], src_dir_fd=fd, dst_dir_fd=top)
                else:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(current, dir_fd=top)


def _children(fd: int) -> list[tuple[str, bool]]:
    with os.scandir(fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def _open_folder(parent: int, name: str) -> int:
    """Open folder ``name`` of ``parent`` (never through a link), its owner granted rwx."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_mode & stat.S_IRWXU != stat.S_IRWXU:
            os.fchmod(fd, stat.S_IRWXU)
    return fd


@contextlib.contextmanager
def accessible(path: Path, need: int) -> Iterator[None]:
    """Grant the owner ``need`` bits on ``path`` while it is read, when the agent removed them."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        yield
        return
    mode = stat.S_IMODE(st.st_mode)
    if mode & need == need or stat.S_ISLNK(st.st_mode) or os.geteuid() == 0:
        yield
        return
    os.chmod(path, mode | need)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.chmod(path, mode)


def unlock(folder: str, need: int, undo: list[tuple[str, int]]) -> None:
    """Grant the owner ``need`` bits on ``folder`` for the rest of a scan (put back through
    ``undo``) when the agent removed them."""
    st = os.lstat(folder)
    mode = stat.S_IMODE(st.st_mode)
    if mode & need != need and not stat.S_ISLNK(st.st_mode) and os.geteuid() != 0:
        os.chmod(folder, mode | need)
        undo.append((folder, mode))
