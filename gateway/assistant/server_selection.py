"""Which MCP servers a completion or run uses (agents contract §1.3 "Selection", [P-3]).

Referenced ids (agent's, then the request's, then those of the selected skills; deduped, order
kept) must name an enabled builtin or custom server -- builtin first, the first id wins.
Temporary servers sent inline with a completion are validated like stored items, named
``tmp-<n>`` when they carry no id, appended after the referenced ones, and count toward the
same 20-server cap.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.assistant import mcp_servers


class SelectionRefused(ValueError):
    """The selection cannot be used; the message is the contract's text."""


def referenced_ids(*groups: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(server_id for group in groups for server_id in group))


def select_servers(ids: Iterable[str], builtin: Iterable[dict[str, Any]],
                   custom: Iterable[dict[str, Any]], temporary: Any = None
                   ) -> list[dict[str, Any]]:
    """The server items to use, in order (raises ``SelectionRefused``)."""
    known = {server["id"]: server for server in mcp_servers.merged(builtin, custom)}
    chosen: list[dict[str, Any]] = []
    for server_id in dict.fromkeys(ids):
        server = known.get(server_id)
        if server is None or not server.get("enabled", True):
            raise SelectionRefused(f"unknown or disabled MCP server: {server_id}")
        chosen.append(server)
    if temporary:
        try:
            extra = mcp_servers.read_servers(temporary, lambda index: f"tmp-{index + 1}")
        except mcp_servers.InvalidServers:
            raise SelectionRefused(mcp_servers.INVALID) from None
        taken = {server["id"] for server in chosen}
        if any(server["id"] in taken for server in extra):
            raise SelectionRefused(mcp_servers.INVALID)
        chosen.extend(server for server in extra if server["enabled"])
    if len(chosen) > mcp_servers.MAX_SERVERS:
        raise SelectionRefused("Too many MCP servers")
    return chosen
