"""The known formats, and importing files and folders of traces (format found from content).

``import_paths`` takes files or folders (a folder imports every session file under it), finds
each file's format from its content, and imports it through :mod:`.importer`: idempotent, and
continuing where an earlier import of the same session stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, cast

from agentrunner.imports import (
    aider,
    aider_chat,
    atif,
    claude_code,
    codex,
    gemini_cli,
    inspect_eval,
    mini_swe_agent,
    opencode,
    openhands,
    swe_agent,
)
from agentrunner.imports.importer import FileImport, SessionReport, import_file
from agentrunner.imports.items import Format
from agentrunner.store.leases import Leases
from agentrunner.values.errors import UsageError

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

FORMATS: dict[str, ModuleType] = {
    claude_code.NAME: claude_code,
    atif.NAME: atif,
    codex.NAME: codex,
    mini_swe_agent.NAME: mini_swe_agent,
    swe_agent.NAME: swe_agent,
    gemini_cli.NAME: gemini_cli,
    aider.NAME: aider,
    aider_chat.NAME: aider_chat,
    opencode.NAME: opencode,
    inspect_eval.NAME: inspect_eval,
    openhands.NAME: openhands,
}
SUFFIXES = (".jsonl", ".json", ".traj", ".aider.chat.history.md", "opencode.db", ".eval")
"""What a file found in a folder is named like to be looked at (a file named is always)."""
HEAD_BYTES = 64 * 1024


def _format(module: ModuleType) -> Format:
    return cast(Format, module)  # a format module is its own Format


@dataclass
class FileReport:
    path: Path
    format: str | None
    sessions: list[SessionReport] = field(default_factory=list)
    skipped: str | None = None
    """Why the file was not imported (no known format, unreadable)."""


def detect(path: Path) -> str | None:
    """The format of ``path`` read from its content, or None when no importer knows it."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    for name, module in FORMATS.items():
        if _format(module).sniff(path, head):
            return name
    return None


def session_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and under each folder named every file with a trace suffix, sorted."""
    for path in paths:
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES)
            )
        elif path.exists():
            yield path
        else:
            raise UsageError(f"{path}: no such file or folder", param="path")


def in_order(
    paths: Iterable[Path], fmt: str, find: Callable[[Path], str | None] = detect
) -> Iterator[tuple[Path, str | None]]:
    """The files of ``paths`` (:func:`session_files`) with their format, each session's in
    the order they import: a file of a format whose sessions span files (a Claude Code
    session and its subagents' files: ``companions``) brings its session's other files, the
    main file first, whatever order they were found or named in. Each file comes once."""
    done: set[Path] = set()
    for path in session_files(paths):
        name = fmt if fmt != "auto" else find(path)
        related = getattr(FORMATS[name], "companions", None) if name is not None else None
        for member in related(path) if related is not None else [path]:
            if member.resolve() not in done:
                done.add(member.resolve())
                yield member, name


def import_paths(
    store: StoreBackend,
    paths: Iterable[Path],
    *,
    fmt: str = "auto",
    live: bool = False,
    held: Leases | None = None,
) -> list[FileReport]:
    """Import every session found in ``paths``; a file of no known format is reported as
    skipped (when it was found in a folder) or is an error (when it was named). ``held``: see
    :func:`~agentrunner.imports.importer.import_file`."""
    if fmt != "auto" and fmt not in FORMATS:
        known = ", ".join(["auto", *FORMATS])
        raise UsageError(f"unknown format {fmt!r}; known: {known}", param="format")
    paths = list(paths)
    named = {p for p in paths if not p.is_dir()}
    reports: list[FileReport] = []
    for path, name in in_order(paths, fmt):
        if name is None:
            if path in named:
                raise UsageError(
                    f"{path}: not a trace any importer knows"
                    f" ({', '.join(FORMATS)}); name one with --format",
                    param="path",
                )
            reports.append(FileReport(path, None, skipped="no known format"))
            continue
        try:
            module = _format(FORMATS[name])
            checked = fmt != "auto"  # named by the user: the content must bear it out
            sessions = import_file(store, path, module, live=live, held=held, checked=checked)
        except (ValueError, OSError) as exc:  # not readable as its format (or not yet, live)
            if path in named and not live:
                raise UsageError(f"{path}: cannot import as {name}: {exc}", param="path") from None
            reports.append(FileReport(path, name, skipped=f"cannot import as {name}: {exc}"))
            continue
        reports.append(FileReport(path, name, sessions))
    return reports


def _journal_mark(path: Path) -> tuple[int, ...]:
    """The size and time of a SQLite database's write-ahead log (``PATH-wal``), where its
    writer's changes land before they reach the file itself (none: empty)."""
    try:
        stat = path.with_name(path.name + "-wal").stat()
    except OSError:
        return ()
    return (stat.st_size, stat.st_mtime_ns)


def _change_mark(path: Path, name: str | None) -> tuple[int, ...]:
    """What else changes when the trace at ``path`` grows: its database's write-ahead log, or
    what its format says (``change_mark``: an OpenHands conversation's new event files)."""
    marked = getattr(FORMATS[name], "change_mark", None) if name is not None else None
    return (*_journal_mark(path), *(marked(path) if marked is not None else ()))


class Follower:
    """Keeps importing files as they grow (``import --follow``): a file that grows by lines
    (JSONL) is read from where the last look stopped, with the same parser; another is read
    again whole when it changes. The followed episodes' leases are held until :meth:`close`."""

    def __init__(self, store: StoreBackend, *, fmt: str = "auto") -> None:
        self.store = store
        self.fmt = fmt
        self.held = Leases(store)
        self.files: dict[Path, FileImport] = {}
        self.whole: dict[Path, str] = {}  # files read whole (not appending): their format
        self.seen: dict[Path, tuple[int, ...]] = {}
        self.names: dict[Path, str | None] = {}

    def _detect(self, path: Path) -> str | None:
        """A file's format, found once it is known (looked for again while it is not)."""
        if self.names.get(path) is None:
            self.names[path] = detect(path)
        return self.names[path]

    def look(self, paths: Iterable[Path]) -> list[FileReport]:
        """Import what the files under ``paths`` gained since the last look."""
        reports = []
        for path, name in in_order(paths, self.fmt, self._detect):
            try:
                stat = path.stat()
            except OSError:  # gone meanwhile
                continue
            mark = (stat.st_size, stat.st_mtime_ns, *_change_mark(path, name))
            if self.seen.get(path) == mark:
                continue
            self.seen[path] = mark
            if name is None:
                continue  # not (yet) a trace: looked at again when it changes
            try:
                sessions = self._import(path, _format(FORMATS[name]), stat.st_size)
            except (ValueError, OSError) as exc:  # being (re)written, or no conversation yet
                reports.append(FileReport(path, name, skipped=f"cannot import yet: {exc}"))
                continue
            reports.append(FileReport(path, name, sessions))
        return reports

    def _import(self, path: Path, fmt: Format, size: int) -> list[SessionReport]:
        if not fmt.APPENDS:
            self.whole[path] = fmt.NAME
            return import_file(self.store, path, fmt, live=True, held=self.held)
        known = self.files.get(path)
        if known is None or size < known.offset:  # new, or rewritten shorter: start again
            known = self.files[path] = FileImport(self.store, path, fmt, held=self.held)
        return known.appended()

    def finish(self) -> list[FileReport]:
        """Close what the followed files leave open, as importing them as they are now does
        (when following stops): the last model call of a session gets what its file holds of
        its answer and usage instead of staying open; importing the grown files later
        continues from there."""
        reports = []
        for path, known in self.files.items():
            reports.append(FileReport(path, known.fmt.NAME, known.close_open()))
        for path, name in self.whole.items():
            try:
                sessions = import_file(self.store, path, _format(FORMATS[name]), held=self.held)
            except (ValueError, OSError) as exc:
                reports.append(FileReport(path, name, skipped=f"left as it was: {exc}"))
                continue
            reports.append(FileReport(path, name, sessions))
        return reports

    def heartbeat(self) -> None:
        for episode_id in self.held:
            self.store.heartbeat(episode_id)

    def close(self) -> None:
        self.held.release_all()
