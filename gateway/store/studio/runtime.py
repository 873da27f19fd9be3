"""A studio's execution environment (agents contract §4.7, [P-22]): a cloud sandbox XOR a
connector device (online now) with a workspace; prefixes normalized (§2.6).

The call replaces all four values (omitted = cleared); all empty means no environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.engine import Connection

from gateway.assistant.connector_approval import normalize_prefixes
from gateway.sandboxes.gate import SandboxRefused, sandbox_gate
from gateway.store import devices
from gateway.store.assistant.refused import invalid
from gateway.store.studio import companies
from gateway.store.studio.rows import CompanyRow

EITHER = "Choose either a cloud sandbox or a local connector"
SANDBOX_UNAVAILABLE = "Cloud sandbox is unavailable"
DEVICE_REQUIRED = "connector device is required"
DEVICE_NOT_FOUND = "connector device not found"
DEVICE_OFFLINE = "connector device is offline"
WORKSPACE_TOO_LONG = "workspace path is too long"
WORKSPACE_REQUIRED = "Workspace path is required"
MAX_WORKSPACE = 1000


@dataclass(frozen=True)
class Runtime:
    connector_device_id: str
    connector_workspace_path: str
    connector_command_prefixes: list[str]
    cloud_sandbox_id: str


def check_runtime(conn: Connection, user_id: int, runtime: Runtime, now: datetime
                  ) -> dict[str, Any]:
    """The §4.7 checks; the normalized values (prefixes as a list) when they pass."""
    device_id, workspace = runtime.connector_device_id, runtime.connector_workspace_path
    sandbox_id = runtime.cloud_sandbox_id
    if sandbox_id:
        if device_id or workspace:
            raise invalid(EITHER)
        try:
            sandbox_gate(conn, user_id, sandbox_id, now, require_credit=False)
        except SandboxRefused:
            raise invalid(SANDBOX_UNAVAILABLE) from None
    elif device_id or workspace:
        if not device_id:
            raise invalid(DEVICE_REQUIRED)
        device = devices.get_for_user(conn, user_id, device_id)
        if device is None or device.hidden:
            raise invalid(DEVICE_NOT_FOUND)
        if not device.online_at(now):
            raise invalid(DEVICE_OFFLINE)
        if len(workspace) > MAX_WORKSPACE:
            raise invalid(WORKSPACE_TOO_LONG)
        if not workspace:
            raise invalid(WORKSPACE_REQUIRED)
    return {"connector_device_id": device_id, "connector_workspace_path": workspace,
            "connector_command_prefixes": normalize_prefixes(runtime.connector_command_prefixes),
            "cloud_sandbox_id": sandbox_id}


def configure(conn: Connection, company: CompanyRow, user_id: int, runtime: Runtime,
              now: datetime) -> CompanyRow:
    values = check_runtime(conn, user_id, runtime, now)
    values["connector_command_prefixes"] = orjson.dumps(
        values["connector_command_prefixes"]).decode("utf-8")
    return companies.set_runtime(conn, company, user_id, values, now)
