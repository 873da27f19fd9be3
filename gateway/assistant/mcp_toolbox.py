"""The MCP tools of one request or run, as function tools a model can call (§1.3).

``McpToolbox.load`` lists every selected server's tools (one fresh client per server) and names
each ``mcp_<server>__<tool>`` (``tool_names``); a listing failure stops the load with
``Failed to load MCP tools: <server name>: <cause>``.  ``call`` dispatches a function name back
to its server.  ``connector``-type servers run on the user's device, so their listing and
calls go through the ``ConnectorMcp`` the caller passes (the device link); without one they
fail with the contract's message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from twisted.web.iweb import IAgent

from gateway.assistant.mcp_client import McpClient, McpTool, McpToolResult
from gateway.assistant.mcp_http import McpError
from gateway.assistant.mcp_servers import CONNECTOR
from gateway.assistant.tool_names import ToolNamer, description

NO_DEVICE = "connector MCP server requires a selected connector device"


class ConnectorMcp(Protocol):
    """How a ``connector`` server is reached (through the run's connector device)."""

    async def list_tools(self, server: dict[str, Any]) -> list[McpTool]: ...

    async def call_tool(self, server: dict[str, Any], name: str,
                        arguments: dict[str, Any]) -> McpToolResult: ...


class McpLoadFailed(Exception):
    """Listing a server's tools failed; the message is the one the contract shows."""


@dataclass(frozen=True)
class BoundTool:
    """One model-facing function and where it goes."""

    function_name: str
    server: dict[str, Any]
    tool: McpTool

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style function tool."""
        return {"type": "function", "function": {
            "name": self.function_name,
            "description": description(self.server["name"], self.tool.description),
            "parameters": self.tool.input_schema}}


ClientFactory = Callable[[dict[str, Any]], McpClient]


class McpToolbox:
    def __init__(self, tools: list[BoundTool], clients: dict[str, McpClient],
                 connector: ConnectorMcp | None) -> None:
        self.tools = tools
        self._by_name = {tool.function_name: tool for tool in tools}
        self._clients = clients
        self._connector = connector

    @classmethod
    async def load(cls, servers: list[dict[str, Any]], agent: IAgent, clock: Any, *,
                   connector: ConnectorMcp | None = None,
                   client_factory: ClientFactory | None = None) -> McpToolbox:
        make = client_factory or (lambda server: McpClient.for_server(agent, clock, server))
        namer = ToolNamer()
        tools: list[BoundTool] = []
        clients: dict[str, McpClient] = {}
        for server in servers:
            try:
                if server.get("type") == CONNECTOR:
                    if connector is None:
                        raise McpError(NO_DEVICE)
                    listed = await connector.list_tools(server)
                else:
                    client = clients[server["id"]] = make(server)
                    listed = await client.list_tools()
            except McpError as exc:
                raise McpLoadFailed(
                    f"Failed to load MCP tools: {server['name']}: {exc}") from None
            tools.extend(BoundTool(namer.name(server["id"], tool.name), server, tool)
                         for tool in listed)
        return cls(tools, clients, connector)

    def specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self.tools]

    def find(self, function_name: str) -> BoundTool | None:
        return self._by_name.get(function_name)

    async def call(self, function_name: str, arguments: dict[str, Any]) -> McpToolResult:
        """Run a named tool (``KeyError`` for a name this toolbox did not hand out; transport
        failures raise ``McpError``)."""
        bound = self._by_name[function_name]
        if bound.server.get("type") == CONNECTOR:
            if self._connector is None:
                raise McpError(NO_DEVICE)
            return await self._connector.call_tool(bound.server, bound.tool.name, arguments)
        return await self._clients[bound.server["id"]].call_tool(bound.tool.name, arguments)
