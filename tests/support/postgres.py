"""A real PostgreSQL server for the tests: initdb + pg_ctl in a temp dir, on a loopback port.

Started once per test session (lazily), stopped at exit.  Each test gets a fresh database.
Skipped with a clear reason when the PostgreSQL binaries are absent; CI sets
LOCKGATE_REQUIRE_SERVERS=1 so a missing server fails instead of skipping.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile

from twisted.trial.unittest import SkipTest

_server: PostgresServer | None = None
_counter = itertools.count(1)


def _bin_dir() -> str | None:
    if shutil.which("pg_ctl") and shutil.which("initdb"):
        return os.path.dirname(shutil.which("pg_ctl") or "")
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return os.path.dirname(candidates[0]) if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_postgres_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "nobody", "--", *cmd]
    return cmd


class PostgresServer:
    def __init__(self) -> None:
        bindir = _bin_dir()
        if bindir is None:
            raise FileNotFoundError("pg_ctl/initdb not found")
        self.bindir = bindir
        self.root = tempfile.mkdtemp(prefix="lockgate-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        os.chmod(self.root, 0o777)
        if os.geteuid() == 0:
            shutil.chown(self.root, "nobody")
        subprocess.run(
            _as_postgres_user([f"{bindir}/initdb", "-D", self.data, "-U", "postgres",
                               "--auth=trust", "-E", "UTF8", "--no-sync"]),
            check=True, capture_output=True,
        )
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        subprocess.run(
            _as_postgres_user([f"{bindir}/pg_ctl", "-D", self.data, "-o", options, "-w",
                               "-l", os.path.join(self.root, "log"), "start"]),
            check=True, capture_output=True,
        )

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, template: str | None = None) -> str:
        """A new database, empty or (``template``: a database name) a copy of another one
        that nobody is connected to."""
        import sqlalchemy

        name = f"lockgate_test_{os.getpid()}_{next(_counter)}"
        copy = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        engine = sqlalchemy.create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"{copy}')
        engine.dispose()
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(
            _as_postgres_user([f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "immediate",
                               "stop"]),
            capture_output=True, check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def postgres_url() -> str:
    """A fresh, empty database on the shared test server (SkipTest when unavailable)."""
    return postgres_server().create_database()


def postgres_server() -> PostgresServer:
    """The shared test server, started on first use (SkipTest when unavailable)."""
    global _server
    if _server is None:
        try:
            _server = PostgresServer()
        except (FileNotFoundError, subprocess.CalledProcessError) as exc:
            if os.environ.get("LOCKGATE_REQUIRE_SERVERS"):
                raise
            raise SkipTest(f"PostgreSQL server binaries unavailable: {exc}") from None
        atexit.register(_server.stop)
    return _server
