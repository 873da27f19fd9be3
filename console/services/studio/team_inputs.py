"""Reading the team, hiring and handoff bodies (agents contract §4.14) with the contract's 400
messages verbatim.  Pure: the stores check what needs the database."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from console.http import bad_request
from console.services.studio.inputs import read_runtime, text, time_field
from gateway.store.studio.handoffs import UNAVAILABLE, NewHandoff
from gateway.store.studio.runtime import Runtime
from gateway.store.studio.team import Evidence, template_key
from gateway.studio import json_text, risk

TEMPLATE_REQUIRED = "Role name and definition_of_done are required"
TEMPLATE_JSON = "required_skills and allowed_tools must be valid JSON"
PLAN_REQUIRED = "Recruitment title and capability_gap are required"
PLAN_JSON = "proposed_tools must be valid JSON"
EVIDENCE_RULES = ("Capability, evidence_uri, score and confidence are required; score and "
                  "confidence must be between 0 and 1")


def _optional_id(body: dict[str, Any], key: str, message: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise bad_request(message)
    return value


def read_role_template(body: dict[str, Any]) -> dict[str, Any]:
    name, done = text(body, "name"), text(body, "definition_of_done")
    if not name or not done:
        raise bad_request(TEMPLATE_REQUIRED)
    try:
        skills = json_text.field(body, "required_skills", "[]")
        tools = json_text.field(body, "allowed_tools", "[]")
    except json_text.JsonTextError:
        raise bad_request(TEMPLATE_JSON) from None
    concurrency = body.get("max_concurrency")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        concurrency = 1
    key = template_key(text(body, "template_key"), name)
    if not key:
        raise bad_request(TEMPLATE_REQUIRED)
    responsibilities = body.get("responsibilities")
    return {"template_key": key, "name": name[:160],
            "responsibilities": responsibilities if isinstance(responsibilities, str) else "",
            "definition_of_done": done, "required_skills": skills, "allowed_tools": tools,
            "max_risk_level": risk.risk_level(body.get("max_risk_level")),
            "max_concurrency": min(8, max(1, concurrency))}


def read_plan(body: dict[str, Any]) -> dict[str, Any]:
    title, gap = text(body, "title"), text(body, "capability_gap")
    if not title or not gap:
        raise bad_request(PLAN_REQUIRED)
    try:
        tools = json_text.field(body, "proposed_tools", "[]")
    except json_text.JsonTextError:
        raise bad_request(PLAN_JSON) from None
    benefit = body.get("expected_benefit")
    return {"title": title[:200], "capability_gap": gap,
            "expected_benefit": benefit if isinstance(benefit, str) else "",
            "role_template_id": _optional_id(body, "role_template_id",
                                             "Role template is not available"),
            "max_risk_level": risk.risk_level(body.get("max_risk_level")),
            "proposed_tools": tools}


def _unit(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise bad_request(EVIDENCE_RULES)
    try:
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(str(value))
    except InvalidOperation:
        raise bad_request(EVIDENCE_RULES) from None
    if not number.is_finite() or not 0 <= number <= 1:
        raise bad_request(EVIDENCE_RULES)
    return number.normalize() if number else Decimal(0)


def read_evidence(body: dict[str, Any]) -> Evidence:
    capability, uri = text(body, "capability"), text(body, "evidence_uri")
    if not capability or not uri or body.get("score") is None \
            or body.get("confidence") is None:
        raise bad_request(EVIDENCE_RULES)
    summary = body.get("evaluation_summary")
    return Evidence(capability=capability[:200], evidence_uri=uri,
                    evaluation_summary=summary if isinstance(summary, str) else "",
                    score=_unit(body["score"]), confidence=_unit(body["confidence"]),
                    valid_until=time_field(body, "valid_until"))


def read_binding(body: dict[str, Any]) -> tuple[str, Runtime]:
    agent = body.get("advanced_chat_agent_id")
    agent_id = str(agent).strip() if isinstance(agent, str | int) \
        and not isinstance(agent, bool) else ""
    return agent_id, read_runtime(body)


def read_handoff(body: dict[str, Any]) -> NewHandoff:
    summary, steps = text(body, "completion_summary"), text(body, "next_steps")
    to = body.get("to_employee_id")
    if not summary or not steps or isinstance(to, bool) or not isinstance(to, int):
        raise bad_request(UNAVAILABLE)
    try:
        evidence = json_text.field(body, "evidence", "[]")
        risks = json_text.field(body, "risks", "[]")
    except json_text.JsonTextError:
        raise bad_request(UNAVAILABLE) from None
    return NewHandoff(to_employee_id=to,
                      from_employee_id=_optional_id(body, "from_employee_id", UNAVAILABLE),
                      work_attempt_id=_optional_id(body, "work_attempt_id", UNAVAILABLE),
                      completion_summary=summary, next_steps=steps, evidence=evidence,
                      risks=risks)
