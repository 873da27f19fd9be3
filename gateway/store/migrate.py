"""Alembic, driven from code: upgrade to head on start, and tell whether a database is current.

The migration scripts live in ``gateway/store/migrations``; no ``alembic.ini`` is needed at run
time (the configuration is built here), so operators never run alembic by hand.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (blocking; called once at start-up)."""
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "head")


@cache
def head_revision() -> str | None:
    """The newest migration this code ships, read from the scripts once per process.

    Why kept: ``/readyz`` asks on every probe (``readiness.database_ready``), and alembic
    loads every migration script to answer (~45 ms of CPU each time); the scripts are part of
    the installed code, so they cannot change under a running process."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


def is_current(conn: Connection) -> bool:
    return current_revision(conn) == head_revision()
