"""``agentrunner`` entry point: argument parsing, dispatch, errors and exit codes.

Exit codes: 0 success, 2 bad usage, 1 failure, 130 cancelled by Ctrl-C. Errors print one
clear line on stderr (a traceback only with ``-v``).

Every command is named in one table with its module and its one-line help; only the module
of the command given is imported (``agentrunner --help`` imports none), so start-up costs
what that command needs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import shlex
import signal
import sys
import traceback
from collections.abc import Collection, Sequence
from types import FrameType

from agentrunner import __version__
from agentrunner.cli.common import add_common, print_json, stderr_console
from agentrunner.runtime import interrupts
from agentrunner.store.location import default_db_path
from agentrunner.values.errors import AgentRunnerError, StoreDriverError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        if "--json" in sys.argv[1:]:
            print_json({"error": message, "type": "UsageError", "exit_code": 2})
        self.exit(2, f"{self.prog}: error: {message}\n")


COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run_cmd", "run one episode and record it"),
    "ls": ("ls_cmd", "list episodes"),
    "show": ("show_cmd", "show one episode"),
    "resume": (
        "lifecycle_cmd",
        "continue an interrupted, cancelled or failed episode, or run a pending fork",
    ),
    "fork": ("lifecycle_cmd", "branch an episode at a model turn"),
    "replay": ("lifecycle_cmd", "re-execute an episode's recorded actions and report divergence"),
    "fanout": (
        "lifecycle_cmd",
        "fork K candidate actions x N continuations at a turn and rank them",
    ),
    "rm": (
        "lifecycle_cmd",
        "remove an episode no fork depends on (or, with --tree, it and its forks)",
    ),
    "diff": ("patch_cmd", "an episode's change to its workspace, as a patch"),
    "apply": ("patch_cmd", "apply an episode's change to a checkout"),
    "batch": ("batch_cmd", "run many episodes (tasks x seeds)"),
    "verify": ("verify_cmd", "check recorded rewards; score episodes (rules, LLM judge, tests)"),
    "export": (
        "export_cmd",
        "export training data (sft, dpo, grpo, kto, prm) or trajectories (atif)",
    ),
    "report": (
        "report_cmd",
        "an evaluation report: pass rate with its interval, pass@k, reward, cost, ...",
    ),
    "view": ("view_cmd", "episodes as one self-contained HTML page"),
    "import": (
        "import_cmd",
        "other agents' traces: Claude Code, Codex, Gemini CLI, aider, opencode, OpenHands, …",
    ),
    "record": (
        "record_cmd",
        "run any agent with its model calls recorded through a loopback proxy",
    ),
    "proxy": ("record_cmd", "run the recording proxy on its own, for agents started elsewhere"),
    "copy": ("copy_cmd", "copy episodes between stores (SQLite file <-> Postgres database)"),
    "gc": (
        "gc_cmd",
        "reclaim space: delete content no episode references (after rm), then vacuum",
    ),
    "db": (
        "db_cmd",
        "migrate a store's schema explicitly, or show its schema, sessions and size",
    ),
    "tasks": ("tasks_cmd", "list tasks"),
    "tui": ("tui_cmd", "browse, follow, replay, branch and resume episodes in a terminal UI"),
    "serve-env": (
        "serve_env_cmd",
        "serve the workspace tasks to a trainer over OpenEnv, every step recorded",
    ),
}
"""Command name -> (its module in ``agentrunner.cli``, its one-line help), in the order
``--help`` lists them; a module's commands stand together, in the order it registers them.
The help is the one the module registers (a test holds them equal)."""


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The command line. Only the modules of ``commands`` (default: all) are imported and
    register their full parsers; every other command is listed by its name and help alone."""
    parser = _Parser(
        prog="agentrunner",
        description="A local, crash-safe flight recorder for long-horizon LLM agents: run "
        "episodes, record every step in a SQLite trace store, and look back into them.",
    )
    parser.add_argument("--version", action="version", version=f"agentrunner {__version__}")
    add_common(parser)  # also before the subcommand: `agentrunner --db X ls`
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    wanted = {COMMANDS[name][0] for name in COMMANDS if commands is None or name in commands}
    registered: set[str] = set()
    for name, (module, help) in COMMANDS.items():
        if module not in wanted:
            sub.add_parser(name, help=help, add_help=False)
        elif module not in registered:
            registered.add(module)
            importlib.import_module(f"agentrunner.cli.{module}").register(sub)
    return parser


def chosen_command(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` names, read by the parser itself (so ``--db ls show`` is
    ``show``); the top-level ``--help``, ``--version`` and usage errors end here."""
    args, _rest = build_parser(()).parse_known_args(argv)
    command: str | None = args.command
    return command


def parse(argv: Sequence[str] | None) -> argparse.Namespace | None:
    """The arguments, with the module of their command loaded; None (the help printed) when
    they name no command."""
    command = chosen_command(argv)
    if command is None:
        build_parser(()).print_help()
        return None
    return build_parser((command,)).parse_args(argv)


def command_names() -> list[str]:
    return sorted(COMMANDS)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt("SIGTERM")


def main(argv: Sequence[str] | None = None) -> int:
    # Honour Ctrl-C even when started in the background (a shell then ignores SIGINT for us),
    # and cancel as gracefully on SIGTERM: runs record the cancel and their end.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args = parse(argv)
    except KeyboardInterrupt:  # while the command's module loads: as entry.py says it
        sys.stderr.write("cancelled\n")
        return 130
    if args is None:
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
    from agentrunner.values.safe_text import line  # Rich's text, loaded only for a message

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


_MISSING_IN_SCHEMA = frozenset({"UndefinedTable", "UndefinedColumn"})
"""psycopg's errors for what a store of an earlier schema lacks (readers never migrate one)."""


def store_problem(exc: StoreDriverError) -> str:
    """What the database's own error on the trace store means for the user."""
    text = str(exc)
    if exc.server == "postgres" and exc.driver in _MISSING_IN_SCHEMA:
        return (
            f"the Postgres trace store lacks a table or column this agentrunner reads ({text});"
            " if `agentrunner db status` shows pending migrations, `agentrunner db migrate`"
            " adds it"
        )
    if exc.server == "postgres" and exc.driver == "InsufficientPrivilege":
        return (
            f"the role in the --db URL may not do this on the Postgres trace store ({text});"
            " run it as a role that may (the tables' owner, or one granted what it needs)"
        )
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
