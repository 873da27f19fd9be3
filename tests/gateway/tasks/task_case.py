"""A running Lockgate with a fake task upstream, a quota-type-100 video model and helpers.

``drive(seconds)`` advances the test Clock one poll interval at a time and waits for each
poller round to finish (the upstream and the database are real, so rounds take real time).
``assert_reconciled()`` checks that the ledger explains the balance and every task's money.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import select

from gateway.billing.money import to_nanos
from gateway.store import schema
from tests.gateway.gateway_case import FUNDING, GatewayTestCase
from tests.support.upstream_tasks import FakeTaskUpstream

VIDEO_CONFIG = {"resolutions": [
    {"resolution": "720p", "durations": [{"seconds": 5, "price": "0.3"},
                                         {"seconds": 10, "price": "0.5"}]},
    {"resolution": "1080p", "duration_unit_price": "0.1"},
    {"resolution": "16:9", "durations": [{"seconds": 5, "price": "0.3"}]},
]}
VIDEO_BODY = {"model": "video-1", "prompt": "a cat surfing", "resolution": "720p",
              "duration": 5}


def nanos(amount: str) -> int:
    return to_nanos(Decimal(amount))


class TaskTestCase(GatewayTestCase):
    interval = 5.0

    def setUp(self) -> None:
        super().setUp()
        self.up = FakeTaskUpstream.start(self.clock)
        self.addCleanup(self.up.stop)

    @property
    def poller(self) -> Any:
        return self.app.tasks

    async def provision_video(self, *, channel_type: str = "compat-video",
                              balance: str = "10") -> None:
        await self.provision(balance=balance, model="video-1", channel_type=channel_type,
                             upstream_model="up-video")
        await self.catalog.set(schema.channels, self.channel_id, base_url=self.up.base_url)
        await self.catalog.set(schema.models, self.model_id, quota_type=100,
                               video_billing_config=VIDEO_CONFIG)
        self.start_balance = await self.balance_nanos(self.user_id)
        self.poller.interval = self.interval

    async def submit(self, body: dict[str, Any] | None = None,
                     path: str = "/v1/video/generations", key: str | None = None) -> Any:
        return await self.call("POST", path, body or VIDEO_BODY,
                               headers={"Authorization": f"Bearer {key or self.api_key}"})

    async def get(self, path: str, key: str | None = None) -> Any:
        return await self.call("GET", path,
                               headers={"Authorization": f"Bearer {key or self.api_key}"})

    async def drive(self, seconds: float, poller: Any = None) -> None:
        poller = poller or self.poller
        await poller.idle()
        elapsed = 0.0
        while elapsed < seconds:
            self.clock.advance(self.interval)
            elapsed += self.interval
            await poller.idle()

    async def task_row(self, task_id: str) -> dict[str, Any]:
        return await self.ctx.db.transaction(lambda conn: dict(conn.execute(
            select(schema.tasks).where(schema.tasks.c.id == task_id)).mappings().one()))

    async def ledger_rows(self) -> list[dict[str, Any]]:
        await self.gateway.settler.flush()
        return await self.ctx.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.ledger).where(schema.ledger.c.user_id == self.user_id,
                                        schema.ledger.c.kind != FUNDING)
            .order_by(schema.ledger.c.id)).mappings()])

    async def all_tasks(self) -> list[dict[str, Any]]:
        return await self.ctx.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.tasks).order_by(schema.tasks.c.created_at)).mappings()])

    async def assert_reconciled(self) -> None:
        """Ledger sum == balance change; per task: one charge, a refund only when failed."""
        balance = await self.balance_nanos(self.user_id)
        rows = await self.ledger_rows()
        assert self.start_balance + sum(r["amount_nanos"] for r in rows) == balance
        by_ref: dict[tuple[str, str], int] = {}
        for row in rows:
            key = (row["kind"], row["ref"])
            assert key not in by_ref, f"two ledger rows for {key}"
            by_ref[key] = row["amount_nanos"]
        for task in await self.all_tasks():
            assert by_ref.get(("charge", task["id"])) == -task["charged_nanos"], task["id"]
            refund = by_ref.get(("task_refund", task["id"]))
            if task["status"] in ("failed", "cancelled", "expired"):
                assert task["billing_state"] == "refunded"
                assert refund == task["charged_nanos"] == task["refunded_nanos"]
            else:
                assert refund is None
                assert task["refunded_nanos"] == 0
