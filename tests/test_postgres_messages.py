"""What the command line says when a Postgres store cannot be reached, has no schema to make its
tables in, or may only be read by the role in the URL (issue 26, item 8): the cause and what to
do, never a bare hint that lost its cause."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from agentrunner.cli.main import main

pytest.importorskip("psycopg")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, " ".join(capsys.readouterr().err.split())


def test_a_closed_port_is_named_as_refused_with_the_servers_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = _closed_port()
    code, err = _error(capsys, "ls", "--db", f"postgresql://someone@127.0.0.1:{port}/traces")
    assert code == 1
    assert f"port {port} failed: Connection refused" in err
    assert "is the server running on that host and accepting TCP/IP connections?" in err
    assert "Traceback" not in err


def test_a_missing_socket_folder_is_named_with_its_cause(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, err = _error(capsys, "ls", "--db", f"postgresql://someone@/traces?host={tmp_path}")
    assert code == 1
    assert "No such file or directory" in err and str(tmp_path) in err


def test_a_search_path_naming_no_schema_says_to_create_it(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"nosuch_{uuid.uuid4().hex[:8]}"
    url = pg_url.rsplit("&options=", 1)[0] + f"&options=-csearch_path%3D{missing}"
    code, err = _error(capsys, "run", "--db", url)
    assert code == 1
    assert f"CREATE SCHEMA {missing}" in err
    assert "Traceback" not in err


def test_a_role_that_may_only_read_is_told_so_when_it_writes(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    assert main(["run", "--db", pg_url]) == 0  # the store exists, made by its owner
    capsys.readouterr()
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema[0]} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema[0]} TO {role}")
    reader = pg_url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
    code, _listed = _error(capsys, "ls", "--db", reader)
    assert code == 0
    code, err = _error(capsys, "run", "--db", reader)
    assert code == 1
    assert f"role {role!r} may not write" in err and "permission denied" in err
    assert "check the server" not in err


def test_a_url_libpq_cannot_read_is_refused_without_showing_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _error(capsys, "ls", "--db", "postgresql://bob:s3cr%zzet@127.0.0.1:5999/db")
    assert code == 1 and "s3cr" not in err and "cannot read the trace store's Postgres URL" in err


def test_a_table_of_someone_else_in_the_stores_schema_does_not_stop_a_writer(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The write check reads the store's own tables only: a role that may write every one of
    them runs, whatever else its schema holds."""
    import psycopg

    role = f"app_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        assert schema is not None
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT ALL ON SCHEMA {schema[0]} TO {role}")
        conn.execute("CREATE TABLE someone_elses (x int)")  # owned by postgres, no grant
    app = pg_url.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
    assert main(["run", "--db", app]) == 0, capsys.readouterr().err
