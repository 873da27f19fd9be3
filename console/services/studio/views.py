"""The wire form of studios and their operations records (agents contract §4).

Money is a minimal decimal string, timestamps RFC 3339 and omitted when unset, JSON-text fields
strings; runtime strings are omitted when empty (origin omit-empty).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.assistant.record_views import timestamp
from gateway.billing.money import format_nanos
from gateway.store.studio.rows import (
    ApprovalRow,
    ArtifactRow,
    AttemptRow,
    AuditEventRow,
    CapabilityEvidenceRow,
    CharterRow,
    CompanyRow,
    EmployeeRow,
    HandoffRow,
    ObjectiveRow,
    RecruitmentPlanRow,
    RoleTemplateRow,
    StudioRow,
    WorkItemRow,
)


def _times(view: dict[str, Any], **values: datetime | None) -> dict[str, Any]:
    for key, value in values.items():
        if value is not None:
            view[key] = timestamp(value)
    return view


def _optional_ids(view: dict[str, Any], **values: int | None) -> dict[str, Any]:
    for key, value in values.items():
        if value is not None:
            view[key] = value
    return view


def studio_view(s: StudioRow) -> dict[str, Any]:
    view: dict[str, Any] = {"id": s.id, "name": s.name, "agents": s.agents,
                            "updated_at": timestamp(s.updated_at)}
    if s.description:
        view["description"] = s.description
    return view


def company_view(c: CompanyRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": c.id, "owner_user_id": c.owner_user_id, "agent_group_id": c.agent_group_id,
        "name": c.name, "state": c.state, "timezone": c.timezone,
        "autonomy_level": c.autonomy_level, "daily_budget": format_nanos(c.daily_budget_nanos),
        "monthly_budget": format_nanos(c.monthly_budget_nanos),
        "balance_floor": format_nanos(c.balance_floor_nanos),
        "connector_command_prefixes": c.connector_command_prefixes,
        "max_concurrent_tasks": c.max_concurrent_tasks}
    if c.charter_revision_id is not None:
        view["charter_revision_id"] = c.charter_revision_id
    for key in ("connector_device_id", "connector_workspace_path", "cloud_sandbox_id"):
        if getattr(c, key):
            view[key] = getattr(c, key)
    return _times(view, paused_at=c.paused_at, created_at=c.created_at,
                  updated_at=c.updated_at)


def charter_view(c: CharterRow) -> dict[str, Any]:
    return {"id": c.id, "personal_company_id": c.personal_company_id, "revision": c.revision,
            "mission": c.mission, "goals": c.goals, "data_boundaries": c.data_boundaries,
            "prohibited_actions": c.prohibited_actions, "approval_policy": c.approval_policy,
            "created_by_user_id": c.created_by_user_id, "created_at": timestamp(c.created_at)}


def objective_view(o: ObjectiveRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": o.id, "personal_company_id": o.personal_company_id,
        "owner_user_id": o.owner_user_id, "title": o.title, "description": o.description,
        "status": o.status, "priority": o.priority}
    return _times(view, target_date=o.target_date, created_at=o.created_at,
                  updated_at=o.updated_at)


def work_item_view(w: WorkItemRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": w.id, "personal_company_id": w.personal_company_id,
        "owner_user_id": w.owner_user_id, "title": w.title, "description": w.description,
        "definition_of_done": w.definition_of_done, "status": w.status,
        "priority": w.priority, "risk_level": w.risk_level,
        "idempotency_key": w.idempotency_key, "input_snapshot": w.input_snapshot,
        "allowed_tools": w.allowed_tools,
        "estimated_cost": format_nanos(w.estimated_cost_nanos),
        "reserved_cost": format_nanos(w.reserved_cost_nanos),
        "consumed_cost": format_nanos(w.consumed_cost_nanos)}
    _optional_ids(view, objective_id=w.objective_id,
                  assigned_employee_id=w.assigned_employee_id,
                  reviewer_employee_id=w.reviewer_employee_id,
                  charter_revision_id=w.charter_revision_id)
    return _times(view, due_at=w.due_at, created_at=w.created_at, updated_at=w.updated_at)


def attempt_view(a: AttemptRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": a.id, "work_item_id": a.work_item_id, "attempt_number": a.attempt_number,
        "kind": a.kind, "status": a.status, "input_snapshot": a.input_snapshot,
        "result_summary": a.result_summary, "cost": format_nanos(a.cost_nanos)}
    if a.advanced_chat_run_id:
        view["advanced_chat_run_id"] = a.advanced_chat_run_id
    return _times(view, lease_expires_at=a.lease_expires_at, started_at=a.started_at,
                  finished_at=a.finished_at, created_at=a.created_at,
                  updated_at=a.updated_at)


def artifact_view(a: ArtifactRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": a.id, "work_item_id": a.work_item_id, "kind": a.kind, "uri": a.uri,
        "content_hash": a.content_hash, "source": a.source,
        "acceptance_state": a.acceptance_state, "created_at": timestamp(a.created_at)}
    return _optional_ids(view, work_attempt_id=a.work_attempt_id)


def handoff_view(h: HandoffRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": h.id, "work_item_id": h.work_item_id, "status": h.status,
        "completion_summary": h.completion_summary, "evidence": h.evidence,
        "risks": h.risks, "next_steps": h.next_steps}
    if h.decision_note:
        view["note"] = h.decision_note
    _optional_ids(view, work_attempt_id=h.work_attempt_id,
                  from_employee_id=h.from_employee_id, to_employee_id=h.to_employee_id)
    return _times(view, accepted_at=h.accepted_at, created_at=h.created_at,
                  updated_at=h.updated_at)


def approval_view(a: ApprovalRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": a.id, "personal_company_id": a.personal_company_id,
        "work_item_id": a.work_item_id, "risk_level": a.risk_level, "status": a.status,
        "requested_action": a.requested_action, "parameters_hash": a.parameters_hash,
        "decision_reason": a.decision_reason}
    _optional_ids(view, decided_by_user_id=a.decided_by_user_id)
    return _times(view, decided_at=a.decided_at, expires_at=a.expires_at,
                  created_at=a.created_at, updated_at=a.updated_at)


def audit_view(e: AuditEventRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": e.id, "personal_company_id": e.personal_company_id, "actor_type": e.actor_type,
        "actor_id": e.actor_id, "event_type": e.event_type, "payload": e.payload,
        "created_at": timestamp(e.created_at)}
    return _optional_ids(view, work_item_id=e.work_item_id)


def role_template_view(t: RoleTemplateRow) -> dict[str, Any]:
    return {"id": t.id, "personal_company_id": t.personal_company_id,
            "template_key": t.template_key, "name": t.name,
            "responsibilities": t.responsibilities, "definition_of_done": t.definition_of_done,
            "required_skills": t.required_skills, "allowed_tools": t.allowed_tools,
            "max_risk_level": t.max_risk_level, "max_concurrency": t.max_concurrency,
            "created_at": timestamp(t.created_at), "updated_at": timestamp(t.updated_at)}


def recruitment_plan_view(p: RecruitmentPlanRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": p.id, "personal_company_id": p.personal_company_id, "title": p.title,
        "capability_gap": p.capability_gap, "expected_benefit": p.expected_benefit,
        "max_risk_level": p.max_risk_level, "proposed_tools": p.proposed_tools,
        "status": p.status}
    if p.decision_reason:
        view["decision_reason"] = p.decision_reason
    _optional_ids(view, role_template_id=p.role_template_id, employee_id=p.employee_id)
    return _times(view, decided_at=p.decided_at, created_at=p.created_at,
                  updated_at=p.updated_at)


def employee_view(e: EmployeeRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": e.id, "personal_company_id": e.personal_company_id,
        "employee_key": e.employee_key, "name": e.name, "role": e.role, "status": e.status,
        "version": e.version, "allowed_tools": e.allowed_tools, "data_scope": e.data_scope,
        "max_risk_level": e.max_risk_level, "max_concurrency": e.max_concurrency,
        "created_at": timestamp(e.created_at), "updated_at": timestamp(e.updated_at)}
    if e.advanced_chat_agent_id:
        view["advanced_chat_agent_id"] = e.advanced_chat_agent_id
    return view


def evidence_view(e: CapabilityEvidenceRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": e.id, "employee_id": e.employee_id, "employee_version": e.employee_version,
        "capability": e.capability, "evidence_uri": e.evidence_uri,
        "evaluation_summary": e.evaluation_summary, "score": e.score,
        "confidence": e.confidence}
    return _times(view, valid_until=e.valid_until, created_at=e.created_at)
