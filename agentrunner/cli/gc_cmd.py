"""``agentrunner gc``: the store's size by part, and reclaiming what no episode references."""

from __future__ import annotations

import argparse

from rich.table import Table

from agentrunner.cli.common import (
    new_command,
    open_store,
    print_json,
    stderr_console,
    stdout_console,
)
from agentrunner.store.gc import Part, Report
from agentrunner.values.formatting import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "gc",
        run_gc,
        help="reclaim space: delete content no episode references (after rm), then vacuum",
        description="Show the store's size by part (events, messages, tools, blobs, "
        "snapshots, other: rows and bytes) and delete the content no episode references any "
        "more: workspace file blobs and snapshots, recorded answers, messages and tool sets "
        "left behind by `rm`. Then give the space back (SQLite: VACUUM, the file shrinks; "
        "Postgres: VACUUM, the space becomes reusable). Events are never deleted. Content is "
        "shared by hash, so a running episode may be about to reuse any of it: gc deletes "
        "only while no other process has the store open (no run, import, record, tui...; on "
        "Postgres: no other session connected to its database), "
        "and keeps others out until it is done; otherwise it deletes nothing and exits 1 "
        "naming them (--wait: retry each second until they are done). Exit codes: 0 done, "
        "1 store in use or failure.",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="only show the size by part and what gc would free; change nothing",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="while other processes have the store open, wait for them (retrying each "
        "second, progress on stderr) instead of exiting 1",
    )


_NOUNS = {"blobs": "blob", "messages": "message", "tools": "tool set", "snapshots": "snapshot"}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # unreachable: GiB is the last unit


def _parts_json(parts: dict[str, Part]) -> dict[str, dict[str, int]]:
    return {name: {"rows": p.rows, "bytes": p.bytes} for name, p in parts.items()}


def _as_json(store_where: str, report: Report) -> dict[str, object]:
    value: dict[str, object] = {
        "store": store_where,
        "dry_run": report.dry_run,
        "parts": _parts_json(report.parts),
        "size_before": report.size_before,
    }
    key = "would_free" if report.dry_run else "freed"
    value[key] = _parts_json(report.garbage)
    if report.size_after is not None:
        value["size_after"] = report.size_after
    return value


def run_gc(args: argparse.Namespace) -> int:
    store = open_store(args)
    err = stderr_console()
    try:
        where = store.where
        report = store.collect_garbage(
            dry_run=args.dry_run,
            wait=args.wait,
            progress=lambda text: err.print(f"gc: {text}", markup=False),
        )
    finally:
        store.close()
    if args.json:
        print_json(_as_json(where, report))
        return 0
    out = stdout_console()
    when = "" if report.dry_run else " before gc"
    table = Table("part", "rows", "bytes", title=f"{where}{when}: {_size(report.size_before)}")
    for name, part in report.parts.items():
        table.add_row(name, f"{part.rows:,}", _size(part.bytes))
    out.print(table)
    freed = ", ".join(
        f"{plural(p.rows, _NOUNS[name])} ({_size(p.bytes)})"
        for name, p in report.garbage.items()
        if p.rows
    )
    if report.dry_run:
        out.print(f"would free: {freed or 'nothing'} (dry run: nothing changed)")
    else:
        after = report.size_after if report.size_after is not None else report.size_before
        out.print(f"freed: {freed or 'nothing'}")
        out.print(f"size: {_size(report.size_before)} -> {_size(after)}")
    return 0
