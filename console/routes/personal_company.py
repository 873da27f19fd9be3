"""``/api/user/personal-company``: a studio's operations (agents contract §4.2-§4.15, §4.18).

Every route takes ``?studio_id=`` and applies the §4.2 rules first (400 ``studio_id is
required``, 404 ``Agent Studio not found``, and -- except for the panel and bootstrap -- 404
``Personal Company has not been bootstrapped``), then reads its body.  Each route is one
transaction; linked runs a transition interrupted (pause, cancel) are stopped after it commits,
through the assistant's own stop.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.assistant import tx
from console.services.studio import inputs, team_inputs
from console.services.studio.panel_view import panel_view
from console.services.studio.views import (
    approval_view,
    artifact_view,
    attempt_view,
    audit_view,
    charter_view,
    company_view,
    employee_view,
    evidence_view,
    handoff_view,
    objective_view,
    recruitment_plan_view,
    role_template_view,
    work_item_view,
)
from gateway.assistant.record_views import run_view, session_view
from gateway.assistant.run_service import RunService
from gateway.store.connection import Connection
from gateway.store.studio import (
    approvals,
    charters,
    companies,
    connector_approvals,
    handoffs,
    objectives,
    panel,
    team,
    timeline,
    work_items,
)
from gateway.store.studio.companies import Context
from gateway.store.studio.runtime import configure

log = Logger()
BODY_LIMIT = 1 << 20
PAUSE_FAILED = "Studio paused but active work could not be interrupted"
SCHEDULER_MESSAGE = "The Chief scheduler will start this work item."


def _studio_id(request: Any) -> str:
    values = request.args.get(b"studio_id") or [b""]
    return values[0].decode("utf-8", "replace")


class PersonalCompanyRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext, runs: RunService) -> None:
        self.ctx = ctx
        self.runs = runs

    async def _in(self, request: Any, work: Callable[..., Any], *, bootstrapped: bool = True,
                  body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """Run ``work(conn, context, user_id, now, body)`` in one transaction after §4.2."""
        user = await self.ctx.sessions.user(request)
        user_id, studio_id, now = user["id"], _studio_id(request), self.ctx.now()

        def run(conn: Connection) -> Any:
            found = companies.context(conn, user_id, studio_id, bootstrapped=bootstrapped)
            return work(conn, found, user_id, now, body or {})

        return user_id, await tx.run(self.ctx, run)

    async def _stop(self, user_id: int, run_ids: list[str]) -> bool:
        """Stop the linked runs (§1.11); False when one could not be stopped."""
        ok = True
        for run_id in run_ids:
            try:
                await self.runs.stop(user_id, run_id, studio=True)
            except Exception:
                log.failure("stopping studio run {run_id} failed", run_id=run_id)
                ok = False
        return ok

    # --- the record ----------------------------------------------------------------------

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return panel.load(conn, user_id, c.studio, now)

        _, loaded = await self._in(request, work, bootstrapped=False)
        return panel_view(loaded)

    @app.route("/bootstrap", methods=["POST"])
    @json_route
    async def bootstrap(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT, optional=True)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            if c.company is not None:
                raise ApiError(409, companies.ALREADY)
            values, charter = inputs.read_bootstrap(b)
            return companies.bootstrap(conn, user_id, c.studio, values, charter, now)

        _, company = await self._in(request, work, bootstrapped=False, body=body)
        return 201, {"company": company_view(company)}

    @app.route("/settings", methods=["PUT"])
    @json_route
    async def settings(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return companies.update_settings(conn, c.record, user_id, inputs.read_settings(b),
                                             now)

        _, company = await self._in(request, work, body=body)
        return {"company": company_view(company)}

    @app.route("/charter", methods=["PUT"])
    @json_route
    async def charter(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return charters.revise(conn, c.record.id, user_id, now, **inputs.read_charter(b))

        _, charter = await self._in(request, work, body=body)
        return {"charter": charter_view(charter)}

    @app.route("/charters", methods=["GET"])
    @json_route
    async def charter_history(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return charters.history(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"charters": [charter_view(row) for row in rows]}

    @app.route("/pause", methods=["POST"])
    @json_route
    async def pause(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            companies.set_state(conn, c.record, user_id, "paused", now)
            return work_items.interrupt_all(conn, c.record, now)

        user_id, stopped = await self._in(request, work)
        if not await self._stop(user_id, stopped.run_ids):
            raise ApiError(500, PAUSE_FAILED)
        return {"state": "paused"}

    @app.route("/resume", methods=["POST"])
    @json_route
    async def resume(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            companies.set_state(conn, c.record, user_id, "operating", now)

        await self._in(request, work)
        return {"state": "operating"}

    @app.route("/runtime", methods=["PUT"])
    @json_route
    async def runtime(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return configure(conn, c.record, user_id, inputs.read_runtime(b), now)

        _, company = await self._in(request, work, body=body)
        return {"connector_device_id": company.connector_device_id,
                "connector_workspace_path": company.connector_workspace_path,
                "cloud_sandbox_id": company.cloud_sandbox_id}

    @app.route("/scheduler", methods=["PUT"])
    @json_route
    async def scheduler(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> int:
            slots = inputs.read_scheduler(b)
            companies.set_scheduler(conn, c.record, user_id, slots, now)
            return slots

        _, slots = await self._in(request, work, body=body)
        return {"max_concurrent_tasks": slots}

    # --- objectives ----------------------------------------------------------------------

    @app.route("/objectives", methods=["GET"])
    @json_route
    async def objective_list(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return objectives.list_objectives(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"objectives": [objective_view(row) for row in rows]}

    @app.route("/objectives", methods=["POST"])
    @json_route
    async def objective_create(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return objectives.create(conn, c.record, user_id, now=now,
                                     **inputs.read_objective(b))

        _, row = await self._in(request, work, body=body)
        return 201, {"objective": objective_view(row)}

    # --- work items ----------------------------------------------------------------------

    @app.route("/work-items", methods=["GET"])
    @json_route
    async def work_item_list(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return work_items.list_items(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"work_items": [work_item_view(row) for row in rows]}

    @app.route("/work-items", methods=["POST"])
    @json_route
    async def work_item_create(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            if c.record.state != "operating":
                raise ApiError(409, work_items.NOT_OPERATING)
            return work_items.create(conn, c.record, user_id, inputs.read_work_item(b), now)

        _, row = await self._in(request, work, body=body)
        return 201, {"work_item": work_item_view(row)}

    @app.route("/work-items/<item_id>/timeline", methods=["GET"])
    @json_route
    async def work_item_timeline(self, request: Any, item_id: str) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return timeline.timeline(conn, c.record.id, item_id)

        _, t = await self._in(request, work)
        return {"work_item": work_item_view(t.work_item),
                "attempts": [attempt_view(a) for a in t.attempts],
                "artifacts": [artifact_view(a) for a in t.artifacts],
                "handoffs": [handoff_view(h) for h in t.handoffs],
                "events": [audit_view(e) for e in t.events]}

    @app.route("/work-items/<item_id>/internal-session", methods=["GET"])
    @json_route
    async def work_item_session(self, request: Any, item_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, *_: Any) -> Any:
            return timeline.internal_session(conn, c.record.id, user_id, item_id)

        _, found = await self._in(request, work)
        return {"work_item_id": found.attempt.work_item_id,
                "attempt": attempt_view(found.attempt), "run": run_view(found.run),
                "session": session_view(found.session), "readonly": True}

    @app.route("/work-items/<item_id>/queue", methods=["POST"])
    @json_route
    async def work_item_queue(self, request: Any, item_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return work_items.queue(conn, c.record, user_id, item_id, now)

        await self._in(request, work)
        return {"status": "queued"}

    @app.route("/work-items/<item_id>/run", methods=["POST"])
    @json_route
    async def work_item_run(self, request: Any, item_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return work_items.run(conn, c.record, user_id, item_id, now)

        _, item = await self._in(request, work)
        return 202, {"work_item_id": item.id, "status": "queued",
                     "message": SCHEDULER_MESSAGE}

    @app.route("/work-items/<item_id>/cancel", methods=["POST"])
    @json_route
    async def work_item_cancel(self, request: Any, item_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return work_items.cancel(conn, c.record, user_id, item_id, now)

        user_id, stopped = await self._in(request, work)
        await self._stop(user_id, stopped.run_ids)
        return {"status": "cancelled"}

    @app.route("/work-items/<item_id>/approve", methods=["POST"])
    @json_route
    async def work_item_approve(self, request: Any, item_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT, optional=True)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return approvals.approve_item(conn, c.record, user_id, item_id,
                                          inputs.text(b, "reason"), now)

        _, (decision, status) = await self._in(request, work, body=body)
        return {"status": decision, "work_item_status": status}

    # --- approvals -----------------------------------------------------------------------

    @app.route("/approvals", methods=["GET"])
    @json_route
    async def approval_list(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return approvals.list_approvals(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"approvals": [approval_view(row) for row in rows]}

    @app.route("/approvals/<approval_id>/decide", methods=["POST"])
    @json_route
    async def approval_decide(self, request: Any, approval_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            decision, reason = inputs.read_decision(b)
            return approvals.decide(conn, c.record, user_id, approval_id, decision, reason,
                                    now)

        _, (decision, status) = await self._in(request, work, body=body)
        if decision == "expired":
            raise ApiError(409, approvals.EXPIRED)
        return {"status": decision, "work_item_status": status}

    @app.route("/connector-approvals/<task_id>/decide", methods=["POST"])
    @json_route
    async def connector_decide(self, request: Any, task_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return connector_approvals.decide(conn, c.record, user_id, task_id,
                                              b.get("approved") is True, now)

        _, (status, device_id) = await self._in(request, work, body=body)
        tasks = self.runs.connector_tasks
        if status == "queued":
            tasks.hub.wake(device_id)
        else:
            tasks.hub.task_finished(task_id)  # the run waiting on it reads the denial
        return {"status": status}

    # --- team, hiring and handoffs (§4.14) -----------------------------------------------

    @app.route("/work-items/<item_id>/handoffs", methods=["POST"])
    @json_route
    async def handoff_create(self, request: Any, item_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return handoffs.create(conn, c.record, user_id, item_id,
                                   team_inputs.read_handoff(b), now)

        _, row = await self._in(request, work, body=body)
        return 201, {"handoff": handoff_view(row)}

    @app.route("/handoffs/<handoff_id>/decide", methods=["POST"])
    @json_route
    async def handoff_decide(self, request: Any, handoff_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return handoffs.decide(conn, c.record, user_id, handoff_id,
                                   inputs.text(b, "decision").lower(), inputs.text(b, "note"),
                                   now)

        _, row = await self._in(request, work, body=body)
        return {"handoff": handoff_view(row)}

    @app.route("/org-chart", methods=["GET"])
    @json_route
    async def org_chart(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return (c.record.id, team.list_employees(conn, c.record.id),
                    team.list_templates(conn, c.record.id), team.list_plans(conn, c.record.id))

        _, (company_id, employees, templates, plans) = await self._in(request, work)
        return {"company_id": company_id,
                "employees": [employee_view(e) for e in employees],
                "role_templates": [role_template_view(t) for t in templates],
                "recruitment_plans": [recruitment_plan_view(p) for p in plans]}

    @app.route("/role-templates", methods=["GET"])
    @json_route
    async def template_list(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return team.list_templates(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"role_templates": [role_template_view(row) for row in rows]}

    @app.route("/role-templates", methods=["POST"])
    @json_route
    async def template_create(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return team.create_template(conn, c.record, user_id,
                                        team_inputs.read_role_template(b), now)

        _, row = await self._in(request, work, body=body)
        return 201, {"role_template": role_template_view(row)}

    @app.route("/staffing/recruitment-plans", methods=["GET"])
    @json_route
    async def plan_list(self, request: Any) -> Any:
        def work(conn: Connection, c: Context, *_: Any) -> Any:
            return team.list_plans(conn, c.record.id)

        _, rows = await self._in(request, work)
        return {"recruitment_plans": [recruitment_plan_view(row) for row in rows]}

    @app.route("/staffing/recruitment-plans", methods=["POST"])
    @json_route
    async def plan_create(self, request: Any) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return team.propose(conn, c.record, user_id, team_inputs.read_plan(b), now)

        _, row = await self._in(request, work, body=body)
        return 201, {"recruitment_plan": recruitment_plan_view(row)}

    @app.route("/staffing/recruitment-plans/<plan_id>/approve", methods=["POST"])
    @json_route
    async def plan_approve(self, request: Any, plan_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return team.approve_plan(conn, c.record, user_id, plan_id, now)

        _, employee = await self._in(request, work)
        return 201, {"employee": employee_view(employee), "status": "approved"}

    @app.route("/staffing/recruitment-plans/<plan_id>/reject", methods=["POST"])
    @json_route
    async def plan_reject(self, request: Any, plan_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT, optional=True)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> None:
            team.reject_plan(conn, c.record, user_id, plan_id, inputs.text(b, "reason"), now)

        await self._in(request, work, body=body)
        return {"status": "rejected"}

    @app.route("/employees/<employee_id>/capability-evidence", methods=["POST"])
    @json_route
    async def evidence_create(self, request: Any, employee_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            return team.record_evidence(conn, c.record, user_id, employee_id,
                                        team_inputs.read_evidence(b), now)

        _, row = await self._in(request, work, body=body)
        return 201, {"capability_evidence": evidence_view(row)}

    @app.route("/employees/<employee_id>/promote", methods=["POST"])
    @json_route
    async def employee_promote(self, request: Any, employee_id: str) -> Any:
        def work(conn: Connection, c: Context, user_id: int, now: datetime, _: Any) -> Any:
            return team.promote(conn, c.record, user_id, employee_id, now)

        _, promoted = await self._in(request, work)
        return {"employee_id": promoted, "status": "active"}

    @app.route("/employees/<employee_id>/runtime-binding", methods=["POST"])
    @json_route
    async def employee_binding(self, request: Any, employee_id: str) -> Any:
        body = read_object(request, limit=BODY_LIMIT)

        def work(conn: Connection, c: Context, user_id: int, now: datetime,
                 b: dict[str, Any]) -> Any:
            agent_id, runtime = team_inputs.read_binding(b)
            return team.bind_runtime(conn, c.record, user_id, employee_id, agent_id, runtime,
                                     now)

        _, (bound, version) = await self._in(request, work, body=body)
        return {"employee_id": bound, "version": version}
