"""§3.6 settlement of sandbox tasks on a real database: exact charges, once, delivered usage.

Each test runs on SQLite and (``...PostgresTests``) on a real PostgreSQL server.  Expected
figures come from the contract's formula computed independently (``contract_runtime_nanos``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.sandboxes.gate import (
    INSUFFICIENT_BALANCE,
    UNAVAILABLE,
    SandboxRefused,
    sandbox_gate,
)
from gateway.sandboxes.settlement import settle_sandbox_task
from gateway.store import schema, subscriptions
from tests.gateway.billing.test_sandbox_pricing import contract_runtime_nanos
from tests.gateway.sandboxes.sandbox_case import SANDBOXES, SandboxCase

UNIT = 1_000_000_000
PRICES = {"runtime_price_hour": "0.5", "cpu_price_hour": "0.12",
          "memory_price_gb_hour": "0.05", "runtime_multiplier": "1.5"}
#: 2 minutes of 0.25 core, 512 MB at PRICES
RUNTIME_NANOS = contract_runtime_nanos(Decimal(61), "0.5", "0.12", "0.05", "1.5", "0.25", 512)


class SettlementTests(SandboxCase):
    async def sandbox(self, storage: str = "0", **fields: Any) -> str:
        host_id, self.device_id = await self.add_host(storage_price_gb_hour=storage, **PRICES)
        body = {"cpu_cores": "0.25", "memory_mb": 512, "disk_gb": 10, **fields}
        return str((await self.create_sandbox(host_id, **body))["id"])

    async def settle(self, task_id: str, at: float) -> Any:
        return await settle_sandbox_task(self.ctx.db, self.ctx.invalidation, task_id,
                                         self.at(at))

    async def test_runtime_and_storage_to_the_nano_unit(self) -> None:
        await self.start()
        box = await self.sandbox(storage="0.002")
        task = await self.finished_task(box, self.at(100), self.at(161))
        settled = await self.settle(task, 1000)
        self.assertEqual(RUNTIME_NANOS, 27_750_000)
        # 1000 s of 10 GB at 0.002 per GB-hour = 0.00555...; rounded once, half-even
        storage_nanos = 5_555_556
        self.assertEqual(settled.wallet_nanos, RUNTIME_NANOS + storage_nanos)
        charges = await self.charges(box)
        self.assertEqual(
            [(c["kind"], c["reference"], c["quantity"], c["cost_nanos"]) for c in charges],
            [("runtime", f"task:{task}", "2", RUNTIME_NANOS),
             ("storage", f"storage:{box}:{self.at(1000):%Y-%m-%dT%H:%M:%S}.000000000Z",
              "0.277777778", storage_nanos)])
        self.assertEqual(orjson.loads(charges[0]["rate_snapshot"]), PRICES)
        self.assertEqual(orjson.loads(charges[1]["rate_snapshot"]),
                         {"storage_price_gb_hour": "0.002", "disk_gb": "10"})
        self.assertEqual(await self.balance(self.alice),
                         100 * UNIT - RUNTIME_NANOS - storage_nanos)
        ledger = await self.sandbox_ledger(self.alice)
        self.assertEqual([(r["kind"], r["ref"], r["amount_nanos"]) for r in ledger],
                         [("sandbox", c["reference"], -c["cost_nanos"]) for c in charges])
        shown = await self.call("GET", f"{SANDBOXES}/{box}", token=self.user_token)
        self.assertEqual(shown.json()["storage_charged_at"],
                         f"{self.at(1000):%Y-%m-%dT%H:%M:%S}.000000Z")
        await self.verify_ledger()

    async def test_a_retried_result_is_a_no_op(self) -> None:
        await self.start()
        box = await self.sandbox(storage="1")
        task = await self.finished_task(box, self.at(0), self.at(30))
        self.assertIsNotNone(await self.settle(task, 60))
        before = (await self.balance(self.alice), await self.charges(box))
        self.assertIsNone(await self.settle(task, 120))
        self.assertIsNone(await self.settle(task, 7200))
        self.assertEqual((await self.balance(self.alice), await self.charges(box)), before)
        await self.verify_ledger()

    async def test_concurrent_settlements_of_one_task_charge_once(self) -> None:
        await self.start()
        box = await self.sandbox(storage="0.5")
        task = await self.finished_task(box, self.at(0), self.at(90))
        results = await gatherResults([ensureDeferred(self.settle(task, 600)) for _ in range(8)])
        self.assertEqual(sum(r is not None for r in results), 1)
        charges = await self.charges(box)
        self.assertEqual([c["kind"] for c in charges], ["runtime", "storage"])
        self.assertEqual(await self.balance(self.alice),
                         100 * UNIT - sum(c["cost_nanos"] for c in charges))
        await self.verify_ledger()

    async def test_failed_tasks_are_billed_cleanups_and_device_tasks_are_not(self) -> None:
        await self.start()
        box = await self.sandbox()
        failed = await self.finished_task(box, self.at(0), self.at(1), success=False)
        self.assertEqual((await self.settle(failed, 5)).wallet_nanos,
                         contract_runtime_nanos(Decimal(1), "0.5", "0.12", "0.05", "1.5",
                                                "0.25", 512))
        cleanup = await self.finished_task(box, self.at(0), self.at(600),
                                           action="cleanup_cloud_sandbox")
        self.assertIsNone(await self.settle(cleanup, 700))
        self.assertIsNone(await self.settle("act-unknown", 700))
        self.assertEqual([c["reference"] for c in await self.charges(box)], [f"task:{failed}"])

    async def test_a_short_wallet_is_drained_to_zero_not_refused(self) -> None:
        await self.start(balance="0.01")
        box = await self.sandbox()
        task = await self.finished_task(box, self.at(0), self.at(61))
        settled = await self.settle(task, 100)
        self.assertEqual(settled.wallet_nanos, 10_000_000)
        self.assertEqual(await self.balance(self.alice), 0)
        # the charge record keeps the full cost; the ledger what the wallet paid
        self.assertEqual([c["cost_nanos"] for c in await self.charges(box)], [RUNTIME_NANOS])
        self.assertEqual([r["amount_nanos"] for r in await self.sandbox_ledger(self.alice)],
                         [-10_000_000])
        # an empty wallet pays nothing more and writes no ledger row
        again = await self.finished_task(box, self.at(200), self.at(230))
        self.assertEqual((await self.settle(again, 300)).wallet_nanos, 0)
        self.assertEqual(len(await self.sandbox_ledger(self.alice)), 1)
        await self.verify_ledger()

    async def grant_quota(self, amount: str) -> int:
        now = self.ctx.now()

        def run(conn: Any) -> int:
            plan = subscriptions.create_plan(conn, {
                "name": "sandbox plan", "reset_amount_nanos": int(Decimal(amount) * UNIT),
                "reset_interval_days": 30, "duration_days": 30}, now)
            return int(subscriptions.grant(conn, self.alice, plan, 30, False, now, "test")["id"])

        return await self.ctx.db.transaction(run)

    async def quota_left(self, subscription_id: int) -> int:
        s = schema.user_subscriptions
        return await self.ctx.db.transaction(lambda conn: int(conn.execute(
            select(s.c.balance_nanos).where(s.c.id == subscription_id)).scalar_one()))

    async def test_subscription_quota_pays_first(self) -> None:
        await self.start(balance="1")
        subscription = await self.grant_quota("0.02")
        box = await self.sandbox()
        task = await self.finished_task(box, self.at(0), self.at(61))
        settled = await self.settle(task, 100)
        self.assertEqual((settled.quota_nanos, settled.wallet_nanos),
                         (20_000_000, RUNTIME_NANOS - 20_000_000))
        self.assertEqual(await self.quota_left(subscription), 0)
        self.assertEqual(await self.balance(self.alice), UNIT - (RUNTIME_NANOS - 20_000_000))
        self.assertEqual([r["amount_nanos"] for r in await self.sandbox_ledger(self.alice)],
                         [-(RUNTIME_NANOS - 20_000_000)])
        await self.verify_ledger()

    async def test_the_gate_and_the_server_owned_keys(self) -> None:
        await self.start(balance="0")
        host_id, device_id = await self.add_host(policy='{"network":"none"}', **PRICES)
        box = (await self.create_sandbox(host_id, cpu_cores="0.5", memory_mb=256,
                                         disk_gb=2))["id"]
        now = self.ctx.now()

        def gate(require_credit: bool = True, user: int | None = None) -> Any:
            return self.ctx.db.transaction(sandbox_gate, user or self.alice, box, now,
                                                 require_credit=require_credit)

        refused = await self.assertFailure(gate(), SandboxRefused)
        self.assertEqual(refused.message, INSUFFICIENT_BALANCE)
        binding = await gate(require_credit=False)
        self.assertEqual(binding.device_id, device_id)
        self.assertEqual(binding.payload({"command": "ls", "cloud_sandbox_id": "forged"}), {
            "command": "ls", "cloud_sandbox_id": box, "cloud_sandbox_spec": {
                "image": "python:3.12-slim", "cpu_cores": "0.5", "memory_mb": 256,
                "disk_gb": 2, "security_policy": {"network": "none"}}})
        await self.grant_quota("1")  # a usable subscription is spendable credit
        self.assertEqual((await gate()).sandbox_id, box)
        bob = (await self.register("bob"))["user"]["id"]
        self.assertEqual((await self.assertFailure(gate(user=bob), SandboxRefused)).message,
                         UNAVAILABLE)
        h = schema.sandbox_hosts
        await self.ctx.db.transaction(lambda conn: conn.execute(
            h.update().where(h.c.id == host_id).values(enabled=False)))
        self.assertEqual((await self.assertFailure(gate(), SandboxRefused)).message,
                         UNAVAILABLE)
        await self.ctx.db.transaction(lambda conn: conn.execute(
            h.update().where(h.c.id == host_id).values(enabled=True)))
        await self.call("DELETE", f"{SANDBOXES}/{box}", token=self.user_token)
        self.assertEqual((await self.assertFailure(gate(), SandboxRefused)).message,
                         UNAVAILABLE)

    async def test_storage_is_not_billed_twice_across_task_settlements(self) -> None:
        await self.start()
        box = await self.sandbox(storage="0.36")  # 10 GB: 0.001 per second
        first = await self.finished_task(box, self.at(0), self.at(10))
        second = await self.finished_task(box, self.at(20), self.at(30))
        await self.settle(first, 100)
        await self.settle(second, 250)
        storage = [c for c in await self.charges(box) if c["kind"] == "storage"]
        self.assertEqual([c["cost_nanos"] for c in storage], [100_000_000, 150_000_000])

    async def cached_available(self) -> int | None:
        wallets = self.app.gateway.wallets
        held = await wallets.reserve(f"probe-{self.clock.seconds()}", self.alice, None, 0,
                                     jwt=True)
        wallets.release(held)
        return wallets.available_nanos(self.alice)  # type: ignore[no-any-return]

    async def test_the_cached_wallet_admits_against_the_charged_balance(self) -> None:
        await self.start()
        box = await self.sandbox()
        self.assertEqual(await self.cached_available(), 100 * UNIT)
        task = await self.finished_task(box, self.at(0), self.at(61))
        await self.settle(task, 100)
        self.assertEqual(await self.cached_available(), 100 * UNIT - RUNTIME_NANOS)

    async def test_concurrent_deletes_settle_storage_once(self) -> None:
        await self.start()
        box = await self.sandbox(storage="0.36")  # 10 GB: 0.001 per second
        self.clock.advance(1000)
        answers = await gatherResults([ensureDeferred(self.call(
            "DELETE", f"{SANDBOXES}/{box}", token=self.user_token)) for _ in range(4)])
        self.assertEqual(sorted(a.status for a in answers), [200, 404, 404, 404])
        self.assertEqual([(c["kind"], c["cost_nanos"]) for c in await self.charges(box)],
                         [("storage", UNIT)])
        t = schema.connector_tasks
        cleanups = await self.ctx.db.transaction(lambda conn: conn.execute(
            select(t.c.id).where(t.c.action == "cleanup_cloud_sandbox")).all())
        self.assertEqual(len(cleanups), 1)
        await self.verify_ledger()


class SettlementPostgresTests(SettlementTests):
    backend = "postgresql"
