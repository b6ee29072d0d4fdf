"""What every subcommand shares: common options, opening the store, JSON output.

Cheap to import (the top-level parser uses it): the store and Rich are loaded when a command
opens the store or makes a console.
"""

from __future__ import annotations

import argparse
import errno
import functools
import ipaddress
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.store.location import user_db_path
from agentrunner.values.errors import StoreError, StoreSchemaError, UsageError

if TYPE_CHECKING:
    from rich.console import Console

    from agentrunner.store.protocol import StoreBackend


def add_common(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """``--db``, ``--json`` and ``-v``: accepted before the subcommand (the main parser's,
    which sets the defaults) and after it (each subcommand's, ``defaults=False``: only what
    is given there is set, so the one given after the subcommand wins)."""
    group = parser.add_argument_group("common options")
    group.add_argument(
        "--db",
        default=None if defaults else argparse.SUPPRESS,
        metavar="PATH|URL",
        help="trace store: a SQLite file, or a Postgres database as postgresql://USER@HOST/DB"
        " (default: $AGENTRUNNER_DB, else one store per user in the XDG data folder, here "
        + str(user_db_path()).replace("%", "%%")
        + "); run, batch, import and record create a missing file (and its folder) or a"
        " database's tables, other commands need the store to exist",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=False if defaults else argparse.SUPPRESS,
        help="print one JSON object (or array) on one line as the last line of stdout",
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if defaults else argparse.SUPPRESS,
        help="show more detail",
    )


def new_command(
    sub: argparse._SubParsersAction,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str,
) -> argparse.ArgumentParser:
    """A subcommand parser with the common options and its handler attached."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(handler=handler)
    add_common(parser, defaults=False)
    return parser


CREATING_COMMANDS = frozenset({"run", "batch", "import", "record", "proxy", "serve-env"})
"""Only these may make a new store; every other command reads (or adds to) an existing one."""

WRITING_COMMANDS = CREATING_COMMANDS | {"resume", "fork", "replay", "fanout", "rm", "verify", "gc"}
"""These write to the store: on a shared (Postgres) store of an earlier schema they refuse
(only ``agentrunner db migrate`` migrates one); the others read what the store holds."""


def store_location(args: argparse.Namespace) -> str | Path:
    """The store ``--db``, ``$AGENTRUNNER_DB`` or the per-user default names. A command that
    creates stores and is about to make the default one says so on stderr, naming it (once:
    the first time, since the store then exists)."""
    if args.db:
        _warn_of_a_visible_password(str(args.db))
    location = args.db or os.environ.get("AGENTRUNNER_DB")
    if location:
        return str(location)
    path = user_db_path()
    if getattr(args, "command", None) in CREATING_COMMANDS and not path.exists():
        print(
            f"agentrunner: making the default trace store {path}"
            " (one per user; --db PATH or $AGENTRUNNER_DB picks another)",
            file=sys.stderr,
        )
    return path


@functools.cache
def _warn_of_a_visible_password(location: str) -> None:
    """A password written in ``--db`` is on the command line every local user can read
    (``ps``): say so once, and where it belongs."""
    from urllib.parse import urlsplit

    if "://" in location and urlsplit(location).password:
        print(
            "agentrunner: the password in --db is visible to every user of this machine (ps);"
            " put the URL in $AGENTRUNNER_DB, or the password in ~/.pgpass or $PGPASSWORD",
            file=sys.stderr,
        )


def open_store(args: argparse.Namespace) -> StoreBackend:
    """The store ``--db`` (or the default) names. Commands that only read or add to a store
    never create one (nor convert an empty or foreign file): they say where they looked.

    A Postgres store of an earlier schema is never migrated here: a command that writes
    refuses it (naming ``agentrunner db migrate``), one that reads reads what it holds and
    says on stderr that it lags."""
    from agentrunner.store import TraceStore

    command = getattr(args, "command", None)
    store = TraceStore(store_location(args), create=command in CREATING_COMMANDS)
    if store.sql.postgres:
        from agentrunner.store import postgres_schema

        behind = postgres_schema.lagging(store)
        if behind and command in WRITING_COMMANDS:
            store.close()
            raise StoreSchemaError(postgres_schema.behind_message(store.where, behind))
        role, unwritable = postgres_schema.unwritable(store)
        if unwritable and command in WRITING_COMMANDS:
            store.close()
            raise StoreError(
                f"{store.where}: the role {role!r} may not write to this store (permission"
                f" denied to add rows to {', '.join(unwritable)}); `{command}` writes, so run"
                " it as a role that may (the tables' owner, or one granted INSERT, UPDATE and"
                " DELETE on them); this role may still read (ls, show, export, report)"
            )
        if behind:
            print(
                f"agentrunner: {store.where} lags this agentrunner's schema by"
                f" {len(behind)} migration(s) ({', '.join(behind)}); shown is what it holds;"
                " `agentrunner db migrate` brings it up to date",
                file=sys.stderr,
            )
    return store


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class _Console(Console):
        """A Rich console that reports a closed output as an error instead of exiting the
        program (Rich's default), so a run can record why it stops."""

        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "the output was closed")

    return _Console


def stderr_console() -> Console:
    return _console_class()(stderr=True, highlight=False)


def stdout_console() -> Console:
    """Stdout console; when piped, wide enough that tables are not cut."""
    return _console_class()(highlight=False, width=None if sys.stdout.isatty() else 200)


def reward_text(reward: float | None) -> str:
    """A reward for an outcome line: ``not judged`` when unknown (no test, no verifier)."""
    return "not judged" if reward is None else f"{reward:g}"


def print_json(value: Any) -> None:
    """One JSON line; what a terminal would act on is written as ``\\u`` escapes (same value)."""
    from agentrunner.values.safe_text import json_safe

    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.write(json_safe(text) + "\n")
    sys.stdout.flush()


def listening_token(host: str, given: str | None, variable: str, why: str) -> str | None:
    """The token a server listening on ``host`` asks its clients for: ``given`` (``--token``)
    or ``$variable``; on any address but loopback one is required (a UsageError saying
    ``why``), on loopback none is."""
    token = given or os.environ.get(variable) or None
    if token is None and not _loopback(host):
        raise UsageError(
            f"--host {host} is reachable from other machines: give --token (or ${variable}); {why}"
        )
    return token


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
