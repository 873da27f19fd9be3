"""Typed rows of the studio tables: one frozen dataclass per table, fields = columns.

Stores hand these (never live ``Result`` objects) back to the reactor thread; ``row_of`` from
the assistant rows builds them from a result mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.store.assistant.rows import numeric_key, row_of

__all__ = ["numeric_key", "row_of"]


@dataclass(frozen=True)
class StudioRow:
    user_id: int
    id: str
    name: str
    description: str
    agents: list[dict[str, Any]]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class CompanyRow:
    id: int
    owner_user_id: int
    agent_group_id: str
    name: str
    state: str
    timezone: str
    autonomy_level: str
    daily_budget_nanos: int
    monthly_budget_nanos: int
    balance_floor_nanos: int
    charter_revision_id: int | None
    connector_device_id: str
    connector_workspace_path: str
    connector_command_prefixes: str
    cloud_sandbox_id: str
    max_concurrent_tasks: int
    paused_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class CharterRow:
    id: int
    personal_company_id: int
    revision: int
    mission: str
    goals: str
    data_boundaries: str
    prohibited_actions: str
    approval_policy: str
    created_by_user_id: int
    created_at: datetime


@dataclass(frozen=True)
class ObjectiveRow:
    id: int
    personal_company_id: int
    owner_user_id: int
    title: str
    description: str
    status: str
    priority: int
    target_date: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class WorkItemRow:
    id: int
    personal_company_id: int
    owner_user_id: int
    objective_id: int | None
    title: str
    description: str
    definition_of_done: str
    status: str
    priority: int
    risk_level: str
    idempotency_key: str
    input_snapshot: str
    allowed_tools: str
    assigned_employee_id: int | None
    reviewer_employee_id: int | None
    charter_revision_id: int | None
    estimated_cost_nanos: int
    reserved_cost_nanos: int
    consumed_cost_nanos: int
    due_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class AttemptRow:
    id: int
    work_item_id: int
    personal_company_id: int
    attempt_number: int
    advanced_chat_run_id: str
    kind: str
    status: str
    lease_token: str
    lease_expires_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    input_snapshot: str
    result_summary: str
    cost_nanos: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ArtifactRow:
    id: int
    work_item_id: int
    work_attempt_id: int | None
    kind: str
    uri: str
    content_hash: str
    source: str
    acceptance_state: str
    created_at: datetime


@dataclass(frozen=True)
class HandoffRow:
    id: int
    work_item_id: int
    work_attempt_id: int | None
    from_employee_id: int | None
    to_employee_id: int | None
    status: str
    completion_summary: str
    evidence: str
    risks: str
    next_steps: str
    decision_note: str
    accepted_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class ApprovalRow:
    id: int
    personal_company_id: int
    work_item_id: int
    risk_level: str
    status: str
    requested_action: str
    parameters_hash: str
    decision_reason: str
    decided_by_user_id: int | None
    decided_at: datetime | None
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class AuditEventRow:
    id: int
    personal_company_id: int
    work_item_id: int | None
    actor_type: str
    actor_id: str
    event_type: str
    payload: str
    created_at: datetime


@dataclass(frozen=True)
class RoleTemplateRow:
    id: int
    personal_company_id: int
    template_key: str
    name: str
    responsibilities: str
    definition_of_done: str
    required_skills: str
    allowed_tools: str
    max_risk_level: str
    max_concurrency: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class RecruitmentPlanRow:
    id: int
    personal_company_id: int
    role_template_id: int | None
    title: str
    capability_gap: str
    expected_benefit: str
    max_risk_level: str
    proposed_tools: str
    status: str
    decision_reason: str
    employee_id: int | None
    decided_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class EmployeeRow:
    id: int
    personal_company_id: int
    employee_key: str
    advanced_chat_agent_id: str
    name: str
    role: str
    status: str
    version: int
    allowed_tools: str
    data_scope: str
    max_risk_level: str
    max_concurrency: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class CapabilityEvidenceRow:
    id: int
    employee_id: int
    employee_version: int
    capability: str
    evidence_uri: str
    evaluation_summary: str
    score: str
    confidence: str
    valid_until: datetime | None
    created_at: datetime
