"""``agentrunner diff`` and ``agentrunner apply``: an episode's workspace change as a patch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentrunner.cli.common import new_command, open_store, print_json, stdout_console
from agentrunner.readers.changes import WorkspaceChange, episode_change
from agentrunner.values.errors import UsageError
from agentrunner.values.safe_text import visible

_LEFT_OUT = (
    "The change is what `git status` would show in the workspace: files the agent created "
    "that git ignores there (the repository's .gitignore files at every level, its "
    ".git/info/exclude, your core.excludesFile; a task without a repository: its own "
    ".gitignore files and .pytest_cache/), __pycache__ and the agent's private .git are left "
    "out; tracked files are kept whatever pattern matches them. The snapshots keep them all."
)
_EXCLUDE = (
    "leave out the paths this pattern matches, tracked or not (gitignore syntax, relative to "
    "the workspace's top: '*.lock', 'docs/', '/setup.cfg'); repeatable"
)
_APPLY_EXIT = (
    "Exit codes: 0 applied (with --check: would apply); 3 refused, nothing written (the "
    "checkout is missing, is not the top folder of a git checkout, has moved from the "
    "episode's base commit, has local changes in a path the change touches, or `git apply "
    "--check` rejects the change); 2 bad usage; 1 failure."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "diff",
        diff,
        help="an episode's change to its workspace, as a patch",
        description="Print the change an episode made to its workspace, against the base it "
        "started from, as a unified diff that `git apply` accepts (binary files included). "
        f"{_LEFT_OUT} Read from the trace store alone (the ignore rules of the repository "
        "and of your git config when they are on this machine): the repository need not "
        "exist here. Piped or redirected, the patch is written byte for byte; to a "
        "terminal, control characters in it are shown (ESC as ^[), never obeyed. No change "
        "prints nothing on stdout and says so on stderr. "
        "Example: agentrunner diff EP | git apply",
    )
    p.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    p.add_argument("--turn", type=int, metavar="K", help="the change as of the end of model turn K")
    p.add_argument("--stat", action="store_true", help="a summary of files changed (git --stat)")
    p.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help=_EXCLUDE)

    a = new_command(
        sub,
        "apply",
        apply,
        help="apply an episode's change to a checkout",
        description="Apply an episode's workspace change (what `agentrunner diff` prints) to "
        "a checkout: by default the repository the episode ran on (--repo), else --to PATH. "
        "Refused, with nothing changed, when the checkout's HEAD is not the episode's base "
        "commit or when a file the change touches has local changes; only the working tree "
        f"is written (never the index or a commit). {_LEFT_OUT}",
    )
    a.epilog = _APPLY_EXIT
    a.add_argument("episode", metavar="EP", help="episode id or unique prefix")
    a.add_argument("--to", type=Path, metavar="PATH", help="the checkout to change")
    a.add_argument("--turn", type=int, metavar="K", help="the change as of model turn K")
    a.add_argument("--check", action="store_true", help="only check that it would apply")
    a.add_argument("--exclude", action="append", default=[], metavar="PATTERN", help=_EXCLUDE)


def diff(args: argparse.Namespace) -> int:
    store = open_store(args)
    change = episode_change(store, args.episode, turn=args.turn)
    left_out = change.left_out(store, args.exclude)
    text = change.patch(store, stat=args.stat, left_out=left_out)
    if args.json:
        stat = text if args.stat else change.patch(store, stat=True, left_out=left_out)
        printable = None if args.stat else _utf8(text)
        print_json(
            {
                **change.to_dict(),
                "changed": bool(text),
                "files": len(change.paths(left_out)),
                "left_out": len(left_out),
                "stat": _utf8(stat) or "",
                "patch": printable,
            }
        )
        return 0
    if not text:
        print(_no_change(change, args.turn, len(left_out)), file=sys.stderr)
        return 0
    if args.stat and left_out:
        print(_left_out(len(left_out)), file=sys.stderr)
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
    left_out = change.left_out(store, args.exclude)
    result = change.apply(store, target.resolve(), check_only=args.check, left_out=left_out)
    summary = {
        **change.to_dict(),
        "target": str(target),
        "applied": not args.check,
        "files": result.files,
        "added": result.added,
        "modified": result.modified,
        "deleted": result.deleted,
        "left_out": len(left_out),
    }
    if args.json:
        print_json(summary)
        return 0
    verb = "would apply" if args.check else "applied"
    left = f"; {_left_out(len(left_out))}" if left_out else ""
    stdout_console().print(
        f"{verb} {result.files} file(s) ({result.added} added, {result.modified} modified, "
        f"{result.deleted} deleted) to {target}{left}"
    )
    return 0


def _left_out(count: int) -> str:
    return f"left out {count} path(s) git ignores or --exclude matches"


def _no_change(change: WorkspaceChange, turn: int | None, left_out: int) -> str:
    when = f"no change as of turn {turn}" if turn is not None else "no change"
    if left_out:
        return f"{when} ({_left_out(left_out)})"
    return f"{when}: the workspace of episode {change.episode_id} matches its base"


def _utf8(text: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text
