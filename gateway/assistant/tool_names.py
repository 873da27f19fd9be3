"""The function name a model sees for each MCP tool (agents contract §1.3).

``mcp_<first 16 safe chars of the server id>__<tool name>``: characters outside
``[A-Za-z0-9_-]`` become ``_`` and each part loses leading/trailing ``_``/``-``.  A name over 64
characters becomes its first 48 (trailing ``_-`` trimmed) + ``_`` + the first 8 hex digits of
the SHA-1 of the long name; a name already given out gets ``_2``, ``_3``, ...
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_-")


def tool_name(server_id: str, tool: str) -> str:
    """The name before collisions are resolved."""
    server_part = safe(_UNSAFE.sub("_", server_id)[:16])
    name = f"mcp_{server_part}__{safe(tool)}"
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(name.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]
        name = f"{name[:48].rstrip('_-')}_{digest}"
    return name


class ToolNamer:
    """Hands out unique names across every server of one run."""

    def __init__(self) -> None:
        self._taken: set[str] = set()

    def name(self, server_id: str, tool: str) -> str:
        base = tool_name(server_id, tool)
        candidate, number = base, 1
        while candidate in self._taken:
            number += 1
            candidate = f"{base}_{number}"
        self._taken.add(candidate)
        return candidate


def description(server_name: str, tool_description: str) -> str:
    text = tool_description.strip()
    return f"MCP server {server_name}: {text}" if text else f"MCP server {server_name}"
