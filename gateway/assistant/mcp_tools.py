"""MCP servers' tools as function tools of a run (agents contract §1.3 "Exposure to the model").

Why a protocol here: the Streamable-HTTP client (and the connector-device transport) is its
own piece of work; the run loop only needs "list the tools of this server" and "call one".
Whatever implements ``McpClient`` plugs in through an ``McpClientFactory`` given to the run
service -- one client per server per request/run, no caching across runs (§1.3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.assistant.tool_names import ToolNamer, description
from gateway.assistant.tool_set import Tool, ToolFailed, ToolResult

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class McpCallOutput:
    text: str
    is_error: bool = False


class McpClient(Protocol):
    async def list_tools(self) -> list[dict[str, Any]]:
        """``result.tools[]`` of ``tools/list``: ``{name, description, inputSchema}``."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpCallOutput: ...


#: builds the client of one server item (§1.3 item shape)
McpClientFactory = Callable[[dict[str, Any]], McpClient]


class McpUnavailable(Exception):
    """Listing failed; ``str()`` is the contract's ``Failed to load MCP tools: ...`` text."""


async def mcp_tools(servers: Iterable[dict[str, Any]], factory: McpClientFactory | None
                    ) -> list[Tool]:
    """Every tool of every server, named per §1.3; a listing failure aborts (raised)."""
    namer = ToolNamer()
    tools: list[Tool] = []
    for server in servers:
        label = str(server.get("name") or server.get("id") or "")
        if factory is None:
            raise McpUnavailable(f"Failed to load MCP tools: {label}: "
                                 "no MCP client is configured on this server")
        client = factory(server)
        try:
            listed = await client.list_tools()
        except Exception as exc:
            raise McpUnavailable(f"Failed to load MCP tools: {label}: {exc}") from None
        for item in listed:
            name = str(item.get("name") or "")
            if not name:
                continue
            schema = item.get("inputSchema")
            tools.append(Tool(
                name=namer.name(str(server.get("id") or ""), name),
                description=description(label, str(item.get("description") or "")),
                parameters=schema if isinstance(schema, dict) else EMPTY_SCHEMA,
                group="mcp", run=_caller(client, name), server=label, tool=name))
    return tools


def _caller(client: McpClient, name: str) -> Any:
    async def run(arguments: dict[str, Any], _call_id: str) -> ToolResult:
        try:
            output = await client.call_tool(name, arguments)
        except ToolFailed:
            raise  # already carries its §1.8 prefix (a connector server's task failure)
        except Exception as exc:
            raise ToolFailed(f"Tool call failed: {exc}") from None
        if output.is_error:
            raise ToolFailed(f"Tool returned an error: {output.text}")
        return ToolResult(output.text)

    return run
