"""[P-40] the periodic storage settlement, driven by the test ``Clock``.

The job is the one the app runs (``Lockgate.background``); ticks happen when the test advances
the clock.  Two apps on one PostgreSQL and one redis-server show that one node runs each round
and that even two rounds at once never bill an interval twice.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults
from twisted.trial.unittest import TestCase

from gateway.jobs.sandbox_storage import (
    CLAIM_KEY,
    SETTING,
    SandboxStorageJob,
    settle_interval,
)
from gateway.sandboxes.settlement import settle_sandbox_task
from gateway.settings.store import Settings
from gateway.store.upsert import upsert_setting
from tests.gateway.sandboxes.sandbox_case import SandboxCase
from tests.support.redis_nodes import SharedRedisNodes

UNIT = 1_000_000_000
#: 10 GB at 0.01 per GB-hour: 0.1 per hour
HOURLY = 100_000_000


def job_of(app: Any) -> SandboxStorageJob:
    (job,) = [service for service in app.background if isinstance(service, SandboxStorageJob)]
    return job


class StorageJobCase(SandboxCase):
    async def advance(self, seconds: float, *apps: Any) -> None:
        """Move the clock (the job ticks) and wait until every job's round has finished."""
        self.clock.advance(seconds)
        for app in apps or (self.app,):
            await job_of(app).idle()

    async def storage(self, sandbox_id: str) -> list[tuple[str, int]]:
        return [(c["quantity"], c["cost_nanos"]) for c in await self.charges(sandbox_id)
                if c["kind"] == "storage"]

    async def idle_sandbox(self) -> str:
        await self.start()
        host_id, self.device_id = await self.add_host(storage_price_gb_hour="0.01")
        return str((await self.create_sandbox(host_id, disk_gb=10))["id"])

    async def charges_host(self, sandbox_id: str) -> str:
        got = await self.call("GET", f"/api/user/advanced-chat/cloud-sandboxes/{sandbox_id}",
                              token=self.user_token)
        return str(got.json()["host_id"])


class StorageJobTests(StorageJobCase):
    async def test_two_intervals_bill_two_hours(self) -> None:
        box = await self.idle_sandbox()
        await self.advance(1800)
        self.assertEqual(await self.storage(box), [])  # not due yet
        await self.advance(1800)
        self.assertEqual(await self.storage(box), [("1", HOURLY)])
        await self.advance(3600)
        self.assertEqual(await self.storage(box), [("1", HOURLY), ("1", HOURLY)])
        self.assertEqual(await self.balance(self.alice), 100 * UNIT - 2 * HOURLY)
        await self.verify_ledger()

    async def test_a_task_settlement_between_ticks_does_not_double_bill(self) -> None:
        box = await self.idle_sandbox()
        await self.advance(3600)                     # job: t0 .. t0+1h
        await self.advance(1800)
        task = await self.finished_task(box, self.at(-60), self.at(-30))
        await settle_sandbox_task(self.ctx.db, self.ctx.invalidation, task, self.at(0))
        await self.advance(1800)                     # t0+2h: last billed 30 min ago
        self.assertEqual(await self.storage(box), [("1", HOURLY), ("0.5", HOURLY // 2)])
        await self.advance(1800)                     # t0+2.5h: due again
        self.assertEqual(await self.storage(box),
                         [("1", HOURLY), ("0.5", HOURLY // 2), ("1", HOURLY)])
        # 2.5 hours of storage in all, each second once
        self.assertEqual(sum(cost for _, cost in await self.storage(box)), 5 * HOURLY // 2)
        await self.verify_ledger()

    async def test_the_admin_interval_and_deleted_or_free_sandboxes(self) -> None:
        box = await self.idle_sandbox()
        free_host, _ = await self.add_host(name="free")
        free = (await self.create_sandbox(free_host))["id"]
        gone = (await self.create_sandbox((await self.charges_host(box)), name="gone"))["id"]
        await self.call("DELETE", f"/api/user/advanced-chat/cloud-sandboxes/{gone}",
                        token=self.user_token)
        await self.ctx.db.transaction(upsert_setting, SETTING, "600", self.ctx.now())
        await self.ctx.live_settings.reload()
        await self.advance(600)
        self.assertEqual(await self.storage(box), [("0.166666667", 16_666_667)])  # 0.1 / 6, rounded
        self.assertEqual(await self.storage(free), [])
        self.assertEqual(await self.storage(gone), [])

    async def test_a_result_whose_settlement_was_lost_is_billed_by_the_next_round(self) -> None:
        await self.start()
        host_id, _ = await self.add_host(runtime_price_hour="0.6")  # 0.01 a minute
        box = (await self.create_sandbox(host_id))["id"]
        task = await self.finished_task(box, self.at(-120), self.at(-30))  # never settled
        await self.advance(10)
        self.assertEqual(await self.charges(box), [])  # the link's own call may still come
        await self.advance(30)
        self.assertEqual([(c["reference"], c["cost_nanos"]) for c in await self.charges(box)],
                         [(f"task:{task}", 20_000_000)])
        await self.advance(3600)
        self.assertEqual(len(await self.charges(box)), 1)
        await self.verify_ledger()


class IntervalSettingTests(TestCase):
    def test_default_and_range(self) -> None:
        self.assertEqual(settle_interval(Settings()), 3600)
        self.assertEqual(settle_interval(Settings({SETTING: "10"})), 10)
        self.assertEqual(settle_interval(Settings({SETTING: "86400"})), 86400)
        for bad in ("9", "86401", "soon", "-5"):
            self.assertEqual(settle_interval(Settings({SETTING: bad})), 3600, bad)


class TwoNodeStorageJobTests(SharedRedisNodes, StorageJobCase):
    """Node A (the test's app) and node B on one PostgreSQL and one redis-server."""

    backend = "postgresql"

    async def node_b(self) -> Any:
        node = self.open_app()
        self.addCleanup(node.close)
        await node.state.settled()
        return node

    async def test_one_node_runs_each_round(self) -> None:
        box = await self.idle_sandbox()
        b = await self.node_b()
        a_job, b_job = job_of(self.app), job_of(b)
        await self.advance(3600, self.app, b)
        self.assertEqual(a_job.rounds + b_job.rounds, 1)
        await self.app.state.release(CLAIM_KEY)  # the claim's TTL is wall-clock time
        await self.advance(3600, self.app, b)
        self.assertEqual(a_job.rounds + b_job.rounds, 2)
        self.assertEqual(await self.storage(box), [("1", HOURLY), ("1", HOURLY)])
        await self.verify_ledger()

    async def test_two_rounds_at_once_bill_each_interval_once(self) -> None:
        boxes = [await self.idle_sandbox()]
        host_id = await self.charges_host(boxes[0])
        boxes += [(await self.create_sandbox(host_id, name=f"b{n}"))["id"] for n in range(4)]
        b = await self.node_b()
        self.clock.advance(3600)
        await gatherResults([job_of(self.app).idle(), job_of(b).idle()])
        before = {box: await self.storage(box) for box in boxes}
        self.clock.advance(3600)  # claims are held (wall clock): run both rounds by hand
        billed = await gatherResults([ensureDeferred(job_of(self.app).run_once()),
                                      ensureDeferred(job_of(b).run_once())])
        self.assertEqual(sum(billed), len(boxes))
        for box in boxes:
            self.assertEqual(await self.storage(box), [*before[box], ("1", HOURLY)])
        await self.verify_ledger()
