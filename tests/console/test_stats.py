"""``GET /api/stats``, ``GET /api/user/stats`` and ``GET /api/channel-usage``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from gateway.store import schema
from tests.console.test_logs import NOW, insert_logs, log_row
from tests.support.app import AppTestCase

NANO = 1_000_000_000


class StatsCase(AppTestCase):
    async def prepare(self) -> None:
        self.admin_token = await self.setup_admin()
        self.alice = await self.register("alice")
        self.alice_id = self.alice["user"]["id"]

    async def add_order(self, status: str, amount_nanos: int, number: str) -> None:
        def write(conn: Any) -> None:
            conn.execute(schema.orders.insert().values(
                order_no=number, user_id=self.alice_id, amount_nanos=amount_nanos,
                local_amount_nanos=amount_nanos, method="alipay", provider="epay",
                status=status, expires_at=NOW, created_at=NOW, updated_at=NOW))

        await self.ctx.db.transaction(write)

    async def admin_api(self, method: str, path: str, payload: Any = None) -> Any:
        response = await self.call(method, path, payload, token=self.admin_token)
        self.assertIn(response.status, (200, 201), response)
        return response.json()


class AdminStatsTest(StatsCase):
    async def test_counts_money_revenue_and_trend(self) -> None:
        await self.prepare()
        midnight = NOW.replace(hour=0, minute=0)
        await insert_logs(self.ctx, [
            log_row(self.alice_id, NOW, cost_nanos=NANO // 2),
            log_row(self.alice_id, midnight, cost_nanos=NANO),
            log_row(self.alice_id, midnight - timedelta(seconds=1), cost_nanos=2 * NANO),
            log_row(self.alice_id, NOW - timedelta(days=6), cost_nanos=NANO // 4),
            log_row(self.alice_id, NOW - timedelta(days=30), cost_nanos=NANO),
        ])
        await self.add_order("paid", 10 * NANO, "o1")
        await self.add_order("paid", NANO // 10, "o2")
        await self.add_order("pending", 99 * NANO, "o3")
        await self.add_order("expired", 5 * NANO, "o4")
        stats = await self.admin_api("GET", "/api/stats")
        self.assertEqual(stats["users"], 2)
        self.assertEqual(stats["channels"], 0)
        self.assertEqual(stats["total_requests"], 5)
        self.assertEqual(stats["total_cost"], "4.75")
        self.assertEqual(stats["today_requests"], 2)
        self.assertEqual(stats["today_cost"], "1.5")
        self.assertEqual(stats["revenue"], "10.1")
        trend = stats["trend"]
        self.assertEqual([d["date"] for d in trend][-2:], ["2027-01-14", "2027-01-15"])
        self.assertEqual(len(trend), 7)
        self.assertEqual(trend[-1], {"date": "2027-01-15", "requests": 2, "cost": "1.5"})
        self.assertEqual(trend[-2], {"date": "2027-01-14", "requests": 1, "cost": "2"})
        self.assertEqual(trend[0], {"date": "2027-01-09", "requests": 1, "cost": "0.25"})

    async def test_admin_only(self) -> None:
        await self.prepare()
        response = await self.call("GET", "/api/stats", token=self.alice["token"])
        self.assertEqual(response.status, 403)


class UserStatsTest(StatsCase):
    async def test_own_numbers_rate_and_group(self) -> None:
        await self.prepare()
        bob = await self.register("bob")
        await insert_logs(self.ctx, [
            log_row(self.alice_id, NOW - timedelta(seconds=10), input_tokens=100,
                    output_tokens=50, cost_nanos=NANO),
            log_row(self.alice_id, NOW - timedelta(seconds=59), input_tokens=10,
                    output_tokens=5, cost_nanos=NANO),
            log_row(self.alice_id, NOW - timedelta(minutes=5), input_tokens=1000,
                    cost_nanos=NANO),
            log_row(self.alice_id, NOW - timedelta(days=2), cost_nanos=NANO),
            log_row(bob["user"]["id"], NOW, cost_nanos=7 * NANO),
        ])
        response = await self.call("GET", "/api/user/stats", token=self.alice["token"])
        self.assertEqual(response.status, 200, response)
        stats = response.json()
        self.assertEqual(stats["balance"], self.alice["user"]["balance"])
        self.assertEqual(stats["group"]["id"], self.alice["user"]["group_id"])
        self.assertEqual((stats["total_requests"], stats["today_requests"]), (4, 3))
        self.assertEqual(stats["total_cost"], "4")
        self.assertEqual((stats["rpm"], stats["tpm"]), (2, 165))
        self.assertEqual(stats["trend"][-1], {"date": "2027-01-15", "requests": 3, "cost": "3"})
        self.assertEqual(stats["trend"][-3]["requests"], 1)
        self.assertEqual((await self.call("GET", "/api/user/stats")).status, 401)


class ChannelUsageTest(StatsCase):
    async def test_totals_per_user_channel_and_upstream(self) -> None:
        await self.prepare()
        standard = await self.admin_api("POST", "/api/user-channels", {"name": "standard"})
        budget = await self.admin_api("POST", "/api/user-channels",
                                      {"name": "budget", "multiplier": "0.5"})
        up_a = await self.admin_api("POST", "/api/channels", {
            "name": "up-a", "type": "compat", "base_url": "https://a.example",
            "user_channel_id": standard["id"], "priority": 10})
        up_b = await self.admin_api("POST", "/api/channels", {
            "name": "up-b", "type": "compat", "base_url": "https://b.example",
            "user_channel_id": standard["id"], "priority": 20})
        await insert_logs(self.ctx, [
            log_row(self.alice_id, NOW, user_channel_id=standard["id"], channel_id=up_a["id"],
                    input_tokens=10, output_tokens=5, cached_input_tokens=2, cost_nanos=NANO),
            log_row(self.alice_id, NOW - timedelta(days=3), user_channel_id=standard["id"],
                    channel_id=up_a["id"], input_tokens=1, output_tokens=1, cost_nanos=NANO),
            log_row(self.alice_id, NOW, user_channel_id=standard["id"], channel_id=up_b["id"],
                    input_tokens=4, cost_nanos=NANO // 2),
        ])
        usage = await self.admin_api("GET", "/api/channel-usage")
        self.assertEqual([u["name"] for u in usage["user_channels"]], ["budget", "standard"])
        by_name = {u["name"]: u for u in usage["user_channels"]}
        self.assertEqual(by_name["budget"]["request_count"], 0)
        self.assertEqual(by_name["budget"]["multiplier"], "0.5")
        self.assertEqual(budget["id"], by_name["budget"]["id"])
        std = by_name["standard"]
        self.assertEqual((std["request_count"], std["input_tokens"], std["output_tokens"],
                          std["cached_input_tokens"], std["total_tokens"], std["total_cost"]),
                         (3, 15, 6, 2, 21, "2.5"))
        self.assertEqual([c["name"] for c in usage["upstream_channels"]], ["up-b", "up-a"])
        a = usage["upstream_channels"][1]
        self.assertEqual((a["request_count"], a["total_tokens"], a["total_cost"],
                          a["user_channel_name"]), (2, 17, "2", "standard"))
        recent = await self.admin_api("GET", "/api/channel-usage?from=2027-01-14")
        self.assertEqual(recent["upstream_channels"][1]["request_count"], 1)
        bad = await self.call("GET", "/api/channel-usage?to=soon", token=self.admin_token)
        self.assertEqual(bad.status, 400)
        denied = await self.call("GET", "/api/channel-usage", token=self.alice["token"])
        self.assertEqual(denied.status, 403)


class AdminStatsPostgresTest(AdminStatsTest):
    backend = "postgresql"
