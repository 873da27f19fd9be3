"""Two Lockgate nodes on one PostgreSQL and one real redis-server (agents contract §4.8: one
control loop cluster-wide, a dead scheduler replaced within one lease, no work started twice).

Node A schedules and runs two work items; then node A dies (its app closes, its model calls
end).  Node B does not schedule while A's lease holds, takes over once it ran out, recovers A's
orphaned runs (their run lease expired: failed by B's sweep, then settled by B's loop) and
starts the next queued item -- every item has exactly one execution attempt.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor

from gateway.store import schema
from gateway.studio.control_loop import ControlLoop
from gateway.studio.work_start import AssistantInternalRuns
from tests.gateway.studio.test_control_loop import StudioLoopCase
from tests.support.redis_nodes import SharedRedisNodes
from tests.support.tool_upstream import HANG


class SchedulerFailoverTests(SharedRedisNodes, StudioLoopCase):
    backend = "postgresql"

    def node_loop(self, app: Any, node: str) -> ControlLoop:
        loop = ControlLoop(reactor, self.loop_clock, app.ctx.db,
                           AssistantInternalRuns(app.assistant), node)
        loop.startService()
        self.addCleanup(loop.stopService)
        return loop

    async def test_the_other_node_takes_over_within_one_lease_and_starts_nothing_twice(
            self) -> None:
        await self.studio(slots=2)
        self.loop.stopService()  # the case's own loop; the nodes' loops follow
        assert self.app.studio_loop is not None
        self.app.studio_loop.stopService()
        node_a = self.open_app(node_name="node-a")
        self.addCleanup(node_a.close)
        node_a.studio_loop.stopService()
        await node_a.state.settled()
        await self.app.state.settled()
        loop_a = self.node_loop(node_a, "node-a")
        loop_b = self.node_loop(self.app, "node-b")  # ticks after A on the same clock
        first = await self.work_item("first", priority=3)
        second = await self.work_item("second", priority=2)
        third = await self.work_item("third", priority=1)
        self.upstream.script(HANG, HANG, HANG)

        await loop_a.tick()  # A's round first: A takes the lease
        await self.tick(10, loop_a, loop_b)  # both tick; only the holder schedules
        [lease] = await self.rows(schema.studio_scheduler_leases)
        assert lease["holder"] == loop_a.holder
        assert [(await self.item(i))["status"] for i in (first, second, third)] == [
            "executing", "executing", "queued"]
        runs = [(await self.attempts(i))[0]["advanced_chat_run_id"] for i in (first, second)]
        assert set(node_a.assistant.workers) == set(runs)  # A runs what A started

        loop_a.stopService()
        await node_a.close()  # node A dies; its runs are left to their leases
        await self.tick(10, loop_b)
        assert (await self.rows(schema.studio_scheduler_leases))[0]["holder"] == loop_a.holder
        await self.tick(30, loop_b)  # one scheduler lease after A's last round
        assert (await self.rows(schema.studio_scheduler_leases))[0]["holder"] == loop_b.holder

        # A's runs lost their node: B's sweep fails them once their run lease ran out, and
        # B's loop settles their attempts and starts the third item, once
        self.clock.advance(61)
        await self.app.assistant.sweep()
        for run_id in runs:
            assert (await self.wait_for_run(run_id))["status"] == "failed"
        await self.tick(10, loop_b)
        assert [(await self.item(i))["status"] for i in (first, second, third)] == [
            "blocked", "blocked", "executing"]
        for item_id in (first, second, third):
            attempts = await self.attempts(item_id)
            assert [a["kind"] for a in attempts] == ["execution"], attempts
        [started] = await self.attempts(third)
        assert started["advanced_chat_run_id"] in self.app.assistant.workers
