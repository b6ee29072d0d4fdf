"""``agentrunner`` entry point: argument parsing, dispatch, errors and exit codes.

Exit codes: 0 success, 2 bad usage, 1 failure, 130 cancelled by Ctrl-C. Errors print one
clear line on stderr (a traceback only with ``-v``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import sys
import traceback
from collections.abc import Sequence
from types import FrameType

from agentrunner import __version__, interrupts
from agentrunner.cli import (
    batch_cmd,
    copy_cmd,
    export_cmd,
    gc_cmd,
    import_cmd,
    lifecycle_cmd,
    ls_cmd,
    patch_cmd,
    record_cmd,
    report_cmd,
    run_cmd,
    serve_env_cmd,
    show_cmd,
    tasks_cmd,
    tui_cmd,
    verify_cmd,
    view_cmd,
)
from agentrunner.cli.common import add_common, print_json, stderr_console
from agentrunner.errors import AgentRunnerError, StoreDriverError
from agentrunner.safe_text import line
from agentrunner.store.location import default_db_path


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        if "--json" in sys.argv[1:]:
            print_json({"error": message, "type": "UsageError", "exit_code": 2})
        self.exit(2, f"{self.prog}: error: {message}\n")


COMMAND_MODULES = (
    run_cmd,
    ls_cmd,
    show_cmd,
    lifecycle_cmd,
    patch_cmd,
    batch_cmd,
    verify_cmd,
    export_cmd,
    report_cmd,
    view_cmd,
    import_cmd,
    record_cmd,
    copy_cmd,
    gc_cmd,
    tasks_cmd,
    tui_cmd,
    serve_env_cmd,
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentrunner",
        description="A local, crash-safe flight recorder for long-horizon LLM agents: run "
        "episodes, record every step in a SQLite trace store, and look back into them.",
    )
    parser.add_argument("--version", action="version", version=f"agentrunner {__version__}")
    add_common(parser)  # also before the subcommand: `agentrunner --db X ls`
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def command_names() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(action.choices)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt("SIGTERM")


def main(argv: Sequence[str] | None = None) -> int:
    # Honour Ctrl-C even when started in the background (a shell then ignores SIGINT for us),
    # and cancel as gracefully on SIGTERM: runs record the cancel and their end.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        with interrupts.cancel_is_final():
            return int(args.handler(args))
    except StoreDriverError as exc:  # a read path met a damaged or unwritable store
        return _fail(args, store_problem(exc), exc.driver, 1)
    except AgentRunnerError as exc:
        return _fail(args, as_flags(str(exc)), type(exc).__name__, exc.exit_code)
    except KeyboardInterrupt as exc:
        reason = str(exc.args[0]) if exc.args else "SIGINT"
        return _fail(args, f"cancelled ({reason})", "Cancelled", 130, style="yellow")
    except BrokenPipeError:
        _silence_stdout()  # the reader went away (`| head`): nothing more to say to it
        return 141


def _fail(
    args: argparse.Namespace, message: str, kind: str, code: int, style: str = "bold red"
) -> int:
    """Say what went wrong: one line on stderr; with --json also an object on stdout."""
    if getattr(args, "verbose", False):
        traceback.print_exc()
    label = "error" if code != 130 else "cancelled"
    text = message if code != 130 else message.removeprefix("cancelled ")
    stderr_console().print(line((f"{label}:", style), " ", text), soft_wrap=True)
    if getattr(args, "json", False):
        with contextlib.suppress(BrokenPipeError):
            print_json({"error": message, "type": kind, "exit_code": code})
    return code


def as_flags(message: str) -> str:
    """A library message in the command line's words: ```max_turns``` -> ``--max-turns``."""
    return re.sub(r"`([a-z][a-z_]*)`", lambda m: "--" + m.group(1).replace("_", "-"), message)


def store_problem(exc: StoreDriverError) -> str:
    """What the database's own error on the trace store means for the user."""
    text = str(exc)
    if exc.server == "postgres":
        return f"the Postgres trace store failed ({text}); check the server and the --db URL"
    if "readonly" in text:
        return f"the trace store is read-only ({text}); give a writable --db"
    if "disk is full" in text or "database or disk is full" in text:
        return f"the disk holding the trace store is full ({text}); free space and resume"
    return (
        f"the trace store is damaged ({text}); check it with "
        f"`sqlite3 {shlex.quote(str(default_db_path()))} 'PRAGMA integrity_check'`"
        " (or your --db path)"
    )


def _silence_stdout() -> None:
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
