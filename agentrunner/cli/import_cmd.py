"""``agentrunner import``: other agents' traces as episodes, once or following them live."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from agentrunner.cli.common import new_command, open_store, print_json, stderr_console
from agentrunner.imports.registry import FORMATS, FileReport, Follower, import_paths
from agentrunner.values.formatting import plural
from agentrunner.values.safe_text import literal

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

FOLLOW_POLL_S = 0.5
HEARTBEAT_S = 2.0


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "import",
        run_import,
        help="other agents' traces: Claude Code, Codex, Gemini CLI, aider, opencode, OpenHands, …",
        description="Import other agents' traces into the store, one episode per session "
        "(subagents as linked episodes), so that ls, show, the TUI, verify, export and fork "
        "work on them. A folder imports every session file under it (e.g. "
        "~/.claude/projects or ~/.codex/sessions); each file's format is found from its "
        "content. Importing again adds only what is new: nothing for an unchanged file, the "
        "new records of a session that grew. With --follow, keep importing as the files grow "
        "(a running session shows live in `show --follow` and the TUI) until Ctrl-C.",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders")
    p.add_argument(
        "--format",
        default="auto",
        choices=["auto", *FORMATS],
        help="the files' format (default: found from each file's content)",
    )
    p.add_argument(
        "--follow", action="store_true", help="keep importing as the files grow, until Ctrl-C"
    )
    p.add_argument(
        "--poll",
        type=float,
        default=FOLLOW_POLL_S,
        metavar="S",
        help=f"with --follow: how often to look for new records (default {FOLLOW_POLL_S} s)",
    )


def run_import(args: argparse.Namespace) -> int:
    store = open_store(args)
    if args.follow:
        return _follow(store, args)
    reports = import_paths(store, args.paths, fmt=args.format)
    _print(reports, json_out=args.json)
    return 0


def _print(reports: list[FileReport], *, json_out: bool) -> None:
    if json_out:
        print_json(
            [
                {
                    "path": str(r.path),
                    "format": r.format,
                    "skipped": r.skipped,
                    "sessions": [s.to_dict() for s in r.sessions],
                }
                for r in reports
            ]
        )
        return
    console = stderr_console()
    sessions = [s for r in reports for s in r.sessions]
    for r in reports:
        if r.skipped:
            console.print(f"skipped {literal(r.path)}: {literal(r.skipped)}")
        for s in r.sessions:
            what = "new" if s.created else ("grew" if s.events else "unchanged")
            kept = f", {plural(s.kept_raw, 'record')} kept raw" if s.kept_raw else ""
            console.print(
                f"{s.episode_id}  {literal(r.format)}  {what}: "
                f"{plural(s.events, 'event')} added{kept}"
                f"  ({literal(r.path)})"
            )
    created = sum(s.created for s in sessions)
    added = sum(s.events for s in sessions)
    raw = sum(s.kept_raw for s in sessions)
    skipped = sum(1 for r in reports if r.skipped)
    console.print(
        f"imported {plural(len(sessions), 'session')} ({created} new) from "
        f"{plural(len(reports) - skipped, 'file')}: {plural(added, 'event')} added, "
        f"{plural(raw, 'record')} kept raw" + (f", {skipped} skipped" if skipped else "")
    )


def _follow(store: StoreBackend, args: argparse.Namespace) -> int:
    """Import, then look for new records every ``--poll`` seconds; the episodes being
    followed are held (their status is ``running``) until Ctrl-C or SIGTERM. On Ctrl-C, what
    the files leave open is closed as a one-shot import closes it (a last model call gets
    the answer and usage its file holds)."""
    console = stderr_console()
    follower = Follower(store, fmt=args.format)
    beat = 0.0
    console.print("following; Ctrl-C to stop")
    try:
        while True:
            for report in follower.look(args.paths):
                _show_growth(console, report, json_out=args.json)
            if time.monotonic() - beat >= HEARTBEAT_S:
                follower.heartbeat()
                beat = time.monotonic()
            time.sleep(args.poll)
    except KeyboardInterrupt:
        for report in follower.finish():  # the calls still open get what their files hold
            _show_growth(console, report, json_out=args.json)
        console.print("stopped following")
        return 0
    finally:
        follower.close()


def _show_growth(console: Console, report: FileReport, *, json_out: bool) -> None:
    for s in report.sessions:
        if not s.events:
            continue
        if json_out:
            print_json({**s.to_dict(), "path": str(report.path)})
        else:
            where = literal(report.path)
            console.print(f"{s.episode_id}  +{plural(s.events, 'event')}  ({where})")
