"""The studio's governance roster (agents contract §4.14): role templates, recruitment plans,
employees with immutable versions, capability evidence, promotion and runtime binding.

Employees are service identities, never user accounts; nothing is seeded.  At most 12
non-retired employees; plans asking for more than ``r1`` need a policy change first.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.agents import find_agent
from gateway.store.assistant.refused import conflict, invalid, missing
from gateway.store.studio import audit
from gateway.store.studio.rows import (
    CapabilityEvidenceRow,
    CompanyRow,
    EmployeeRow,
    RecruitmentPlanRow,
    RoleTemplateRow,
    numeric_key,
    row_of,
)
from gateway.store.studio.runtime import Runtime, check_runtime
from gateway.studio import risk

TEMPLATES = schema.studio_role_templates
PLANS = schema.studio_recruitment_plans
EMPLOYEES = schema.studio_employees
VERSIONS = schema.studio_employee_versions
EVIDENCE = schema.studio_capability_evidence
MAX_EMPLOYEES = 12
TEMPLATE_TAKEN = "A role template with this key already exists"
TEMPLATE_UNAVAILABLE = "Role template is not available"
PLAN_NOT_FOUND = "Recruitment plan not found"
PLAN_DECIDED = "Recruitment plan has already been decided"
PLAN_RISK = "Plans requesting R2 or higher require a separate policy change"
ORG_LIMIT = "Personal Company organization limit reached"
EMPLOYEE_NOT_FOUND = "Employee not found"
VERSION_UNAVAILABLE = "Employee version is unavailable"
NOT_PROBATION = "Only probationary employees can be promoted"
NEEDS_EVIDENCE = "Employee needs verified capability evidence before promotion"
AGENT_REQUIRED = "An existing Advanced Chat agent is required"
PROMOTION_SCORE = Decimal("0.8")
PROMOTION_CONFIDENCE = Decimal("0.7")


def template_key(given: str, name: str) -> str:
    """Given, or derived from the name: lower-case, spaces → ``-``, only ``[a-z0-9-]``,
    trimmed ``-``, at most 80."""
    source = given or name
    key = re.sub(r"[^a-z0-9-]", "", source.lower().replace(" ", "-")).strip("-")
    return key[:80]


def list_templates(conn: Connection, company_id: int) -> list[RoleTemplateRow]:
    rows = conn.execute(select(TEMPLATES).where(TEMPLATES.c.personal_company_id == company_id)
                        .order_by(TEMPLATES.c.name, TEMPLATES.c.id)).mappings()
    return [row_of(RoleTemplateRow, r) for r in rows]


def create_template(conn: Connection, company: CompanyRow, user_id: int,
                    values: dict[str, Any], now: datetime) -> RoleTemplateRow:
    t = TEMPLATES
    if conn.execute(select(t.c.id).where(t.c.personal_company_id == company.id,
                                         t.c.template_key == values["template_key"])).first():
        raise conflict(TEMPLATE_TAKEN)
    key = conn.execute(t.insert().values(personal_company_id=company.id, created_at=now,
                                         updated_at=now, **values)).inserted_primary_key
    assert key is not None
    audit.record(conn, company.id, "role_template.created", now, actor_id=str(user_id),
                 payload={"role_template_id": int(key[0])})
    return row_of(RoleTemplateRow, conn.execute(select(t).where(t.c.id == key[0]))
                  .mappings().one())


def list_plans(conn: Connection, company_id: int) -> list[RecruitmentPlanRow]:
    rows = conn.execute(select(PLANS).where(PLANS.c.personal_company_id == company_id)
                        .order_by(PLANS.c.created_at.desc(), PLANS.c.id.desc())).mappings()
    return [row_of(RecruitmentPlanRow, r) for r in rows]


def _plan(conn: Connection, company_id: int, key: str) -> RecruitmentPlanRow:
    plan_id = numeric_key(key)
    found = None if plan_id is None else conn.execute(select(PLANS).where(
        PLANS.c.personal_company_id == company_id, PLANS.c.id == plan_id)).mappings().first()
    if found is None:
        raise missing(PLAN_NOT_FOUND)
    return row_of(RecruitmentPlanRow, found)


def propose(conn: Connection, company: CompanyRow, user_id: int, values: dict[str, Any],
            now: datetime) -> RecruitmentPlanRow:
    template_id = values.get("role_template_id")
    if template_id is not None and conn.execute(select(TEMPLATES.c.id).where(
            TEMPLATES.c.personal_company_id == company.id,
            TEMPLATES.c.id == template_id)).first() is None:
        raise invalid(TEMPLATE_UNAVAILABLE)
    key = conn.execute(PLANS.insert().values(
        personal_company_id=company.id, status="proposed", created_at=now, updated_at=now,
        **values)).inserted_primary_key
    assert key is not None
    audit.record(conn, company.id, "recruitment_plan.proposed", now, actor_id=str(user_id),
                 payload={"recruitment_plan_id": int(key[0])})
    return _plan(conn, company.id, str(key[0]))


def _employee(conn: Connection, company_id: int, key: str | int) -> EmployeeRow:
    employee_id = key if isinstance(key, int) else numeric_key(key)
    found = None if employee_id is None else conn.execute(select(EMPLOYEES).where(
        EMPLOYEES.c.personal_company_id == company_id, EMPLOYEES.c.id == employee_id)
    ).mappings().first()
    if found is None:
        raise missing(EMPLOYEE_NOT_FOUND)
    return row_of(EmployeeRow, found)


def approve_plan(conn: Connection, company: CompanyRow, user_id: int, key: str, now: datetime
                 ) -> EmployeeRow:
    """Hire a probation employee from a proposed plan (version 1 and its record)."""
    plan = _plan(conn, company.id, key)
    if plan.status != "proposed":
        raise conflict(PLAN_DECIDED)
    if risk.rank(plan.max_risk_level) > risk.rank("r1"):
        raise conflict(PLAN_RISK)
    staffed = conn.execute(select(func.count()).select_from(EMPLOYEES).where(
        EMPLOYEES.c.personal_company_id == company.id, EMPLOYEES.c.status != "retired")
    ).scalar() or 0
    if staffed >= MAX_EMPLOYEES:
        raise conflict(ORG_LIMIT)
    inserted = conn.execute(EMPLOYEES.insert().values(
        personal_company_id=company.id, employee_key=f"employee_{secrets.token_hex(8)}",
        name=plan.title, role="candidate", status="probation", version=1,
        allowed_tools=plan.proposed_tools, max_risk_level=plan.max_risk_level,
        created_at=now, updated_at=now)).inserted_primary_key
    assert inserted is not None
    employee_id = int(inserted[0])
    conn.execute(VERSIONS.insert().values(employee_id=employee_id, version=1,
                                          tool_grants=plan.proposed_tools, created_at=now))
    if not conn.execute(update(PLANS).where(PLANS.c.id == plan.id, PLANS.c.status == "proposed")
                        .values(status="approved", employee_id=employee_id, decided_at=now,
                                updated_at=now)).rowcount:
        raise conflict(PLAN_DECIDED)
    audit.record(conn, company.id, "recruitment_plan.approved", now, actor_id=str(user_id),
                 payload={"recruitment_plan_id": plan.id, "employee_id": employee_id})
    return _employee(conn, company.id, employee_id)


def reject_plan(conn: Connection, company: CompanyRow, user_id: int, key: str, reason: str,
                now: datetime) -> None:
    """[P-39]: a proposed plan → rejected."""
    plan = _plan(conn, company.id, key)
    if plan.status != "proposed" or not conn.execute(
            update(PLANS).where(PLANS.c.id == plan.id, PLANS.c.status == "proposed")
            .values(status="rejected", decision_reason=reason, decided_at=now,
                    updated_at=now)).rowcount:
        raise conflict(PLAN_DECIDED)
    audit.record(conn, company.id, "recruitment_plan.rejected", now, actor_id=str(user_id),
                 payload={"recruitment_plan_id": plan.id, "reason": reason})


def list_employees(conn: Connection, company_id: int) -> list[EmployeeRow]:
    rows = conn.execute(select(EMPLOYEES).where(EMPLOYEES.c.personal_company_id == company_id)
                        .order_by(EMPLOYEES.c.created_at, EMPLOYEES.c.id)).mappings()
    return [row_of(EmployeeRow, r) for r in rows]


@dataclass(frozen=True)
class Evidence:
    capability: str
    evidence_uri: str
    evaluation_summary: str
    score: Decimal
    confidence: Decimal
    valid_until: datetime | None


def record_evidence(conn: Connection, company: CompanyRow, user_id: int, key: str,
                    evidence: Evidence, now: datetime) -> CapabilityEvidenceRow:
    employee = _employee(conn, company.id, key)
    if conn.execute(select(VERSIONS.c.id).where(VERSIONS.c.employee_id == employee.id,
                                                VERSIONS.c.version == employee.version)
                    ).first() is None:
        raise conflict(VERSION_UNAVAILABLE)
    inserted = conn.execute(EVIDENCE.insert().values(
        employee_id=employee.id, employee_version=employee.version,
        capability=evidence.capability, evidence_uri=evidence.evidence_uri,
        evaluation_summary=evidence.evaluation_summary, score=str(evidence.score),
        confidence=str(evidence.confidence), valid_until=evidence.valid_until,
        created_at=now)).inserted_primary_key
    assert inserted is not None
    audit.record(conn, company.id, "capability_evidence.recorded", now, actor_id=str(user_id),
                 payload={"employee_id": employee.id, "capability": evidence.capability})
    return row_of(CapabilityEvidenceRow, conn.execute(
        select(EVIDENCE).where(EVIDENCE.c.id == inserted[0])).mappings().one())


def promote(conn: Connection, company: CompanyRow, user_id: int, key: str, now: datetime
            ) -> int:
    employee = _employee(conn, company.id, key)
    if employee.status != "probation":
        raise conflict(NOT_PROBATION)
    rows = conn.execute(select(EVIDENCE).where(EVIDENCE.c.employee_id == employee.id)).mappings()
    verified = any(
        Decimal(r["score"]) >= PROMOTION_SCORE and Decimal(r["confidence"]) >= PROMOTION_CONFIDENCE
        and (r["valid_until"] is None or r["valid_until"] > now) for r in rows)
    if not verified:
        raise conflict(NEEDS_EVIDENCE)
    if not conn.execute(update(EMPLOYEES).where(EMPLOYEES.c.id == employee.id,
                                                EMPLOYEES.c.status == "probation")
                        .values(status="active", updated_at=now)).rowcount:
        raise conflict(NOT_PROBATION)
    audit.record(conn, company.id, "employee.promoted", now, actor_id=str(user_id),
                 payload={"employee_id": employee.id})
    return employee.id


def bind_runtime(conn: Connection, company: CompanyRow, user_id: int, key: str, agent_id: str,
                 runtime: Runtime, now: datetime) -> tuple[int, int]:
    """A new immutable employee version bound to a chat agent and a runtime ([P-38])."""
    employee = _employee(conn, company.id, key)
    if not agent_id or find_agent(conn, user_id, agent_id, now) is None:
        raise invalid(AGENT_REQUIRED)
    policy = check_runtime(conn, user_id, runtime, now)
    version = employee.version + 1
    conn.execute(VERSIONS.insert().values(
        employee_id=employee.id, version=version,
        prompt_profile=f"advanced_chat_agent:{agent_id}",
        tool_grants=employee.allowed_tools, data_scope=employee.data_scope,
        runtime_policy=orjson.dumps(policy).decode("utf-8"), created_at=now))
    conn.execute(update(EMPLOYEES).where(EMPLOYEES.c.id == employee.id).values(
        version=version, advanced_chat_agent_id=agent_id, updated_at=now))
    audit.record(conn, company.id, "employee.runtime_bound", now, actor_id=str(user_id),
                 payload={"employee_id": employee.id, "version": version})
    return employee.id, version


def active_member(conn: Connection, company_id: int, employee_id: int) -> bool:
    """A probation or active employee of this studio (handoffs)."""
    return conn.execute(select(EMPLOYEES.c.id).where(
        EMPLOYEES.c.personal_company_id == company_id, EMPLOYEES.c.id == employee_id,
        EMPLOYEES.c.status.in_(("probation", "active")))).first() is not None
