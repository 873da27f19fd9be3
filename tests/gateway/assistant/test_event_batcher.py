"""Run events in group commits (``event_batcher``) on a real SQLite database.

Events queued in one reactor turn share one transaction; each run's ``seq`` still counts up
from 1 in the order its events were queued; a run that ended gets no more events; a batch
that fails is written item by item so only the bad event fails; the bus announcement gets the
committed rows in order.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import StatementError
from twisted.internet import reactor
from twisted.internet.defer import gatherResults

from gateway.assistant.event_batcher import EventBatcher
from gateway.store.assistant.rows import RunEventRow, RunRow
from gateway.store.assistant.runs import create_run, events_after, transition
from gateway.store.assistant.sessions import save_session
from tests.gateway.gateway_case import GatewayTestCase


class EventBatcherTests(GatewayTestCase):
    async def runs(self, count: int) -> list[RunRow]:
        await self.provision()
        now = self.ctx.now()

        def create(conn: Any) -> list[RunRow]:
            made = []
            for index in range(count):
                session = f"s-{index}"
                save_session(conn, self.user_id, session, {"title": "t"},
                             [{"id": f"acm-{index}", "role": "assistant", "content": ""}], now)
                made.append(create_run(conn, {
                    "id": f"acr-{index}", "user_id": self.user_id, "session_id": session,
                    "assistant_message_id": f"acm-{index}", "mode": "assistant",
                    "status": "running", "node_name": "n",
                    "lease_expires_at": now + timedelta(seconds=60)}, now))
            return made

        return await self.ctx.db.transaction(create)

    def batcher(self) -> tuple[EventBatcher, list[RunEventRow]]:
        announced: list[RunEventRow] = []
        return EventBatcher(self.ctx.db, reactor, announced.extend), announced

    async def stored(self, run_id: str) -> list[tuple[int, str, Any]]:
        rows = await self.ctx.db.transaction(events_after, run_id, 0)
        return [(row.seq, row.event, row.payload) for row in rows]

    async def test_one_turns_events_share_a_transaction_and_keep_seq_order(self) -> None:
        runs = await self.runs(4)
        batcher, announced = self.batcher()
        now = self.ctx.now()
        writes = [batcher.write(run, "status", {"message": "model_round", "round": n},
                                {"current_round": n}, now)
                  for n in range(1, 6) for run in runs]
        rows = [row for row in await gatherResults(writes) if row is not None]
        assert len(rows) == 20
        assert batcher.batch_sizes == [20]
        for run in runs:
            assert await self.stored(run.id) == [
                (n, "status", {"message": "model_round", "round": n}) for n in range(1, 6)]
        assert [(r.run_id, r.seq) for r in rows] == [(r.run_id, r.seq) for r in announced]
        current = await self.call("GET", f"/api/user/advanced-chat/runs/{runs[0].id}",
                                  token=self.user_token)
        assert current.json()["current_round"] == 5

    async def test_a_batch_costs_a_few_statements_however_many_events(self) -> None:
        """Lock + seq read + one multi-row insert + one update per run (tool-call details
        merged in memory), not four statements per event."""
        runs = await self.runs(4)
        batcher, _announced = self.batcher()
        now = self.ctx.now()
        statements: list[str] = []

        def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            statements.append(statement.split()[0].upper())

        engine = self.ctx.db.engine
        event.listen(engine, "before_cursor_execute", count)
        self.addCleanup(event.remove, engine, "before_cursor_execute", count)
        writes = []
        for run in runs:
            writes.append(batcher.write(run, "status", {"message": "model_round", "round": 1},
                                        {"current_round": 1}, now))
            for status in ("running", "ok"):
                writes.append(batcher.write(run, "tool_call", {
                    "id": "call_1", "round": 1, "name": "tasks_list", "status": status,
                    "arguments": {}, "result": "done" if status == "ok" else ""}, None, now))
        rows = await gatherResults(writes)
        assert batcher.batch_sizes == [12] and all(row is not None for row in rows)
        work = [s for s in statements if s not in ("BEGIN", "COMMIT")]
        assert work == ["SELECT", "SELECT", "INSERT", "UPDATE", "UPDATE", "UPDATE", "UPDATE"]
        current = await self.call("GET", f"/api/user/advanced-chat/runs/{runs[2].id}",
                                  token=self.user_token)
        assert current.json()["current_round"] == 1
        assert current.json()["tool_call_details"] == [{
            "id": "call_1", "round": 1, "name": "tasks_list", "status": "ok",
            "arguments": {}, "result": "done"}]

    async def test_events_queued_while_a_batch_is_written_form_the_next_batch(self) -> None:
        [run] = await self.runs(1)
        batcher, _announced = self.batcher()
        now = self.ctx.now()
        first = batcher.write(run, "text", {"delta": "a", "round": 1}, None, now)
        reactor_turn = batcher.write(run, "text", {"delta": "b", "round": 1}, None, now)
        await first
        later = [batcher.write(run, "text", {"delta": c, "round": 1}, None, now)
                 for c in "cde"]
        await gatherResults([reactor_turn, *later])
        assert batcher.batch_sizes == [2, 3]
        assert [p["delta"] for _s, _e, p in await self.stored(run.id)] == list("abcde")

    async def test_an_ended_run_gets_no_event(self) -> None:
        running, ended = await self.runs(2)
        now = self.ctx.now()
        await self.ctx.db.transaction(lambda conn: transition(
            conn, ended.id, {"status": "cancelled"}, now))
        batcher, announced = self.batcher()
        late, live = await gatherResults([
            batcher.write(ended, "text", {"delta": "x", "round": 1}, None, now),
            batcher.write(running, "text", {"delta": "y", "round": 1}, None, now)])
        assert late is None and live is not None and live.seq == 1
        assert await self.stored(ended.id) == []
        assert [r.run_id for r in announced] == [running.id]

    async def test_a_bad_event_fails_alone(self) -> None:
        one, two = await self.runs(2)
        batcher, announced = self.batcher()
        now = self.ctx.now()
        good = batcher.write(one, "text", {"delta": "ok", "round": 1}, None, now)
        bad = batcher.write(two, "text", {"delta": object()}, None, now)
        also = batcher.write(two, "text", {"delta": "fine", "round": 1}, None, now)
        with self.assertRaises(StatementError):
            await bad
        first, second = await good, await also
        assert first is not None and second is not None and first.seq == second.seq == 1
        assert await self.stored(two.id) == [(1, "text", {"delta": "fine", "round": 1})]
        assert len(announced) == 2
        self.flushLoggedErrors(StatementError)
