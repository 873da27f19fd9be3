"""Run events written on one node while another node stops the run (agents contract §1.10,
§1.11), on one PostgreSQL database and one redis-server.

Each test makes the interleaving certain instead of hoping for it: a third connection holds a
lock that both nodes' transactions queue behind, the test waits until PostgreSQL reports both
of them waiting, then lets go.

- A stop queued before an event write must win: the event is not written after the run's
  ``cancelled`` event (the write's "run still active" check used to read the run before the
  stop committed and append after it).
- An event write that got to the run first must keep its number: the stop's ``cancelled``
  numbers after it (both used to read the same ``seq`` maximum and one failed on the unique
  index -- a 500 for the stop or a failed batch for the worker).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, text
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater

from tests.console import test_assistant_runs_two_nodes as two_nodes

WAITING = text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
               "AND wait_event_type = 'Lock'")


class RunRacesOnPostgresTests(two_nodes.RunsAcrossNodesTests):
    backend = "postgresql"

    def setUp(self) -> None:
        super().setUp()
        self.engine = create_engine(self.database_url)
        self.addCleanup(self.engine.dispose)

    def holding(self, statement: str, **params: Any) -> Any:
        """A transaction on a third connection that holds what ``statement`` locks."""
        conn = self.engine.connect()
        transaction = conn.begin()
        conn.execute(text(statement), params)
        self.addCleanup(conn.close)
        return transaction

    async def until_waiting(self, count: int) -> None:
        for _ in range(500):
            with self.engine.connect() as conn:
                if conn.execute(WAITING).scalar() == count:
                    return
            await deferLater(reactor, 0.01, lambda: None)
        raise AssertionError(f"never saw {count} transactions waiting on a lock")

    async def hanging_run(self) -> tuple[str, Any]:
        await self.provision()
        await self.start_node_b()
        run_id = await self.run_hanging_on_a()
        await self.wait_for_events(run_id, 3)
        return run_id, self.app.assistant.workers[run_id].run

    async def wait_for_events(self, run_id: str, count: int) -> None:
        for _ in range(500):
            if len(await self.events(run_id)) >= count:
                return
            await deferLater(reactor, 0.01, lambda: None)
        raise AssertionError("the run's first events never arrived")

    async def test_a_stop_on_b_queued_first_leaves_no_event_after_cancelled(self) -> None:
        run_id, run = await self.hanging_run()
        lock = self.holding("SELECT id FROM assistant_runs WHERE id = :id FOR UPDATE",
                            id=run_id)
        stop = ensureDeferred(self.on_b("POST", f"/api/user/advanced-chat/runs/{run_id}/stop"))
        await self.until_waiting(1)
        write = self.app.assistant.append(run, "status", {
            "message": "model_round", "round": 2, "mode": "assistant"},
            {"current_round": 2, "status_message": "model_round"})
        await self.until_waiting(2)
        lock.rollback()
        stopped = await stop
        assert stopped.status == 200, stopped
        assert await write is None
        events = await self.events(run_id)
        assert events[-1]["payload"] == {"message": "cancelled"}
        assert {"message": "model_round", "round": 2, "mode": "assistant"} not in [
            e["payload"] for e in events]
        record = await self.call("GET", f"/api/user/advanced-chat/runs/{run_id}",
                                 token=self.user_token)
        assert (record.json()["status"], record.json()["current_round"]) == ("cancelled", 1)

    async def test_an_event_write_on_a_that_came_first_keeps_its_seq(self) -> None:
        run_id, run = await self.hanging_run()
        before = len(await self.events(run_id))
        lock = self.holding("LOCK TABLE assistant_run_events IN ACCESS EXCLUSIVE MODE")
        write = self.app.assistant.append(run, "text", {"delta": "first", "round": 1})
        await self.until_waiting(1)
        stop = ensureDeferred(self.on_b("POST", f"/api/user/advanced-chat/runs/{run_id}/stop"))
        await self.until_waiting(2)
        lock.rollback()
        stopped = await stop
        assert stopped.status == 200, stopped
        written = await write
        assert written is not None and written.seq == before + 1
        events = await self.events(run_id)
        assert [(e["seq"], e["event"], e["payload"]) for e in events[before:]] == [
            (before + 1, "text", {"delta": "first", "round": 1}),
            (before + 2, "status", {"message": "cancelled"})]
