"""``/personal-company``: the §4.2 context rules, the panel's first read, bootstrap, charter
revisions, settings, pause/resume, runtime and scheduler -- every message verbatim, ownership
404s, audit events, and that nothing changes on a refusal (agents contract §4.2-§4.8, §4.15)."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.defer import ensureDeferred, gatherResults

from tests.console.studio.studio_case import StudioCase

COMPANY_TABLES = ("studio_companies", "studio_charters", "studio_audit_events")
DEVICES = "/api/user/advanced-chat/devices"
DEFAULT_POLICY = '{"r3":"owner_required","r4":"forbidden"}'


class CompanyRouteTests(StudioCase):
    async def events(self) -> list[str]:
        return [row["event_type"] for row in await self.rows("studio_audit_events")]

    async def test_context_rules_for_every_route(self) -> None:
        await self.studio()
        routes = [("GET", ""), ("POST", "/bootstrap"), ("PUT", "/charter"), ("GET", "/charters"),
                  ("POST", "/pause"), ("POST", "/resume"), ("PUT", "/runtime"),
                  ("PUT", "/scheduler"), ("PUT", "/settings"), ("GET", "/objectives"),
                  ("POST", "/objectives"), ("GET", "/work-items"), ("POST", "/work-items"),
                  ("GET", "/work-items/1/timeline"), ("GET", "/work-items/1/internal-session"),
                  ("POST", "/work-items/1/queue"), ("POST", "/work-items/1/run"),
                  ("POST", "/work-items/1/cancel"), ("POST", "/work-items/1/approve"),
                  ("GET", "/approvals"), ("POST", "/approvals/1/decide"),
                  ("POST", "/connector-approvals/act-x/decide")]
        for method, path in routes:
            body = {} if method != "GET" else None
            for studio_id in (None, "", "%20"):
                await self.company_refused(method, path, body, 400, "studio_id is required",
                                           studio_id=studio_id, tables=COMPANY_TABLES)
            await self.company_refused(method, path, body, 404, "Agent Studio not found",
                                       studio_id="nope", tables=COMPANY_TABLES)
            # another user's studio is exactly a missing one
            await self.company_refused(method, path, body, 404, "Agent Studio not found",
                                       token=self.bob, tables=COMPANY_TABLES)
            if path not in ("", "/bootstrap"):
                await self.company_refused(method, path, body, 404,
                                           "Personal Company has not been bootstrapped",
                                           tables=COMPANY_TABLES)

    async def test_first_read_creates_the_default_record(self) -> None:
        await self.studio()
        panel = await self.company_ok("GET", "")
        company, charter = panel["company"], panel["charter"]
        assert company["name"] == "Growth studio" and company["state"] == "operating"
        assert company["agent_group_id"] == "growth" and company["timezone"] == "UTC"
        assert (company["autonomy_level"], company["daily_budget"], company["monthly_budget"],
                company["balance_floor"]) == ("r0", "0", "0", "0")
        assert company["connector_command_prefixes"] == "[]"
        assert company["max_concurrent_tasks"] == 1
        assert "connector_device_id" not in company and "paused_at" not in company
        assert company["charter_revision_id"] == charter["id"] and charter["revision"] == 1
        assert charter["mission"] == (
            "Chief-scheduled delivery through immutable internal Studio sessions.")
        assert (charter["goals"], charter["approval_policy"]) == ("[]", DEFAULT_POLICY)
        assert (panel["objectives"], panel["work_items"], panel["approvals"],
                panel["connector_approvals"]) == ([], [], [], [])
        assert panel["budget"] == {"daily_limit": "0", "monthly_limit": "0", "reserved": "0",
                                   "consumed": "0", "monthly_reserved": "0"}
        assert panel["health"] == {"active_objectives": 0, "active_work_items": 0,
                                   "blocked_work_items": 0, "pending_approvals": 0}
        assert panel["balance_guard"]["floor"] == "0"
        assert await self.events() == ["company.default_enabled"]
        # a second read creates nothing more
        again = await self.company_ok("GET", "")
        assert again["company"]["id"] == company["id"]
        assert len(await self.rows("studio_companies")) == 1
        assert len(await self.rows("studio_charters")) == 1
        await self.company_refused("POST", "/bootstrap", {"name": "n", "mission": "m"}, 409,
                                   "Personal Company is already bootstrapped",
                                   tables=COMPANY_TABLES)

    async def test_racing_first_reads_create_one_record(self) -> None:
        await self.studio()
        answers = await gatherResults([ensureDeferred(self.company("GET", ""))
                                       for _ in range(4)])
        assert [a.status for a in answers] == [200] * 4, answers
        assert len({a.json()["company"]["id"] for a in answers}) == 1
        assert len(await self.rows("studio_companies")) == 1
        assert len(await self.rows("studio_charters")) == 1
        assert await self.events() == ["company.default_enabled"]

    async def test_odd_bodies_are_refused_never_a_500(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        odd: list[Any] = [[], "x", 1, None, {"title": 5, "definition_of_done": ["d"]},
                          {"title": "t", "definition_of_done": "d", "priority": "high"},
                          {"title": "t", "definition_of_done": "d", "estimated_cost": "1e99"},
                          {"title": "t", "definition_of_done": "d", "due_at": "tomorrow"},
                          {"title": "t", "definition_of_done": "d", "objective_id": "1"},
                          {"mission": {"a": 1}, "goals": "[1,"},
                          {"max_concurrent_tasks": 2**62}, {"connector_command_prefixes": 5},
                          {"connector_command_prefixes": "[1]"}, {"daily_budget": "abc"},
                          {"title": "t", "target_date": "2027-13-01T00:00:00Z"}]
        paths = [("POST", "/work-items"), ("PUT", "/charter"), ("PUT", "/scheduler"),
                 ("PUT", "/runtime"), ("PUT", "/settings"), ("POST", "/objectives"),
                 ("POST", "/approvals/1/decide"), ("POST", "/work-items/1/approve"),
                 ("POST", "/connector-approvals/act-x/decide")]
        for method, path in paths:
            for body in odd:
                response = await self.company(method, path, body)
                assert response.status < 500, (method, path, body, response)
                if response.status != 200 and response.status != 201:
                    assert "error" in response.json(), response
            raw = await self.call(method, f"/api/user/personal-company{path}?studio_id=growth",
                                  data=b"{not json", token=self.alice)
            assert raw.status == 400, raw

    async def test_bootstrap(self) -> None:
        await self.studio()
        cases: list[tuple[dict[str, Any], str]] = [
            ({}, "Company name and mission are required"),
            ({"name": "n"}, "Company name and mission are required"),
            ({"name": " ", "mission": "m"}, "Company name and mission are required"),
            ({"name": "n", "mission": "m", "daily_budget": -1}, "Budgets cannot be negative"),
            ({"name": "n", "mission": "m", "monthly_budget": "-0.5"},
             "Budgets cannot be negative"),
            ({"name": "n", "mission": "m", "balance_floor": "-2"}, "Budgets cannot be negative"),
            ({"name": "n", "mission": "m", "goals": "{nope"}, "goals must be valid JSON"),
            ({"name": "n", "mission": "m", "data_boundaries": "["},
             "data_boundaries must be valid JSON"),
            ({"name": "n", "mission": "m", "prohibited_actions": "x"},
             "prohibited_actions must be valid JSON"),
        ]
        for body, message in cases:
            await self.company_refused("POST", "/bootstrap", body, 400, message,
                                       tables=COMPANY_TABLES)
        created = await self.company_ok("POST", "/bootstrap", {
            "name": "Acme", "mission": "Ship", "timezone": "Europe/Paris",
            "daily_budget": "1.50", "monthly_budget": 50, "balance_floor": "5",
            "autonomy_level": "r9", "goals": ["a", {"b": 1}],
            "data_boundaries": '[ "no pii" ]', "prohibited_actions": "[]"}, status=201)
        company = created["company"]
        assert (company["name"], company["state"], company["timezone"]) == (
            "Acme", "operating", "Europe/Paris")
        assert (company["daily_budget"], company["monthly_budget"], company["balance_floor"],
                company["autonomy_level"]) == ("1.5", "50", "5", "r0")
        charter = (await self.company_ok("GET", ""))["charter"]
        assert (charter["mission"], charter["goals"], charter["data_boundaries"]) == (
            "Ship", '["a",{"b":1}]', '["no pii"]')
        assert charter["revision"] == 1
        assert await self.events() == ["company.bootstrapped"]
        await self.company_refused("POST", "/bootstrap", {"name": "n", "mission": "m"}, 409,
                                   "Personal Company is already bootstrapped",
                                   tables=COMPANY_TABLES)

    async def test_charter_revisions_are_immutable(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        for body, message in (({}, "Mission is required"), ({"mission": "  "},
                                                            "Mission is required"),
                              ({"mission": "m", "goals": "{"},
                               "Charter structured fields must be valid JSON"),
                              ({"mission": "m", "approval_policy": "nope"},
                               "Charter structured fields must be valid JSON")):
            await self.company_refused("PUT", "/charter", body, 400, message,
                                       tables=COMPANY_TABLES)
        first = (await self.rows("studio_charters"))[0]
        revised = (await self.company_ok("PUT", "/charter", {
            "mission": "Grow", "goals": '["x"]', "approval_policy": {"r2": "owner_required"}}
        ))["charter"]
        assert (revised["revision"], revised["goals"], revised["approval_policy"]) == (
            2, '["x"]', '{"r2":"owner_required"}')
        assert revised["prohibited_actions"] == "[]"
        third = (await self.company_ok("PUT", "/charter", {"mission": "Again"}))["charter"]
        assert third["revision"] == 3 and third["approval_policy"] == DEFAULT_POLICY
        history = (await self.company_ok("GET", "/charters"))["charters"]
        assert [c["revision"] for c in history] == [3, 2, 1]
        assert (await self.rows("studio_charters"))[0] == first
        panel = await self.company_ok("GET", "")
        assert panel["charter"]["revision"] == 3
        assert panel["company"]["charter_revision_id"] == third["id"]
        events = await self.rows("studio_audit_events")
        assert [(e["event_type"], orjson.loads(e["payload"])) for e in events[1:]] == [
            ("charter.revised", {"revision": 2}), ("charter.revised", {"revision": 3})]

    async def test_settings(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        await self.company_refused("PUT", "/settings", {"daily_budget": "-1"}, 400,
                                   "Budgets cannot be negative", tables=COMPANY_TABLES)
        updated = (await self.company_ok("PUT", "/settings", {
            "name": "", "monthly_budget": "12.5", "autonomy_level": "r2"}))["company"]
        assert (updated["name"], updated["monthly_budget"], updated["autonomy_level"]) == (
            "Growth studio", "12.5", "r2")
        assert updated["timezone"] == "UTC" and updated["daily_budget"] == "0"
        assert (await self.events())[-1] == "company.settings_updated"

    async def test_pause_and_resume(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        assert await self.company_ok("POST", "/pause") == {"state": "paused"}
        panel = await self.company_ok("GET", "")
        assert panel["company"]["state"] == "paused" and "paused_at" in panel["company"]
        await self.company_refused("POST", "/work-items", {
            "title": "t", "definition_of_done": "d"}, 409, "Personal Company is not operating",
            tables=("studio_work_items",))
        assert await self.company_ok("POST", "/pause") == {"state": "paused"}
        assert await self.company_ok("POST", "/resume") == {"state": "operating"}
        company = (await self.company_ok("GET", ""))["company"]
        assert company["state"] == "operating" and "paused_at" not in company
        assert await self.events() == ["company.default_enabled", "company.paused",
                                       "company.paused", "company.operating"]
        assert [s["kind"] for s in await self.rows("studio_signals")] == [
            "company.paused", "company.paused", "company.operating"]

    async def test_scheduler(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        for value in (0, -1, 9, 2.5, "3", True, None):
            await self.company_refused("PUT", "/scheduler", {"max_concurrent_tasks": value},
                                       400, "max_concurrent_tasks must be between 1 and 8",
                                       tables=COMPANY_TABLES)
        assert await self.company_ok("PUT", "/scheduler", {"max_concurrent_tasks": 8}) == {
            "max_concurrent_tasks": 8}
        assert (await self.company_ok("GET", ""))["company"]["max_concurrent_tasks"] == 8
        assert (await self.events())[-1] == "studio.scheduler_configured"

    async def online_device(self) -> str:
        response = await self.call("POST", f"{DEVICES}/token", {"name": "Laptop"},
                                   token=self.alice)
        assert response.status == 200, response
        body = response.json()
        hello = await self.call("POST", "/api/advanced-chat/connectors/register",
                                headers={"X-Connector-Token": body["token"]})
        assert hello.status == 200, hello
        return str(body["device"]["id"])

    async def test_runtime(self) -> None:
        await self.studio()
        await self.company_ok("GET", "")
        device = await self.online_device()
        cases: list[tuple[dict[str, Any], str]] = [
            ({"cloud_sandbox_id": "acs-x", "connector_device_id": device},
             "Choose either a cloud sandbox or a local connector"),
            ({"cloud_sandbox_id": "acs-x", "connector_workspace_path": "/srv"},
             "Choose either a cloud sandbox or a local connector"),
            ({"cloud_sandbox_id": "acs-missing"}, "Cloud sandbox is unavailable"),
            ({"connector_workspace_path": "/srv"}, "connector device is required"),
            ({"connector_device_id": "acd-missing", "connector_workspace_path": "/srv"},
             "connector device not found"),
            ({"connector_device_id": device, "connector_workspace_path": "/" + "x" * 1000},
             "workspace path is too long"),
            ({"connector_device_id": device}, "Workspace path is required"),
        ]
        for body, message in cases:
            await self.company_refused("PUT", "/runtime", body, 400, message,
                                       tables=COMPANY_TABLES)
        answer = await self.company_ok("PUT", "/runtime", {
            "connector_device_id": device, "connector_workspace_path": "/srv/site",
            "connector_command_prefixes": [" npm test", "git status", "npm test", ""]})
        assert answer == {"connector_device_id": device, "connector_workspace_path": "/srv/site",
                          "cloud_sandbox_id": ""}
        company = (await self.company_ok("GET", ""))["company"]
        assert company["connector_command_prefixes"] == '["npm test","git status"]'
        assert company["connector_workspace_path"] == "/srv/site"
        # another user's device is a missing one
        await self.company_refused("PUT", "/runtime", {
            "connector_device_id": device, "connector_workspace_path": "/srv"}, 404,
            "Agent Studio not found", token=self.bob, tables=COMPANY_TABLES)
        # the device goes offline after the 60 s window
        self.clock.advance(61)
        await self.company_refused("PUT", "/runtime", {
            "connector_device_id": device, "connector_workspace_path": "/srv"}, 400,
            "connector device is offline", tables=COMPANY_TABLES)
        # all empty clears the environment
        cleared = await self.company_ok("PUT", "/runtime", {})
        assert cleared == {"connector_device_id": "", "connector_workspace_path": "",
                           "cloud_sandbox_id": ""}
        assert (await self.events()).count("studio.runtime_configured") == 2


class PostgresCompanyRouteTests(CompanyRouteTests):
    backend = "postgresql"
