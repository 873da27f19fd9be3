"""The owner's studio chat (completions ``mode=agent_group``, agents contract §1.7, §1.8 step 1,
§4.16), the studio's checker as the approver of internal runs (§1.12, §4.13) and deleting a
studio (§4.1).  Real SQLite, the real run service, a scripted loopback upstream and a linked
device row acting through the real task queue."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import update
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.store import connector_tasks, devices, schema
from gateway.store.connector_tasks import TaskRow
from tests.console.test_assistant_completions import cost_nanos
from tests.gateway.studio.test_control_loop import STUDIO, StudioLoopCase
from tests.support.tool_upstream import HANG, text, tool_call

DEVICE = "acd-laptop"


class StudioChatCase(StudioLoopCase):
    async def chat(self, content: str = "Please write the release notes",
                   **extra: Any) -> dict[str, Any]:
        started = await self.complete({"mode": "agent_group", "agent_group_id": STUDIO,
                                       "messages": [{"role": "user", "content": content}],
                                       **extra})
        assert started.status == 202, started
        return await self.wait_for_run(started.json()["run"]["id"])

    def tool_names(self, request: int) -> list[str]:
        return [t["function"]["name"] for t in self.upstream.requests[request].get("tools") or []]


class IntakeDeskTests(StudioChatCase):
    async def test_first_chat_creates_operations_and_the_chief_only_takes_work(self) -> None:
        await self.studio(operations=False)
        self.upstream.script(
            tool_call("studio_create_work", {"title": "Release notes",
                                             "definition_of_done": "notes.md exists",
                                             "priority": 3}, "c1"),
            tool_call("studio_list_work", {}, "c2"),
            text("Queued the release notes."))
        run = await self.chat()
        assert (run["mode"], run["status"]) == ("agent_group", "completed"), run
        assert self.tool_names(0) == ["studio_create_work", "studio_list_work"]
        assert "the intake desk" in self.upstream.requests[0]["messages"][0]["content"]
        [company] = await self.rows(schema.studio_companies, agent_group_id=STUDIO)
        assert company["state"] == "operating"
        self.company_id = company["id"]
        [item] = await self.rows(schema.studio_work_items, personal_company_id=company["id"])
        assert (item["title"], item["definition_of_done"], item["status"], item["risk_level"],
                item["priority"]) == ("Release notes", "notes.md exists", "queued", "r0", 3)
        assert item["idempotency_key"].startswith("chief-work_")
        assert await self.audit_types() == ["company.default_enabled",
                                            "work_item.created_from_chat"]
        details = {d["id"]: d for d in run["tool_call_details"]}
        assert details["c1"]["result"].startswith(f"Created Studio work item #{item['id']}. ")
        assert orjson.loads(details["c2"]["result"]) == {
            "studio": {"name": "Ops", "state": "operating"},
            "work_items": [{"id": item["id"], "title": "Release notes", "status": "queued",
                            "priority": 3}],
            "pending_approvals": {"work": 0, "connector": 0}}
        # a second chat finds the record (one record per studio)
        self.upstream.script(text("Nothing new."))
        await self.chat("Anything else?")
        assert len(await self.rows(schema.studio_companies, agent_group_id=STUDIO)) == 1

    async def test_a_paused_studio_chat_delegates_and_the_member_cost_is_the_runs(self) -> None:
        await self.studio(workers=("wrk",))
        paused = await self.call("POST", f"/api/user/personal-company/pause?studio_id={STUDIO}",
                                 token=self.user_token)
        assert paused.status == 200, paused
        self.upstream.script(
            tool_call("agent_delegate", {"agent_id": "wrk", "goal": "Draft it"}, "c1"),
            text("Drafted."), text("The worker drafted it."))
        run = await self.chat()
        assert run["status"] == "completed", run
        tools = self.tool_names(0)
        assert "agent_delegate" in tools
        assert "studio_create_work" not in tools and "studio_review_work" not in tools
        [detail] = run["tool_call_details"]
        assert (detail["status"], detail["result"]) == ("ok", "[Wrk] Drafted.")
        count, total = await self.usage_cost()
        assert count == 3 and cost_nanos(run["cost"]) == total

    async def test_internal_sessions_refuse_the_intake_tools(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(tool_call("studio_create_work", {
            "title": "More", "definition_of_done": "x"}, "c1"),
            tool_call("studio_list_work", {}, "c2"), text("ok"))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        results = {d["id"]: (d["status"], d["result"]) for d in run["tool_call_details"]}
        assert results == {
            "c1": ("error", "internal Studio work sessions cannot create additional work items"),
            "c2": ("error", "internal Studio work sessions cannot inspect the Studio work queue")}
        assert len(await self.rows(schema.studio_work_items)) == 1


class PreparationRefusalTests(StudioChatCase):
    async def refused(self, body: dict[str, Any], message: str) -> None:
        sessions = await self.rows(schema.assistant_sessions)
        answer = await self.complete({"mode": "agent_group",
                                      "messages": [{"role": "user", "content": "hi"}], **body})
        assert answer.status == 400, answer
        assert answer.json()["error"] == message
        assert await self.rows(schema.assistant_sessions) == sessions
        assert self.upstream.requests == []

    async def test_every_studio_preparation_message(self) -> None:
        await self.studio(operations=False)
        await self.refused({}, "Studio is required")
        await self.refused({"agent_group_id": "nope"}, "Studio not found")

        async def members(agents: list[dict[str, Any]]) -> None:
            await self.ctx.db.transaction(lambda conn: conn.execute(
                update(schema.studios).where(schema.studios.c.id == STUDIO)
                .values(agents=agents)))

        checker = {"id": "chk", "name": "Chk", "type": "checker", "chat_agent_id": "default"}
        await members([checker])
        await self.refused({"agent_group_id": STUDIO}, "Studio must contain exactly one chief")
        await members([{"id": "c", "name": "C", "type": "chief", "chat_agent_id": ""}, checker])
        await self.refused({"agent_group_id": STUDIO}, "Studio member must select an agent")
        await members([{"id": "c", "name": "C", "type": "chief", "chat_agent_id": "999"},
                       checker])
        await self.refused({"agent_group_id": STUDIO}, "Referenced chat agent was not found")
        # nothing of operations was created by a refused chat
        assert await self.rows(schema.studio_companies) == []


class CheckerApproverTests(StudioChatCase):
    async def device_runs_next(self, output: str) -> TaskRow:
        for _ in range(1500):  # ~30 s: the machine may be busy
            now = self.ctx.now()

            def claim(conn: Any) -> TaskRow | None:
                return connector_tasks.claim_next(conn, DEVICE, self.user_id, "http", now)

            task = await self.ctx.db.transaction(claim)
            if task is not None:
                # the result arrives the way a device's does: through the links' task service
                device = await self.ctx.db.transaction(devices.get, DEVICE)
                assert device is not None and self.ctx.links is not None
                await self.ctx.links.tasks.record_result(
                    device, task.id, {"success": True, "result": output})
                return task
            await deferLater(reactor, 0.02, lambda: None)
        raise AssertionError("no task was queued for the device")

    async def test_the_studio_checker_approves_an_internal_runs_connector_task(self) -> None:
        await self.studio()
        now = self.ctx.now()

        def link(conn: Any) -> None:
            device = devices.create(conn, device_id=DEVICE, user_id=self.user_id,
                                    name="laptop", remark="", mode="platform", listen_port=0,
                                    token_hash="0" * 64, hidden=False, now=now)
            devices.report(conn, device, {"os": "linux", "arch": "amd64"}, now)
            conn.execute(update(schema.studio_companies)
                         .where(schema.studio_companies.c.id == self.company_id)
                         .values(connector_device_id=DEVICE, connector_workspace_path="/w"))

        await self.ctx.db.transaction(link)
        item_id = await self.work_item()
        self.upstream.script(
            tool_call("workspace_run_command", {"command": "rm -rf build"}, "c1"),
            tool_call("connector_approval_decision", {"decision": "yes",
                                                      "opinion": "a build cleanup"}, "v1"),
            text("Cleaned."))
        await self.tick()
        task = await self.device_runs_next("removed")
        assert (task.action, task.payload["command"]) == ("run_command", "rm -rf build")
        await self.until_status(item_id, "awaiting_review")
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert self.tool_names(0).count("workspace_write_file") == 0  # the chief reads only
        checker_call = self.upstream.requests[1]
        assert checker_call["tools"][0]["function"]["name"] == "connector_approval_decision"
        assert "Check." in checker_call["messages"][0]["content"]  # the checker member's prompt
        approvals = [e["payload"] for e in await self.events(run["id"])
                     if e["event"] == "agent_task"]
        assert [(a["kind"], a["status"], a["agent_id"], a["agent_type"]) for a in approvals] == [
            ("approval", "running", "chk", "checker"), ("approval", "completed", "chk",
                                                         "checker")]
        assert approvals[1]["decision"] == "yes"
        count, total = await self.usage_cost()
        assert count == 3 and cost_nanos(run["cost"]) == total == attempt["cost_nanos"]


class DeleteStudioTests(StudioChatCase):
    async def test_deleting_a_studio_deletes_its_record_and_stops_its_work(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(HANG)
        await self.tick()
        await self.upstream.hung
        [attempt] = await self.attempts(item_id)
        deleted = await self.call("DELETE", f"/api/user/advanced-chat/agent-groups/{STUDIO}",
                                  token=self.user_token)
        assert deleted.status == 200 and deleted.json() == {"message": "Studio deleted"}
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert run["status"] == "cancelled"
        for table in (schema.studio_companies, schema.studio_work_items,
                      schema.studio_work_attempts, schema.studio_audit_events,
                      schema.studio_charters):
            assert await self.rows(table) == [], table.name
        panel = await self.call("GET", f"/api/user/personal-company?studio_id={STUDIO}",
                                token=self.user_token)
        assert panel.status == 404 and panel.json()["error"] == "Agent Studio not found"
        # the same id again is a new studio with a fresh record
        created = await self.call("POST", "/api/user/advanced-chat/agent-groups", {
            "id": STUDIO, "name": "Ops again", "agents": [
                {"id": "c", "type": "chief", "chat_agent_id": "default"},
                {"id": "k", "type": "checker", "chat_agent_id": "default"}]},
            token=self.user_token)
        assert created.status == 200, created
        panel = await self.call("GET", f"/api/user/personal-company?studio_id={STUDIO}",
                                token=self.user_token)
        assert panel.status == 200 and panel.json()["work_items"] == []
        assert panel.json()["company"]["name"] == "Ops again"
