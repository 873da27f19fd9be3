"""Reads an agent body (agents contract §1.4, [P-4]) into store values, in the contract's
order of checks and with its messages.  Reference checks (skills, MCP servers, the name's
uniqueness) run in the store's transaction."""

from __future__ import annotations

from typing import Any

from console.http import bad_request
from console.services.assistant.text_rules import flag, id_list, server_ids, text, whole_number

TOOL_GROUPS = ("workspace", "web", "sites", "tasks", "ask_user", "memory")
PRESET_ROLES = ("system", "user", "assistant")
MAX_PRESETS = 24
MAX_PRESET = 8000
MAX_PRESETS_TOTAL = 30000


def _presets(body: dict[str, Any]) -> list[dict[str, str]]:
    given = body.get("preset_messages")
    if given is None:
        return []
    if not isinstance(given, list):
        raise bad_request("preset_messages must be an array", field="preset_messages")
    presets: list[dict[str, str]] = []
    for item in given:
        if not isinstance(item, dict):
            raise bad_request("preset_messages must be an array of objects",
                              field="preset_messages")
        content = item.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise bad_request("preset_messages content must be a string",
                              field="preset_messages")
        if not content.strip():
            continue
        presets.append({"role": item.get("role"), "content": content})  # type: ignore[dict-item]
    if len(presets) > MAX_PRESETS:
        raise bad_request("Too many preset messages", field="preset_messages")
    total = 0
    for preset in presets:
        if preset["role"] not in PRESET_ROLES:
            raise bad_request("Preset message role must be system, user, or assistant",
                              field="preset_messages")
        if len(preset["content"]) > MAX_PRESET:
            raise bad_request("Preset message is too long", field="preset_messages")
        total += len(preset["content"])
    if total > MAX_PRESETS_TOTAL:
        raise bad_request("Preset messages are too long", field="preset_messages")
    return presets


def _tools(body: dict[str, Any]) -> list[str]:
    groups = id_list(body, ("tools",))
    for group in groups:
        if group not in TOOL_GROUPS:
            raise bad_request(f"Unknown tool group: {group}", field="tools")
    return groups


def read_agent(body: dict[str, Any]) -> dict[str, Any]:
    """Every mutable column of an agent (PUT replaces them all)."""
    name = text(body, ("name",), 100, "Agent name is too long")
    if not name:
        raise bad_request("Agent name is required", field="name")
    values: dict[str, Any] = {"name": name}
    values["default_model"] = text(body, ("default_model", "model"), 100,
                                   "Default model is too long")
    values["prompt"] = text(body, ("prompt", "system_prompt"), 20000, "Agent prompt is too long",
                            strip=False)
    values["description"] = text(body, ("description",), 2000, "Agent description is too long")
    values["skill_ids"] = id_list(body, ("skill_ids",))
    values["mcp_server_ids"] = server_ids(body, ("mcp_server_ids", "mcp_servers"))
    values["knowledge_base_ids"] = id_list(body, ("knowledge_base_ids",))
    values["preset_messages"] = _presets(body)
    values["tools"] = _tools(body)
    values["user_channel_id"] = max(0, whole_number(body, ("user_channel_id",)))
    values["stream"] = flag(body, "stream", False)
    values["enabled"] = flag(body, "enabled", True)
    return values
