"""Write the sessions of one source file into the store, each as one episode.

Every event an import writes carries ``src`` = [record index, part, slot]: its place in the source
file. Importing again re-reads the file, asks the store where each session's episode stopped
(its last event's ``src``) and appends only what comes after, so that importing a file twice
adds nothing, a session that grew gains only its new records, and an importer killed at any
point continues exactly where its last committed event was. Events are stamped with the time
their record says it happened (when it says one). This module reads a file and hands each
session's items to its :class:`~agentrunner.imports.session_writer.SessionWriter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.imports.items import (
    Answer,
    Ask,
    Begin,
    Emit,
    Format,
    Observed,
    Parser,
    Piece,
    Said,
    Source,
    jsonl_appended,
    unfinished,
)
from agentrunner.imports.session_writer import (
    FINISH_PART,
    MAX_SLOT,
    UNRECORDED,
    SessionReport,
    SessionWriter,
    being_written,
    episode_of,
    source_key,
    stamp,
)
from agentrunner.store.leases import Leases
from agentrunner.values.formatting import plural
from agentrunner.values.hashing import file_sha256
from agentrunner.values.types import ToolSpec

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

__all__ = [
    "CONVERSATION",
    "FINISH_PART",
    "MAX_SLOT",
    "UNRECORDED",
    "FileImport",
    "SessionReport",
    "SessionWriter",
    "closed_items",
    "episode_of",
    "import_file",
    "infer_tools",
    "positioned",
    "source_key",
    "stamp",
]

CONVERSATION = (Said, Ask, Piece, Answer, Observed)
"""The items that make a file a conversation (a file with none of them is refused)."""


def positioned(
    records: Sequence[Any], parser: Parser, *, finish: bool, start: int = 0
) -> list[tuple[int, int, Emit]]:
    """Every item of the records with its place: (record index, part within that record);
    ``start`` is the index of the first (records already fed to ``parser`` come before)."""
    out: list[tuple[int, int, Emit]] = []
    for index, record in enumerate(records, start):
        for part, emit in enumerate(parser.feed(index, record)):
            out.append((index, part, emit))
    if finish:
        last = max(start + len(records) - 1, 0)
        for part, emit in enumerate(parser.finish()):
            out.append((last, FINISH_PART + part, emit))
    return out


def closed_items(
    records: Sequence[Any], fmt: Format, path: Path, done: tuple[int, ...], key: str
) -> list[Any]:
    """The items of session ``key`` that an import which finished the file at ``done`` wrote
    when closing it (its parser's ``finish``), if the file has grown since: the parser gives
    some of them again later (a tool result held by a call it closed, records waiting for a
    session's start), and those are not to be written twice. Parsers are deterministic, so
    reading the file as it was then gives them back."""
    last, part = done[0], done[1]
    if part < FINISH_PART or last >= len(records) - 1:
        return []
    then = positioned(records[: last + 1], fmt.parser(path), finish=True)
    return [item for _, p, (k, item) in then if k == key and p >= FINISH_PART]


def infer_tools(emits: Sequence[tuple[int, int, Emit]], key: str) -> list[ToolSpec]:
    """Tools a session's calls show it had: names, and the argument names each was given."""
    seen: dict[str, set[str]] = {}
    for _, _, (k, item) in emits:
        if k != key or not isinstance(item, Answer):
            continue
        for call in item.turn.tool_calls:
            names = seen.setdefault(call.name, set())
            names.update(call.checked_arguments()[0] or {})  # unparsable: no argument names
    return [
        ToolSpec(
            name=name,
            description="(inferred from the calls the imported session made)",
            parameters={"type": "object", "properties": {a: {} for a in sorted(args)}},
        )
        for name, args in sorted(seen.items())
    ]


def _first_time(emits: Sequence[tuple[int, int, Emit]], key: str) -> int | None:
    for _, _, (k, item) in emits:
        moment = stamp(getattr(item, "ts", None)) if k == key else None
        if moment is not None:
            return moment
    return None


def import_file(
    store: StoreBackend,
    path: Path,
    fmt: Format,
    *,
    live: bool = False,
    held: Leases | None = None,
    checked: bool = False,
) -> list[SessionReport]:
    """Import (or continue importing) every session of one file; return what was done.

    With ``live``, the file is still being written: a last line without its newline waits,
    and a model call still open at the end stays open (its next blocks may come). Each
    session's episode is written under its writer lease; a caller that keeps importing
    (``--follow``) passes ``held``, the episodes whose leases it keeps, else the leases are
    released on return. ``checked``: see :attr:`FileImport.checked`.
    """
    return FileImport(store, path, fmt, held=held, checked=checked).whole(live=live)


class FileImport:
    """One file's import: its parser and its sessions' writers. A live import of a file that
    only grows by lines (``fmt.APPENDS``) keeps them between looks and feeds the parser only
    the lines appended since (:meth:`appended`); the positions are those a whole import gives."""

    def __init__(
        self,
        store: StoreBackend,
        path: Path,
        fmt: Format,
        *,
        held: Leases | None = None,
        checked: bool = False,
    ) -> None:
        self.store, self.path, self.fmt = store, path, fmt
        self.checked = checked
        """The format was named, not found from the content: a file must show it is one by
        holding a conversation (a message, model call or tool result) as the format has
        them, else it is refused."""
        self.complete = True  # every item read so far is written (no look was cut short)
        self.own_leases = held is None
        self.leases = Leases(store) if held is None else held
        self.parser = fmt.parser(path)
        self.writers: dict[str, SessionWriter] = {}
        self.fed = 0  # records given to the parser
        self.offset = 0  # bytes read (appending formats)
        self.digest = file_sha256(path)

    def whole(self, *, live: bool) -> list[SessionReport]:
        """Read the whole file and import what the store does not have yet."""
        records = self.fmt.records(self.path, live=live)
        if self.fmt.APPENDS and unfinished(self.path):  # its writer is writing its last line
            live = True
        return self._feed(records, finish=not live, whole=records, live=live)

    def appended(self) -> list[SessionReport]:
        """Import the whole lines appended since the last look (the first look reads all)."""
        first = self.fed == 0
        records, self.offset = jsonl_appended(self.path, self.offset)
        return self._feed(records, finish=False, whole=records if first else None, live=True)

    def close_open(self) -> list[SessionReport]:
        """Close what the records read so far leave open (a model call whose answer is not
        complete gets what the file holds of it), as a whole import of the file as it is now
        does: ``--follow`` stopping. An import of the grown file continues from there."""
        if self.fed == 0 or not self.complete:  # a look cut short: the next import goes on
            return []
        closing = [
            (self.fed - 1, FINISH_PART + part, emit)
            for part, emit in enumerate(self.parser.finish())
        ]
        return self._write(closing, whole=None)

    def _feed(
        self, records: Sequence[Any], *, finish: bool, whole: Sequence[Any] | None, live: bool
    ) -> list[SessionReport]:
        """Import the items of ``records``; with ``self.checked``, a finished file that
        holds no conversation is refused, nothing written."""
        emits = positioned(records, self.parser, finish=finish, start=self.fed)
        self.fed += len(records)
        conversation = any(isinstance(e[1], CONVERSATION) for _, _, e in emits)
        if self.checked and whole is not None and not live and not conversation:
            raise ValueError(
                f"no conversation in it ({plural(len(whole), 'record')}, none a message, model"
                f" call or tool result as {self.fmt.NAME} writes them): is it another format?"
            )
        return self._write(emits, whole=whole)

    def _write(
        self, emits: Sequence[tuple[int, int, Emit]], *, whole: Sequence[Any] | None
    ) -> list[SessionReport]:
        if self.own_leases:  # the sessions read in an earlier look: theirs again for this one
            for writer in self.writers.values():
                self.leases.hold(writer.episode_id, refused=being_written(writer.episode_id))
        for writer in self.writers.values():  # what this look adds
            writer.report = SessionReport(writer.episode_id, writer.source, created=False)
        self.complete = False
        try:
            for index, part, (key, item) in emits:
                if isinstance(item, Begin) and key not in self.writers:
                    new = self._session(item.source, key, emits)
                    if whole is not None:
                        new.closed = closed_items(whole, self.fmt, self.path, new.done, key)
                current = self.writers.get(key)
                if current is None:
                    raise ValueError(f"{self.fmt.NAME}: an item came before its session began")
                current.write(index, part, item)
            self.complete = True
        finally:
            if self.own_leases:
                self.leases.release_all()
        return [w.report for w in self.writers.values()]

    def _session(
        self, source: Source, key: str, emits: Sequence[tuple[int, int, Emit]]
    ) -> SessionWriter:
        above = source.parent_session  # a subagent's parent session in this file, if any
        parent = self.writers.get(above) if above is not None else None
        parent_episode = parent.episode_id if parent is not None else None
        if parent_episode is None and source.parent_session_id is not None:  # another file's
            parent_key = f"{source.format}:{source.parent_session_id}"
            parent_episode = self.store.imported_episode(parent_key)
        writer = SessionWriter(
            self.store,
            source,
            tools=infer_tools(emits, key),
            digest=self.digest,
            parent_episode=parent_episode,
            first_ts=_first_time(emits, key),
            held=self.leases,
        )
        self.writers[key] = writer
        return writer
