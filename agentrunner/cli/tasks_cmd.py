"""``agentrunner tasks``: the bundled (or given) tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from agentrunner.cli.common import new_command, print_json, stdout_console
from agentrunner.envs.tasks import load_tasks
from agentrunner.values.safe_text import one_line_visible, plain


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "tasks",
        tasks,
        help="list tasks",
        description="List the bundled tasks (or those of a tasks.json file) with difficulty, "
        "split, horizon (max_steps), reward mode and prompt (cut to one line; -v shows "
        "whole prompts).",
    )
    p.add_argument(
        "--tasks", type=Path, metavar="PATH", help="a tasks.json file (default: bundled)"
    )
    p.add_argument("--split", help="only tasks of this split (train, test, ...)")


def tasks(args: argparse.Namespace) -> int:
    selected = [t for t in load_tasks(args.tasks) if not args.split or t.split == args.split]
    if args.json:
        print_json([t.summary() for t in selected])
        return 0
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True)
    for col in ("task", "difficulty", "split", "max_steps", "reward", "prompt"):
        prompt = col == "prompt"
        table.add_column(  # -v: whole prompts, wrapped; else one line each, cut
            col,
            overflow="fold" if prompt and args.verbose else "ellipsis",
            no_wrap=prompt and not args.verbose,
            max_width=60 if prompt and not args.verbose else None,
        )
    for t in selected:
        table.add_row(  # what a tasks file says: Text, never markup, controls visible
            plain(one_line_visible(t.task_id)),
            plain(t.difficulty),
            plain(t.split),
            str(t.max_steps),
            plain(t.reward_mode),
            plain(t.prompt),
        )
    stdout_console().print(table)
    return 0
