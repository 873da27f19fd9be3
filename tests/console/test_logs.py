"""``GET/DELETE /api/logs`` and ``GET /api/user/logs``: filters, aliases, dual mode, scoping."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from gateway.store import schema, usage_queries, usage_rollups
from gateway.store.usage_queries import LogFilter
from tests.support.app import AppTestCase

_request_ids = itertools.count(1)
#: the test clock's start (tests.support.app.AppTestCase.start_time): 2027-01-15T08:00:00Z
NOW = datetime.fromtimestamp(1_800_000_000, UTC)


def log_row(user_id: int, created_at: datetime, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "request_id": f"req-{next(_request_ids)}", "user_id": user_id,
        "model_name": "gpt-4o", "created_at": created_at, "cost_nanos": 1_000_000,
    }
    row.update(fields)
    return row


async def insert_logs(ctx: Any, rows: list[dict[str, Any]]) -> None:
    def write(conn: Any) -> None:
        for row in rows:
            conn.execute(schema.usage_logs.insert().values(**row))
        usage_rollups.add_logged(conn, rows)  # what settlement does with the rows it logs

    await ctx.db.transaction(write)


async def count_logs(ctx: Any) -> int:
    def read(conn: Any) -> int:
        return conn.execute(select(func.count()).select_from(schema.usage_logs)).scalar_one()

    return await ctx.db.transaction(read)


class LogCase(AppTestCase):
    async def prepare(self) -> None:
        self.admin_token = await self.setup_admin()
        self.alice = await self.register("alice")
        self.bob = await self.register("bob")
        self.alice_id = self.alice["user"]["id"]
        self.bob_id = self.bob["user"]["id"]

    async def admin_get(self, query: str = "") -> Any:
        response = await self.call("GET", "/api/logs" + query, token=self.admin_token)
        self.assertEqual(response.status, 200, response)
        return response.json()


class AdminLogsTest(LogCase):
    async def test_plain_array_of_the_100_newest_without_parameters(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW - timedelta(minutes=i))
                                     for i in range(105)])
        body = await self.admin_get()
        self.assertIsInstance(body, list)
        self.assertEqual(len(body), 100)
        times = [item["created_at"] for item in body]
        self.assertEqual(times, sorted(times, reverse=True))
        self.assertEqual(body[0]["created_at"], "2027-01-15T08:00:00Z")

    async def test_envelope_and_pagination(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW - timedelta(minutes=i))
                                     for i in range(45)])
        page2 = await self.admin_get("?page=2")
        self.assertEqual((page2["total"], page2["page"], page2["page_size"]), (45, 2, 20))
        self.assertEqual(len(page2["items"]), 20)
        first = await self.admin_get("?page=1&page_size=20")
        self.assertTrue(first["items"][-1]["created_at"] > page2["items"][0]["created_at"])
        clamped = await self.admin_get("?page_size=500")
        self.assertEqual((clamped["page_size"], len(clamped["items"])), (100, 45))
        bad = await self.admin_get("?page=abc&page_size=-3")
        self.assertEqual((bad["page"], bad["page_size"]), (1, 20))
        empty = await self.admin_get("?page=9")
        self.assertEqual((empty["items"], empty["total"]), ([], 45))

    async def test_id_filters_and_user_id(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [
            log_row(self.alice_id, NOW, api_key_id=7, channel_id=3, user_channel_id=2),
            log_row(self.alice_id, NOW, api_key_id=8, channel_id=4, user_channel_id=2),
            log_row(self.bob_id, NOW, api_key_id=9, channel_id=3, user_channel_id=5),
        ])
        self.assertEqual((await self.admin_get(f"?user_id={self.bob_id}"))["total"], 1)
        self.assertEqual((await self.admin_get("?api_key_id=8"))["total"], 1)
        self.assertEqual((await self.admin_get("?channel_id=3"))["total"], 2)
        self.assertEqual((await self.admin_get("?user_channel_id=2"))["total"], 2)
        both = await self.admin_get(f"?channel_id=3&user_id={self.alice_id}")
        self.assertEqual([i["api_key_id"] for i in both["items"]], [7])
        response = await self.call("GET", "/api/logs?api_key_id=x", token=self.admin_token)
        self.assertEqual(response.status, 400)
        self.assertEqual(response.json()["field"], "api_key_id")

    async def test_model_filter_is_a_case_insensitive_substring(self) -> None:
        await self.prepare()
        names = ["gpt-4o", "openai/GPT-4o-mini", "claude-3", "gemini-pro", "gpt-4o"]
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW - timedelta(seconds=i),
                                             model_name=name) for i, name in enumerate(names)])
        gpt = await self.admin_get("?model=GPT")
        self.assertEqual(gpt["total"], 3)
        self.assertEqual({i["model_name"] for i in gpt["items"]},
                         {"gpt-4o", "openai/GPT-4o-mini"})
        self.assertEqual((await self.admin_get("?model_name=4o-MINI"))["total"], 1)
        self.assertEqual((await self.admin_get("?model=gemini"))["total"], 1)
        nothing = await self.admin_get("?model=llama")
        self.assertEqual((nothing["items"], nothing["total"]), ([], 0))
        # LIKE wildcards in the needle are literal characters
        self.assertEqual((await self.admin_get("?model=%25"))["total"], 0)

    async def test_time_filters_and_aliases(self) -> None:
        await self.prepare()
        day = datetime(2027, 1, 10).astimezone()  # server-local midnight
        await insert_logs(self.ctx, [
            log_row(self.alice_id, day - timedelta(seconds=1), model_name="before"),
            log_row(self.alice_id, day, model_name="start"),
            log_row(self.alice_id, day + timedelta(hours=23, minutes=59), model_name="late"),
            log_row(self.alice_id, day + timedelta(days=1), model_name="next"),
        ])

        async def names(query: str) -> set[str]:
            return {i["model_name"] for i in (await self.admin_get(query))["items"]}

        self.assertEqual(await names("?from=2027-01-10&to=2027-01-10"), {"start", "late"})
        self.assertEqual(await names("?start_date=2027-01-10&end_date=2027-01-10"),
                         {"start", "late"})
        self.assertEqual(await names("?start_time=2027-01-11"), {"next"})
        utc_start = day.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.assertEqual(await names(f"?from={utc_start}&end_time={utc_start}"), {"start"})
        self.assertEqual(await names(f"?to={utc_start.replace('Z', '.000001Z')}"),
                         {"before", "start"})
        local = (day + timedelta(hours=23, minutes=59)).strftime("%Y-%m-%dT%H:%M")
        self.assertEqual(await names(f"?from={local}"), {"late", "next"})
        for bad in ("yesterday", "2027-13-01", "2027-01-10T25:00", "1736000000"):
            response = await self.call("GET", f"/api/logs?from={bad}", token=self.admin_token)
            self.assertEqual(response.status, 400, bad)
            self.assertEqual(response.json()["error"], "invalid time format")

    async def test_record_shape(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [log_row(
            self.alice_id, NOW, api_key_id=3, input_tokens=100, output_tokens=20,
            base_cost_nanos=1_500_000_000, group_multiplier_nanos=2_000_000_000,
            user_channel_multiplier_nanos=1_000_000_000, cost_nanos=3_000_000_000,
            prices={"input_price": "0.3", "output_price": "1.25", "quota_type": 0},
            pricing_formula="x", status=0, ip="203.0.113.9", user_agent="sdk/1")])
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW - timedelta(seconds=1),
                                             status=502, error_message="upstream failed")])
        items = (await self.admin_get("?page=1"))["items"]
        ok, failed = items
        self.assertEqual((ok["cost"], ok["base_cost"], ok["group_multiplier"]), ("3", "1.5", "2"))
        self.assertEqual((ok["input_price"], ok["output_price"], ok["cached_input_price"]),
                         ("0.3", "1.25", "0"))
        self.assertEqual((ok["input_tokens"], ok["output_tokens"], ok["api_key_id"]), (100, 20, 3))
        self.assertNotIn("error_message", ok)
        self.assertEqual((failed["status"], failed["error_message"]), (502, "upstream failed"))

    async def test_admin_only(self) -> None:
        await self.prepare()
        response = await self.call("GET", "/api/logs", token=self.alice["token"])
        self.assertEqual(response.status, 403)
        self.assertEqual((await self.call("GET", "/api/logs")).status, 401)

    async def test_like_fallback_when_names_are_too_many_to_walk(self) -> None:
        await self.prepare()
        self.patch(usage_queries, "DISTINCT_NAME_PROBES", 2)
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW, model_name=name)
                                     for name in ("a-one", "B_two", "c-ONE", "d_one")])
        result = await self.ctx.db.transaction(usage_queries.list_logs,
                                               LogFilter(model="one"), limit=10)
        self.assertEqual(result["total"], 3)
        result = await self.ctx.db.transaction(usage_queries.list_logs,
                                               LogFilter(model="_"), limit=10)
        self.assertEqual({r["model_name"] for r in result["items"]}, {"B_two", "d_one"})


class UserLogsTest(LogCase):
    async def test_scoped_to_the_caller(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW, api_key_id=1),
                                     log_row(self.bob_id, NOW, api_key_id=2),
                                     log_row(self.alice_id, NOW - timedelta(hours=1))])
        response = await self.call("GET", "/api/user/logs", token=self.alice["token"])
        self.assertEqual(response.status, 200)
        self.assertEqual({i["user_id"] for i in response.json()}, {self.alice_id})
        self.assertEqual(len(response.json()), 2)
        spoof = await self.call("GET", f"/api/user/logs?user_id={self.bob_id}",
                                token=self.alice["token"])
        self.assertIsInstance(spoof.json(), list)  # user_id is not a user filter
        self.assertEqual({i["user_id"] for i in spoof.json()}, {self.alice_id})
        other_key = await self.call("GET", "/api/user/logs?api_key_id=2",
                                    token=self.alice["token"])
        self.assertEqual(other_key.json()["total"], 0)
        self.assertEqual((await self.call("GET", "/api/user/logs")).status, 401)


class DeleteLogsTest(LogCase):
    async def test_delete_removes_every_row(self) -> None:
        await self.prepare()
        await insert_logs(self.ctx, [log_row(self.alice_id, NOW - timedelta(days=i))
                                     for i in range(5)])

        def add_checks(conn: Any) -> int:
            monitor = conn.execute(schema.status_monitors.insert().values(
                name="gw", target_url="https://gw.example", created_at=NOW,
                updated_at=NOW)).inserted_primary_key[0]
            for status in ("up", "down"):
                conn.execute(schema.status_checks.insert().values(
                    monitor_id=monitor, status=status, checked_at=NOW))
            return conn.execute(select(func.count()).select_from(
                schema.status_checks)).scalar_one()

        self.assertEqual(await self.ctx.db.transaction(add_checks), 2)
        refused = await self.call("DELETE", "/api/logs", token=self.alice["token"])
        self.assertEqual(refused.status, 403)
        self.assertEqual(await count_logs(self.ctx), 5)
        response = await self.call("DELETE", "/api/logs", token=self.admin_token)
        self.assertEqual((response.status, response.json()), (200, {"deleted": 7}))
        self.assertEqual(await count_logs(self.ctx), 0)

        def monitors_and_checks(conn: Any) -> tuple[int, int]:
            count = func.count()
            return (conn.execute(select(count).select_from(schema.status_monitors)).scalar_one(),
                    conn.execute(select(count).select_from(schema.status_checks)).scalar_one())

        # the monitors stay; only their check history (a log) goes
        self.assertEqual(await self.ctx.db.transaction(monitors_and_checks), (1, 0))
        again = await self.call("DELETE", "/api/logs", token=self.admin_token)
        self.assertEqual(again.json(), {"deleted": 0})


class DeleteLogsPostgresTest(DeleteLogsTest):
    backend = "postgresql"


class AdminLogsPostgresTest(AdminLogsTest):
    backend = "postgresql"
