"""``agentrunner export``: training data (SFT, DPO, GRPO, KTO, PRM) from traces and fork groups,
and ATIF trajectories for other agent tools. Its format choices, their help and the dispatch
come from :data:`agentrunner.export.FORMATS`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agentrunner.cli.common import new_command, open_store, print_json, stderr_console
from agentrunner.export import FORMATS, ExportOptions, Selection, export
from agentrunner.export.formats import Option, names
from agentrunner.values.errors import UsageError
from agentrunner.values.events import Status

INTRO = (
    "Export recorded episodes as training data in TRL's conversational shapes, one JSON "
    "object per line (or Parquet), or as trajectories for other agent tools. Every row names "
    "its source episode(s) and seq(s)."
)
OUTRO = (
    "By default only completed episodes are read (named EPs: any status). An export that "
    "selects nothing writes an empty file (trajectories: nothing), says so on stderr and exits "
    "0. Notes on stderr say what was left out, and when rows are longer than TRL's trainers "
    "take by default."
)


def _summary() -> str:
    """The one line ``agentrunner --help`` shows: the formats, by what they write."""
    rows, trajectories = ", ".join(names("rows")), ", ".join(names("trajectories"))
    return f"export training data ({rows}) or trajectories ({trajectories})"


def _description() -> str:
    """``export --help``: what each format writes."""
    formats = " ".join(f"{name}: {f.help}" for name, f in FORMATS.items())
    return f"{INTRO} {formats} {OUTRO}"


def _for_formats(option: Option, text: str) -> str:
    """An option's help, led by the formats that read it unless every row format does."""
    rows = [FORMATS[name] for name in names("rows")]
    readers = [f.name for f in rows if option in f.options]
    return text if not readers or len(readers) == len(rows) else f"{', '.join(readers)}: {text}"


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(sub, "export", run_export, help=_summary(), description=_description())
    p.add_argument(
        "--format",
        required=True,
        choices=sorted(FORMATS),
        help="the row shape, or the trajectory format (" + ", ".join(names("trajectories")) + ")",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE|DIR",
        help="write here (default: stdout), whole or not at all, with the permissions your "
        "umask gives new files; a .parquet name writes Parquet; atif: a directory (an "
        "existing one, or a path ending in /) gets one <episode_id>.json per episode",
    )
    p.add_argument(
        "--parquet", action="store_true", help="write Parquet (needs pyarrow and -o FILE)"
    )
    t = p.add_argument_group("traces (otlp)")
    t.add_argument(
        "--endpoint",
        metavar="URL",
        help="send the traces to this OTLP/HTTP endpoint (protobuf; /v1/traces is added to a "
        "bare base URL) instead of writing a file",
    )
    t.add_argument(
        "--no-content",
        action="store_true",
        help="leave message contents out of the spans (names, counts and times stay)",
    )
    f = p.add_argument_group("filters (which episodes are read)")
    f.add_argument(
        "episodes",
        nargs="*",
        metavar="EP",
        help="only these episodes (ids or unique prefixes), whatever their status unless "
        "--status is given",
    )
    f.add_argument("--task", action="append", metavar="ID", help="only this task (repeatable)")
    f.add_argument(
        "--split",
        help="only tasks of this split, read from the tasks file each episode was run with",
    )
    f.add_argument(
        "--tasks", type=Path, metavar="PATH", help="read --split from this tasks.json instead"
    )
    f.add_argument(
        "--model",
        action="append",
        metavar="SPEC",
        help="only episodes of this model spec (repeatable; wildcards: 'openai:*')",
    )
    f.add_argument(
        "--status",
        action="append",
        metavar="S",
        help="only episodes with this status (repeatable; default completed; 'any' for all)",
    )
    f.add_argument("--min-reward", type=float, metavar="X", help="only rewards >= X")
    f.add_argument(
        "--reward-percentile",
        type=float,
        metavar="P",
        help="only rewards at or above the P-th percentile (0-100) of the episodes the other "
        "filters kept (90 keeps the top 10%%)",
    )
    f.add_argument(
        "--verifier",
        metavar="NAME",
        help="leave out episodes whose latest result from verifier NAME failed",
    )
    f.add_argument(
        "--verified-only",
        action="store_true",
        help="only episodes with a passing result (from --verifier NAME, or from every "
        "verifier that checked them)",
    )
    o = p.add_argument_group("row options")
    o.add_argument(
        "--reasoning",
        nargs="?",
        const="reasoning_content",
        metavar="KEY",
        help="include the model's reasoning in assistant messages under KEY (default key "
        "reasoning_content; 'thinking' for Harmony-style templates); a prm action always "
        "carries it, under KEY or reasoning_content",
    )
    o.add_argument(
        "--tool-args",
        choices=("string", "object"),
        default="object",
        help="tool-call arguments as a parsed JSON object (default: what Hugging Face chat "
        "templates such as Qwen2.5's and Llama 3.1's expect; a string there is encoded "
        "twice) or as the raw string the model wrote (OpenAI's fine-tuning format). In "
        "Parquet they are JSON text either way",
    )
    o.add_argument(
        "--kto-threshold",
        type=float,
        default=1.0,
        metavar="X",
        help=_for_formats(
            "kto_threshold", "label is true when the episode's reward >= X (default 1.0)"
        ),
    )
    o.add_argument(
        "--with-tool-results",
        action="store_true",
        help=_for_formats(
            "with_tool_results", "chosen/rejected also hold the tool results of the turn"
        ),
    )


def _selection(args: argparse.Namespace) -> Selection:
    statuses: tuple[str, ...] = () if args.episodes else (Status.COMPLETED,)
    if args.status:
        statuses = () if "any" in args.status else tuple(args.status)
    if args.tasks is not None and args.split is None:
        raise UsageError("--tasks only serves --split")
    return Selection(
        episodes=tuple(args.episodes),
        tasks=tuple(args.task or ()),
        split=args.split,
        tasks_path=args.tasks,
        models=tuple(args.model or ()),
        statuses=statuses,
        min_reward=args.min_reward,
        reward_percentile=args.reward_percentile,
        verifier=args.verifier,
        verified_only=args.verified_only,
    )


def run_export(args: argparse.Namespace) -> int:
    if args.json and args.output is None and args.endpoint is None:
        raise UsageError("--json needs -o FILE (without it the rows go to stdout)")
    if args.format != "otlp" and (args.endpoint is not None or args.no_content):
        raise UsageError("--endpoint and --no-content are options of --format otlp")
    selection = _selection(args)
    options = ExportOptions(
        reasoning_key=args.reasoning,
        tool_args=args.tool_args,
        kto_threshold=args.kto_threshold,
        with_tool_results=args.with_tool_results,
    )
    output = Path(args.output) if args.output is not None else None
    store = open_store(args)
    result = export(
        store,
        args.format,
        output,
        selection=selection,
        options=options,
        parquet=True if args.parquet else None,
        directory=True if args.output and args.output.endswith(("/", os.sep)) else None,
        endpoint=args.endpoint,
        content=not args.no_content,
    )
    err = stderr_console()
    for note in result.notes:
        err.print(f"note: {note}", soft_wrap=True)
    where = result.file or "stdout"
    if FORMATS[args.format].writes == "traces":
        done = "sent" if args.endpoint is not None else "wrote"
        err.print(
            f"{done} {result.rows} span(s) of {result.episodes} episode(s) to {where}",
            soft_wrap=True,
        )
    elif FORMATS[args.format].writes == "trajectories":
        if result.rows == 0:
            err.print(
                f"[yellow]nothing to export[/]: {result.episodes} episode(s) selected, no "
                f"{args.format} trajectory written"
            )
        else:
            what = "trajectory" if result.rows == 1 else "trajectories"
            err.print(
                f"wrote {result.rows} {args.format} {what} from {result.episodes} "
                f"episode(s) to {where}"
            )
    elif result.rows == 0:
        wrote = f"wrote an empty file {where}" if result.file else "wrote nothing"
        err.print(
            f"[yellow]nothing to export[/]: {result.episodes} episode(s) selected, no "
            f"{args.format} rows; {wrote}"
        )
    else:
        err.print(
            f"wrote {result.rows} {args.format} row(s) from {result.episodes} episode(s) to {where}"
        )
    if args.json:
        print_json(result.to_dict())
    return 0
