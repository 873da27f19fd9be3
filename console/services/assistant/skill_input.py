"""Reads a skill body (agents contract §1.5, [P-5]) into store values with the contract's
messages; name uniqueness and MCP server references are checked in the store's transaction."""

from __future__ import annotations

from typing import Any

from console.http import bad_request
from console.services.assistant.text_rules import flag, server_ids, text


def read_skill(body: dict[str, Any]) -> dict[str, Any]:
    name = text(body, ("name",), 100, "Skill name is too long")
    if not name:
        raise bad_request("Skill name is required", field="name")
    return {
        "name": name,
        "description": text(body, ("description",), 2000, "Skill description is too long"),
        "prompt": text(body, ("prompt",), 20000, "Skill prompt is too long", strip=False),
        "content": text(body, ("content",), 200000, "Skill content is too long", strip=False),
        "enabled": flag(body, "enabled", True),
        "mcp_server_ids": server_ids(body, ("mcp_server_ids", "mcp_servers")),
    }
