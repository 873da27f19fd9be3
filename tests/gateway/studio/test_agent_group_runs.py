"""Studio work as true ``agent_group`` runs: the chief delegates with ``agent_delegate``, members
work in sub-runs billed through the internal /v1 path, the reviewer's delegation lets the
chief record ``verified``, and the control loop (ticked by a ``Clock``) delivers the item --
with the audit timeline and the costs equal to the usage log to the nano-unit (agents contract
§1.8, §1.10, §1.12, §4.8, §4.10, [P-42]).  Real SQLite, the real run service and a scripted
loopback upstream."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.store import schema
from tests.console.test_assistant_completions import cost_nanos
from tests.gateway.studio.test_control_loop import STUDIO, StudioLoopCase
from tests.support.tool_upstream import HANG, text, tool_call


def delegate(agent_id: str, goal: str, call_id: str = "call_d") -> dict[str, Any]:
    return tool_call("agent_delegate", {"group_id": STUDIO, "agent_id": agent_id,
                                        "goal": goal}, call_id)


class DelegatedWorkFlowTests(StudioLoopCase):
    async def test_work_is_delegated_reviewed_verified_and_delivered_on_its_own(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item(estimated=2_000_000)
        self.upstream.script(
            delegate("wrk", "Write the notes"),                       # chief, execution
            text("Notes written to notes.md."),                       # worker
            text("Delivered notes.md. Evidence: the worker's report."),  # chief
            delegate("rev", "Inspect notes.md", "call_r"),            # chief, review
            text("notes.md meets the definition of done."),           # reviewer
            tool_call("studio_review_work", {"decision": "verified",
                                             "summary": "meets the definition"}, "call_v"),
            text("Review recorded."))                                 # chief
        await self.tick()
        [execution] = await self.attempts(item_id)
        assert (execution["kind"], execution["status"]) == ("execution", "executing")
        # the run's outcome is read the moment it ends: no tick happened since the start
        await self.until_status(item_id, "awaiting_review")
        run = await self.wait_for_run(execution["advanced_chat_run_id"])
        assert (run["mode"], run["status"]) == ("agent_group", "completed"), run

        chief_round, worker_round, chief_final = self.upstream.requests[:3]
        chief_tools = [t["function"]["name"] for t in chief_round["tools"]]
        assert "agent_delegate" in chief_tools and "studio_review_work" not in chief_tools
        system = chief_round["messages"][0]["content"]
        assert "- wrk: Wrk (worker)" in system and "- rev: Rev (reviewer)" in system
        assert "chk:" not in system  # the checker only approves
        assert worker_round["model"] == "gpt-fake"  # no model of its own: the chief's
        assert "You are Wrk, a worker member of the studio Ops" in \
            worker_round["messages"][0]["content"]
        assert worker_round["messages"][-1] == {"role": "user", "content": "Write the notes"}
        assert "agent_delegate" not in [t["function"]["name"]
                                        for t in worker_round.get("tools") or []]
        assert chief_final["messages"][-1] == {
            "role": "tool", "tool_call_id": "call_d",
            "content": "[Wrk] Notes written to notes.md."}
        events = await self.events(run["id"])
        tasks = [e["payload"] for e in events if e["event"] == "agent_task"]
        assert [(t["status"], t["agent_id"], t["agent_type"], t["kind"]) for t in tasks] == [
            ("running", "wrk", "worker", "cps"), ("completed", "wrk", "worker", "cps")]
        assert tasks[0]["task_id"].startswith("agt-") and tasks[0]["parent_id"] == "call_d"
        assert tasks[1]["result"] == "Notes written to notes.md."
        lines = [(e["payload"]["role"], e["payload"]["content"]) for e in events
                 if e["event"] == "agent_message"]
        assert lines == [("user", "Write the notes"),
                         ("assistant", "Notes written to notes.md.")]

        await self.tick()  # the review starts
        await self.until_status(item_id, "verified")
        _, review = await self.attempts(item_id)
        review_run = await self.wait_for_run(review["advanced_chat_run_id"])
        assert (review_run["mode"], review_run["status"]) == ("agent_group", "completed")

        async def review_cost_recorded() -> bool:
            return bool((await self.attempts(item_id))[1]["cost_nanos"])

        await self.until(review_cost_recorded, "the review run's cost recorded")
        await self.tick()
        assert (await self.item(item_id))["status"] == "delivered"
        assert await self.audit_types(item_id) == [
            "work_attempt.leased", "work_attempt.completed", "work_attempt.leased",
            "review_attempt.verified", "work_item.delivered"]
        timeline = await self.call(
            "GET", f"/api/user/personal-company/work-items/{item_id}/timeline"
            f"?studio_id={STUDIO}", token=self.user_token)
        assert timeline.status == 200, timeline
        assert [e["event_type"] for e in timeline.json()["events"]] == [
            "work_attempt.leased", "work_attempt.completed", "work_attempt.leased",
            "review_attempt.verified", "work_item.delivered"]
        assert [(a["kind"], a["status"]) for a in timeline.json()["attempts"]] == [
            ("execution", "awaiting_review"), ("review", "verified")]
        assert timeline.json()["work_item"]["status"] == "delivered"

        # every model call (chief, worker, reviewer) is one usage-log row; the runs' costs,
        # the attempts' costs and the item's consumed cost are the same sums ([P-42])
        await self.gateway.settler.flush()
        count, total = await self.usage_cost()
        execution, review = await self.attempts(item_id)
        work = await self.item(item_id)
        assert count == 7
        assert execution["cost_nanos"] + review["cost_nanos"] == work["consumed_cost_nanos"] \
            == total
        rows = await self.usage_rows()
        assert execution["cost_nanos"] == sum(r["cost_nanos"] for r in rows[:3])
        assert review["cost_nanos"] == sum(r["cost_nanos"] for r in rows[3:])
        ledger = [(r["entry_type"], r["amount_nanos"])
                  for r in await self.rows(schema.studio_budget_ledger, work_item_id=item_id)]
        assert ledger == [("reservation", 2_000_000), ("consumption", execution["cost_nanos"]),
                          ("release", -2_000_000), ("consumption", review["cost_nanos"])]
        [artifact] = await self.rows(schema.studio_artifacts, work_item_id=item_id)
        assert artifact["acceptance_state"] == "verified"

    async def test_a_worker_delegation_does_not_let_the_chief_record_a_review(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item(status="awaiting_review")
        self.upstream.script(
            delegate("wrk", "Inspect it"), text("Looks fine to me."),
            tool_call("studio_review_work", {"decision": "verified", "summary": "ok"}, "c2"),
            text("Could not record."))
        await self.tick()
        [review] = await self.attempts(item_id)
        await self.until_status(item_id, "blocked")  # the run ended without a decision
        assert self.upstream.requests[3]["messages"][-1]["content"] == (
            "Chief must receive a reviewer delegation result before recording review")
        review = (await self.attempts(item_id))[0]
        assert review["result_summary"] == "Reviewer did not record a decision"


class DelegationRuleTests(StudioLoopCase):
    async def test_the_chief_cannot_delegate_to_itself_the_checker_or_a_stranger(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item()
        self.upstream.script(
            delegate("chief", "do it", "c1"), delegate("chk", "do it", "c2"),
            delegate("nobody", "do it", "c3"),
            tool_call("agent_delegate", {"group_id": "other", "agent_id": "wrk",
                                         "goal": "x"}, "c4"),
            text("I give up."))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        results = {d["id"]: (d["status"], d["result"]) for d in run["tool_call_details"]}
        assert results == {
            "c1": ("error", "Delegated agent failed: cannot delegate to the studio's chief"),
            "c2": ("error", "Delegated agent failed: cannot delegate to the studio's checker"),
            "c3": ("error", "Delegated agent failed: unknown studio member: nobody"),
            "c4": ("error", "Delegated agent failed: unknown studio: other")}
        assert len(self.upstream.requests) == 5  # no member loop ran

    async def test_a_failing_member_is_a_tool_error_and_its_cost_still_counts(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item()
        self.upstream.script(delegate("wrk", "go"), {"status": 400}, text("It failed."))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        [detail] = run["tool_call_details"]
        assert detail["status"] == "error"
        assert detail["result"].startswith("Delegated agent failed: ")
        tasks = [e["payload"] for e in await self.events(run["id"]) if e["event"] == "agent_task"]
        assert [t["status"] for t in tasks] == ["running", "error"]
        await self.gateway.settler.flush()
        _count, total = await self.usage_cost()
        assert cost_nanos(run["cost"]) == total


class PauseTests(StudioLoopCase):
    async def test_pause_mid_delegation_stops_the_run_and_resume_continues(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item()
        self.upstream.script(delegate("wrk", "go"), HANG)  # the worker's call hangs
        await self.tick()
        await self.upstream.hung
        [attempt] = await self.attempts(item_id)
        paused = await self.call("POST", f"/api/user/personal-company/pause?studio_id={STUDIO}",
                                 token=self.user_token)
        assert paused.status == 200 and paused.json() == {"state": "paused"}, paused
        [attempt] = await self.attempts(item_id)
        assert (attempt["status"], attempt["result_summary"]) == (
            "cancelled", "Studio operations paused")
        assert (await self.item(item_id))["status"] == "queued"
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert run["status"] == "cancelled"
        [worker_call] = self.upstream.hanging

        async def abandoned() -> bool:  # the member's model call in flight is closed too
            return bool(getattr(worker_call, "_disconnected", False))

        await self.until(abandoned, "the worker's model call closed")

        # the cancelled run's cost is still the attempt's and the item's ([P-42])
        async def cost_recorded() -> bool:
            return bool((await self.attempts(item_id))[0]["cost_nanos"])

        await self.until(cost_recorded, "the cancelled run's cost recorded")
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        _count, total = await self.usage_cost()
        assert attempt["cost_nanos"] == cost_nanos(run["cost"]) == total
        assert (await self.item(item_id))["consumed_cost_nanos"] == total
        await self.tick()
        assert len(await self.attempts(item_id)) == 1  # paused: nothing starts
        resumed = await self.call(
            "POST", f"/api/user/personal-company/resume?studio_id={STUDIO}",
            token=self.user_token)
        assert resumed.json() == {"state": "operating"}
        self.upstream.script(text("done"))
        await self.tick()
        _first, second = await self.attempts(item_id)
        assert (second["attempt_number"], second["kind"]) == (2, "execution")
        await self.until_status(item_id, "awaiting_review")

    async def test_the_owner_cannot_stop_an_internal_run(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(HANG)
        await self.tick()
        await self.upstream.hung
        [attempt] = await self.attempts(item_id)
        stopped = await self.call(
            "POST", f"/api/user/advanced-chat/runs/{attempt['advanced_chat_run_id']}/stop",
            token=self.user_token)
        assert stopped.status == 409, stopped
        assert stopped.json()["error"] == (
            "Internal Studio runs are controlled by Studio operations")
        [session] = await self.rows(schema.assistant_sessions,
                                    id=(await self.wait_for_run(
                                        attempt["advanced_chat_run_id"], ("running",))
                                        )["session_id"])
        assert session["internal"] is True


class LeaseExpiryTests(StudioLoopCase):
    async def test_a_third_expired_lease_dead_letters_the_item(self) -> None:
        await self.studio()
        item_id = await self.work_item()
        self.upstream.script(HANG, HANG, HANG, HANG)
        await self.tick()
        for _ in range(2):
            await self.tick(11 * 60)  # expired: requeued and started again
        statuses = [a["status"] for a in await self.attempts(item_id)]
        assert statuses == ["retryable_failure", "retryable_failure", "executing"]
        await self.tick(11 * 60)
        attempts = await self.attempts(item_id)
        assert [a["status"] for a in attempts] == [
            "retryable_failure", "retryable_failure", "dead_letter"]
        assert (await self.item(item_id))["status"] == "dead_letter"
        for attempt in attempts:
            run = await self.wait_for_run(attempt["advanced_chat_run_id"])
            assert run["status"] == "cancelled"


class SplitTests(StudioLoopCase):
    async def test_a_member_splits_work_into_parallel_helpers(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item()
        self.upstream.script(
            delegate("wrk", "Do both parts"),
            tool_call("agent_split", {"tasks": [{"id": "a", "goal": "part A"},
                                                {"goal": "part B", "context": "B notes"}]},
                      "s1"),
            text("helper done"), text("helper done"),
            text("Both parts done."), text("Delivered."))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert run["status"] == "completed", run
        member_tools = [t["function"]["name"] for t in self.upstream.requests[1]["tools"]]
        assert "agent_split" in member_tools and "agent_delegate" not in member_tools
        helpers = self.upstream.requests[2:4]
        for helper in helpers:
            assert "agent_split" not in [t["function"]["name"]
                                         for t in helper.get("tools") or []]
            assert "one of 2 parallel helpers of Wrk" in helper["messages"][0]["content"]
        assert sorted(h["messages"][-1]["content"] for h in helpers) == [
            "part A", "part B\n\nContext: B notes"]
        split_result = self.upstream.requests[4]["messages"][-1]
        assert split_result["tool_call_id"] == "s1"
        assert orjson.loads(split_result["content"]) == [
            {"id": "a", "status": "completed", "result": "helper done", "mutations": 0},
            {"id": "task-2", "status": "completed", "result": "helper done", "mutations": 0}]
        tasks = [e["payload"] for e in await self.events(run["id"])
                 if e["event"] == "agent_task"]
        assert sorted((t["kind"], t["status"]) for t in tasks) == [
            ("cps", "completed"), ("cps", "running"), ("split", "completed"),
            ("split", "completed"), ("split", "running"), ("split", "running")]
        count, total = await self.usage_cost()
        assert count == 6 and cost_nanos(run["cost"]) == total

    async def test_a_split_without_tasks_is_invalid(self) -> None:
        await self.studio(workers=("wrk",))
        item_id = await self.work_item()
        self.upstream.script(delegate("wrk", "go"), tool_call("agent_split", {"tasks": []}, "s1"),
                             text("no split"), text("ok"))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert self.upstream.requests[2]["messages"][-1]["content"] == (
            "Invalid tool arguments: tasks must be a list of 1 to 8 objects with a goal")


class MemberEquipmentTests(StudioLoopCase):
    async def test_a_member_works_with_its_own_skills(self) -> None:
        await self.studio(workers=("wrk",))
        skill_id = await self.skill()
        await self.equip_worker(skill_ids=[skill_id])
        item_id = await self.work_item()
        self.upstream.script(delegate("wrk", "a poem"),
                             tool_call("activate_skill", {"skill_id": skill_id}, "k1"),
                             text("A poem."), text("Delivered."))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        assert run["status"] == "completed", run
        chief, worker = self.upstream.requests[:2]
        assert "activate_skill" not in [t["function"]["name"] for t in chief["tools"]]
        assert "activate_skill" in [t["function"]["name"] for t in worker["tools"]]
        assert "[Skill: Haiku]\nBe brief." in worker["messages"][0]["content"]
        lines = [e["payload"] for e in await self.events(run["id"])
                 if e["event"] == "agent_message" and e["payload"]["role"] == "tool"]
        assert [(line["tool"], line["status"]) for line in lines] == [("activate_skill", "ok")]

    async def test_a_member_with_an_unknown_server_cannot_be_delegated_to(self) -> None:
        await self.studio(workers=("wrk",))
        await self.equip_worker(mcp_server_ids=["nope"])
        item_id = await self.work_item()
        self.upstream.script(delegate("wrk", "go"), text("It could not work."))
        await self.tick()
        [attempt] = await self.attempts(item_id)
        run = await self.wait_for_run(attempt["advanced_chat_run_id"])
        [detail] = run["tool_call_details"]
        assert (detail["status"], detail["result"]) == (
            "error", "Delegated agent failed: unknown or disabled MCP server: nope")
