"""``agentrunner copy``: episodes from one store into another (SQLite or Postgres)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrunner.cli.common import new_command, print_json, stderr_console, stdout_console
from agentrunner.store import TraceStore
from agentrunner.store.core import StoreCore
from agentrunner.store.transfer import Copied, copy_episode, lineage_order
from agentrunner.values.errors import StoreError, UsageError
from agentrunner.values.formatting import plural


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "copy",
        run_copy,
        help="copy episodes between stores (SQLite file <-> Postgres database)",
        description="Copy episodes from one trace store into another, either kind: publish "
        "local runs to the team's Postgres store, or take episodes from it into a local "
        "file. Episodes keep their ids and lineage (a fork's ancestors are copied with it), "
        "every event, the messages, tools and workspace snapshots they name, and their "
        "batch, fork-group, verification and import rows. Copying again is safe: an episode "
        "already there gets only the events it lacks.",
    )
    p.add_argument(
        "episodes",
        nargs="*",
        metavar="EP",
        help="episode ids or unique prefixes in the source (default: every episode)",
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="PATH|URL",
        help="the store to copy from (default: --db, $AGENTRUNNER_DB or the per-user store)",
    )
    p.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="PATH|URL",
        help="the store to copy into (a missing SQLite file, or a database's tables, is made)",
    )


def run_copy(args: argparse.Namespace) -> int:
    source = args.source or args.db
    if args.source is not None and "://" not in source and not Path(source).exists():
        raise UsageError(f"no trace store at {source} (--from): give the store to copy from")
    src = TraceStore(source, create=False)
    try:
        dst = TraceStore(args.target)
        try:
            if src.identity == dst.identity:
                raise UsageError(f"--from and --to are the same store ({src.where})")
            copied, failed = _copy(src, dst, args.episodes or None, quiet=args.json)
        finally:
            dst.close()
    finally:
        src.close()
    if args.json:
        print_json(
            {
                "from": src.where,
                "to": dst.where,
                "episodes": [c.__dict__ for c in copied],
                "failed": failed,
            }
        )
    else:
        new = sum(c.outcome == "new" for c in copied)
        grew = sum(c.outcome == "grew" for c in copied)
        events = sum(c.events for c in copied)
        stdout_console().print(
            f"copied {plural(len(copied), 'episode')} from {src.where} to {dst.where}:"
            f" {new} new, {grew} grew, {len(copied) - new - grew} unchanged;"
            f" {plural(events, 'event')} written" + (f"; {len(failed)} failed" if failed else "")
        )
    return 1 if failed else 0


def _copy(
    src: StoreCore, dst: StoreCore, wanted: list[str] | None, *, quiet: bool
) -> tuple[list[Copied], list[dict[str, str]]]:
    order = lineage_order(src, wanted)
    copied: list[Copied] = []
    failed: list[dict[str, str]] = []
    broken: set[str] = set()
    err = stderr_console()
    for i, episode_id in enumerate(order, 1):
        parent = src.episode(episode_id).parent_episode_id
        try:
            if parent in broken:
                raise StoreError(f"its parent {parent} was not copied")
            done = copy_episode(src, dst, episode_id)
        except StoreError as exc:
            broken.add(episode_id)
            failed.append({"episode_id": episode_id, "error": str(exc)})
            err.print(f"[{i}/{len(order)}] {episode_id}: not copied: {exc}")
            continue
        copied.append(done)
        if not quiet:
            err.print(
                f"[{i}/{len(order)}] {episode_id} {done.outcome}"
                + (f" (+{plural(done.events, 'event')})" if done.events else "")
            )
    return copied, failed
