"""Export traces as training data (SFT, DPO, GRPO, KTO and PRM rows, JSON Lines or Parquet) and
as ATIF trajectories for other agent tools.

One module per format (``sft``, ``dpo``, ``grpo``, ``kto``, ``prm``), a shared selection of episodes
(``select``), the store reads the formats share (``sources``), the chat shape (``chat``), the
writers (``writer``; ``parquet`` holds the Parquet schemas) and a note on row lengths against
TRL's defaults (``lengths``); ``atif`` writes one ATIF document per episode. The formats are
listed in ``formats`` (:data:`FORMATS`: name, help, options, what each writes, and the function
that writes it), which ``export`` and ``agentrunner export`` dispatch through. Every row
names the episode(s) and seq(s) it came from, and every prompt is rebuilt from the
content-addressed message chain, so it is exactly what the model saw. Python::

    from agentrunner.export import Selection, ExportOptions, export
    result = export(store, "dpo", Path("pairs.jsonl"), selection=Selection(tasks=("demo-mean",)))
    result.rows, result.file
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.export.atif import atif_trajectory
from agentrunner.export.chat import ExportOptions, chat, chat_message, tool_schemas
from agentrunner.export.formats import (
    FORMATS,
    ExportResult,
    Format,
    RowFormat,
    Target,
    TrajectoryFormat,
    get_format,
)
from agentrunner.export.select import Selected, Selection, percentile, select_episodes
from agentrunner.values.errors import UsageError

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def export_rows(
    store: StoreBackend,
    fmt: str,
    *,
    selection: Selection | None = None,
    options: ExportOptions | None = None,
) -> tuple[Selected, Iterator[dict[str, Any]]]:
    """The selected episodes and (lazily) the rows of format ``fmt`` built from them."""
    found = get_format(fmt)
    if not isinstance(found, RowFormat):
        raise UsageError(f"{fmt} writes one document per episode, not rows: use export()")
    selected = select_episodes(store, selection or Selection())
    return selected, found.rows(store, selected, options or ExportOptions())


def export(
    store: StoreBackend,
    fmt: str,
    output: Path | None,
    *,
    selection: Selection | None = None,
    options: ExportOptions | None = None,
    parquet: bool | None = None,
    directory: bool | None = None,
    endpoint: str | None = None,
    content: bool = True,
) -> ExportResult:
    """Write format ``fmt`` to ``output`` (stdout when None; Parquet when ``parquet`` or the
    file ends in ``.parquet``). An export that selects nothing writes an empty file. The
    notes say what the selection left out and when rows are longer than TRL's trainers take
    by default.

    ``atif`` writes one trajectory per episode (``rows`` counts them): to the file
    ``output`` or stdout when one episode is selected, else into the directory ``output``
    (``directory``, or an existing one) as ``<episode_id>.json``; nothing when none is.
    ``otlp`` writes OpenTelemetry traces to ``output`` or stdout, or sends them to the
    OTLP/HTTP ``endpoint`` (``content``: with message contents; ``rows`` counts spans)."""
    target = Target(output, options or ExportOptions(), parquet, directory, endpoint, content)
    return get_format(fmt).export(store, selection or Selection(), target)


__all__ = [
    "FORMATS",
    "ExportOptions",
    "ExportResult",
    "Format",
    "RowFormat",
    "Selected",
    "Selection",
    "Target",
    "TrajectoryFormat",
    "atif_trajectory",
    "chat",
    "chat_message",
    "export",
    "export_rows",
    "get_format",
    "percentile",
    "select_episodes",
    "tool_schemas",
]
