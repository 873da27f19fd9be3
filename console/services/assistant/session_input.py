"""Reads a session body (agents contract §1.6, [P-7]) into a draft the store can save.

The checks that need no database run here, in the contract's order; ``session_save`` runs the
rest (agent, skills, MCP servers) in the saving transaction, before the 409s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from console.http import ApiError, bad_request
from console.services.assistant.text_rules import flag, id_list, server_ids, text, whole_number
from gateway.assistant.ids import MESSAGE, SESSION, random_id

RUN_MODES = ("chat", "assistant", "agent_group")
APPROVAL_MODES = ("manual", "full_access", "assistant")
EFFORTS = ("minimal", "low", "medium", "high")
TOOL_GROUPS = ("workspace", "web", "sites", "tasks", "ask_user", "memory")
MAX_ID = 80
MAX_TITLE = 200
MAX_WORKSPACE = 1000
MAX_METADATA = 16 * 1024
_ID_FORBIDDEN = frozenset("/\\?#")


@dataclass(frozen=True)
class Switches:
    """The admin settings a session save depends on."""

    assistant_mode_enabled: bool
    mcp_tools_enabled: bool
    workspace_tools_enabled: bool


@dataclass
class SessionDraft:
    id: str
    #: columns of ``assistant_sessions`` (agent ids not merged yet)
    values: dict[str, Any]
    messages: list[dict[str, Any]]


def valid_id(value: Any) -> str | None:
    """A usable client id (trimmed), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or len(value) > MAX_ID or any(c in _ID_FORBIDDEN for c in value):
        return None
    return value


def session_id(body: dict[str, Any], path_id: str | None) -> str:
    if path_id is not None:
        chosen = valid_id(path_id)
    elif body.get("id") is None or body.get("id") == "":
        return random_id(SESSION)
    else:
        chosen = valid_id(body.get("id"))
    if chosen is None:
        raise bad_request("Invalid session id", field="id")
    return chosen


def _message(item: Any, taken: set[str]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise bad_request("messages must be an array of objects", field="messages")
    content = item.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise bad_request("message content must be a string", field="messages")
    parts = item.get("content_parts") or []
    calls = item.get("tool_calls") or []
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise bad_request("content_parts must be an array of objects", field="messages")
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise bad_request("tool_calls must be an array of objects", field="messages")
    message_id = valid_id(item.get("id"))
    if message_id is None or message_id in taken:
        message_id = random_id(MESSAGE)
    taken.add(message_id)
    return {"id": message_id, "role": "assistant" if item.get("role") == "assistant" else "user",
            "content": content, "content_parts": parts, "tool_calls": calls}


def read_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    given = body.get("messages")
    if given is None:
        return []
    if not isinstance(given, list):
        raise bad_request("messages must be an array", field="messages")
    taken: set[str] = set()
    return [_message(item, taken) for item in given]


def default_title(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message["role"] == "user" and message["content"].strip():
            return message["content"].strip()[:28]
    return "New session"


def _metadata(body: dict[str, Any]) -> dict[str, Any]:
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or len(orjson.dumps(value)) > MAX_METADATA:
        raise bad_request("metadata must be a JSON object of at most 16 KiB", field="metadata")
    return value


def _temperature(body: dict[str, Any]) -> float | None:
    value = body.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request("temperature must be a number", field="temperature")
    return float(min(2.0, max(0.0, value)))


def _approval_mode(body: dict[str, Any]) -> str:
    given = body.get("connector_approval_mode")
    if isinstance(given, str) and given.strip() in APPROVAL_MODES:
        return given.strip()
    return "full_access" if flag(body, "connector_auto_approve", False) else "manual"


def _connector(body: dict[str, Any], mode: str, switches: Switches) -> dict[str, Any]:
    device = text(body, ("connector_device_id",), MAX_ID, "connector device not found")
    workspace = text(body, ("connector_workspace_path",), 100_000, "workspace path is too long")
    sandbox = text(body, ("cloud_sandbox_id",), MAX_ID, "Cloud sandbox is unavailable")
    if mode == "chat":
        return {"connector_device_id": "", "connector_workspace_path": "",
                "cloud_sandbox_id": "", "connector_approval_mode": "manual"}
    if (device or workspace or sandbox) and not switches.workspace_tools_enabled:
        raise bad_request("Workspace tools are disabled", field="connector_device_id")
    if sandbox and workspace:
        raise bad_request("Cloud sandboxes do not accept a workspace path",
                          field="connector_workspace_path")
    if workspace and not device and not sandbox:
        raise bad_request("connector device is required", field="connector_device_id")
    if len(workspace) > MAX_WORKSPACE:
        raise bad_request("workspace path is too long", field="connector_workspace_path")
    return {"connector_device_id": device, "connector_workspace_path": workspace,
            "cloud_sandbox_id": sandbox,
            "connector_approval_mode": "full_access" if sandbox else _approval_mode(body)}


def read_session(body: dict[str, Any], path_id: str | None, switches: Switches
                 ) -> SessionDraft:
    """The first pure checks in contract order (id, mode switch, model name); the reference
    checks and ``late_checks`` follow in the saving transaction."""
    chosen = session_id(body, path_id)
    mode = body.get("run_mode")
    mode = mode if mode in RUN_MODES else "chat"
    if mode != "chat" and not switches.assistant_mode_enabled:
        raise ApiError(403, "Assistant mode is disabled")
    model = text(body, ("model_name", "model"), 100, "Model name is too long")
    messages = read_messages(body)
    agent_id = valid_id(body.get("agent_id"))
    if agent_id is None and body.get("agent_id") not in (None, ""):
        raise bad_request("Agent not found", field="agent_id")
    group = text(body, ("agent_group_id",), MAX_ID, "Studio is required")
    title = text(body, ("title",), 100_000, "Title is too long")[:MAX_TITLE]
    values: dict[str, Any] = {
        "title": title or default_title(messages),
        "run_mode": mode,
        "agent_id": "" if mode == "agent_group" else (agent_id or "default"),
        "agent_group_id": group if mode == "agent_group" else "",
        "skill_ids": id_list(body, ("skill_ids",)),
        "mcp_server_ids": server_ids(body, ("mcp_server_ids", "mcp_servers")),
        "knowledge_base_ids": id_list(body, ("knowledge_base_ids",)),
        "model_name": model,
        "user_channel_id": max(0, whole_number(body, ("user_channel_id", "channel_id"))),
        "max_tokens": whole_number(body, ("max_tokens",), clamp=(0, 200000)),
        "temperature": _temperature(body),
        "reasoning_effort": body.get("reasoning_effort")
        if body.get("reasoning_effort") in EFFORTS else "",
        "auto_compress_context": flag(body, "auto_compress_context", False),
        "disabled_tool_groups": [g for g in id_list(body, ("disabled_tool_groups",))
                                 if g in TOOL_GROUPS],
        "connector_command_prefixes": id_list(body, ("connector_command_prefixes",)),
        "folder_id": text(body, ("folder_id",), MAX_ID, "folder_id is too long"),
        "metadata": _metadata(body),
    }
    return SessionDraft(chosen, values, messages)


def late_checks(draft: SessionDraft, body: dict[str, Any], switches: Switches) -> None:
    """The pure checks the contract orders after the reference checks: the studio and the
    execution target; fills the connector columns."""
    if draft.values["run_mode"] == "agent_group" and not draft.values["agent_group_id"]:
        raise bad_request("Studio is required", field="agent_group_id")
    draft.values.update(_connector(body, draft.values["run_mode"], switches))
