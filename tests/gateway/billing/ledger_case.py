"""A real database (SQLite file or PostgreSQL) with users and keys, for the money tests.

``LedgerCase`` starts on a fresh database at the migrations' head (``migrated_databases``), runs a ``DBRunner`` on the real reactor's threads, and
builds ``Wallets`` + ``Settler`` on a ``Clock`` (so batch timers and retry backoff are driven by
the test).  Commits are counted with a SQLAlchemy engine event.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import event, func, select, update
from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.ledger.settlement import Settler
from gateway.ledger.wallet import Wallets
from gateway.store import schema
from gateway.store.ledger_audit import audit
from gateway.store.pool import DBRunner, make_engine
from tests.support.migrated_databases import migrated_postgres_url, migrated_sqlite_url

NOW = datetime(2027, 1, 15, 12, 0, tzinfo=UTC)
UNIT = 1_000_000_000
_names = itertools.count(1)
#: the ledger kind of the test's funding (written as an admin's balance change is)
FUNDING = "test_funding"


def _fund(conn: Any, user_id: int, balance_nanos: int, before: int) -> None:
    """The ledger row of a balance set by the test, so the ledger sums to the balance."""
    if balance_nanos != before:
        conn.execute(schema.ledger.insert().values(
            user_id=user_id, kind=FUNDING, amount_nanos=balance_nanos - before,
            balance_after_nanos=balance_nanos, ref=None, memo="test funding", created_at=NOW))


class LedgerCase(TestCase):
    backend = "sqlite"

    def setUp(self) -> None:
        if self.backend == "postgresql":
            url = migrated_postgres_url()
        else:
            directory = tempfile.mkdtemp(prefix="lockgate-bill-")
            self.addCleanup(shutil.rmtree, directory, True)
            url = migrated_sqlite_url(directory, "db")
        engine, threads = make_engine(url)
        self.core_commits = 0

        def _count(_conn: Any) -> None:
            self.core_commits += 1

        event.listen(engine, "commit", _count)
        self.db = DBRunner(reactor, engine, threads)
        self.db.start()
        self.addCleanup(self.db.stop)
        self.clock = Clock()
        self.clock.advance(NOW.timestamp())
        self.wallets = Wallets(self.db)
        self.settler = self.new_settler()
        self.group_id = self.db.blocking(lambda conn: conn.execute(
            schema.groups.insert().values(name="user", created_at=NOW, updated_at=NOW)
        ).inserted_primary_key[0])

    @property
    def commits(self) -> int:
        """Commits through SQLAlchemy plus those of the lean DB-API path (SQLite's
        settlement batches, ``DBRunner.driver_transaction``)."""
        return self.core_commits + self.db.driver_commits

    def new_settler(self, **options: Any) -> Settler:
        return Settler(self.db, self.clock, self.wallets, **options)

    # --- seeding and reading ----------------------------------------------------------------

    async def add_user(self, balance_nanos: int) -> int:
        n = next(_names)

        def insert(conn: Any) -> int:
            user_id: int = conn.execute(schema.users.insert().values(
                username=f"u{n}", email=f"u{n}@example.com", balance_nanos=balance_nanos,
                group_id=self.group_id, referral_code=f"R{n}", created_at=NOW,
                updated_at=NOW)).inserted_primary_key[0]
            _fund(conn, user_id, balance_nanos, 0)
            return user_id

        return await self.db.transaction(insert)

    async def add_key(self, user_id: int, quota_nanos: int = 0) -> int:
        n = next(_names)

        def insert(conn: Any) -> int:
            return conn.execute(schema.api_keys.insert().values(
                user_id=user_id, name=f"k{n}", key_hash=f"{n:064d}", key_prefix="sk-",
                quota_limit_nanos=quota_nanos, created_at=NOW, updated_at=NOW)
            ).inserted_primary_key[0]

        return await self.db.transaction(insert)

    async def balance(self, user_id: int) -> int:
        return await self.db.transaction(lambda conn: conn.execute(
            select(schema.users.c.balance_nanos).where(schema.users.c.id == user_id)).scalar())

    async def set_balance(self, user_id: int, balance_nanos: int) -> None:
        def run(conn: Any) -> None:
            users = schema.users
            before = conn.execute(select(users.c.balance_nanos)
                                  .where(users.c.id == user_id)).scalar_one()
            conn.execute(update(users).where(users.c.id == user_id)
                         .values(balance_nanos=balance_nanos))
            _fund(conn, user_id, balance_nanos, int(before))

        await self.db.transaction(run)

    async def key_row(self, key_id: int) -> dict[str, Any]:
        return await self.db.transaction(lambda conn: dict(conn.execute(
            select(schema.api_keys).where(schema.api_keys.c.id == key_id)).mappings().one()))

    async def ledger(self, user_id: int) -> list[dict[str, Any]]:
        """The user's ledger rows the code under test wrote (the test's funding left out)."""
        return await self.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.ledger).where(schema.ledger.c.user_id == user_id,
                                        schema.ledger.c.kind != FUNDING)
            .order_by(schema.ledger.c.id)).mappings()])

    async def verify_ledger(self) -> None:
        """``lockgate-admin verify-ledger``'s check: nothing differs from the recomputation."""
        differences = await self.db.transaction(audit)
        assert differences == [], "\n".join(str(d) for d in differences)

    async def logs(self) -> list[dict[str, Any]]:
        return await self.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.usage_logs).order_by(schema.usage_logs.c.id)).mappings()])

    async def count(self, table: Any) -> int:
        """Rows of ``table`` (of the ledger: those the code under test wrote)."""
        query = select(func.count()).select_from(table)
        if table is schema.ledger:
            query = query.where(schema.ledger.c.kind != FUNDING)
        return await self.db.transaction(lambda conn: conn.execute(query).scalar_one())
