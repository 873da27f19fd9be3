"""The owner decides a connector task awaiting approval (agents contract §1.13, [P-15]).

An approved task may carry adjusted input: it replaces the tool arguments after the same check
fresh arguments get; the action and the server-owned keys cannot change.  The waiting run sees
the new payload when the device's result arrives and tells the model the input was adjusted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.assistant.connector_arguments import check_arguments
from gateway.assistant.tool_set import BadArguments
from gateway.store import connector_decisions
from gateway.store.assistant.refused import Refused, invalid, missing
from gateway.store.connection import Connection
from gateway.store.connector_tasks import QUEUED

NOT_FOUND = "Connector task not found"
DECIDED = "Connector task already decided"
SERVER_OWNED = ("cloud_sandbox_id", "cloud_sandbox_spec", "connector_task_id")


def read_decision(body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    approved = body.get("approved") is True
    given = body.get("input")
    if "input" in body and given is not None and not isinstance(given, dict):
        raise invalid("input must be an object")
    return approved, given if approved else None


def _adjusted(action: str, original: dict[str, Any], given: dict[str, Any],
              workspace: str) -> dict[str, Any]:
    try:
        payload = check_arguments(action, given, workspace)
    except BadArguments as exc:
        raise invalid(f"Invalid adjusted input: {exc}") from None
    for key, value in original.items():
        if key in SERVER_OWNED or key.startswith("preview_"):
            payload[key] = value
    return payload


def decide(conn: Connection, user_id: int, task_id: str, approved: bool,
           given: dict[str, Any] | None, now: datetime) -> tuple[str, str]:
    """The task's new status and its device (to wake when queued)."""
    task = connector_decisions.get_for_user(conn, user_id, task_id)
    if task is None:
        raise missing(NOT_FOUND)
    if task.status != "pending_approval":
        raise Refused(409, DECIDED, {"status": task.status})
    payload = (_adjusted(task.action, task.payload, given, task.workspace_path)
               if approved and given is not None else None)
    if not connector_decisions.decide(conn, task_id, approved, payload, "user", now):
        current = connector_decisions.get_for_user(conn, user_id, task_id)
        raise Refused(409, DECIDED, {"status": current.status if current else "failed"})
    return (QUEUED if approved else "failed"), task.device_id
