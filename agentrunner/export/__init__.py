"""Export traces as training data (SFT, DPO, GRPO, KTO and PRM rows, JSON Lines or Parquet) and
as ATIF trajectories for other agent tools.

One module per format (``sft``, ``dpo``, ``grpo``, ``kto``, ``prm``), a shared selection of episodes
(``select``), the store reads the formats share (``sources``), the chat shape (``chat``), the
writers (``writer``; ``parquet`` holds the Parquet schemas) and a note on row lengths against
TRL's defaults (``lengths``); ``atif`` writes one ATIF document per episode. Every row
names the episode(s) and seq(s) it came from, and every prompt is rebuilt from the
content-addressed message chain, so it is exactly what the model saw. Python::

    from agentrunner.export import Selection, ExportOptions, export
    result = export(store, "dpo", Path("pairs.jsonl"), selection=Selection(tasks=("demo-mean",)))
    result.rows, result.file
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrunner.errors import UsageError
from agentrunner.export.atif import atif_target, atif_trajectory, write_atif
from agentrunner.export.chat import ExportOptions, chat, chat_message, tool_schemas
from agentrunner.export.dpo import dpo_rows
from agentrunner.export.grpo import grpo_rows
from agentrunner.export.kto import kto_rows
from agentrunner.export.lengths import LengthWatch
from agentrunner.export.parquet import require_pyarrow
from agentrunner.export.prm import prm_rows
from agentrunner.export.select import Selected, Selection, percentile, select_episodes
from agentrunner.export.sft import sft_rows
from agentrunner.export.writer import RecordableRows, check_output, write_jsonl, write_parquet
from agentrunner.store import TraceStore

RowsFn = Callable[[TraceStore, Selected, ExportOptions], Iterator[dict[str, Any]]]
FORMATS: dict[str, RowsFn] = {
    "sft": sft_rows,
    "dpo": dpo_rows,
    "grpo": grpo_rows,
    "kto": kto_rows,
    "prm": prm_rows,
}
TRAJECTORY_FORMATS = ("atif",)
"""Formats written as one JSON document per episode rather than as rows."""


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


def export_rows(
    store: TraceStore,
    fmt: str,
    *,
    selection: Selection | None = None,
    options: ExportOptions | None = None,
) -> tuple[Selected, Iterator[dict[str, Any]]]:
    """The selected episodes and (lazily) the rows of format ``fmt`` built from them."""
    rows_fn = FORMATS.get(fmt)
    if fmt in TRAJECTORY_FORMATS:
        raise UsageError(f"{fmt} writes one document per episode, not rows: use export()")
    if rows_fn is None:
        raise UsageError(f"unknown export format {fmt!r}; one of {', '.join(FORMATS)}")
    selected = select_episodes(store, selection or Selection())
    return selected, rows_fn(store, selected, options or ExportOptions())


def export(
    store: TraceStore,
    fmt: str,
    output: Path | None,
    *,
    selection: Selection | None = None,
    options: ExportOptions | None = None,
    parquet: bool | None = None,
    directory: bool | None = None,
) -> ExportResult:
    """Write format ``fmt`` to ``output`` (stdout when None; Parquet when ``parquet`` or the
    file ends in ``.parquet``). An export that selects nothing writes an empty file. The
    notes say what the selection left out and when rows are longer than TRL's trainers take
    by default.

    ``atif`` writes one trajectory per episode (``rows`` counts them): to the file
    ``output`` or stdout when one episode is selected, else into the directory ``output``
    (``directory``, or an existing one) as ``<episode_id>.json``; nothing when none is."""
    if fmt in TRAJECTORY_FORMATS:
        return _export_trajectories(store, fmt, output, selection, parquet, directory)
    options = options or ExportOptions()
    as_parquet = parquet if parquet is not None else bool(output and output.suffix == ".parquet")
    if output is not None:
        check_output(output)  # fail before reading anything
    if as_parquet:
        if output is None:
            raise UsageError("Parquet output needs a file: -o FILE.parquet")
        require_pyarrow()
    selected, rows = export_rows(store, fmt, selection=selection, options=options)
    watch, recordable = LengthWatch(fmt), RecordableRows()
    rows = watch.rows(recordable.rows(rows))
    if as_parquet:
        assert output is not None
        count = write_parquet(rows, output, fmt, options.reasoning_key)
    else:
        count = write_jsonl(rows, output)
    return ExportResult(
        format=fmt,
        rows=count,
        file=str(output) if output is not None else None,
        episodes=len(selected.episodes),
        notes=[*selected.notes, *recordable.notes(), *watch.notes()],
    )


def _export_trajectories(
    store: TraceStore,
    fmt: str,
    output: Path | None,
    selection: Selection | None,
    parquet: bool | None,
    directory: bool | None,
) -> ExportResult:
    if parquet:
        raise UsageError(f"{fmt} trajectories are JSON documents: --parquet does not apply")
    to_directory = atif_target(output, directory)  # fail before reading anything
    selected = select_episodes(store, selection or Selection())
    count, notes = write_atif(store, selected.episodes, output, directory=to_directory)
    return ExportResult(
        format=fmt,
        rows=count,
        file=str(output) if output is not None else None,
        episodes=len(selected.episodes),
        notes=[*selected.notes, *notes],
    )


__all__ = [
    "FORMATS",
    "TRAJECTORY_FORMATS",
    "ExportOptions",
    "ExportResult",
    "Selected",
    "Selection",
    "atif_trajectory",
    "chat",
    "chat_message",
    "export",
    "export_rows",
    "percentile",
    "select_episodes",
    "tool_schemas",
]
