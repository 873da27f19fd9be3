"""Team, hiring and handoffs (agents contract §4.14, [P-38], [P-39]): role templates, plans,
hiring into probation, evidence, promotion, runtime binding versions, handoffs -- every message
verbatim, foreign ids 404, nothing changed on a refusal, audit events recorded."""

from __future__ import annotations

from typing import Any

from tests.console.studio.studio_case import StudioCase

TEAM_TABLES = ("studio_role_templates", "studio_recruitment_plans", "studio_employees",
               "studio_employee_versions", "studio_capability_evidence", "studio_handoffs",
               "studio_audit_events")
PLANS = "/staffing/recruitment-plans"


class TeamRouteTests(StudioCase):
    async def operating(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")

    async def hire(self, title: str = "Analyst") -> dict[str, Any]:
        plan = (await self.company_ok("POST", PLANS, {"title": title, "capability_gap": "gap"},
                                      status=201))["recruitment_plan"]
        hired = await self.company_ok("POST", f"{PLANS}/{plan['id']}/approve", status=201)
        return dict(hired["employee"])

    async def test_role_templates(self) -> None:
        await self.operating()
        created = (await self.company_ok("POST", "/role-templates", {
            "name": "  Senior QA Tester! ", "definition_of_done": "bugs found",
            "required_skills": '["pytest"]', "allowed_tools": ["web"], "max_risk_level": "r2",
            "max_concurrency": 20}, status=201))["role_template"]
        assert created["template_key"] == "senior-qa-tester"
        assert (created["required_skills"], created["allowed_tools"]) == ('["pytest"]',
                                                                          '["web"]')
        assert (created["max_risk_level"], created["max_concurrency"]) == ("r2", 8)
        second = (await self.company_ok("POST", "/role-templates", {
            "name": "Writer", "template_key": "Ab C", "definition_of_done": "d",
            "max_risk_level": "x", "max_concurrency": 0}, status=201))["role_template"]
        assert (second["template_key"], second["max_risk_level"],
                second["max_concurrency"]) == ("ab-c", "r0", 1)
        for body, status, message in (
                ({"name": "n"}, 400, "Role name and definition_of_done are required"),
                ({"definition_of_done": "d"}, 400,
                 "Role name and definition_of_done are required"),
                ({"name": "n", "definition_of_done": "d", "allowed_tools": "{"}, 400,
                 "required_skills and allowed_tools must be valid JSON"),
                ({"name": "Senior QA tester", "definition_of_done": "d"}, 409,
                 "A role template with this key already exists")):
            await self.company_refused("POST", "/role-templates", body, status, message,
                                       tables=TEAM_TABLES)
        listed = (await self.company_ok("GET", "/role-templates"))["role_templates"]
        assert [t["name"] for t in listed] == ["Senior QA Tester!", "Writer"]

    async def test_hiring_evidence_and_promotion(self) -> None:
        await self.operating()
        template = (await self.company_ok("POST", "/role-templates", {
            "name": "QA", "definition_of_done": "d"}, status=201))["role_template"]
        for body, message in (({"title": "t"}, "Recruitment title and capability_gap are required"),
                              ({"title": "t", "capability_gap": "g", "role_template_id": 999},
                               "Role template is not available"),
                              ({"title": "t", "capability_gap": "g", "proposed_tools": "{"},
                               "proposed_tools must be valid JSON")):
            await self.company_refused("POST", PLANS, body, 400, message, tables=TEAM_TABLES)
        plan = (await self.company_ok("POST", PLANS, {
            "title": "Tester", "capability_gap": "no tests", "role_template_id": template["id"],
            "proposed_tools": ["shell"], "max_risk_level": "r1"}, status=201))[
            "recruitment_plan"]
        assert (plan["status"], plan["proposed_tools"]) == ("proposed", '["shell"]')
        risky = (await self.company_ok("POST", PLANS, {
            "title": "Admin", "capability_gap": "g", "max_risk_level": "r2"}, status=201))[
            "recruitment_plan"]
        await self.company_refused("POST", f"{PLANS}/{risky['id']}/approve", None, 409,
                                   "Plans requesting R2 or higher require a separate policy "
                                   "change", tables=TEAM_TABLES)
        assert await self.company_ok("POST", f"{PLANS}/{risky['id']}/reject", {"reason": "no"}
                                     ) == {"status": "rejected"}
        await self.company_refused("POST", f"{PLANS}/{risky['id']}/reject", None, 409,
                                   "Recruitment plan has already been decided",
                                   tables=TEAM_TABLES)
        hired = await self.company_ok("POST", f"{PLANS}/{plan['id']}/approve", status=201)
        employee = hired["employee"]
        assert hired["status"] == "approved"
        assert (employee["name"], employee["role"], employee["status"], employee["version"]) == (
            "Tester", "candidate", "probation", 1)
        assert employee["employee_key"].startswith("employee_")
        for plan_id, status, message in ((plan["id"], 409,
                                          "Recruitment plan has already been decided"),
                                         (999, 404, "Recruitment plan not found"),
                                         ("x", 404, "Recruitment plan not found")):
            await self.company_refused("POST", f"{PLANS}/{plan_id}/approve", None, status,
                                       message, tables=TEAM_TABLES)
        evidence_path = f"/employees/{employee['id']}/capability-evidence"
        rules = ("Capability, evidence_uri, score and confidence are required; score and "
                 "confidence must be between 0 and 1")
        for body in ({}, {"capability": "c", "evidence_uri": "u", "score": 1.2,
                          "confidence": 0.5},
                     {"capability": "c", "evidence_uri": "u", "score": 0.9},
                     {"capability": "c", "evidence_uri": "u", "score": "x", "confidence": 1}):
            await self.company_refused("POST", evidence_path, body, 400, rules,
                                       tables=TEAM_TABLES)
        await self.company_refused("POST", "/employees/999/capability-evidence", {
            "capability": "c", "evidence_uri": "u", "score": 1, "confidence": 1}, 404,
            "Employee not found", tables=TEAM_TABLES)
        promote = f"/employees/{employee['id']}/promote"
        await self.company_refused("POST", promote, None, 409,
                                   "Employee needs verified capability evidence before promotion",
                                   tables=TEAM_TABLES)
        weak = (await self.company_ok("POST", evidence_path, {
            "capability": "testing", "evidence_uri": "https://ci/1", "score": 0.9,
            "confidence": "0.5"}, status=201))["capability_evidence"]
        assert (weak["score"], weak["confidence"], weak["employee_version"]) == ("0.9", "0.5", 1)
        await self.company_refused("POST", promote, None, 409,
                                   "Employee needs verified capability evidence before promotion",
                                   tables=TEAM_TABLES)
        await self.company_ok("POST", evidence_path, {
            "capability": "testing", "evidence_uri": "https://ci/2", "score": 0.8,
            "confidence": 0.7}, status=201)
        assert await self.company_ok("POST", promote) == {"employee_id": employee["id"],
                                                         "status": "active"}
        await self.company_refused("POST", promote, None, 409,
                                   "Only probationary employees can be promoted",
                                   tables=TEAM_TABLES)
        chart = await self.company_ok("GET", "/org-chart")
        assert [e["status"] for e in chart["employees"]] == ["active"]
        assert [p["id"] for p in chart["recruitment_plans"]] == [risky["id"], plan["id"]]
        assert [t["id"] for t in chart["role_templates"]] == [template["id"]]
        events = [e["event_type"] for e in await self.rows("studio_audit_events")]
        assert events[1:] == ["role_template.created", "recruitment_plan.proposed",
                              "recruitment_plan.proposed", "recruitment_plan.rejected",
                              "recruitment_plan.approved", "capability_evidence.recorded",
                              "capability_evidence.recorded", "employee.promoted"]

    async def test_organization_limit(self) -> None:
        await self.operating()
        for n in range(12):
            await self.hire(f"E{n}")
        plan = (await self.company_ok("POST", PLANS, {"title": "13th", "capability_gap": "g"},
                                      status=201))["recruitment_plan"]
        await self.company_refused("POST", f"{PLANS}/{plan['id']}/approve", None, 409,
                                   "Personal Company organization limit reached",
                                   tables=TEAM_TABLES)

    async def test_runtime_binding(self) -> None:
        await self.operating()
        employee = await self.hire()
        path = f"/employees/{employee['id']}/runtime-binding"
        for body, message in (({}, "An existing Advanced Chat agent is required"),
                              ({"advanced_chat_agent_id": "424242"},
                               "An existing Advanced Chat agent is required"),
                              ({"advanced_chat_agent_id": "default",
                                "cloud_sandbox_id": "acs-x", "connector_device_id": "acd-x"},
                               "Choose either a cloud sandbox or a local connector"),
                              ({"advanced_chat_agent_id": "default",
                                "connector_device_id": "acd-x",
                                "connector_workspace_path": "/w"},
                               "connector device not found")):
            await self.company_refused("POST", path, body, 400, message, tables=TEAM_TABLES)
        bound = await self.company_ok("POST", path, {"advanced_chat_agent_id": "default"})
        assert bound == {"employee_id": employee["id"], "version": 2}
        again = await self.company_ok("POST", path, {"advanced_chat_agent_id": "default"})
        assert again["version"] == 3
        versions = [(v["version"], v["prompt_profile"])
                    for v in await self.rows("studio_employee_versions")]
        assert versions == [(1, ""), (2, "advanced_chat_agent:default"),
                            (3, "advanced_chat_agent:default")]

    async def test_handoffs(self) -> None:
        await self.operating()
        first, second = await self.hire("A"), await self.hire("B")
        item = (await self.company_ok("POST", "/work-items", {
            "title": "t", "definition_of_done": "d"}, status=201))["work_item"]
        path = f"/work-items/{item['id']}/handoffs"
        valid = {"to_employee_id": second["id"], "from_employee_id": first["id"],
                 "completion_summary": "done", "next_steps": "review",
                 "evidence": ["log"], "risks": '["none"]'}
        unavailable = ("Handoff contains an unavailable employee, attempt, or invalid "
                       "structured evidence")
        for body in ({}, {**valid, "to_employee_id": 999},
                     {**valid, "from_employee_id": second["id"]},
                     {**valid, "work_attempt_id": 5}, {**valid, "evidence": "{"},
                     {**valid, "next_steps": ""}):
            await self.company_refused("POST", path, body, 400, unavailable,
                                       tables=TEAM_TABLES)
        await self.company_refused("POST", "/work-items/999/handoffs", valid, 404,
                                   "Work item or handoff not found", tables=TEAM_TABLES)
        handoff = (await self.company_ok("POST", path, valid, status=201))["handoff"]
        assert (handoff["status"], handoff["evidence"], handoff["risks"]) == (
            "pending", '["log"]', '["none"]')
        decide = f"/handoffs/{handoff['id']}/decide"
        await self.company_refused("POST", decide, {"decision": "maybe"}, 400, unavailable,
                                   tables=TEAM_TABLES)
        await self.company_refused("POST", "/handoffs/999/decide", {"decision": "accepted"},
                                   404, "Work item or handoff not found", tables=TEAM_TABLES)
        accepted = (await self.company_ok("POST", decide, {"decision": "accepted",
                                                           "note": "thanks"}))["handoff"]
        assert accepted["status"] == "accepted" and "accepted_at" in accepted
        await self.company_refused("POST", decide, {"decision": "rejected"}, 409,
                                   "Handoff has already been decided", tables=TEAM_TABLES)
        timeline = await self.company_ok("GET", f"/work-items/{item['id']}/timeline")
        assert timeline["work_item"]["status"] == "queued"
        assert [h["id"] for h in timeline["handoffs"]] == [handoff["id"]]
        assert [e["event_type"] for e in timeline["events"]] == [
            "work_item.created", "handoff.created", "handoff.accepted"]


class PostgresTeamRouteTests(TeamRouteTests):
    backend = "postgresql"
