"""``agentrunner view``: episodes (or a batch's) as one self-contained HTML transcript page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from agentrunner.cli.common import new_command, open_store, print_json
from agentrunner.store.records import EpisodeFilter
from agentrunner.values.errors import UsageError
from agentrunner.view import write_page

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "view",
        view,
        help="episodes as one self-contained HTML page",
        description="Write one self-contained HTML page of one or more episodes (or of a "
        "batch's episodes, with an index at the top): the transcript as `show` and the TUI "
        "show it (system prompt and task, each turn with its reasoning folded, its text, its "
        "tool calls with their arguments and output, usage and cost; errors, cancels, "
        "resumes, decision points, compactions), the lineage (parent, forks, sub-agents; "
        "episodes in the same page are linked), and the files the episode changed with "
        "their diff. The page loads nothing (no network, no external file), finds as you "
        "type, and shows every recorded text as text: HTML, scripts and terminal escape "
        "sequences in what a model wrote are shown, never obeyed. Prints the page's path.",
    )
    p.add_argument("episodes", nargs="*", metavar="EP", help="episode id or unique prefix")
    p.add_argument(
        "--batch", metavar="B", help="every episode of batch B (an id, a prefix or its name)"
    )
    p.add_argument(
        "--forks",
        action="store_true",
        help="also every fork below each episode (linked from its lineage)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE.html",
        help="where to write the page (default: EP.html, or BATCH.html, in this folder)",
    )


def _chosen(store: StoreBackend, args: argparse.Namespace) -> tuple[list[str], str, str | None]:
    """The full ids of the episodes the page shows, in order; its default file name (the
    first episode's id, or the batch's); the batch's id when one is named."""
    if not args.episodes and not args.batch:
        raise UsageError("name an episode (EP) or a batch (--batch B)")
    ids = [store.resolve(ref) for ref in args.episodes]
    batch_id = store.resolve_batch(args.batch) if args.batch else None
    if batch_id is not None:
        listed = store.list_episodes(where=EpisodeFilter(batch_id=batch_id))
        if not listed:
            raise UsageError(f"batch {batch_id} has no episodes yet")
        ordered = sorted(listed, key=lambda e: (e.task_id, e.seed, e.created_at))
        ids.extend(e.episode_id for e in ordered)
    if args.forks:
        ids.extend(e for root in list(ids) for e in _forks_below(store, root))
    name = ids[0] if args.episodes else str(batch_id)
    return list(dict.fromkeys(ids)), name, batch_id


def _forks_below(store: StoreBackend, episode_id: str) -> list[str]:
    """Every fork below ``episode_id``, depth first."""
    out = []
    for child in store.children(episode_id):
        out += [child, *_forks_below(store, child)]
    return out


def view(args: argparse.Namespace) -> int:
    store = open_store(args)
    ids, name, batch_id = _chosen(store, args)
    path: Path = args.output or Path(f"{name}.html")
    if len(ids) == 1:
        title = f"agentrunner episode {ids[0]}"
    else:
        title = f"agentrunner: {len(ids)} episodes" + (f" of {batch_id}" if batch_id else "")
    size = write_page(store, ids, path, title=title)
    if args.json:
        print_json({"path": str(path), "episodes": ids, "bytes": size})
    else:
        print(path)
        print(f"{len(ids)} episode(s), {size:,} bytes", file=sys.stderr)
    return 0
