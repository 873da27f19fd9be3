"""Run events in group commits (``event_batcher``) on a real SQLite database (and PostgreSQL).

Events queued in one reactor turn share one transaction; each run's ``seq`` still counts up
from 1 in the order its events were queued; a run that ended gets no more events; a batch
that fails is written item by item so only the bad event fails; the bus announcement gets the
committed rows in order.  Runs' starts and finishes share those batches: each run gets exactly
its own columns, message and events, a start only moves a queued run, nothing of a run is
written after its finish, and a finish that fails fails only its own run.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import StatementError
from twisted.internet import reactor
from twisted.internet.defer import gatherResults

from gateway.assistant.event_batcher import EventBatcher
from gateway.store.assistant.event_batches import Answer
from gateway.store.assistant.rows import RunEventRow, RunRow
from gateway.store.assistant.runs import create_run, events_after, find_run, transition
from gateway.store.assistant.sessions import get_session, save_session
from tests.gateway.gateway_case import GatewayTestCase


class EventBatcherCase(GatewayTestCase):
    """Runs to write events for, a batcher, and what the database holds."""

    async def runs(self, count: int, status: str = "running") -> list[RunRow]:
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
                    "status": status, "node_name": "n",
                    "lease_expires_at": now + timedelta(seconds=60)}, now))
            return made

        return await self.ctx.db.transaction(create)

    def batcher(self) -> tuple[EventBatcher, list[RunEventRow]]:
        announced: list[RunEventRow] = []
        return EventBatcher(self.ctx.db, reactor, announced.extend), announced

    async def stored(self, run_id: str) -> list[tuple[int, str, Any]]:
        rows = await self.ctx.db.transaction(events_after, run_id, 0)
        return [(row.seq, row.event, row.payload) for row in rows]



class EventBatcherTests(EventBatcherCase):
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


    def start(self, batcher: EventBatcher, run: RunRow, now: Any) -> list[Any]:
        return [batcher.write(run, "status", {"message": "assistant_started"}, {
                    "status": "running", "status_message": "loading_tools", "started_at": now},
                    now, starts=True),
                batcher.write(run, "status", {"message": "loading_tools"}, None, now)]

    def finish(self, batcher: EventBatcher, run: RunRow, now: Any, cost: int,
               parts: Any = None) -> Any:
        details = [{"id": "call_1", "round": 1, "name": "tasks_list", "status": "ok",
                    "arguments": {}, "result": run.id}]
        message = {"role": "assistant", "content": f"answer {run.id}",
                   "content_parts": parts if parts is not None else [
                       {"round": 1, "content": f"answer {run.id}"}]}
        result = {"message": message, "cost": str(cost), "tool_calls": 1,
                  "tool_call_details": details}
        return batcher.write(run, "done", result, {
            "status": "completed", "status_message": "completed", "cost_nanos": cost,
            "tool_call_details": details, "tool_calls": 1, "finished_at": now,
            "lease_expires_at": None}, now, answer=Answer(
                run.assistant_message_id, {**message, "tool_calls": details}, cost))

    async def session_answer(self, run: RunRow) -> dict[str, Any]:
        stored = await self.ctx.db.transaction(get_session, self.user_id, run.session_id)
        [message] = [m for m in stored.messages if m.id == run.assistant_message_id]
        return {"content": message.content, "parts": message.content_parts,
                "calls": message.tool_calls}

    async def test_many_runs_start_and_finish_in_one_batch_each_with_its_own_rows(
            self) -> None:
        runs = await self.runs(4, status="queued")
        batcher, announced = self.batcher()
        now = self.ctx.now()
        writes = []
        for number, run in enumerate(runs, 1):
            writes += self.start(batcher, run, now)
            writes.append(batcher.write(run, "text", {"delta": run.id, "round": 1}, None, now))
            writes.append(self.finish(batcher, run, now, cost=number * 1000))
        rows = await gatherResults(writes)
        assert batcher.batch_sizes == [16] and all(row is not None for row in rows)
        assert len(announced) == 16
        for number, run in enumerate(runs, 1):
            stored = await self.ctx.db.transaction(find_run, run.id)
            assert (stored.status, stored.status_message, stored.cost_nanos) == (
                "completed", "completed", number * 1000)
            assert stored.started_at is not None and stored.finished_at is not None
            assert stored.lease_expires_at is None
            assert [d["result"] for d in stored.tool_call_details] == [run.id]
            assert [(seq, name) for seq, name, _p in await self.stored(run.id)] == [
                (1, "status"), (2, "status"), (3, "text"), (4, "done")]
            assert (await self.stored(run.id))[2][2]["delta"] == run.id
            assert await self.session_answer(run) == {
                "content": f"answer {run.id}",
                "parts": [{"round": 1, "content": f"answer {run.id}"}],
                "calls": stored.tool_call_details}

    async def test_a_stopped_run_is_not_started_and_nothing_follows_a_finish(self) -> None:
        stopped, finished, late = await self.runs(3, status="queued")
        now = self.ctx.now()
        await self.ctx.db.transaction(lambda conn: transition(
            conn, stopped.id, {"status": "cancelled"}, now))
        batcher, _announced = self.batcher()
        start_rows = await gatherResults(self.start(batcher, stopped, now))
        assert start_rows == [None, None] and await self.stored(stopped.id) == []
        assert (await self.ctx.db.transaction(find_run, stopped.id)).status == "cancelled"
        assert None not in await gatherResults(self.start(batcher, finished, now))
        done, after = await gatherResults([
            self.finish(batcher, finished, now, cost=7),
            batcher.write(finished, "text", {"delta": "late", "round": 1}, None, now)])
        assert done is not None and after is None
        assert [p.get("message", p.get("delta")) for _s, e, p in await self.stored(
            finished.id) if e != "done"] == ["assistant_started", "loading_tools"]
        # a finish after a stop keeps the run stopped and its message empty, and records the
        # cost the run's model calls had (higher than the stored one)
        await self.ctx.db.transaction(lambda conn: transition(
            conn, late.id, {"status": "cancelled"}, now))
        assert await self.finish(batcher, late, now, cost=42) is None
        stored = await self.ctx.db.transaction(find_run, late.id)
        assert (stored.status, stored.cost_nanos) == ("cancelled", 42)
        assert (await self.session_answer(late))["content"] == ""
        assert await self.stored(late.id) == []

    async def test_a_finish_that_fails_fails_only_its_own_run(self) -> None:
        bad, good = await self.runs(2, status="queued")
        batcher, _announced = self.batcher()
        now = self.ctx.now()
        writes = [*self.start(batcher, bad, now), *self.start(batcher, good, now)]
        failing = self.finish(batcher, bad, now, cost=5, parts=[object()])
        finishing = self.finish(batcher, good, now, cost=6)
        with self.assertRaises(StatementError):
            await failing
        assert all(row is not None for row in await gatherResults([*writes, finishing]))
        assert batcher.batch_sizes[0] == 6
        assert (await self.ctx.db.transaction(find_run, bad.id)).status == "running"
        assert [e for _s, e, _p in await self.stored(bad.id)] == ["status", "status"]
        assert (await self.session_answer(bad))["content"] == ""
        assert (await self.ctx.db.transaction(find_run, good.id)).status == "completed"
        assert (await self.session_answer(good))["content"] == f"answer {good.id}"
        self.flushLoggedErrors(StatementError)


class EventBatcherStatementTests(EventBatcherCase):
    """SQLite only: the statements are counted through its trace callback."""

    async def test_a_batch_costs_a_few_statements_however_many_events(self) -> None:
        """Lock + seq read + one multi-row insert + one ``executemany`` update of the runs
        that changed the same columns (tool-call details merged in memory), not four
        statements per event."""
        runs = await self.runs(4)
        batcher, _announced = self.batcher()
        now = self.ctx.now()
        statements: list[str] = []

        def count(statement: str) -> None:
            statements.append(statement.split()[0].upper())

        def trace(dbapi_connection: Any, *_args: Any) -> None:
            # batches are plain DB-API statements (no Core events): SQLite's own trace
            # sees every statement the connection runs
            dbapi_connection.set_trace_callback(count)
            self.addCleanup(dbapi_connection.set_trace_callback, None)

        engine = self.ctx.db.engine
        event.listen(engine, "checkout", trace)
        self.addCleanup(event.remove, engine, "checkout", trace)
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
        # SQLite traces an ``executemany`` row by row: one row update per run, not per event
        assert work == ["SELECT", "SELECT", "INSERT", "UPDATE", "UPDATE", "UPDATE", "UPDATE"]
        current = await self.call("GET", f"/api/user/advanced-chat/runs/{runs[2].id}",
                                  token=self.user_token)
        assert current.json()["current_round"] == 1
        assert current.json()["tool_call_details"] == [{
            "id": "call_1", "round": 1, "name": "tasks_list", "status": "ok",
            "arguments": {}, "result": "done"}]


class EventBatcherPostgresTests(EventBatcherTests):
    """The same batches on PostgreSQL: its placeholders, row locks (``FOR UPDATE``), the
    multi-row ``INSERT ... RETURNING`` and the values as its column types read them back."""

    backend = "postgresql"

