"""``agentrunner`` entry point: argument parsing, dispatch, errors and exit codes.

Exit codes: 0 success, 2 bad usage, 1 failure, 130 cancelled by Ctrl-C. Errors print one
clear line on stderr (a traceback only with ``-v``).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from rich.markup import escape

from agentrunner import __version__, interrupts
from agentrunner.cli import (
    batch_cmd,
    export_cmd,
    inspect_cmd,
    lifecycle_cmd,
    patch_cmd,
    run_cmd,
    tasks_cmd,
    tui_cmd,
    verify_cmd,
)
from agentrunner.cli.common import stderr_console
from agentrunner.errors import AgentRunnerError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


COMMAND_MODULES = (
    run_cmd,
    inspect_cmd,
    lifecycle_cmd,
    patch_cmd,
    batch_cmd,
    verify_cmd,
    export_cmd,
    tasks_cmd,
    tui_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentrunner",
        description="A local, crash-safe flight recorder for long-horizon LLM agents: run "
        "episodes, record every step in a SQLite trace store, and look back into them.",
    )
    parser.add_argument("--version", action="version", version=f"agentrunner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def command_names() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(action.choices)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    interrupts.IGNORE_AFTER_CANCEL = True
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.handler(args))
    except AgentRunnerError as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        stderr_console().print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        stderr_console().print("[yellow]cancelled[/]")
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
