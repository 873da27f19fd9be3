"""Approval mode ``assistant``: the user's approval agent decides connector tasks (agents
contract §1.13 "Checker approval").

Real Lockgate on SQLite, a linked device row acting through the real task queue, and the
tool-calling upstream answering both the run's rounds and the checker's call: the checker's
call goes through the internal /v1 path, so it is a usage-log row and part of the run's cost.
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.store import connector_tasks, devices
from gateway.store.connector_tasks import TaskRow
from tests.console.test_assistant_completions import AssistantCase, cost_nanos
from tests.support.tool_upstream import text, tool_call

DEVICE = "acd-laptop"
BASE = "/api/user/advanced-chat"


def verdict(decision: str, opinion: str = "") -> dict[str, Any]:
    arguments = {"decision": decision, **({"opinion": opinion} if opinion else {})}
    return tool_call("connector_approval_decision", arguments, "check_1")


class CheckerTests(AssistantCase):
    async def start_checked_run(self, *answers: Any) -> str:
        await self.provision()
        now = self.ctx.now()

        def link(conn: Any) -> None:
            device = devices.create(conn, device_id=DEVICE, user_id=self.user_id,
                                    name="laptop", remark="", mode="platform", listen_port=0,
                                    token_hash="0" * 64, hidden=False, now=now)
            devices.report(conn, device, {"os": "linux", "arch": "amd64"}, now)

        await self.ctx.db.transaction(link)
        agent = await self.call("POST", f"{BASE}/agents", {
            "name": "Reviewer", "system_prompt": "You are careful."}, token=self.user_token)
        assert agent.status in (200, 201), agent
        saved = await self.call("PUT", f"{BASE}/settings", {
            "connector_approval_agent_id": agent.json()["id"]}, token=self.user_token)
        assert saved.status == 200, saved
        self.upstream.script(
            tool_call("workspace_run_command", {"command": "rm -rf build"}), *answers)
        started = await self.complete({
            "messages": [{"role": "user", "content": "clean up"}], "mode": "assistant",
            "connector_device_id": DEVICE, "connector_workspace_path": "/w",
            "connector_approval_mode": "assistant"})
        assert started.status == 202, started
        return str(started.json()["run"]["id"])

    async def device_runs_next(self, output: str) -> TaskRow:
        for _ in range(1500):  # ~30 s: the machine may be busy
            now = self.ctx.now()

            def work(conn: Any) -> TaskRow | None:
                task = connector_tasks.claim_next(conn, DEVICE, self.user_id, "http", now)
                if task is not None:
                    connector_tasks.finish(conn, task.id, DEVICE, success=True, result=output,
                                           error_message="", output={}, now=now)
                return task

            task = await self.ctx.db.transaction(work)
            if task is not None:
                return task
            await deferLater(reactor, 0.02, lambda: None)
        raise AssertionError("no task was queued for the device")

    async def checker_events(self, run_id: str) -> list[dict[str, Any]]:
        return [e["payload"] for e in await self.events(run_id) if e["event"] == "agent_task"]

    async def test_yes_queues_the_task_and_the_checker_is_billed_to_the_run(self) -> None:
        run_id = await self.start_checked_run(verdict("yes", "a build cleanup"))
        task = await self.device_runs_next("removed")
        assert task.payload["command"] == "rm -rf build"
        self.clock.advance(1)  # the run re-reads its task every second
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed", finished
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == ("ok", "removed")
        # the checker saw the task, not the conversation, and had to call the decision tool
        check = self.upstream.requests[1]
        assert [t["function"]["name"] for t in check["tools"]] == ["connector_approval_decision"]
        assert check["messages"][0]["content"].startswith("You are careful.")
        asked = orjson.loads(check["messages"][1]["content"])
        assert (asked["action"], asked["arguments"]["command"], asked["workspace_path"],
                asked["workspace_unrestricted"]) == ("run_command", "rm -rf build", "/w", False)
        assert "clean up" not in orjson.dumps(check["messages"]).decode()
        running, done = await self.checker_events(run_id)
        assert (running["status"], running["kind"], running["connector_task_id"]) == (
            "running", "approval", task.id)
        assert (done["status"], done["decision"], done["opinion"], done["task_id"]) == (
            "completed", "yes", "a build cleanup", running["task_id"])
        count, total = await self.usage_cost()
        assert count == 3 and cost_nanos(finished["cost"]) == total > 0
        await self.verify_ledger()

    async def test_no_denies_the_task_with_the_opinion(self) -> None:
        run_id = await self.start_checked_run(verdict("no", "destroys the build"))
        finished = await self.wait_for_run(run_id)
        [detail] = finished["tool_call_details"]
        assert (detail["status"], detail["result"]) == (
            "error", "Connector tool failed: denied by checker: destroys the build")

    async def test_an_answer_without_the_decision_tool_rejects(self) -> None:
        run_id = await self.start_checked_run(text("Looks fine to me."))
        finished = await self.wait_for_run(run_id)
        [detail] = finished["tool_call_details"]
        assert detail["result"] == ("Connector tool failed: denied by checker: no "
                                    "connector_approval_decision call")
        assert (await self.checker_events(run_id))[-1]["status"] == "error"

    async def test_escalate_leaves_the_task_to_the_owner(self) -> None:
        run_id = await self.start_checked_run(verdict("escalate", "not sure"))
        for _ in range(1500):
            events = await self.checker_events(run_id)
            if len(events) == 2:
                break
            await deferLater(reactor, 0.02, lambda: None)
        assert events[-1]["status"] == "approval_required"
        [pending] = (await self.call("GET", f"{BASE}/runs/{run_id}/connector-tasks/pending",
                                     token=self.user_token)).json()
        decided = await self.call("POST", f"{BASE}/connector-tasks/{pending['id']}/decision",
                                  {"approved": True}, token=self.user_token)
        assert decided.json() == {"ok": True, "status": "queued"}
        await self.device_runs_next("removed")
        self.clock.advance(1)
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed"
        assert finished["tool_call_details"][0]["result"] == "removed"
