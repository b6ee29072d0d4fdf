"""``agentrunner`` entry point: argument parsing, dispatch, errors and exit codes.

Exit codes: 0 success, 2 bad usage, 1 failure, 130 cancelled by Ctrl-C. Errors print one
clear line on stderr (a traceback only with ``-v``).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from agentrunner import __version__
from agentrunner.cli import inspect_cmd, run_cmd, tasks_cmd
from agentrunner.cli.common import add_common, stderr_console
from agentrunner.errors import AgentRunnerError

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    parser = _Parser(
        prog="agentrunner",
        description="A local, crash-safe flight recorder for long-horizon LLM agents: run "
        "episodes, record every step in a SQLite trace store, and look back into them.",
    )
    parser.add_argument("--version", action="version", version=f"agentrunner {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    handlers: dict[str, Handler] = {}
    for p, fn in [
        (run_cmd.add_parser(sub), run_cmd.run),
        (tasks_cmd.add_parser(sub), tasks_cmd.tasks),
    ]:
        handlers[p.prog.split()[-1]] = fn
    ls_p, show_p = inspect_cmd.add_parsers(sub)
    handlers["ls"], handlers["show"] = inspect_cmd.ls, inspect_cmd.show
    for name in handlers:
        add_common(sub.choices[name])
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return handlers[args.command](args)
    except AgentRunnerError as exc:
        if getattr(args, "verbose", False):
            traceback.print_exc()
        stderr_console().print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        return exc.exit_code
    except KeyboardInterrupt:
        stderr_console().print("[yellow]cancelled[/]")
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
