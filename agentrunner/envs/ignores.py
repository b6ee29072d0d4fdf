"""Which paths of a workspace change are not part of it: git's ignore rules and ``--exclude``.

An episode's change is what ``git status`` would show in its workspace. A path the base
snapshot holds is tracked, and stays part of the change whatever pattern matches it; a path
the agent created is left out when git ignores it, and git decides: ``git check-ignore`` runs
in a throwaway repository whose work tree holds the snapshot's ``.gitignore`` files (those on
the way to the paths asked about), whose ``info/exclude`` is the recorded repository's (when
it is on this machine) and whose ``core.excludesFile`` is the user's own, read from their git
config as ``git status`` in that repository reads it. An episode on a task without a
repository uses its own ``.gitignore`` files and :data:`TASK_DEFAULTS`, never the user's
excludes, so its change is the same on every machine. ``__pycache__`` is never part of a
change. ``--exclude`` patterns (gitignore syntax, relative to the workspace's top) leave out
every path they match, tracked or not.

The snapshots keep every file the agent wrote, ignored or not (a resume needs them); only the
change leaves them out.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import url2pathname

from agentrunner.envs.manifest import Entry, FileEntry
from agentrunner.envs.patch_git import checked, first_line, git, user_config_path
from agentrunner.values.errors import EnvironmentFailure

TASK_DEFAULTS = (".pytest_cache/",)
"""What an episode on a task without a repository ignores besides its own ``.gitignore``."""
NEVER = "__pycache__"
"""A folder name no change ever holds (snapshots skip it too)."""

_CHECK = ["check-ignore", "--no-index", "--stdin", "-z"]
_HERE = b"./"
"""Put before each path asked about: check-ignore reads a leading ``:`` as pathspec magic (and
takes no ``--literal-pathspecs``); after ``./`` a name is only a name."""


def left_out(
    paths: Iterable[str],
    *,
    tracked: Collection[str],
    new: Mapping[str, Entry],
    read_blob: Callable[[str], bytes],
    repo: str | None,
    patterns: Sequence[str] = (),
) -> frozenset[str]:
    """Those of ``paths`` (paths that differ between two snapshots) that are not part of the
    change: ``__pycache__``, untracked paths git ignores in the ``new`` snapshot, and paths
    an ``--exclude`` pattern in ``patterns`` matches. ``tracked`` holds the base snapshot's
    paths; ``repo`` is the recorded repository (path or ``file://`` URL), None for a task
    without one."""
    asked = [path for path in paths if _plain(path)]
    out = {path for path in asked if NEVER in path.split("/")}
    untracked = [path for path in asked if path not in tracked and path not in out]
    if untracked:
        exclude, excludes_file = _rules(repo)
        ignores = _gitignores(untracked, new, read_blob)
        out |= _ignored(untracked, ignores, exclude, excludes_file)
    if patterns:
        mine = "".join(f"{pattern}\n" for pattern in patterns).encode("utf-8", "surrogateescape")
        out |= _ignored(asked, {}, mine, os.devnull)
    return frozenset(out)


def _rules(repo: str | None) -> tuple[bytes, str]:
    """The ``info/exclude`` text and the ``core.excludesFile`` of an episode on ``repo``: the
    repository's and the user's, or :data:`TASK_DEFAULTS` and none for a task."""
    if repo is None:
        return "".join(f"{pattern}\n" for pattern in TASK_DEFAULTS).encode(), os.devnull
    folder = _local_folder(repo)
    excludes_file = user_config_path("core.excludesFile", cwd=folder) or _default_excludes()
    return _info_exclude(folder), excludes_file


def _gitignores(
    paths: Iterable[str], new: Mapping[str, Entry], read_blob: Callable[[str], bytes]
) -> dict[str, bytes]:
    """The ``.gitignore`` files of ``new`` in the folders on the way to ``paths``."""
    folders = {
        path.rsplit("/", depth)[0] + "/"
        for path in paths
        for depth in range(1, path.count("/") + 1)
    }
    found: dict[str, bytes] = {}
    for name in sorted({f"{folder}.gitignore" for folder in folders} | {".gitignore"}):
        entry = new.get(name)
        if isinstance(entry, FileEntry):  # git reads no .gitignore through a symlink
            try:
                found[name] = read_blob(entry.sha256)
            except OSError as exc:
                raise EnvironmentFailure(f"cannot read blob {entry.sha256[:12]}: {exc}") from exc
    return found


def _ignored(
    paths: Sequence[str], files: Mapping[str, bytes], exclude: bytes, excludes_file: str
) -> set[str]:
    """Those of ``paths`` git ignores in a work tree holding ``files`` (``.gitignore`` files),
    with ``exclude`` as its ``info/exclude`` and ``excludes_file`` as ``core.excludesFile``."""
    try:
        with tempfile.TemporaryDirectory(prefix="agentrunner-ignores-") as scratch:
            top = Path(scratch) / "workspace"
            checked(git(["init", "-q", "--template=", str(top)]), "git init")
            (top / ".git" / "info").mkdir()
            (top / ".git" / "info" / "exclude").write_bytes(exclude)
            for name, data in files.items():
                (top / name).parent.mkdir(parents=True, exist_ok=True)
                (top / name).write_bytes(data)
            names = b"".join(_HERE + os.fsencode(path) + b"\0" for path in paths)
            config = {"core.excludesFile": excludes_file}
            result = git(_CHECK, cwd=top, stdin=names, config=config)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot use a temporary git repository: {exc}") from exc
    if result.returncode not in (0, 1):  # 1: none of them is ignored
        raise EnvironmentFailure(f"git check-ignore failed: {first_line(result.stderr)}")
    return {os.fsdecode(name.removeprefix(_HERE)) for name in result.stdout.split(b"\0") if name}


def _plain(path: str) -> bool:
    parts = path.split("/")
    return "\0" not in path and not path.startswith("/") and ".." not in parts and "" not in parts


def _local_folder(repo: str) -> Path | None:
    """The recorded repository as a folder on this machine, if it is one."""
    path = Path(url2pathname(urlsplit(repo).path)) if repo.startswith("file://") else Path(repo)
    return path if path.is_dir() else None


def _info_exclude(folder: Path | None) -> bytes:
    """The repository's ``info/exclude`` (``b""`` when it or the repository is not here)."""
    if folder is None:
        return b""
    found = git(["-C", str(folder), "rev-parse", "--git-path", "info/exclude"])
    if found.returncode != 0:
        return b""
    try:
        return (folder / os.fsdecode(found.stdout.rstrip(b"\n"))).read_bytes()
    except OSError:  # no such file: nothing excluded there
        return b""


def _default_excludes() -> str:
    """git's default ``core.excludesFile``: ``$XDG_CONFIG_HOME/git/ignore``, else
    ``$HOME/.config/git/ignore`` (``os.devnull`` with neither set)."""
    config = os.environ.get("XDG_CONFIG_HOME") or (
        os.path.join(os.environ["HOME"], ".config") if os.environ.get("HOME") else ""
    )
    return os.path.join(config, "git", "ignore") if config else os.devnull
