"""The Alembic migrations build exactly the schema in ``gateway.store.schema``, on SQLite and
PostgreSQL, and ``/readyz``'s notion of "current" agrees."""

from __future__ import annotations

import os
import shutil
import tempfile

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine
from twisted.trial.unittest import TestCase

from gateway.store import migrate
from gateway.store.schema import metadata
from tests.support.postgres import postgres_url


class MigrationTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-migrate-")
        self.addCleanup(shutil.rmtree, directory, True)
        return f"sqlite:///{os.path.join(directory, 'db.sqlite3')}"

    def test_upgrade_matches_schema(self) -> None:
        engine = create_engine(self.database_url())
        self.addCleanup(engine.dispose)
        with engine.connect() as conn:
            assert not migrate.is_current(conn)
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert migrate.is_current(conn)
            context = MigrationContext.configure(conn, opts={"compare_type": False})
            differences = compare_metadata(context, metadata)
        assert differences == [], differences

    def test_upgrade_is_idempotent(self) -> None:
        engine = create_engine(self.database_url())
        self.addCleanup(engine.dispose)
        migrate.upgrade(engine)
        migrate.upgrade(engine)
        with engine.connect() as conn:
            assert migrate.current_revision(conn) == migrate.head_revision()


class PostgresMigrationTests(MigrationTests):
    def database_url(self) -> str:
        return postgres_url()
