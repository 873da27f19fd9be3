"""The Alembic migrations build exactly the schema in ``gateway.store.schema``, on SQLite and
PostgreSQL, and ``/readyz``'s notion of "current" agrees."""

from __future__ import annotations

import os
import shutil
import tempfile

from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from twisted.trial.unittest import TestCase

from gateway.store import migrate
from gateway.store.readiness import database_ready
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


class ReadinessTests(TestCase):
    """``/readyz`` checks the schema on every probe: the code's head revision is read from the
    migration scripts once per process, not on each probe."""

    def test_the_scripts_are_read_once_per_process(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-ready-")
        self.addCleanup(shutil.rmtree, directory, True)
        engine = create_engine(f"sqlite:///{os.path.join(directory, 'db.sqlite3')}")
        self.addCleanup(engine.dispose)
        migrate.upgrade(engine)
        reads = []
        real = ScriptDirectory.from_config

        def counted(config: Config) -> ScriptDirectory:
            reads.append(config)
            return real(config)

        self.patch(ScriptDirectory, "from_config", counted)
        with engine.connect() as conn:
            for _ in range(5):
                assert database_ready(conn)
        assert len(reads) <= 1  # none when an earlier test of this process already asked
