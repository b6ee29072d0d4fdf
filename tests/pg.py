"""A real Postgres server for the tests: ``initdb`` + ``pg_ctl`` into a temp dir, listening
on a unix socket only, started once per test session and stopped at its end.

The binaries come from Debian's ``postgresql`` package (``/usr/lib/postgresql/*/bin``; CI
installs it when missing). Postgres refuses to run as root, so a root test run starts the
server as the ``postgres`` user the package creates. Each test gets its own schema
(``schema_url``), so tests never see each other's rows.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any


def binaries() -> Path | None:
    """The newest installed Postgres' bin folder, if any."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name or 0)
    )
    for folder in reversed(found):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def why_not() -> str | None:
    """Why no server can be started here (None: it can)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'agentrunner[postgres]')"
    if binaries() is None:
        return "Postgres is not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        closed = _closed_to(entry.pw_uid, Path(tempfile.gettempdir()))
        if closed is not None:
            return (
                f"running as root, the server runs as 'postgres', which cannot enter {closed}"
                " on the way to TMPDIR (chmod o+x it, as .ci/run does for its folder)"
            )
    return None


def _closed_to(uid: int, folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` that user ``uid`` may not enter."""
    for part in [*reversed(folder.resolve().parents), folder.resolve()]:
        mode = part.stat()
        if mode.st_uid != uid and not mode.st_mode & 0o001:
            return part
    return None


class PostgresServer:
    """One server in a temp dir; :meth:`url` connects to its ``postgres`` database."""

    def __init__(self, **settings: Any) -> None:
        bin_dir = binaries()
        assert bin_dir is not None
        self._bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="agentrunner-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres"
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
        )
        options = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "max_connections": "300",
            "shared_buffers": "64MB",
            **{k: str(v) for k, v in settings.items()},
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            for key, value in options.items():
                conf.write(f"{key} = {value}\n")
        self.start()

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")

    def shut(self, mode: str) -> None:
        """Stop the server: ``fast`` (its sessions ended, their transactions rolled back) or
        ``immediate`` (as a crash: what was not flushed is lost)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def halt(self) -> None:
        """Stop the server at once, as a crash would (clients' connections drop)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self._bin / program), *args],
            check=True,
            capture_output=True,
            user=self._user,
            cwd=self.root,
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def schema_url(self) -> str:
        """A URL whose tables live in a new, empty schema of their own."""
        import psycopg

        schema = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url()}&options=-csearch_path%3D{schema}"

    def stop(self) -> None:
        with_server = (self.data / "postmaster.pid").exists()
        if with_server:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
