"""Confined file operations (agentrunner.envs.paths) on real files, links, fifos and races."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrunner.envs import beneath
from agentrunner.envs.paths import list_tree, open_beneath, read_bytes, write_bytes
from agentrunner.envs.sandbox import ToolError

MAX = 1024
SECRET = b"the secret outside the workspace"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_bytes(b"print('hi')\n")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_bytes(SECRET)
    return folder


REFUSED = {
    "openat2": "path resolves outside the workspace through a symlink: ",
    "fallback": "path goes through a symlink, which is refused without openat2: ",
}
"""How each resolver words a symlink it will not follow, before the path as given."""


def _no_openat2(dir_fd: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))


def _force_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the module see a kernel (or seccomp filter) without openat2."""
    monkeypatch.setattr(beneath, "_openat2_ok", None)
    monkeypatch.setattr(beneath, "_sys_openat2", _no_openat2)


@pytest.fixture(params=["openat2", "fallback"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with openat2 and once with the component-by-component fallback."""
    if request.param == "fallback":
        _force_fallback(monkeypatch)
    elif not beneath.has_openat2():
        pytest.skip("openat2 is not available here")
    return str(request.param)


@pytest.fixture
def openat2() -> None:
    """For behaviour only openat2 has: following symlinks that stay inside."""
    if not beneath.has_openat2():
        pytest.skip("openat2 is not available here")


# -- escapes are refused (with openat2 and with the fallback) -------------------------------


@pytest.mark.parametrize("path", ["/etc/passwd", "~/.ssh/id_rsa"])
def test_an_absolute_path_is_refused(ws: Path, resolver: str, path: str) -> None:
    with pytest.raises(ToolError, match=r"^absolute paths are refused"):
        read_bytes(ws, path, MAX)


def test_a_dotdot_path_is_refused(ws: Path, outside: Path, resolver: str) -> None:
    with pytest.raises(ToolError, match=r"^path escapes the workspace: \.\./outside/secret.txt$"):
        read_bytes(ws, "../outside/secret.txt", MAX)


def test_an_absolute_symlink_is_refused(ws: Path, outside: Path, resolver: str) -> None:
    (ws / "link").symlink_to(outside)
    with pytest.raises(ToolError) as caught:
        read_bytes(ws, "link/secret.txt", MAX)
    assert str(caught.value) == REFUSED[resolver] + "link/secret.txt"


def test_a_dotdot_symlink_is_refused(ws: Path, outside: Path, resolver: str) -> None:
    (ws / "link").symlink_to("../outside/secret.txt")
    with pytest.raises(ToolError) as caught:
        read_bytes(ws, "link", MAX)
    assert str(caught.value) == REFUSED[resolver] + "link"


def test_open_beneath_refuses_a_symlink_out_for_writing(
    ws: Path, outside: Path, resolver: str
) -> None:
    (ws / "link").symlink_to(outside)
    with pytest.raises(ToolError) as caught:
        open_beneath(ws, "link/new.txt", os.O_WRONLY | os.O_CREAT)
    assert str(caught.value) == REFUSED[resolver] + "link/new.txt"
    assert os.listdir(outside) == ["secret.txt"]


def test_write_through_a_symlink_out_is_refused(ws: Path, outside: Path, resolver: str) -> None:
    (ws / "link").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolError) as caught:
        write_bytes(ws, "link", b"pwned")
    assert str(caught.value) == REFUSED[resolver] + "link"
    assert (outside / "secret.txt").read_bytes() == SECRET


def test_write_below_a_symlinked_folder_out_is_refused(
    ws: Path, outside: Path, resolver: str
) -> None:
    (ws / "link").symlink_to("../outside")
    with pytest.raises(ToolError) as caught:
        write_bytes(ws, "link/new/file.txt", b"pwned")
    assert str(caught.value) == REFUSED[resolver] + "link/new/file.txt"
    assert os.listdir(outside) == ["secret.txt"]


def test_list_tree_of_a_symlinked_folder_out_is_refused(
    ws: Path, outside: Path, resolver: str
) -> None:
    (ws / "link").symlink_to(outside)
    with pytest.raises(ToolError) as caught:
        list_tree(ws, "link", frozenset())
    assert str(caught.value) == REFUSED[resolver] + "link"


def test_the_fallback_refuses_even_symlinks_that_stay_inside(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _force_fallback(monkeypatch)
    (ws / "code").symlink_to("src")
    with pytest.raises(
        ToolError, match=r"^path goes through a symlink, which is refused without openat2: code/"
    ):
        read_bytes(ws, "code/main.py", MAX)


# -- symlinks that stay inside (openat2) -----------------------------------------------------


def test_a_symlinked_folder_inside_is_followed(ws: Path, openat2: None) -> None:
    (ws / "code").symlink_to("src")
    assert read_bytes(ws, "code/main.py", MAX) == b"print('hi')\n"


def test_a_symlink_climbing_back_inside_is_followed(ws: Path, openat2: None) -> None:
    (ws / "src" / "up").symlink_to("../src/main.py")
    assert read_bytes(ws, "src/up", MAX) == b"print('hi')\n"


def test_a_symlink_loop_is_a_clear_error(ws: Path, openat2: None) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    with pytest.raises(ToolError, match=r"^too many levels of symbolic links: a$"):
        read_bytes(ws, "a", MAX)


def test_writing_a_symlink_loop_is_a_clear_error(ws: Path, openat2: None) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    with pytest.raises(ToolError, match=r"^too many levels of symbolic links: a$"):
        write_bytes(ws, "a", b"x")


def test_writing_a_symlink_inside_writes_its_target_and_keeps_the_link(
    ws: Path, openat2: None
) -> None:
    (ws / "alias.py").symlink_to("src/main.py")
    write_bytes(ws, "alias.py", b"new\n")
    assert (ws / "src" / "main.py").read_bytes() == b"new\n"
    assert os.readlink(ws / "alias.py") == "src/main.py"


def test_writing_a_dangling_symlink_inside_creates_its_target(ws: Path, openat2: None) -> None:
    (ws / "src" / "later").symlink_to("../notes.txt")
    write_bytes(ws, "src/later", b"notes")
    assert (ws / "notes.txt").read_bytes() == b"notes"


def test_write_creates_parents_through_a_symlinked_folder_inside(ws: Path, openat2: None) -> None:
    (ws / "code").symlink_to("src")
    write_bytes(ws, "code/pkg/mod.py", b"x = 1\n")
    assert (ws / "src" / "pkg" / "mod.py").read_bytes() == b"x = 1\n"


# -- hard links ------------------------------------------------------------------------------


def test_read_refuses_a_hard_link_to_a_file_outside(ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "copy.txt")
    with pytest.raises(ToolError) as caught:
        read_bytes(ws, "copy.txt", MAX)
    assert str(caught.value) == (
        "copy.txt has 2 hard links; refused because it may be a file outside the workspace"
    )


def test_write_on_a_hard_link_leaves_the_file_outside_unchanged(ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "copy.txt")
    write_bytes(ws, "copy.txt", b"mine")
    assert (outside / "secret.txt").read_bytes() == SECRET
    assert (ws / "copy.txt").read_bytes() == b"mine"
    assert (ws / "copy.txt").stat().st_nlink == 1


def test_write_replaces_the_file_and_leaves_the_old_inode_untouched(ws: Path) -> None:
    target = ws / "src" / "main.py"
    os.link(target, ws / "backup.py")
    old_inode = target.stat().st_ino
    write_bytes(ws, "src/main.py", b"new\n")
    assert target.stat().st_ino != old_inode
    assert (ws / "backup.py").read_bytes() == b"print('hi')\n"


# -- what is not a regular file --------------------------------------------------------------


@pytest.mark.timeout(30)
def test_read_refuses_a_fifo_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ToolError, match=r"^pipe is not a regular file$"):
        read_bytes(ws, "pipe", MAX)


@pytest.mark.timeout(30)
def test_write_refuses_a_fifo_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ToolError, match=r"^pipe is not a regular file$"):
        write_bytes(ws, "pipe", b"x")
    assert stat.S_ISFIFO((ws / "pipe").lstat().st_mode)


def test_read_refuses_a_folder_with_the_list_files_hint(ws: Path) -> None:
    with pytest.raises(
        ToolError, match=r"^src is a directory; use list_files to see what it holds$"
    ):
        read_bytes(ws, "src", MAX)


def test_write_refuses_a_folder(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"^src is a directory"):
        write_bytes(ws, "src", b"x")
    assert (ws / "src" / "main.py").exists()


def test_write_refuses_the_workspace_root(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"^\. is a directory"):
        write_bytes(ws, ".", b"x")


def test_read_of_a_missing_file_says_file_not_found(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"^file not found: nope.py$"):
        read_bytes(ws, "nope.py", MAX)


def test_a_file_used_as_a_folder_is_a_clear_error(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"^a part of the path is not a directory: src/main.py/x$"):
        read_bytes(ws, "src/main.py/x", MAX)


def test_read_refuses_a_file_larger_than_max_bytes(ws: Path) -> None:
    (ws / "big.bin").write_bytes(b"x" * (MAX + 1))
    with pytest.raises(ToolError, match=rf"^big.bin is larger than {MAX} bytes"):
        read_bytes(ws, "big.bin", MAX)


def test_read_returns_a_file_of_exactly_max_bytes(ws: Path) -> None:
    (ws / "full.bin").write_bytes(b"x" * MAX)
    assert read_bytes(ws, "full.bin", MAX) == b"x" * MAX


# -- writing ---------------------------------------------------------------------------------


def test_write_creates_missing_parent_folders(ws: Path) -> None:
    write_bytes(ws, "a/b/c/file.txt", b"deep")
    assert (ws / "a" / "b" / "c" / "file.txt").read_bytes() == b"deep"


def test_write_keeps_an_existing_files_mode(ws: Path) -> None:
    (ws / "run.sh").write_bytes(b"#!/bin/sh\n")
    (ws / "run.sh").chmod(0o750)
    write_bytes(ws, "run.sh", b"#!/bin/sh\necho hi\n")
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o750


def test_write_gives_a_new_file_0o644_less_the_umask(ws: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    write_bytes(ws, "new.txt", b"x")
    assert stat.S_IMODE((ws / "new.txt").stat().st_mode) == 0o644 & ~umask


def test_write_leaves_no_temporary_file_behind(ws: Path) -> None:
    write_bytes(ws, "src/main.py", b"one")
    with pytest.raises(ToolError):
        write_bytes(ws, "src", b"two")
    assert sorted(os.listdir(ws / "src")) == ["main.py"]


# -- listing ---------------------------------------------------------------------------------


def test_list_tree_lists_files_links_and_empty_folders_without_following_links(
    ws: Path, outside: Path
) -> None:
    (ws / "empty").mkdir()
    (ws / ".git" / "objects").mkdir(parents=True)
    (ws / "only_git" / ".git").mkdir(parents=True)
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "mod.py").write_bytes(b"")
    (ws / "code").symlink_to("src")
    (ws / "out").symlink_to(outside)
    (ws / "gone").symlink_to("nowhere")
    skip = frozenset({".git"})
    assert list_tree(ws, ".", skip) == [
        "code -> src",
        "empty/",
        "gone -> nowhere",
        "only_git/",
        "out -> " + str(outside),
        "src/main.py",
        "src/pkg/mod.py",
    ]


def test_list_tree_of_a_file_lists_the_file(ws: Path) -> None:
    assert list_tree(ws, "src/main.py", frozenset()) == ["src/main.py"]


def test_list_tree_of_a_missing_path_says_not_found(ws: Path) -> None:
    with pytest.raises(ToolError, match=r"^not found: nope$"):
        list_tree(ws, "nope", frozenset())


def test_list_tree_through_a_symlink_inside_shows_real_paths(ws: Path, openat2: None) -> None:
    (ws / "code").symlink_to("src")
    assert list_tree(ws, "code", frozenset()) == ["src/main.py"]


def test_names_that_are_not_utf8_are_listed_read_and_written(ws: Path) -> None:
    raw = os.fsencode(ws) + b"/caf\xe9.txt"
    with open(raw, "wb") as fh:
        fh.write(b"latin-1 name")
    name = os.fsdecode(b"caf\xe9.txt")
    assert list_tree(ws, ".", frozenset()) == [name, "src/main.py"]
    assert read_bytes(ws, name, MAX) == b"latin-1 name"
    write_bytes(ws, name, b"rewritten")
    with open(raw, "rb") as fh:
        assert fh.read() == b"rewritten"


# -- the symlink-swap race -------------------------------------------------------------------

_SWAPPER = """
import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if hasattr(libc, "renameat2"):
    def swap():
        return libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
else:
    number = {"x86_64": 316, "aarch64": 276}.get(platform.machine())
    if number is None:
        print("unavailable: no renameat2 number for", platform.machine(), flush=True)
        sys.exit()
    def swap():
        return libc.syscall(number, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
for _ in range(2):
    if swap() != 0:
        print("unavailable: renameat2:", os.strerror(ctypes.get_errno()), flush=True)
        sys.exit()
print("ready", flush=True)
for _ in range(20_000_000):
    swap()
"""


@pytest.fixture
def swapping(ws: Path, outside: Path) -> Iterator[None]:
    """A process flipping folder ``d`` with ``d_link -> outside`` (RENAME_EXCHANGE) nonstop."""
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_bytes(b"harmless")
    (ws / "d_link").symlink_to(outside)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(ws / "d"), str(ws / "d_link")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        status = proc.stdout.readline().strip()
        if status != "ready":
            pytest.skip(f"cannot swap with renameat2(RENAME_EXCHANGE): {status or 'no answer'}")
        yield
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_symlink_swap_race_never_reaches_outside(
    ws: Path, outside: Path, resolver: str, swapping: None
) -> None:
    reads: list[bytes] = []
    for i in range(300):
        with contextlib.suppress(ToolError):  # anything else fails the test
            reads.append(read_bytes(ws, "d/secret.txt", MAX))
        with contextlib.suppress(ToolError):
            write_bytes(ws, "d/out.txt", b"written %d" % i)
        assert os.listdir(outside) == ["secret.txt"]
    assert SECRET not in reads
    assert (outside / "secret.txt").read_bytes() == SECRET
