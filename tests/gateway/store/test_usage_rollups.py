"""The hourly usage rollups stay equal to the raw usage rows, whatever settles and is removed.

A mixed workload through the real settler on a real database (SQLite file, and PostgreSQL):
charges, a wallet floored at zero, refusals (wallet and key quota), failed calls logged at no
cost, repeats of a request id, an async task charged then refunded, rows in several hours and
without channels, two settlers (two processes) writing into the same database, then retention
and ``DELETE /api/logs``.  After each step the rollups are recomputed from the raw rows
(``usage_rollups.differences``) and the stats reads are compared with sums over the raw rows
for bounds that do and do not fall on whole hours.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal as D
from typing import Any

from alembic import command
from sqlalchemy import and_, func, select, true
from twisted.internet import reactor

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementRecord, Settler
from gateway.ledger.wallet import Wallets
from gateway.store import migrate, schema, usage_rollups
from gateway.store import tasks as task_store
from gateway.store.pool import DBRunner, make_engine
from gateway.store.usage_queries import (
    LogFilter,
    admin_stats,
    channel_usage,
    delete_all_logs,
    delete_usage_before,
    list_logs,
    user_stats,
)
from tests.gateway.billing.ledger_case import NOW, UNIT, LedgerCase

logs = schema.usage_logs


def record(request_id: str, user_id: int, key_id: int | None = None, *, units: int = 1,
           minutes: float = 0, **fields: Any) -> SettlementRecord:
    """A call costing ``units`` units with ``units`` input and 2 output tokens, logged
    ``minutes`` after NOW (None-created records take the settler's clock)."""
    usage = Usage(input=units, output=2, cache_read=1)
    cost = compute_cost(usage, PriceSet(input=D(1_000_000)))
    fields.setdefault("model_name", f"Model-{request_id[0]}")
    return SettlementRecord(request_id=request_id, user_id=user_id, api_key_id=key_id,
                            cost=cost, usage=usage, created_at=NOW + timedelta(minutes=minutes),
                            **fields)


def raw_totals(conn: Any, *conditions: Any) -> tuple[int, int]:
    row = conn.execute(select(func.count(), func.coalesce(func.sum(logs.c.cost_nanos), 0))
                       .where(and_(true(), *conditions))).one()
    return int(row[0]), int(row[1])


def raw_pairs(conn: Any, *conditions: Any) -> dict[int, tuple[int, ...]]:
    """Raw sums per upstream channel: requests, input, output, cached, cost."""
    return {int(r[0]): tuple(int(v) for v in r[1:]) for r in conn.execute(
        select(logs.c.channel_id, func.count(), func.sum(logs.c.input_tokens),
               func.sum(logs.c.output_tokens), func.sum(logs.c.cached_input_tokens),
               func.sum(logs.c.cost_nanos))
        .where(logs.c.channel_id.is_not(None), *conditions).group_by(logs.c.channel_id))}


class UsageRollupTests(LedgerCase):
    async def differences(self) -> list[str]:
        return await self.db.transaction(usage_rollups.differences)

    async def assert_reconciled(self) -> None:
        differences = await self.differences()
        assert differences == [], "\n".join(differences)

    async def add_channels(self) -> list[int]:
        def insert(conn: Any) -> list[int]:
            uc = conn.execute(schema.user_channels.insert().values(
                name="uc", created_at=NOW, updated_at=NOW)).inserted_primary_key[0]
            return [conn.execute(schema.channels.insert().values(
                name=f"ch{n}", type="openai", base_url="http://127.0.0.1:1", api_key="k",
                user_channel_id=uc, created_at=NOW, updated_at=NOW)).inserted_primary_key[0]
                for n in range(2)]

        return await self.db.transaction(insert)

    async def workload(self) -> dict[str, Any]:
        rich = await self.add_user(1000 * UNIT)
        poor = await self.add_user(2 * UNIT)
        capped = await self.add_user(1000 * UNIT)
        cap_key = await self.add_key(capped, quota_nanos=3 * UNIT)
        key = await self.add_key(rich)
        ch1, ch2 = await self.add_channels()
        uc = await self.db.transaction(lambda conn: conn.execute(
            select(schema.channels.c.user_channel_id).where(schema.channels.c.id == ch1)
        ).scalar_one())
        where = {"user_channel_id": uc}
        settle = self.settler.settle
        outcomes = [
            settle(None, record("a1", rich, key, units=3, channel_id=ch1, **where)),
            settle(None, record("a2", rich, key, units=5, minutes=70, channel_id=ch2, **where)),
            settle(None, record("a3", rich, None, units=7, minutes=130)),  # no channel at all
            # the day before and the day after
            settle(None, record("d1", rich, key, units=2, minutes=-1500, channel_id=ch1,
                                **where)),
            settle(None, record("d2", rich, key, units=4, minutes=1500, channel_id=ch2,
                                **where)),
            # delivered stream beyond the wallet: floored, charged 2 of 9 units
            settle(None, record("p1", poor, units=9, minutes=5, delivered=True, channel_id=ch1,
                                **where)),
            # undelivered and unaffordable: refused, logged at no cost (402)
            settle(None, record("p2", poor, units=9, minutes=6, delivered=False, channel_id=ch1,
                                **where)),
            # the key quota refuses the second one
            settle(None, record("c1", capped, cap_key, units=2, minutes=61, delivered=False,
                                channel_id=ch2, **where)),
            settle(None, record("c2", capped, cap_key, units=2, minutes=62, delivered=False,
                                channel_id=ch2, **where)),
            # a failed call: no cost, still a usage row
            settle(None, SettlementRecord(request_id="f1", user_id=rich, api_key_id=key,
                                          status=502, error_message="upstream failed",
                                          channel_id=ch1, user_channel_id=uc,
                                          created_at=NOW + timedelta(minutes=179))),
            # created_at left to the settler's clock
            settle(None, SettlementRecord(request_id="n1", user_id=rich, cost=record(
                "x", rich, units=4).cost, usage=Usage(input=4, output=2), channel_id=ch2,
                user_channel_id=uc)),
        ]
        # a repeat of a settled id is not applied again
        outcomes.append(settle(None, record("a1", rich, key, units=3, channel_id=ch1, **where)))
        await self.settler.flush()
        for outcome in outcomes:
            await outcome
        again = self.settler.settle(None, record("a2", rich, key, units=5, minutes=70,
                                                 channel_id=ch2, **where))
        await self.settler.flush()
        await again
        # an async task: charged at submit (a usage row), refunded when it fails
        charge = {**record("task-1", rich, key, units=6, minutes=90, channel_id=ch1,
                           **where).row(), "endpoint": "/v1/videos"}
        await self.db.transaction(task_store.create, {
            "id": "vtask_1", "user_id": rich, "api_key_id": key, "family": "video",
            "kind": "video", "model_name": "m", "status": "queued", "cost_nanos": 6 * UNIT,
            "expires_at": NOW + timedelta(days=1)},
            charge, NOW)
        await self.db.transaction(task_store.finish, "vtask_1", "failed", "boom", NOW)
        return {"rich": rich, "poor": poor, "capped": capped, "channels": (ch1, ch2), "uc": uc}

    async def test_rollups_equal_the_raw_rows_after_a_mixed_workload(self) -> None:
        await self.workload()
        await self.assert_reconciled()
        await self.verify_ledger()
        counts = await self.db.transaction(lambda conn: (
            conn.execute(select(func.count()).select_from(logs)).scalar_one(),
            conn.execute(select(func.sum(usage_rollups.channel_hours.c.requests))).scalar_one(),
            conn.execute(select(func.count()).select_from(usage_rollups.user_hours)
                         ).scalar_one()))
        assert counts[0] == counts[1] == 12  # 11 settled ids + the task's charge
        assert counts[2] >= 5  # several hours and users, not one row

    async def test_two_settlers_sharing_the_database_stay_exact(self) -> None:
        """Two processes settling into one database (``--workers``, a PostgreSQL fleet) add to
        the same rollup rows; the sums stay exact."""
        engine, threads = make_engine(str(self.db.engine.url.render_as_string(
            hide_password=False)))
        other_db = DBRunner(reactor, engine, threads)
        other_db.start()
        self.addCleanup(other_db.stop)
        other = Settler(other_db, self.clock, Wallets(other_db))
        user = await self.add_user(1000 * UNIT)
        ch1, ch2 = await self.add_channels()
        pending = []
        for n in range(40):
            settler = self.settler if n % 2 else other
            pending.append(settler.settle(None, record(
                f"w{n}", user, units=1 + n % 3, minutes=n % 3, channel_id=(ch1, ch2)[n % 2])))
        await self.settler.flush()
        await other.flush()
        for outcome in pending:
            await outcome
        await self.assert_reconciled()
        stats = await self.db.transaction(user_stats, user, NOW, NOW, [])
        assert stats["total_requests"] == 40

    async def test_stats_reads_equal_sums_over_the_raw_rows(self) -> None:
        seeded = await self.workload()
        rich, (ch1, ch2) = seeded["rich"], seeded["channels"]
        day_start = NOW.replace(hour=0)
        days = [("d", day_start, day_start + timedelta(days=1)),
                ("odd", NOW + timedelta(minutes=30), NOW + timedelta(minutes=100))]
        admin = await self.db.transaction(admin_stats, NOW + timedelta(minutes=1), days)
        mine = await self.db.transaction(user_stats, rich, NOW + timedelta(minutes=61),
                                         NOW + timedelta(minutes=100), days)

        def expected(conn: Any) -> dict[str, Any]:
            def window(start: Any, end: Any, *more: Any) -> tuple[int, int]:
                return raw_totals(conn, logs.c.created_at >= start, logs.c.created_at < end,
                                  *more)

            return {
                "all": raw_totals(conn),
                "today": raw_totals(conn, logs.c.created_at >= NOW + timedelta(minutes=1)),
                "days": [window(s, e) for _, s, e in days],
                "mine": raw_totals(conn, logs.c.user_id == rich),
                "mine_today": raw_totals(conn, logs.c.user_id == rich,
                                         logs.c.created_at >= NOW + timedelta(minutes=61)),
                "mine_days": [window(s, e, logs.c.user_id == rich) for _, s, e in days],
            }

        want = await self.db.transaction(expected)
        assert (admin["total_requests"], admin["total_cost_nanos"]) == want["all"]
        assert (admin["today_requests"], admin["today_cost_nanos"]) == want["today"]
        assert [(d["requests"], d["cost_nanos"]) for d in admin["trend"]] == want["days"]
        assert (mine["total_requests"], mine["total_cost_nanos"]) == want["mine"]
        assert mine["today_requests"] == want["mine_today"][0]
        assert [(d["requests"], d["cost_nanos"]) for d in mine["trend"]] == want["mine_days"]
        assert want["days"][1][0] > 0 and want["all"][1] > 0  # the odd window is not empty
        for start, end in ((None, None), (NOW + timedelta(minutes=3), None),
                           (NOW + timedelta(minutes=3), NOW + timedelta(minutes=75)),
                           (NOW + timedelta(minutes=61), NOW + timedelta(minutes=62)),
                           (NOW - timedelta(days=1, minutes=-17), NOW + timedelta(days=1, minutes=3)),
                           (None, NOW + timedelta(days=1, minutes=3)),
                           (NOW - timedelta(days=2), NOW + timedelta(days=2))):
            usage = await self.db.transaction(channel_usage, start, end)
            conditions = [c for c in (None if start is None else logs.c.created_at >= start,
                                      None if end is None else logs.c.created_at < end)
                          if c is not None]
            raw = await self.db.transaction(raw_pairs, *conditions)
            got = {cid: (u["request_count"], u["input_tokens"], u["output_tokens"],
                         u["cached_input_tokens"], u["cost_nanos"])
                   for cid, u in usage["by_channel"].items() if cid in (ch1, ch2)}
            assert got == raw, (start, end)

    async def test_log_totals_equal_counts_of_the_raw_rows(self) -> None:
        """``/api/logs`` totals answered from the rollups equal the raw counts."""
        seeded = await self.workload()
        rich, (ch1, _ch2), uc = seeded["rich"], seeded["channels"], seeded["uc"]
        odd = (NOW - timedelta(days=1, minutes=-17), NOW + timedelta(minutes=75))
        filters = [LogFilter(), LogFilter(start=odd[0]), LogFilter(end=odd[1]),
                   LogFilter(start=odd[0], end=odd[1]), LogFilter(user_id=rich),
                   LogFilter(user_id=rich, start=odd[0], end=odd[1]),
                   LogFilter(channel_id=ch1), LogFilter(user_channel_id=uc, start=odd[0]),
                   LogFilter(channel_id=ch1, user_channel_id=uc, end=odd[1]),
                   LogFilter(user_id=rich, channel_id=ch1), LogFilter(model="zz"),
                   LogFilter(model="model-A"), LogFilter(model="odel", start=odd[0]),
                   LogFilter(model="-d", start=odd[0], end=odd[1]),
                   LogFilter(model="model", channel_id=ch1),
                   LogFilter(model="model-a", user_id=rich, end=odd[1])]
        for flt in filters:
            page = await self.db.transaction(list_logs, flt, limit=2)
            conditions = [c for c in (
                None if flt.user_id is None else logs.c.user_id == flt.user_id,
                None if flt.channel_id is None else logs.c.channel_id == flt.channel_id,
                None if flt.user_channel_id is None
                else logs.c.user_channel_id == flt.user_channel_id,
                None if flt.start is None else logs.c.created_at >= flt.start,
                None if flt.end is None else logs.c.created_at < flt.end,
                None if flt.model is None else func.lower(logs.c.model_name).contains(
                    flt.model.lower())) if c is not None]
            count, _ = await self.db.transaction(raw_totals, *conditions)
            assert page["total"] == count, flt
            assert flt.model != "odel" or count > 5  # the model filters do match rows

    async def test_retention_and_emptying_the_log_keep_the_rollups_exact(self) -> None:
        await self.workload()
        deleted = await self.db.transaction(delete_usage_before, NOW + timedelta(minutes=65), 2)
        assert deleted == 2
        await self.assert_reconciled()
        while await self.db.transaction(delete_usage_before, NOW + timedelta(minutes=65), 2):
            pass
        await self.assert_reconciled()
        remaining = await self.db.transaction(lambda conn: conn.execute(
            select(func.count()).select_from(logs)).scalar_one())
        assert remaining > 0
        await self.db.transaction(delete_all_logs)
        await self.assert_reconciled()
        rows = await self.db.transaction(lambda conn: conn.execute(
            select(func.count()).select_from(usage_rollups.channel_hours)).scalar_one())
        assert rows == 0

    async def test_a_rollup_row_off_by_one_nano_unit_is_reported(self) -> None:
        """The reconciliation can fail: it sees a single nano-unit of drift."""
        await self.workload()
        t = usage_rollups.user_hours
        await self.db.transaction(lambda conn: conn.execute(
            t.update().where(t.c.user_id == select(func.min(t.c.user_id)).scalar_subquery())
            .values(cost_nanos=t.c.cost_nanos + 1)))
        differences = await self.differences()
        assert len(differences) >= 1 and "user rollup" in differences[0]


class PostgresUsageRollupTests(UsageRollupTests):
    backend = "postgresql"


class BackfillTests(LedgerCase):
    """Migration 0010 fills the rollups from the usage rows logged before it."""

    def setUp(self) -> None:
        super().setUp()
        self.db.blocking(self._downgrade)

    def _downgrade(self, conn: Any) -> None:
        command.downgrade(migrate.alembic_config(conn), "0009")

    async def test_the_migration_backfills_exact_rollups(self) -> None:
        def fill(conn: Any) -> None:
            conn.execute(logs.insert(), [
                {"request_id": f"old-{n}", "user_id": 1 + n % 3,
                 "channel_id": None if n % 4 == 0 else n % 4,
                 "user_channel_id": None if n % 5 == 0 else 1,
                 "input_tokens": n, "output_tokens": 2 * n, "cached_input_tokens": n % 7,
                 "cost_nanos": 1_000_000_007 * n,
                 "created_at": NOW + timedelta(minutes=37 * n, microseconds=n)}
                for n in range(60)])

        await self.db.transaction(fill)
        await self.db.transaction(
            lambda conn: command.upgrade(migrate.alembic_config(conn), "head"))
        await self.assert_reconciled()
        rows = await self.db.transaction(lambda conn: conn.execute(
            select(func.count()).select_from(usage_rollups.user_hours)).scalar_one())
        assert rows > 30

    async def assert_reconciled(self) -> None:
        differences = await self.db.transaction(usage_rollups.differences)
        assert differences == [], "\n".join(differences)


class PostgresBackfillTests(BackfillTests):
    backend = "postgresql"
