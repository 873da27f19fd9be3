"""The studio control loop on a real app: real SQLite, the assistant's real run service and a
real loopback upstream answering the chief's model calls; the loop's ticks are driven by a
``Clock`` (agents contract §4.8, §4.10-§4.12, [P-33]-[P-35], [P-42])."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import select, update
from twisted.internet import reactor
from twisted.internet.task import Clock, deferLater

from gateway.store import schema
from gateway.store.assistant.refused import Refused
from gateway.store.studio import companies, control, reviews, scheduler_lease
from gateway.store.studio.rows import StudioRow
from gateway.studio.control_loop import LEASE_NAME, ControlLoop
from gateway.studio.work_start import AssistantInternalRuns
from tests.console.test_assistant_completions import AssistantCase
from tests.support.tool_upstream import HANG, text, tool_call

STUDIO = "ops"


class StudioLoopCase(AssistantCase):
    async def studio(self, *, chief_agent: str = "default", balance_floor: int = 0,
                     slots: int = 1, workers: tuple[str, ...] = (),
                     operations: bool = True) -> int:
        """A studio (chief on the default agent, ``workers``, a reviewer, a checker) and, with
        ``operations``, its record (else 0)."""
        await self.provision()
        now = self.ctx.now()
        members = [{"id": "chief", "name": "Chief", "type": "chief", "prompt": "Lead.",
                    "chat_agent_id": chief_agent, "default_model": "gpt-fake"},
                   *({"id": w, "name": w.title(), "type": "worker", "prompt": "Work.",
                      "chat_agent_id": "default"} for w in workers),
                   {"id": "rev", "name": "Rev", "type": "reviewer", "prompt": "Review.",
                    "chat_agent_id": "default"},
                   {"id": "chk", "name": "Chk", "type": "checker", "prompt": "Check.",
                    "chat_agent_id": "default"}]

        def write(conn: Any) -> int:
            conn.execute(schema.studios.insert().values(
                user_id=self.user_id, id=STUDIO, name="Ops", agents=members, created_at=now,
                updated_at=now))
            if not operations:
                return 0
            studio = StudioRow(self.user_id, STUDIO, "Ops", "", members, now, now)
            record = companies.ensure_default(conn, self.user_id, studio, now)
            conn.execute(update(schema.studio_companies)
                         .where(schema.studio_companies.c.id == record.id)
                         .values(balance_floor_nanos=balance_floor, max_concurrent_tasks=slots))
            return record.id

        self.company_id = await self.ctx.db.transaction(write)
        self.loop_clock = Clock()
        self.loop_clock.advance(time.time())
        self.loop = self.control_loop("node-a")
        return self.company_id

    async def equip_worker(self, **values: Any) -> None:
        """Set fields of the studio's worker member ("wrk")."""
        def write(conn: Any) -> None:
            [agents] = conn.execute(select(schema.studios.c.agents)).scalars()
            for member in agents:
                if member["id"] == "wrk":
                    member.update(values)
            conn.execute(update(schema.studios).values(agents=agents))

        await self.ctx.db.transaction(write)

    def control_loop(self, node: str) -> ControlLoop:
        assert self.app.assistant is not None
        loop = ControlLoop(reactor, self.loop_clock, self.ctx.db,
                           AssistantInternalRuns(self.app.assistant), node)
        loop.startService()
        self.addCleanup(loop.stopService)
        return loop

    async def tick(self, seconds: float = 10.0, *loops: ControlLoop) -> None:
        self.loop_clock.advance(seconds)
        for loop in loops or (self.loop,):
            await loop.idle()

    async def work_item(self, title: str = "Write the notes", *, risk: str = "r0",
                        status: str = "queued", estimated: int = 0, priority: int = 0) -> int:
        now = self.ctx.now()

        def write(conn: Any) -> int:
            key = conn.execute(schema.studio_work_items.insert().values(
                personal_company_id=self.company_id, owner_user_id=self.user_id, title=title,
                description="for the team", definition_of_done="notes exist", status=status,
                priority=priority, risk_level=risk, idempotency_key=f"work_{title}",
                input_snapshot='{"topic":"x"}', estimated_cost_nanos=estimated,
                reserved_cost_nanos=estimated, created_at=now, updated_at=now)
            ).inserted_primary_key
            assert key is not None
            if estimated:
                conn.execute(schema.studio_budget_ledger.insert().values(
                    personal_company_id=self.company_id, work_item_id=int(key[0]),
                    entry_type="reservation", amount_nanos=estimated, created_at=now))
            return int(key[0])

        return int(await self.ctx.db.transaction(write))

    async def rows(self, table: Any, **where: Any) -> list[dict[str, Any]]:
        def read(conn: Any) -> list[dict[str, Any]]:
            query = select(table)
            for name, value in where.items():
                query = query.where(table.c[name] == value)
            return [dict(r) for r in conn.execute(query.order_by(table.c[
                "id" if "id" in table.c else "name"])).mappings()]

        return await self.ctx.db.transaction(read)

    async def item(self, item_id: int) -> dict[str, Any]:
        [found] = await self.rows(schema.studio_work_items, id=item_id)
        return found

    async def attempts(self, item_id: int) -> list[dict[str, Any]]:
        return await self.rows(schema.studio_work_attempts, work_item_id=item_id)

    async def audit_types(self, item_id: int | None = None) -> list[str]:
        where = {"work_item_id": item_id} if item_id is not None else {}
        return [r["event_type"] for r in await self.rows(schema.studio_audit_events, **where)]

    async def until(self, check: Any, what: str) -> None:
        """Wait (on the real reactor: runs and hooks are real) until ``await check()``."""
        for _ in range(1500):  # ~30 s: the machine may be busy
            if await check():
                return
            await deferLater(reactor, 0.02, lambda: None)
        raise AssertionError(f"never happened: {what}")

    async def until_status(self, item_id: int, status: str) -> None:
        async def reached() -> bool:
            return (await self.item(item_id))["status"] == status

        await self.until(reached, f"work item {item_id} {status}")

    async def company_state(self) -> str:
        [found] = await self.rows(schema.studio_companies, id=self.company_id)
        return str(found["state"])


class WorkFlowTests(StudioLoopCase):
    async def test_queued_work_runs_is_reviewed_verified_and_delivered(self) -> None:
        await self.studio()
        item_id = await self.work_item(estimated=2_000_000)
        # the review run's model call hangs, so the usage log holds the execution run alone
        self.upstream.script(text("Notes written. Evidence: file. Risks: none."), HANG)
        await self.tick()
        [attempt] = await self.attempts(item_id)
        assert (attempt["kind"], attempt["status"], attempt["attempt_number"]) == (
            "execution", "executing", 1)
        assert (await self.item(item_id))["status"] == "executing"
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert run["status"] == "completed", run
        # the session is a new pcw-… one with the exact user message
        [session] = await self.rows(schema.assistant_sessions, id=run["session_id"])
        assert session["id"].startswith("pcw")
        assert session["title"] == "Personal Company: Write the notes"
        user_message = self.upstream.requests[0]["messages"][-1]
        assert user_message["role"] == "user"
        assert user_message["content"].startswith(
            "Work item: Write the notes\nDescription: for the team\n"
            "Definition of done: notes exist\nInput snapshot: {\"topic\":\"x\"}\n")
        assert "Use only the tools provided" in user_message["content"]

        await self.tick()  # settles the execution, then starts the review (one slot)
        work = await self.item(item_id)
        first, review = await self.attempts(item_id)
        assert (first["status"], first["result_summary"]) == (
            "awaiting_review", "Notes written. Evidence: file. Risks: none.")
        count, total = await self.usage_cost()
        assert count == 1 and total > 0
        # [P-42]: consumed == the run's cost == the usage log, to the nano-unit
        assert first["cost_nanos"] == work["consumed_cost_nanos"] == total
        assert work["reserved_cost_nanos"] == 0
        ledger = [(r["entry_type"], r["amount_nanos"])
                  for r in await self.rows(schema.studio_budget_ledger, work_item_id=item_id)]
        assert ledger == [("reservation", 2_000_000), ("consumption", total),
                          ("release", -2_000_000)]
        [artifact] = await self.rows(schema.studio_artifacts, work_item_id=item_id)
        assert (artifact["kind"], artifact["uri"], artifact["acceptance_state"]) == (
            "advanced_chat_result", f"advanced-chat://runs/{run['id']}", "pending")
        assert (review["kind"], review["status"]) == ("review", "executing")
        assert work["status"] == "executing"

        # the review tool is refused without a reviewer delegation, then records a decision
        def decide(conn: Any, delegated: bool) -> str:
            return reviews.record_decision(conn, review["advanced_chat_run_id"], "verified",
                                           "meets the definition", delegated, self.ctx.now())

        try:
            await self.ctx.db.transaction(decide, False)
        except Refused as refused:
            assert refused.message == (
                "Chief must receive a reviewer delegation result before recording review")
        else:
            raise AssertionError("a review without a reviewer delegation was recorded")
        assert await self.ctx.db.transaction(decide, True) == "verified"
        [artifact] = await self.rows(schema.studio_artifacts, work_item_id=item_id)
        assert artifact["acceptance_state"] == "verified"
        await self.tick()
        assert (await self.item(item_id))["status"] == "delivered"
        events = await self.audit_types(item_id)
        assert events == ["work_attempt.leased", "work_attempt.completed", "work_attempt.leased",
                          "review_attempt.verified", "work_item.delivered"]

    async def test_one_delivery_per_tick_and_no_start_in_that_tick(self) -> None:
        await self.studio(slots=2)
        first = await self.work_item("a", status="verified")
        second = await self.work_item("b", status="verified")
        queued = await self.work_item("c")
        await self.tick()
        statuses = [(await self.item(i))["status"] for i in (first, second, queued)]
        assert statuses == ["delivered", "verified", "queued"]
        await self.tick()
        statuses = [(await self.item(i))["status"] for i in (first, second, queued)]
        assert statuses == ["delivered", "delivered", "queued"]

    async def test_review_run_that_ends_without_a_decision_blocks_the_item(self) -> None:
        await self.studio()
        item_id = await self.work_item(status="awaiting_review")
        self.upstream.script(text("I looked at it."))
        await self.tick()
        [review] = await self.attempts(item_id)
        assert review["kind"] == "review"
        await self.wait_for_run(review["advanced_chat_run_id"])
        await self.tick()
        [review] = await self.attempts(item_id)
        assert (review["status"], review["result_summary"]) == (
            "blocked", "Reviewer did not record a decision")
        assert (await self.item(item_id))["status"] == "blocked"
        assert "review_attempt.blocked" in await self.audit_types(item_id)
        # the review run's cost is the attempt's and the item's, to the nano-unit ([P-42])
        count, total = await self.usage_cost()
        assert count == 1 and total > 0
        assert review["cost_nanos"] == (await self.item(item_id))["consumed_cost_nanos"] == total
        ledger = [(r["entry_type"], r["amount_nanos"])
                  for r in await self.rows(schema.studio_budget_ledger, work_item_id=item_id)]
        assert ledger == [("consumption", total)]

    async def test_slots_follow_max_concurrent_tasks_and_priority(self) -> None:
        await self.studio(slots=2)
        low = await self.work_item("low", priority=1)
        high = await self.work_item("high", priority=5)
        other = await self.work_item("other", priority=3)
        self.upstream.script(HANG, HANG, HANG)
        await self.tick()
        assert [(await self.item(i))["status"] for i in (high, other, low)] == [
            "executing", "executing", "queued"]


class RiskAndMoneyTests(StudioLoopCase):
    async def test_r4_and_owner_decision_items_never_start(self) -> None:
        await self.studio()
        forbidden = await self.work_item("r4", risk="r4")
        waiting = await self.work_item("ask", risk="r3", status="owner_decision")
        await self.tick()
        await self.tick()
        assert (await self.item(forbidden))["status"] == "queued"
        assert (await self.item(waiting))["status"] == "owner_decision"
        assert await self.attempts(forbidden) == [] and await self.attempts(waiting) == []
        assert self.upstream.requests == []

    async def test_balance_at_the_floor_stops_starts_and_needs_attention(self) -> None:
        await self.studio(balance_floor=100 * 10**9)  # the balance is 100 (== the floor)
        item_id = await self.work_item()
        await self.tick()
        assert await self.company_state() == "attention_required"
        assert (await self.item(item_id))["status"] == "queued"
        assert await self.attempts(item_id) == []
        assert "balance.floor_reached" in await self.audit_types()
        [outbox] = await self.rows(schema.studio_outbox, personal_company_id=self.company_id)
        assert outbox["event_type"] == "balance.floor_reached"
        await self.tick()  # not operating: the loop leaves the studio alone
        assert await self.attempts(item_id) == []

    async def test_start_failure_is_recorded_once_per_item_and_error(self) -> None:
        await self.studio(chief_agent="no-such-agent")
        item_id = await self.work_item()
        await self.tick()
        await self.tick()
        attempts = await self.attempts(item_id)
        assert [a["status"] for a in attempts] == ["retryable_failure", "retryable_failure"]
        assert (await self.item(item_id))["status"] == "queued"
        failures = [r for r in await self.rows(schema.studio_audit_events, work_item_id=item_id)
                    if r["event_type"] == "work_attempt.start_failed"]
        assert [orjson.loads(r["payload"]) for r in failures] == [
            {"error": "Referenced chat agent was not found"}]


class LeaseTests(StudioLoopCase):
    async def test_live_run_lease_is_renewed_every_minute(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(HANG)
        await self.tick()
        await self.upstream.hung
        [attempt] = await self.attempts(item_id)
        first = attempt["lease_expires_at"]
        for _ in range(6):
            await self.tick()
        [attempt] = await self.attempts(item_id)
        assert attempt["lease_expires_at"] > first
        assert attempt["status"] == "executing"

    async def test_expired_lease_stops_the_run_and_requeues(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(HANG, HANG)
        await self.tick()
        await self.upstream.hung
        assert len(await self.attempts(item_id)) == 1
        await self.tick(11 * 60)  # the scheduler missed every renewal
        first, second = await self.attempts(item_id)
        assert first["status"] == "retryable_failure"
        run = await self.wait_for_run(first["advanced_chat_run_id"])
        assert run["status"] == "cancelled"
        # requeued, then started again in the same tick
        assert (second["attempt_number"], second["status"]) == (2, "executing")
        assert "work_attempt.lease_expired" in await self.audit_types(item_id)

    async def test_only_the_lease_holder_schedules_and_a_dead_one_is_replaced(self) -> None:
        await self.studio()
        other = self.control_loop("node-b")
        first = await self.work_item("first", status="verified")
        second = await self.work_item("second", status="verified")
        await self.tick(10, self.loop, other)
        assert [(await self.item(i))["status"] for i in (first, second)] == [
            "delivered", "verified"]  # one delivery: only one loop ran a round
        self.loop.stopService()  # node A dies
        await self.tick(10, other)
        assert (await self.item(second))["status"] == "verified"  # A's lease still holds
        await self.tick(30, other)
        assert (await self.item(second))["status"] == "delivered"




class WiringTests(StudioLoopCase):
    async def test_the_app_runs_the_loop_on_its_clock(self) -> None:
        await self.studio()
        self.loop.stopService()  # only the app's own loop is left
        item_id = await self.work_item()
        self.upstream.script(HANG)
        wired = self.app.studio_loop
        assert isinstance(wired, ControlLoop) and wired.running
        self.clock.advance(10)
        await wired.idle()
        [attempt] = await self.attempts(item_id)
        assert (attempt["kind"], attempt["status"]) == ("execution", "executing")


class BudgetTests(StudioLoopCase):
    async def test_budgets_limit_outstanding_reservations_per_utc_day_and_month(self) -> None:
        await self.studio()
        now = datetime(2026, 3, 15, 12, tzinfo=UTC)
        ledger = schema.studio_budget_ledger

        def setup(conn: Any) -> None:
            conn.execute(update(schema.studio_companies)
                         .where(schema.studio_companies.c.id == self.company_id)
                         .values(daily_budget_nanos=10, monthly_budget_nanos=25))
            rows = [("reservation", 8, datetime(2026, 3, 15, 1, tzinfo=UTC)),   # today
                    ("release", -3, datetime(2026, 3, 15, 2, tzinfo=UTC)),      # today
                    ("consumption", 99, datetime(2026, 3, 15, 3, tzinfo=UTC)),  # not counted
                    ("reservation", 12, datetime(2026, 3, 2, tzinfo=UTC)),      # this month
                    ("reservation", 50, datetime(2026, 2, 28, tzinfo=UTC))]     # last month
            for entry, amount, at in rows:
                conn.execute(ledger.insert().values(personal_company_id=self.company_id,
                                                    entry_type=entry, amount_nanos=amount,
                                                    created_at=at))

        await self.ctx.db.transaction(setup)

        def check(conn: Any, estimated: int) -> str | None:
            return control.check_budget(conn, control.company(conn, self.company_id),
                                        estimated, now)

        # today: 5 outstanding of 10; this month: 17 of 25
        assert await self.ctx.db.transaction(check, 0) is None
        assert await self.ctx.db.transaction(check, 5) is None
        over = "Work item exceeds the available Personal Company budget"
        assert await self.ctx.db.transaction(check, 6) == over  # the day
        assert await self.ctx.db.transaction(check, 11) == over  # above the daily budget

        def no_daily(conn: Any) -> None:
            conn.execute(update(schema.studio_companies)
                         .where(schema.studio_companies.c.id == self.company_id)
                         .values(daily_budget_nanos=0))

        await self.ctx.db.transaction(no_daily)
        assert await self.ctx.db.transaction(check, 8) is None
        assert await self.ctx.db.transaction(check, 9) == over  # the month

    async def test_the_floor_is_checked_after_an_execution_run(self) -> None:
        # one nano-unit below the balance: starting is allowed, any spend reaches the floor
        await self.studio(balance_floor=100 * 10**9 - 1)
        item_id = await self.work_item()
        self.upstream.script(text("done"))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        await self.wait_for_run(attempt["advanced_chat_run_id"])
        await self.gateway.settler.flush()
        await self.tick()
        assert (await self.item(item_id))["status"] == "awaiting_review"
        assert await self.company_state() == "attention_required"
        assert len(await self.attempts(item_id)) == 1  # no review starts
        assert "balance.floor_reached" in await self.audit_types()


class TwoAppsOnPostgresTests(StudioLoopCase):
    backend = "postgresql"

    async def test_two_app_instances_only_one_schedules(self) -> None:
        await self.studio()
        self.loop.stopService()  # only the apps' own loops are left
        other = self.open_app(node_name="node-b")
        self.addCleanup(other.close)
        first = await self.work_item("first", status="verified")
        second = await self.work_item("second", status="verified")
        loops = [self.app.studio_loop, other.studio_loop]
        self.clock.advance(10)  # both apps' loops tick on the shared clock
        for loop in loops:
            assert loop is not None
            await loop.idle()
        assert [(await self.item(i))["status"] for i in (first, second)] == [
            "delivered", "verified"]  # one delivery: one scheduler ran a round
        [lease] = await self.rows(schema.studio_scheduler_leases)
        holders = [loop.holder for loop in loops if loop is not None]
        assert lease["holder"] in holders
        [waiting] = [holder for holder in holders if holder != lease["holder"]]
        # the other node cannot take the lease before it expires, and can after
        held = lease["expires_at"]
        before = held - timedelta(seconds=1)
        after = held + timedelta(seconds=1)
        assert not await self.ctx.db.transaction(
            scheduler_lease.acquire, LEASE_NAME, waiting, before, 30)
        assert await self.ctx.db.transaction(
            scheduler_lease.acquire, LEASE_NAME, waiting, after, 30)


class ReviewToolTests(StudioLoopCase):
    async def test_review_tool_without_a_reviewer_delegation_is_refused_in_the_run(self) -> None:
        await self.studio()
        item_id = await self.work_item(status="awaiting_review")
        self.upstream.script(
            tool_call("studio_review_work", {"decision": "verified", "summary": "fine"}),
            text("I could not record it."))
        await self.tick()
        [review] = await self.attempts(item_id)
        run = await self.wait_for_run(review["advanced_chat_run_id"])
        assert run["status"] == "completed", run
        tools = [t["function"]["name"] for t in self.upstream.requests[0]["tools"]]
        assert "studio_review_work" in tools
        assert self.upstream.requests[1]["messages"][-1]["content"] == (
            "Chief must receive a reviewer delegation result before recording review")
        # the refused tool recorded no decision, so the ended review run blocks the item
        await self.until_status(item_id, "blocked")
        [review] = await self.attempts(item_id)
        assert review["result_summary"] == "Reviewer did not record a decision"

    async def test_execution_runs_do_not_get_the_review_tool(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(text("done"))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        await self.wait_for_run(attempt["advanced_chat_run_id"])
        tools = [t["function"]["name"] for t in self.upstream.requests[0].get("tools") or []]
        assert "studio_review_work" not in tools
