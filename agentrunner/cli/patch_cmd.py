"""``agentrunner diff`` and ``agentrunner apply``: an episode's workspace change as a patch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrunner.changes import episode_change
from agentrunner.cli.common import new_command, open_store, print_json, stdout_console
from agentrunner.errors import UsageError
from agentrunner.safe_text import visible


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "diff",
        diff,
        help="an episode's change to its workspace, as a patch",
        description="Print the change an episode made to its workspace, against the base it "
        "started from, as a unified diff that `git apply` accepts (binary files included; "
        "the agent's private .git is left out). Read from the trace store alone: the "
        "repository need not exist here. Piped or redirected, the patch is written byte for "
        "byte; to a terminal, control characters in it are shown (ESC as ^[), never obeyed. "
        "Example: agentrunner diff EP | git apply",
    )
    p.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    p.add_argument("--turn", type=int, metavar="K", help="the change as of the end of model turn K")
    p.add_argument("--stat", action="store_true", help="a summary of files changed (git --stat)")

    a = new_command(
        sub,
        "apply",
        apply,
        help="apply an episode's change to a checkout",
        description="Apply an episode's workspace change to a checkout: by default the "
        "repository the episode ran on (--repo), else --to PATH. Refused, with nothing "
        "changed, when the checkout's HEAD is not the episode's base commit or when a file "
        "the change touches has local changes; only the working tree is written (never the "
        "index or a commit).",
    )
    a.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    a.add_argument("--to", type=Path, metavar="PATH", help="the checkout to change")
    a.add_argument("--turn", type=int, metavar="K", help="the change as of model turn K")
    a.add_argument("--check", action="store_true", help="only check that it would apply")


def diff(args: argparse.Namespace) -> int:
    store = open_store(args)
    change = episode_change(store, args.episode, turn=args.turn)
    text = change.patch(store, stat=args.stat)
    if args.json:
        stat = text if args.stat else change.patch(store, stat=True)
        printable = None if args.stat else _utf8(text)
        print_json({**change.to_dict(), "stat": _utf8(stat) or "", "patch": printable})
        return 0
    if sys.stdout.isatty():  # a terminal shows it (controls visible); a pipe gets the bytes
        text = visible(text)
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()
    return 0


def apply(args: argparse.Namespace) -> int:
    store = open_store(args)
    change = episode_change(store, args.episode, turn=args.turn)
    target = args.to
    if target is None:
        repo = change.base.get("repo")
        if not repo:
            raise UsageError(
                f"episode {change.episode_id} did not run on a repository; give --to PATH"
            )
        target = Path(str(repo))
    result = change.apply(store, target.resolve(), check_only=args.check)
    summary = {
        **change.to_dict(),
        "target": str(target),
        "applied": not args.check,
        "files": result.files,
        "added": result.added,
        "modified": result.modified,
        "deleted": result.deleted,
    }
    if args.json:
        print_json(summary)
        return 0
    verb = "would apply" if args.check else "applied"
    stdout_console().print(
        f"{verb} {result.files} file(s) ({result.added} added, {result.modified} modified, "
        f"{result.deleted} deleted) to {target}"
    )
    return 0


def _utf8(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text
