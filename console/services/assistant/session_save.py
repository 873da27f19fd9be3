"""Saves a session draft in one transaction, checking in the contract's order (§1.6):
agent, skills, knowledge bases, MCP servers, then ``late_checks``, then the connector device
(it must exist and be the user's: 400 ``connector device not found``; it need not be online to
save, §2.5; and a web session that selects one must name a workspace, [P-22]: 400 ``Workspace
path is required``), then the cloud sandbox (the user's, ``ready``, on an enabled host: 400 ``Cloud
sandbox is unavailable``; its host need not be online to save), then the store's 409s.

The agent's skill, MCP server and knowledge base ids are merged into the session's (agent's
first, order kept, no duplicates).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from console.services.assistant.session_input import SessionDraft, Switches, late_checks
from gateway.assistant.sandbox_binding import SandboxUnavailable, usable_sandbox
from gateway.store import devices
from gateway.store.assistant import agents
from gateway.store.assistant.references import check_skills
from gateway.store.assistant.refused import invalid
from gateway.store.assistant.sessions import StoredSession, save_session
from gateway.store.assistant.user_settings import custom_servers
from gateway.store.connection import Connection

DEVICE_NOT_FOUND = "connector device not found"
#: [P-22]: unrestricted (workspace-less) device access stays with non-web channels
WORKSPACE_REQUIRED = "Workspace path is required"


def _merged(first: Iterable[str], then: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*first, *then]))


def usable_server_ids(conn: Connection, user_id: int, builtin: list[dict[str, Any]]
                      ) -> set[str]:
    """Ids of the enabled servers the user may select (builtin and their own)."""
    servers = [*builtin, *custom_servers(conn, user_id)]
    return {server["id"] for server in servers if server.get("enabled", True)}


def check_references(conn: Connection, user_id: int, draft: SessionDraft,
                     builtin: list[dict[str, Any]], switches: Switches, now: datetime) -> None:
    values = draft.values
    if values["agent_id"]:
        agent = agents.find_agent(conn, user_id, values["agent_id"], now)
        if agent is None:
            raise invalid("Agent not found")
        if not agent.enabled:
            raise invalid("Agent is disabled")
        for column in ("skill_ids", "mcp_server_ids", "knowledge_base_ids"):
            values[column] = _merged(getattr(agent, column), values[column])
    check_skills(conn, user_id, values["skill_ids"])
    if values["knowledge_base_ids"]:
        # no knowledge base is ever vectorized here (the feature is not offered)
        raise invalid("Knowledge base is not vectorized")
    wanted = values["mcp_server_ids"]
    if wanted and values["run_mode"] != "chat" and not switches.mcp_tools_enabled:
        raise invalid("MCP tools are disabled")
    usable = usable_server_ids(conn, user_id, builtin) if wanted else set()
    for server_id in wanted:
        if server_id not in usable:
            raise invalid(f"unknown or disabled MCP server: {server_id}")


def save_draft(conn: Connection, user_id: int, draft: SessionDraft, body: dict[str, Any],
               builtin: list[dict[str, Any]], switches: Switches, now: datetime
               ) -> StoredSession:
    check_references(conn, user_id, draft, builtin, switches, now)
    late_checks(draft, body, switches)
    device_id = draft.values["connector_device_id"]
    if device_id and devices.get_for_user(conn, user_id, device_id) is None:
        raise invalid(DEVICE_NOT_FOUND)
    if device_id and not draft.values["connector_workspace_path"]:
        raise invalid(WORKSPACE_REQUIRED)
    if draft.values["cloud_sandbox_id"]:
        try:
            usable_sandbox(conn, user_id, draft.values["cloud_sandbox_id"])
        except SandboxUnavailable as exc:
            raise invalid(str(exc)) from None
    return save_session(conn, user_id, draft.id, draft.values, draft.messages, now)
