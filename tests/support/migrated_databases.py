"""A fresh database already at the migrations' head, for the many tests that start on one.

Running every migration on a new database costs about half a second (alembic loads and runs
each script, SQLite rebuilds tables in batch mode), and most tests open a new database: the
suite spent a third of its time there.  So the real ``migrate.upgrade`` runs once per session
into a template, and each test gets its own copy of it (a file copy for SQLite,
``CREATE DATABASE ... TEMPLATE`` for PostgreSQL): every test still starts on exactly what the
migrations produce, and on a database nobody else writes.  Tests about migrating itself keep
starting from empty databases (a new SQLite file, ``postgres_url()``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile

from gateway.store import migrate
from gateway.store.pool import make_engine
from tests.support.postgres import postgres_server

_sqlite_template: str | None = None
_postgres_template: str | None = None


def migrated_sqlite_url(directory: str, name: str = "db.sqlite3") -> str:
    """The URL of ``directory/name``, a new SQLite file at the migrations' head."""
    global _sqlite_template
    if _sqlite_template is None:
        root = tempfile.mkdtemp(prefix="lockgate-template-")
        atexit.register(shutil.rmtree, root, True)
        path = os.path.join(root, "template.sqlite3")
        _migrate(f"sqlite:///{path}")
        # the engine runs SQLite in WAL mode: fold the log into the file before copying it
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        _sqlite_template = path
    target = os.path.join(directory, name)
    shutil.copyfile(_sqlite_template, target)
    return f"sqlite:///{target}"


def migrated_postgres_url() -> str:
    """A new database at the migrations' head on the shared PostgreSQL test server
    (SkipTest when there is none, as ``postgres_url()``)."""
    global _postgres_template
    server = postgres_server()
    if _postgres_template is None:
        url = server.create_database()
        _migrate(url)
        _postgres_template = url.rsplit("/", 1)[1]
    return server.create_database(template=_postgres_template)


def _migrate(url: str) -> None:
    engine, _threads = make_engine(url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
