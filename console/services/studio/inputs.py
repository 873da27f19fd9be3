"""Reading studio-operations request bodies (agents contract §4.3-§4.10, [P-30], [P-31]) into
store values, with the contract's 400 messages verbatim.

Pure: nothing here touches the database; checks that need it (devices, sandboxes, objectives,
budgets) live in the stores.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from console.http import bad_request
from gateway.billing.money import AmountError, parse_decimal, to_nanos
from gateway.store.studio.runtime import Runtime
from gateway.store.studio.work_items import NewWorkItem
from gateway.studio import json_text, risk
from gateway.studio.risk import DEFAULT_POLICY

NAME_AND_MISSION = "Company name and mission are required"
NEGATIVE_BUDGET = "Budgets cannot be negative"
MISSION_REQUIRED = "Mission is required"
CHARTER_JSON = "Charter structured fields must be valid JSON"
SCHEDULER_RANGE = "max_concurrent_tasks must be between 1 and 8"
OBJECTIVE_TITLE = "Objective title is required"
WORK_REQUIRED = "Work item title and definition_of_done are required"
NEGATIVE_ESTIMATE = "Estimated cost cannot be negative"
WORK_JSON = "input_snapshot and allowed_tools must be valid JSON"
DECISION = "Decision must be approved or rejected"
PREFIXES = "connector_command_prefixes must be a list of strings"
MONEY_FIELDS = ("daily_budget", "monthly_budget", "balance_floor")
LIST_FIELDS = ("goals", "data_boundaries", "prohibited_actions")
MAX_TITLE = 200
MAX_COMPANY_NAME = 160
MAX_TIMEZONE = 80
MAX_IDEMPOTENCY_KEY = 100


def text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    return value.strip() if isinstance(value, str) else ""


def _money(value: Any, negative: str, name: str) -> int:
    try:
        amount = parse_decimal(value, allow_negative=True)
    except AmountError as exc:
        raise bad_request(f"{name} {exc}", field=name) from None
    if amount < 0:
        raise bad_request(negative, field=name)
    return to_nanos(amount)


def _integer(body: dict[str, Any], key: str, default: int = 0) -> int:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 2**31 - 1:
        raise bad_request(f"{key} must be an integer", field=key)
    return value


def time_field(body: dict[str, Any], key: str) -> datetime | None:
    value = body.get(key)
    if value is None or value == "":
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise bad_request(f"{key} must be an RFC 3339 timestamp", field=key)
    return parsed.astimezone(UTC)


def _settings(body: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """name, timezone, budgets, floor, autonomy: shared by bootstrap and [P-31] settings."""
    values: dict[str, Any] = {}
    name = text(body, "name")
    if name:
        values["name"] = name[:MAX_COMPANY_NAME]
    if "timezone" in body or not partial:
        values["timezone"] = (text(body, "timezone") or "UTC")[:MAX_TIMEZONE]
    for field in MONEY_FIELDS:
        if body.get(field) is not None:
            values[f"{field}_nanos"] = _money(body[field], NEGATIVE_BUDGET, field)
    if "autonomy_level" in body or not partial:
        values["autonomy_level"] = risk.autonomy_level(body.get("autonomy_level"))
    return values


def read_bootstrap(body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(record values, charter fields) of ``POST /bootstrap``."""
    if not text(body, "name") or not text(body, "mission"):
        raise bad_request(NAME_AND_MISSION)
    values = _settings(body, partial=False)
    charter: dict[str, str] = {"mission": text(body, "mission")}
    for field in LIST_FIELDS:
        try:
            charter[field] = json_text.field(body, field, "[]")
        except json_text.JsonTextError:
            raise bad_request(f"{field} must be valid JSON", field=field) from None
    return values, charter


def read_settings(body: dict[str, Any]) -> dict[str, Any]:
    """[P-31] ``PUT /settings``: only the fields present (an empty name is ignored)."""
    return _settings(body, partial=True)


def read_charter(body: dict[str, Any]) -> dict[str, str]:
    mission = text(body, "mission")
    if not mission:
        raise bad_request(MISSION_REQUIRED)
    charter = {"mission": mission}
    try:
        for field in LIST_FIELDS:
            charter[field] = json_text.field(body, field, "[]")
        charter["approval_policy"] = json_text.field(body, "approval_policy", DEFAULT_POLICY)
    except json_text.JsonTextError:
        raise bad_request(CHARTER_JSON) from None
    return charter


def read_scheduler(body: dict[str, Any]) -> int:
    value = body.get("max_concurrent_tasks")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 8:
        raise bad_request(SCHEDULER_RANGE, field="max_concurrent_tasks")
    return value


def read_objective(body: dict[str, Any]) -> dict[str, Any]:
    title = text(body, "title")
    if not title:
        raise bad_request(OBJECTIVE_TITLE)
    description = body.get("description")
    return {"title": title[:MAX_TITLE],
            "description": description if isinstance(description, str) else "",
            "priority": _integer(body, "priority"), "target_date": time_field(body, "target_date")}


def read_work_item(body: dict[str, Any]) -> NewWorkItem:
    title, done = text(body, "title"), text(body, "definition_of_done")
    if not title or not done:
        raise bad_request(WORK_REQUIRED)
    estimate = 0
    if body.get("estimated_cost") is not None:
        estimate = _money(body["estimated_cost"], NEGATIVE_ESTIMATE, "estimated_cost")
    try:
        snapshot = json_text.field(body, "input_snapshot", "{}")
        tools = json_text.field(body, "allowed_tools", "[]")
    except json_text.JsonTextError:
        raise bad_request(WORK_JSON) from None
    objective = body.get("objective_id")
    if objective is not None and (isinstance(objective, bool) or not isinstance(objective, int)):
        raise bad_request("objective_id must be an integer", field="objective_id")
    description = body.get("description")
    return NewWorkItem(
        title=title[:MAX_TITLE], definition_of_done=done,
        description=description if isinstance(description, str) else "",
        objective_id=objective or None, priority=_integer(body, "priority"),
        idempotency_key=text(body, "idempotency_key")[:MAX_IDEMPOTENCY_KEY],
        input_snapshot=snapshot, allowed_tools=tools, estimated_cost_nanos=estimate,
        due_at=time_field(body, "due_at"), risk_level=risk.risk_level(body.get("risk_level")))


def read_decision(body: dict[str, Any]) -> tuple[str, str]:
    decision = text(body, "decision").lower()
    if decision not in ("approved", "rejected"):
        raise bad_request(DECISION)
    return decision, text(body, "reason")


def read_runtime(body: dict[str, Any]) -> Runtime:
    """§4.7 body: omitted values are cleared; prefixes are a list or JSON text of one."""
    raw = body.get("connector_command_prefixes")
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw) if raw.strip() else []
        except orjson.JSONDecodeError:
            raise bad_request(PREFIXES, field="connector_command_prefixes") from None
    if raw is None:
        raw = []
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise bad_request(PREFIXES, field="connector_command_prefixes")
    workspace = body.get("connector_workspace_path")
    return Runtime(connector_device_id=text(body, "connector_device_id"),
                   connector_workspace_path=workspace.strip() if isinstance(workspace, str)
                   else "",
                   connector_command_prefixes=raw,
                   cloud_sandbox_id=text(body, "cloud_sandbox_id"))
