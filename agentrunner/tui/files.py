"""Reads behind the files-changed screen: an episode's whole change to its workspace, split
by file, and applying it to the repository it ran on.

The change is the one ``agentrunner diff EP`` prints and ``agentrunner apply EP`` applies
(:func:`agentrunner.readers.changes.episode_change`: ignored files and tool caches left out as
there); this module only splits the patch into files and counts their lines. Each function
runs in a thread worker with that thread's store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.envs.patch import ApplyResult
from agentrunner.readers.changes import episode_change

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

_HEADER = "diff --git "


@dataclass(frozen=True)
class FileDiff:
    """One file's part of the patch."""

    path: str
    """As the patch names it (C-quoted by git when it holds unusual characters)."""
    status: str  # "added", "deleted", "renamed", "modified"
    binary: bool
    added: int  # lines
    removed: int
    lines: list[str]  # the file's part of the patch, header included

    @property
    def mark(self) -> str:
        """One letter, as ``git status --short`` shows it."""
        return {"added": "A", "deleted": "D", "renamed": "R"}.get(self.status, "M")


@dataclass(frozen=True)
class FilesChanged:
    """An episode's change, by file, and where ``apply`` would put it."""

    episode_id: str
    repo: str | None
    """The repository the episode ran on (``run --repo``); None: a task workspace."""
    commit: str | None
    files: list[FileDiff]


def files_changed(store: StoreBackend, episode_id: str) -> FilesChanged:
    """The episode's change from its base to its end, split by file."""
    change = episode_change(store, episode_id)
    repo = change.base.get("repo")
    commit = change.base.get("commit")
    return FilesChanged(
        change.episode_id,
        str(repo) if repo else None,
        str(commit) if commit else None,
        split_patch(change.patch(store)),
    )


def apply_change(
    store: StoreBackend, episode_id: str, target: str, check_only: bool
) -> ApplyResult:
    """Apply the episode's change to the checkout at ``target`` (``check_only``: only check
    that it would apply); refused as ``agentrunner apply`` is (``ApplyRefused``)."""
    change = episode_change(store, episode_id)
    return change.apply(store, Path(target).resolve(), check_only=check_only)


def split_patch(patch: str) -> list[FileDiff]:
    """A ``git diff`` patch, one :class:`FileDiff` per ``diff --git`` section."""
    sections: list[list[str]] = []
    for line in patch.splitlines():
        if line.startswith(_HEADER) or not sections:
            sections.append([])
        sections[-1].append(line)
    return [_file_diff(lines) for lines in sections if lines and lines[0].startswith(_HEADER)]


def _file_diff(lines: list[str]) -> FileDiff:
    head: list[str] = []
    for line in lines[1:]:
        if line.startswith(("@@", "GIT binary patch", "Binary files ")):
            break
        head.append(line)
    status = "modified"
    if any(h.startswith("new file mode") for h in head):
        status = "added"
    elif any(h.startswith("deleted file mode") for h in head):
        status = "deleted"
    elif any(h.startswith("rename from") for h in head):
        status = "renamed"
    body = lines[1 + len(head) :]
    binary = bool(body) and body[0].startswith(("GIT binary patch", "Binary files "))
    added = 0 if binary else sum(1 for b in body if b.startswith("+"))
    removed = 0 if binary else sum(1 for b in body if b.startswith("-"))
    return FileDiff(_path(lines[0]), status, binary, added, removed, lines)


def _path(header: str) -> str:
    """The path of ``diff --git a/P b/P`` (the whole pair when the two sides differ)."""
    pair = header[len(_HEADER) :]
    half = (len(pair) - 5) // 2  # len("a/") + len(" b/")
    path = pair[2 : 2 + half]
    return path if pair == f"a/{path} b/{path}" else pair
