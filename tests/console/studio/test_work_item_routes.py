"""Work items, approvals and connector approvals (agents contract §4.10-§4.13, [P-33],
[P-36], [P-37]): creation with risk, budgets and reservations; the owner's queue/run/cancel;
approval decisions; pause and cancel interrupting an executing attempt and stopping its run;
the timeline's audit events; every message verbatim and nothing changed on a refusal."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from gateway.store import connector_tasks, devices, schema
from gateway.store.assistant.runs import create_run, find_run
from gateway.store.assistant.sessions import save_session
from tests.console.studio.studio_case import StudioCase

WORK_TABLES = ("studio_work_items", "studio_budget_ledger", "studio_approvals",
               "studio_audit_events")
ITEM = {"title": "Fix build", "definition_of_done": "CI is green"}


class WorkItemRouteTests(StudioCase):
    async def operating(self, **settings: Any) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        if settings:
            await self.company_ok("PUT", "/settings", settings)

    async def create(self, **fields: Any) -> dict[str, Any]:
        body = await self.company_ok("POST", "/work-items", {**ITEM, **fields}, status=201)
        return dict(body["work_item"])

    async def alice_id(self) -> int:
        return next(u["id"] for u in await self.rows("users") if u["username"] == "alice")

    async def test_create_list_and_timeline(self) -> None:
        await self.operating()
        objective = (await self.company_ok("POST", "/objectives", {
            "title": "Grow", "priority": 3, "target_date": "2027-01-01T00:00:00Z"},
            status=201))["objective"]
        item = await self.create(objective_id=objective["id"], priority=5,
                                 input_snapshot='{"a": 1}', allowed_tools=["web"],
                                 estimated_cost="0.25", due_at="2027-02-01T10:00:00+02:00")
        assert (item["status"], item["risk_level"], item["priority"]) == ("queued", "r0", 5)
        assert item["idempotency_key"].startswith("work_") and len(item["idempotency_key"]) == 37
        assert (item["input_snapshot"], item["allowed_tools"]) == ('{"a":1}', '["web"]')
        assert (item["estimated_cost"], item["reserved_cost"], item["consumed_cost"]) == (
            "0.25", "0.25", "0")
        assert item["objective_id"] == objective["id"]
        assert item["due_at"].startswith("2027-02-01T08:00:00")
        low = await self.create(title="Low", idempotency_key="mine")
        assert low["idempotency_key"] == "mine"
        listed = (await self.company_ok("GET", "/work-items"))["work_items"]
        assert [w["id"] for w in listed] == [item["id"], low["id"]]
        ledger = await self.rows("studio_budget_ledger")
        assert [(e["entry_type"], e["amount_nanos"], e["work_item_id"]) for e in ledger] == [
            ("reservation", 250_000_000, item["id"])]
        panel = await self.company_ok("GET", "")
        assert panel["budget"]["reserved"] == "0.25"
        assert panel["budget"]["monthly_reserved"] == "0.25"
        assert panel["health"]["active_work_items"] == 2
        assert panel["health"]["active_objectives"] == 1
        timeline = await self.company_ok("GET", f"/work-items/{item['id']}/timeline")
        assert timeline["work_item"] == item
        assert (timeline["attempts"], timeline["artifacts"], timeline["handoffs"]) == ([], [], [])
        assert [e["event_type"] for e in timeline["events"]] == ["work_item.created"]
        assert orjson.loads(timeline["events"][0]["payload"]) == {"status": "queued",
                                                                  "risk_level": "r0"}
        for odd in ("999", "abc", "-1", "9" * 30):
            await self.company_refused("GET", f"/work-items/{odd}/timeline", None, 404,
                                       "Work item not found")
        await self.company_refused("GET", f"/work-items/{item['id']}/internal-session", None,
                                   404, "No internal Studio session exists for this work item")

    async def test_creation_refusals(self) -> None:
        await self.operating(daily_budget="1", monthly_budget="2")
        await self.studio("other")
        await self.company_ok("GET", "", studio_id="other")
        foreign = (await self.company_ok("POST", "/objectives", {"title": "Theirs"},
                                         studio_id="other", status=201))["objective"]
        await self.create(idempotency_key="taken", estimated_cost="0.75")
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({}, 400, "Work item title and definition_of_done are required"),
            ({"title": "t"}, 400, "Work item title and definition_of_done are required"),
            ({**ITEM, "estimated_cost": "-1"}, 400, "Estimated cost cannot be negative"),
            ({**ITEM, "objective_id": foreign["id"]}, 400,
             "Objective is not available to this Personal Company"),
            ({**ITEM, "objective_id": 424242}, 400,
             "Objective is not available to this Personal Company"),
            ({**ITEM, "input_snapshot": "{"}, 400,
             "input_snapshot and allowed_tools must be valid JSON"),
            ({**ITEM, "allowed_tools": "nope"}, 400,
             "input_snapshot and allowed_tools must be valid JSON"),
            ({**ITEM, "risk_level": "r4"}, 400, "Risk level r4 is forbidden by the charter"),
            # over the daily budget on its own, and with today's reservation
            ({**ITEM, "estimated_cost": "1.01"}, 402,
             "Work item exceeds the available Personal Company budget"),
            ({**ITEM, "estimated_cost": "0.3"}, 402,
             "Work item exceeds the available Personal Company budget"),
            ({**ITEM, "idempotency_key": "taken"}, 409,
             "A work item with this idempotency key already exists"),
        ]
        for body, status, message in cases:
            await self.company_refused("POST", "/work-items", body, status, message,
                                       tables=WORK_TABLES)
        await self.create(estimated_cost="0.25")

    async def test_owner_decision_and_approvals(self) -> None:
        await self.operating()
        risky = await self.create(risk_level="R3", idempotency_key="k3",
                                  estimated_cost="0.5", allowed_tools='["shell"]')
        assert risky["status"] == "owner_decision" and risky["risk_level"] == "r3"
        # r1 is above autonomy r0: it needs the owner too
        r1 = await self.create(title="Medium", risk_level="r1")
        assert r1["status"] == "owner_decision"
        approvals = (await self.company_ok("GET", "/approvals"))["approvals"]
        assert [a["work_item_id"] for a in approvals] == [r1["id"], risky["id"]]
        approval = approvals[1]
        expected = hashlib.sha256("\0".join(("k3", "r3", "Fix build", '["shell"]', "{}"))
                                  .encode()).hexdigest()
        assert (approval["status"], approval["requested_action"], approval["parameters_hash"],
                approval["risk_level"]) == ("pending", "Fix build", expected, "r3")
        assert "expires_at" not in approval
        panel = await self.company_ok("GET", "")
        assert [a["id"] for a in panel["approvals"]] == [approval["id"], approvals[0]["id"]]
        assert panel["health"]["pending_approvals"] == 2
        await self.company_refused("POST", f"/work-items/{risky['id']}/queue", None, 409,
                                   "Work item is not authorized for queueing",
                                   tables=WORK_TABLES)
        for body in ({}, {"decision": "maybe"}):
            await self.company_refused("POST", f"/approvals/{approval['id']}/decide", body, 400,
                                       "Decision must be approved or rejected",
                                       tables=WORK_TABLES)
        for odd in ("999", "x"):
            await self.company_refused("POST", f"/approvals/{odd}/decide",
                                       {"decision": "approved"}, 404, "Approval not found",
                                       tables=WORK_TABLES)
        decided = await self.company_ok("POST", f"/approvals/{approval['id']}/decide",
                                        {"decision": "approved", "reason": "fine"})
        assert decided == {"status": "approved", "work_item_status": "authorized"}
        await self.company_refused("POST", f"/approvals/{approval['id']}/decide",
                                   {"decision": "rejected"}, 409,
                                   "Approval has already been decided", tables=WORK_TABLES)
        await self.company_refused("POST", f"/work-items/{risky['id']}/approve", None, 409,
                                   "Work item does not have a pending approval",
                                   tables=WORK_TABLES)
        assert await self.company_ok("POST", f"/work-items/{risky['id']}/queue") == {
            "status": "queued"}
        # the other one: rejected through the approvals route releases nothing (no estimate)
        rejected = await self.company_ok("POST", f"/approvals/{approvals[0]['id']}/decide",
                                         {"decision": "rejected"})
        assert rejected == {"status": "rejected", "work_item_status": "cancelled"}
        # an item approved through /work-items/:id/approve
        third = await self.create(title="Third", risk_level="r3", estimated_cost="1")
        assert await self.company_ok("POST", f"/work-items/{third['id']}/approve", {
            "reason": "ok"}) == {"status": "approved", "work_item_status": "authorized"}
        run = await self.company_ok("POST", f"/work-items/{third['id']}/run", status=202)
        assert run == {"work_item_id": third["id"], "status": "queued",
                       "message": "The Chief scheduler will start this work item."}
        fourth = await self.create(title="Fourth", risk_level="r3", estimated_cost="2")
        no = await self.company_ok("POST", f"/approvals/{approvals[0]['id'] + 2}/decide",
                                   {"decision": "rejected"})
        assert no == {"status": "rejected", "work_item_status": "cancelled"}
        ledger = [(e["entry_type"], e["amount_nanos"], e["reference"], e["work_item_id"])
                  for e in await self.rows("studio_budget_ledger")]
        assert ledger[-1] == ("release", -2_000_000_000, "approval_rejection", fourth["id"])
        events = [e["event_type"] for e in (await self.company_ok(
            "GET", f"/work-items/{risky['id']}/timeline"))["events"]]
        assert events == ["work_item.created", "approval.approved", "work_item.queued"]

    async def test_queue_run_and_cancel(self) -> None:
        await self.operating()
        item = await self.create(estimated_cost="0.5")
        await self.company_refused("POST", f"/work-items/{item['id']}/queue", None, 409,
                                   "Work item is not authorized for queueing",
                                   tables=WORK_TABLES)
        assert (await self.company_ok("POST", f"/work-items/{item['id']}/run", status=202)
                )["status"] == "queued"
        assert await self.company_ok("POST", f"/work-items/{item['id']}/cancel") == {
            "status": "cancelled"}
        for path, message in (("cancel", "Work item cannot be cancelled in its current state"),
                              ("run", "Work item is not scheduled"),
                              ("queue", "Work item is not authorized for queueing")):
            await self.company_refused("POST", f"/work-items/{item['id']}/{path}", None, 409,
                                       message, tables=WORK_TABLES)
        ledger = [(e["entry_type"], e["amount_nanos"], e["reference"])
                  for e in await self.rows("studio_budget_ledger")]
        assert ledger == [("reservation", 500_000_000, "work_item"),
                          ("release", -500_000_000, "cancellation")]
        shown = (await self.company_ok("GET", f"/work-items/{item['id']}/timeline"))
        assert shown["work_item"]["reserved_cost"] == "0"
        assert [e["event_type"] for e in shown["events"]] == ["work_item.created",
                                                             "work_item.cancelled"]
        # [P-36]: a blocked item is an explicit owner retry
        blocked = await self.create(title="Blocked")
        await self.set_status(blocked["id"], "blocked")
        assert (await self.company_ok("POST", f"/work-items/{blocked['id']}/run", status=202)
                )["status"] == "queued"
        events = (await self.company_ok("GET", f"/work-items/{blocked['id']}/timeline"))[
            "events"]
        assert events[-1]["event_type"] == "work_item.requeued"
        # another user's studio cannot reach the item
        await self.company_refused("POST", f"/work-items/{blocked['id']}/cancel", None, 404,
                                   "Agent Studio not found", token=self.bob,
                                   tables=WORK_TABLES)
        await self.studio("other")
        await self.company_ok("GET", "", studio_id="other")
        await self.company_refused("POST", f"/work-items/{blocked['id']}/cancel", None, 404,
                                   "Work item not found", studio_id="other",
                                   tables=WORK_TABLES)

    async def set_status(self, item_id: int, status: str) -> None:
        t = schema.studio_work_items

        def write(conn: Any) -> None:
            conn.execute(t.update().where(t.c.id == item_id).values(status=status))

        await self.ctx.db.transaction(write)

    async def executing(self, item_id: int, kind: str, run_id: str) -> int:
        """An executing attempt of ``item_id`` linked to a running run, as a start makes it."""
        user_id, now = await self.alice_id(), self.ctx.now()
        company_id = (await self.rows("studio_companies"))[0]["id"]

        def write(conn: Any) -> int:
            session = f"pcw-{run_id}"
            save_session(conn, user_id, session, {"title": "Personal Company: t",
                                                  "internal": True},
                         [{"id": f"acm-{run_id}", "role": "assistant", "content": ""}], now)
            create_run(conn, {"id": run_id, "user_id": user_id, "session_id": session,
                              "assistant_message_id": f"acm-{run_id}", "mode": "agent_group",
                              "status": "running", "node_name": "elsewhere"}, now)
            t, a = schema.studio_work_items, schema.studio_work_attempts
            conn.execute(t.update().where(t.c.id == item_id).values(status="executing"))
            key = conn.execute(a.insert().values(
                work_item_id=item_id, personal_company_id=company_id, attempt_number=1,
                advanced_chat_run_id=run_id, kind=kind, status="executing", started_at=now,
                lease_expires_at=now, created_at=now, updated_at=now)).inserted_primary_key
            return int(key[0])

        return await self.ctx.db.transaction(write)

    async def run_status(self, run_id: str) -> str:
        run = await self.ctx.db.transaction(find_run, run_id)
        return str(run.status)

    async def test_pause_interrupts_executing_work_and_stops_its_runs(self) -> None:
        await self.operating()
        first, second = await self.create(title="A"), await self.create(title="B")
        execution = await self.executing(first["id"], "execution", "acr-exec")
        review = await self.executing(second["id"], "review", "acr-review")
        assert await self.company_ok("POST", "/pause") == {"state": "paused"}
        attempts = {a["id"]: a for a in await self.rows("studio_work_attempts")}
        for attempt_id in (execution, review):
            assert attempts[attempt_id]["status"] == "cancelled"
            assert attempts[attempt_id]["result_summary"] == "Studio operations paused"
        items = {w["id"]: w["status"] for w in await self.rows("studio_work_items")}
        assert items == {first["id"]: "queued", second["id"]: "awaiting_review"}
        assert await self.run_status("acr-exec") == "cancelled"
        assert await self.run_status("acr-review") == "cancelled"
        timeline = await self.company_ok("GET", f"/work-items/{first['id']}/timeline")
        assert timeline["events"][-1]["event_type"] == "work_attempt.interrupted"
        assert timeline["attempts"][0]["advanced_chat_run_id"] == "acr-exec"
        session = await self.company_ok("GET", f"/work-items/{first['id']}/internal-session")
        assert session["readonly"] is True and session["run"]["id"] == "acr-exec"
        assert session["session"]["id"] == "pcw-acr-exec"
        assert session["attempt"]["id"] == execution
        kinds = [s["kind"] for s in await self.rows("studio_signals")]
        assert kinds.count("work_attempt.interrupted") == 2

    async def test_cancel_stops_the_executing_run(self) -> None:
        await self.operating()
        item = await self.create()
        attempt = await self.executing(item["id"], "execution", "acr-cancel")
        assert await self.company_ok("POST", f"/work-items/{item['id']}/cancel") == {
            "status": "cancelled"}
        stored = next(a for a in await self.rows("studio_work_attempts") if a["id"] == attempt)
        assert stored["status"] == "cancelled"
        assert await self.run_status("acr-cancel") == "cancelled"

    async def test_connector_approvals(self) -> None:
        await self.operating()
        item = await self.create()
        await self.executing(item["id"], "execution", "acr-conn")
        user_id, now = await self.alice_id(), self.ctx.now()

        def tasks(conn: Any) -> None:
            devices.create(conn, device_id="acd-studio", user_id=user_id, name="Box", remark="",
                           mode="local", listen_port=0, token_hash="h", hidden=False, now=now)
            for task_id, run_id in (("act-one", "acr-conn"), ("act-two", "acr-conn"),
                                    ("act-loose", "")):
                connector_tasks.create(conn, task_id=task_id, user_id=user_id,
                                       device_id="acd-studio", action="run_command",
                                       payload={"command": "rm -rf dist"},
                                       workspace_path="/srv", status="pending_approval",
                                       now=now, run_id=run_id)

        await self.ctx.db.transaction(tasks)
        panel = await self.company_ok("GET", "")
        shown = panel["connector_approvals"]
        assert [t["id"] for t in shown] == ["act-one", "act-two"]
        assert shown[0]["work_item_id"] == item["id"] and shown[0]["run_id"] == "acr-conn"
        assert shown[0]["work_item_title"] == "Fix build"
        assert shown[0]["payload"] == {"command": "rm -rf dist"}
        assert panel["health"]["pending_approvals"] == 2
        tables = ("connector_tasks", "studio_audit_events")
        await self.company_refused("POST", "/connector-approvals/act-nope/decide",
                                   {"approved": True}, 404, "Connector approval not found",
                                   tables=tables)
        await self.company_refused("POST", "/connector-approvals/act-loose/decide",
                                   {"approved": True}, 404,
                                   "Connector approval is not owned by this Studio",
                                   tables=tables)
        assert await self.company_ok("POST", "/connector-approvals/act-one/decide",
                                     {"approved": True}) == {"status": "queued"}
        assert await self.company_ok("POST", "/connector-approvals/act-two/decide",
                                     {"approved": False}) == {"status": "failed"}
        again = await self.company_refused("POST", "/connector-approvals/act-two/decide",
                                           {"approved": True}, 409,
                                           "Connector approval has already been decided",
                                           tables=tables)
        assert again["status"] == "failed"
        stored = {t["id"]: t for t in await self.rows("connector_tasks")}
        assert stored["act-two"]["error_message"] == "denied by owner: Studio owner decision"
        events = (await self.company_ok("GET", f"/work-items/{item['id']}/timeline"))["events"]
        assert [e["event_type"] for e in events[-2:]] == ["connector_approval.queued",
                                                         "connector_approval.failed"]


class PostgresWorkItemRouteTests(WorkItemRouteTests):
    backend = "postgresql"
