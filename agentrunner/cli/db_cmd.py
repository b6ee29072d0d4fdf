"""``agentrunner db``: a store's schema brought up to date on purpose (``db migrate``, the only
way a shared Postgres store is migrated) and what state the store is in (``db status``)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrunner.cli.common import (
    add_common,
    new_command,
    print_json,
    stdout_console,
    store_location,
)
from agentrunner.store.dialect import POSTGRES, SQLITE, Conn, table_sizes
from agentrunner.values.errors import StoreError, UsageError

if TYPE_CHECKING:
    from agentrunner.store.driver import SqliteConnection

_MIGRATE_HELP = "bring the store's schema up to date (the only way a Postgres store is migrated)"
_STATUS_HELP = "the store's schema (applied, pending), who is connected, its size by table"
_BLOBS_HELP = "keep the store's new workspace blobs in an S3-compatible bucket (extra [s3])"


def register(sub: argparse._SubParsersAction) -> None:
    p = new_command(
        sub,
        "db",
        _need_action,
        help="migrate a store's schema explicitly, or show its schema, sessions and size",
        description="A Postgres store is shared, and a migration locks every older "
        "agentrunner out of it, so no command migrates one as it opens it: `db migrate` "
        "does, once every client that writes to it is upgraded. Until then commands that "
        "only read (ls, show, report, ...) read what the store holds, and commands that "
        "write (run, batch, resume, ...) refuse it. A SQLite file is one user's and is "
        "migrated by any command that opens it; `db` works on it too.",
    )
    actions = p.add_subparsers(dest="db_action", metavar="ACTION")
    migrate = actions.add_parser(
        "migrate",
        help=_MIGRATE_HELP,
        description="Apply the migrations the store lacks, one process at a time (a "
        "database without a store gets a new one). Run it once every client that writes to "
        "the store is upgraded, as the role that owns its tables: older agentrunners refuse "
        "a store of a newer schema. A store a newer agentrunner wrote is refused.",
    )
    migrate.set_defaults(handler=run_migrate)
    add_common(migrate, defaults=False)
    migrate.add_argument(
        "--grant-read",
        metavar="ROLE",
        help="Postgres: let ROLE read the store (USAGE on its schema, SELECT on every table "
        "and view) and every table later migrations run by this role add (default "
        "privileges)",
    )
    status = actions.add_parser("status", help=_STATUS_HELP, description=_STATUS_HELP + ".")
    status.set_defaults(handler=run_status)
    add_common(status, defaults=False)
    blobs = actions.add_parser(
        "blobs",
        help=_BLOBS_HELP,
        description="Record in the store that its new workspace blobs go to s3://BUCKET/PREFIX"
        " (the store keeps their index; blobs already in it stay). Every client of the store"
        " then puts and fetches them there: give each the server and credentials the way"
        " boto3 reads them (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or a"
        " profile); none is recorded. A prefix belongs to one store. Needs `pip install"
        " 'agentrunner[s3]'`.",
    )
    blobs.set_defaults(handler=run_blobs)
    add_common(blobs, defaults=False)
    blobs.add_argument("url", metavar="s3://BUCKET/PREFIX", help="where the blobs go")


def _need_action(args: argparse.Namespace) -> int:
    raise UsageError("say what to do: `agentrunner db migrate` or `agentrunner db status`")


@contextmanager
def _postgres(url: str) -> Iterator[tuple[Conn, str]]:
    """One connection to the database ``url`` names, as it is (nothing made or migrated)."""
    from agentrunner.store.postgres import PgConnections, display_name

    where = display_name(url)
    pool = PgConnections(url, where, "NORMAL")
    try:
        yield pool.get(), where
    finally:
        pool.close()


@contextmanager
def _sqlite(path: Path) -> Iterator[SqliteConnection]:
    """The existing store file ``path``, its schema as found."""
    from agentrunner.store.connection import open_connections

    conns = open_connections(path, create=False, migrated=False)
    try:
        yield conns.get()
    finally:
        conns.close()


def _is_url(location: str | Path) -> bool:
    from agentrunner.store.postgres import is_url

    return is_url(location)


def run_migrate(args: argparse.Namespace) -> int:
    location = store_location(args)
    if _is_url(location):
        from agentrunner.store import postgres_schema

        with _postgres(str(location)) as (conn, where):
            applied = postgres_schema.upgrade(conn, where, grant_read=args.grant_read)
            known = postgres_schema.KNOWN
    else:
        if args.grant_read is not None:
            raise UsageError(
                "--grant-read is for a Postgres store: a SQLite file's readers need the file"
                " and its folder writable (WAL), so file permissions decide who reads it"
            )
        from agentrunner.store import connection, schema

        where = str(location)
        with _sqlite(Path(location)) as conn:
            applied = schema.pending(conn.raw)
            connection.migrate(conn.raw, Path(location))
            known = schema.KNOWN_MIGRATIONS
    if args.json:
        print_json(
            {
                "store": where,
                "applied": applied,
                "schema": known[-1],
                "granted_read": args.grant_read,
            }
        )
        return 0
    if applied == known:
        done = "made a new store"
    else:
        done = f"applied {', '.join(applied)}" if applied else "already up to date"
    granted = f"; {args.grant_read} may read it" if args.grant_read else ""
    stdout_console().print(f"{where}: {done} (schema {known[-1]}){granted}", soft_wrap=True)
    return 0


def run_blobs(args: argparse.Namespace) -> int:
    from agentrunner.store import TraceStore
    from agentrunner.store.blob_bucket import use_bucket

    with TraceStore(store_location(args)) as store:
        use_bucket(store, args.url)
        where = store.where
    if args.json:
        print_json({"store": where, "blobs": args.url})
    else:
        stdout_console().print(f"{where}: new workspace blobs go to {args.url}", soft_wrap=True)
    return 0


def run_status(args: argparse.Namespace) -> int:
    location = store_location(args)
    if _is_url(location):
        from agentrunner.store import postgres_schema

        with _postgres(str(location)) as (conn, where):
            applied = postgres_schema.applied(conn)
            if not applied:
                raise StoreError(
                    f"no trace store in {where}; `agentrunner db migrate --db URL` makes one"
                )
            status: dict[str, Any] = {"store": where, "backend": "postgres"}
            status |= _schema(applied, postgres_schema.KNOWN)
            status["connected"] = postgres_schema.sessions(conn)
            status["tables"] = table_sizes(conn, POSTGRES)
    else:
        from agentrunner.store import schema

        path = Path(location)
        with _sqlite(path) as conn:
            status = {"store": str(path), "backend": "sqlite"}
            status |= _schema(schema.applied(conn.raw), schema.KNOWN_MIGRATIONS)
            status["connected"] = None  # SQLite keeps no list of who has a file open
            wal = Path(f"{path}-wal")
            status["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
            status["tables"] = table_sizes(conn, SQLITE)
    if args.json:
        print_json(status)
    else:
        _print_status(status)
    return 0


def _schema(applied: list[str], known: list[str]) -> dict[str, Any]:
    return {
        "applied": applied,
        "known": known,
        "pending": [name for name in known if name not in applied],
        "newer": [name for name in applied if name not in known],
    }


def _print_status(status: dict[str, Any]) -> None:
    from rich.table import Table

    from agentrunner.values.formatting import plural

    lines = [f"store      {status['store']} ({status['backend']})"]
    known, applied = status["known"], status["applied"]
    lines.append(
        f"schema     {applied[-1] if applied else 'none'}"
        f" ({len(applied)} applied, {len(known)} known to this agentrunner)"
    )
    if status["newer"]:
        lines.append(
            f"newer      {', '.join(status['newer'])}: written by a newer agentrunner;"
            " upgrade agentrunner to use it"
        )
    pending = status["pending"]
    lines.append(
        "pending    "
        + (f"{', '.join(pending)} (run `agentrunner db migrate`)" if pending else "none")
    )
    if status["connected"] is None:
        wal = status["wal_bytes"]
        lines.append(
            "connected  not known (SQLite keeps no list of the processes that have a file"
            f" open); write-ahead log: {wal:,} bytes"
            + (", checkpointed (nothing in it)" if wal == 0 else "")
        )
    else:
        sessions = status["connected"]
        lines.append(f"connected  {plural(len(sessions), 'other session')} to the database")
        lines += [
            f"           pid {s['pid']} {s['user'] or '?'} {s['application'] or '-'}"
            f" from {s['client'] or 'local socket'}, {s['state'] or '?'} since {s['since']}"
            for s in sessions
        ]
    console = stdout_console()
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    table = Table("table", "bytes", box=None)
    for name, size in status["tables"].items():
        table.add_row(name, f"{size:,}")
    console.print(table)
    total = sum(status["tables"].values())
    console.print(f"total      {total:,} bytes", highlight=False)
