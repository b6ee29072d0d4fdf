"""The export formats, one entry each: a format's name, its help, the row options it reads,
what it writes (rows, or one trajectory document per episode) and the function that writes it.

``agentrunner export --format`` takes its choices, its help and its dispatch from
:data:`FORMATS`, and :func:`agentrunner.export.export` writes through it. Adding a format takes
two files: its module (the function that makes its rows, or writes its documents) and one entry
in :data:`FORMATS` (a :class:`RowFormat` or a :class:`TrajectoryFormat`). A row format written
as Parquet also needs its columns in :func:`agentrunner.export.parquet.schema` (``parquet=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentrunner.export import atif, dpo, grpo, kto, otlp, prm, sft
from agentrunner.export.chat import ExportOptions
from agentrunner.export.lengths import LengthWatch
from agentrunner.export.parquet import require_pyarrow
from agentrunner.export.select import Selected, Selection, select_episodes
from agentrunner.export.writer import RecordableRows, check_output, write_jsonl, write_parquet
from agentrunner.store import EpisodeSummary
from agentrunner.values.errors import UsageError
from agentrunner.values.redaction import public_url

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

Option = Literal["reasoning_key", "tool_args", "kto_threshold", "with_tool_results"]
"""A row option (a field of :class:`ExportOptions`; its flag is ``--reasoning``,
``--tool-args``, ``--kto-threshold``, ``--with-tool-results``)."""
Writes = Literal["rows", "trajectories", "traces"]
RowsFn = Callable[["StoreBackend", Selected, ExportOptions], Iterator[dict[str, Any]]]
CHAT_OPTIONS: frozenset[Option] = frozenset({"reasoning_key", "tool_args"})
"""What every row made of chat messages reads."""


class DocumentWriter(Protocol):
    """Writes one document per episode to ``output`` (a file, stdout when None) or into the
    directory ``output``; returns how many it wrote and notes on the episodes left out."""

    def __call__(
        self,
        store: StoreBackend,
        episodes: Sequence[EpisodeSummary],
        output: Path | None,
        *,
        directory: bool,
    ) -> tuple[int, list[str]]: ...


@dataclass(frozen=True)
class Target:
    """Where an export goes and how: ``output`` (stdout when None); ``parquet`` (None: when
    the file name ends in ``.parquet``); ``directory`` for trajectories (None: when
    ``output`` is an existing directory)."""

    output: Path | None = None
    options: ExportOptions = field(default_factory=ExportOptions)
    parquet: bool | None = None
    directory: bool | None = None
    endpoint: str | None = None
    """Traces: an OTLP/HTTP endpoint to send them to instead of a file."""
    content: bool = True
    """Traces: message contents in the spans (off: only names, counts and times)."""


@dataclass
class ExportResult:
    """What an export wrote."""

    format: str
    rows: int
    file: str | None  # None: stdout
    episodes: int  # how many episodes the selection kept
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "rows": self.rows,
            "file": self.file,
            "episodes": self.episodes,
            "notes": self.notes,
        }


class Format(Protocol):
    """An export format: what ``export --format NAME`` writes, and the function writing it."""

    @property
    def name(self) -> str: ...

    @property
    def help(self) -> str:
        """What it writes, for ``export --help`` (a sentence or a few)."""
        ...

    @property
    def options(self) -> frozenset[Option]:
        """The row options it reads (the others leave its output as it is)."""
        ...

    @property
    def writes(self) -> Writes: ...

    def export(self, store: StoreBackend, selection: Selection, target: Target) -> ExportResult:
        """Check ``target`` before anything is read, select the episodes, and write."""
        ...


@dataclass(frozen=True)
class RowFormat:
    """A format written as rows: one JSON object per line, or a Parquet table."""

    name: str
    help: str
    rows: RowsFn
    options: frozenset[Option] = CHAT_OPTIONS
    parquet: bool = False
    """Whether :func:`agentrunner.export.parquet.schema` knows its columns."""

    @property
    def writes(self) -> Writes:
        return "rows"

    def export(self, store: StoreBackend, selection: Selection, target: Target) -> ExportResult:
        output = target.output
        as_parquet = target.parquet
        if as_parquet is None:
            as_parquet = output is not None and output.suffix == ".parquet"
        if output is not None:
            check_output(output)  # fail before reading anything
        if as_parquet:
            if output is None:
                raise UsageError("Parquet output needs a file: -o FILE.parquet")
            if not self.parquet:
                raise UsageError(f"{self.name} has no Parquet columns: export JSON Lines")
            require_pyarrow()
        selected = select_episodes(store, selection)
        watch, recordable = LengthWatch(self.name), RecordableRows()
        rows = watch.rows(recordable.rows(self.rows(store, selected, target.options)))
        if as_parquet:
            assert output is not None
            count = write_parquet(rows, output, self.name, target.options.reasoning_key)
        else:
            count = write_jsonl(rows, output)
        return ExportResult(
            format=self.name,
            rows=count,
            file=str(output) if output is not None else None,
            episodes=len(selected.episodes),
            notes=[*selected.notes, *recordable.notes(), *watch.notes()],
        )


@dataclass(frozen=True)
class TrajectoryFormat:
    """A format written as one JSON document per episode: to a file (or stdout) when one
    episode is selected, else into a directory as ``<episode_id>.json``."""

    name: str
    help: str
    write: DocumentWriter
    options: frozenset[Option] = frozenset()

    @property
    def writes(self) -> Writes:
        return "trajectories"

    def export(self, store: StoreBackend, selection: Selection, target: Target) -> ExportResult:
        if target.parquet:
            raise UsageError(
                f"{self.name} trajectories are JSON documents: --parquet does not apply"
            )
        output = target.output
        to_directory = atif.atif_target(output, target.directory)  # fail before reading anything
        selected = select_episodes(store, selection)
        count, notes = self.write(store, selected.episodes, output, directory=to_directory)
        return ExportResult(
            format=self.name,
            rows=count,
            file=str(output) if output is not None else None,
            episodes=len(selected.episodes),
            notes=[*selected.notes, *notes],
        )


@dataclass(frozen=True)
class TraceFormat:
    """Episodes as OpenTelemetry traces: an OTLP JSON file (or stdout), or sent to an
    OTLP/HTTP endpoint (``rows`` counts spans)."""

    name: str
    help: str
    options: frozenset[Option] = frozenset()

    @property
    def writes(self) -> Writes:
        return "traces"

    def export(self, store: StoreBackend, selection: Selection, target: Target) -> ExportResult:
        if target.parquet:
            raise UsageError(
                f"{self.name} traces are OTLP JSON or protobuf: --parquet does not apply"
            )
        if target.endpoint is not None and target.output is not None:
            raise UsageError("-o FILE and --endpoint URL: give one of them", param="endpoint")
        otlp.require_otlp()
        if target.output is not None:
            check_output(target.output)  # fail before reading anything
        selected = select_episodes(store, selection)
        ids = [e.episode_id for e in selected.episodes]
        if target.endpoint is not None:
            sent = otlp.send_otlp(store, ids, target.endpoint, content=target.content)
        else:
            sent = otlp.write_otlp_file(store, ids, target.output, content=target.content)
        return ExportResult(
            format=self.name,
            rows=sent.spans,
            file=public_url(otlp.traces_url(target.endpoint))
            if target.endpoint is not None
            else (str(target.output) if target.output is not None else None),
            episodes=len(selected.episodes),
            notes=[*selected.notes, *sent.notes],
        )


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        RowFormat(
            "sft",
            "one conversation per episode (messages + tools), exactly what the model saw up "
            "to its last turn plus its answer.",
            sft.sft_rows,
            parquet=True,
        ),
        RowFormat(
            "dpo",
            "prompt/chosen/rejected pairs from sibling branches at one fork point whose "
            "rewards differ (fan-out groups and plain forks).",
            dpo.dpo_rows,
            options=CHAT_OPTIONS | {"with_tool_results"},
            parquet=True,
        ),
        RowFormat(
            "grpo",
            "a prompt with a group of recorded reference_completions and their "
            "reference_rewards (fork points, and root episodes of one task that started from "
            "the same prompt).",
            grpo.grpo_rows,
            parquet=True,
        ),
        RowFormat(
            "kto",
            "prompt/completion/label per episode, label = reward >= --kto-threshold.",
            kto.kto_rows,
            options=CHAT_OPTIONS | {"kto_threshold"},
            parquet=True,
        ),
        RowFormat(
            "prm",
            "one row per (decision point, candidate action) of the selected episodes' "
            "decision points (made while running with --branch-every, or by fanout on a "
            "finished episode): state (the exact messages and tools the model saw there), "
            "action (the candidate's assistant message with its reasoning), value (mean reward "
            "of its continuations), spread, n, adopted, mode (best, measure or fanout), "
            "duplicate_of; a decision point still running gives no rows.",
            prm.prm_rows,
            parquet=True,
        ),
        TrajectoryFormat(
            "atif",
            "one Agent Trajectory Interchange Format (Harbor) document per episode, its whole "
            "history (a fork's inherited steps marked is_copied_context), with what ATIF has "
            "no field for (reward, stop reason, lineage, fork group, verifications) under "
            "extra.agentrunner; one episode goes to -o FILE or stdout, several need -o DIR/ "
            "(one <episode_id>.json each).",
            atif.write_atif,
        ),
        TraceFormat(
            "otlp",
            "OpenTelemetry traces, one per episode (GenAI semantic conventions plus the "
            "OpenInference attributes Phoenix reads: an invoke_agent span, a chat span per "
            "model call with its usage, an execute_tool span per tool call; a fork its own "
            "trace linked to its parent); ids derived from episode and seq, so exporting "
            "again updates rather than duplicates; to -o FILE (OTLP JSON, one request per "
            "line) or stdout, or --endpoint URL (OTLP/HTTP protobuf); needs the [otlp] extra.",
        ),
    )
}


def get_format(name: str) -> Format:
    """The format called ``name``, or a :class:`UsageError` naming the known ones."""
    found = FORMATS.get(name)
    if found is None:
        raise UsageError(f"unknown export format {name!r}; one of {', '.join(FORMATS)}")
    return found


def names(writes: Writes) -> list[str]:
    """The formats that write ``writes``, in the order they are listed."""
    return [name for name, f in FORMATS.items() if f.writes == writes]
