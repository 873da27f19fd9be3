"""The MCP clients chat completions and runs use (agents contract §1.3, §1.8 step 3).

Why an adapter: the run loop names MCP tools through ``mcp_tools`` and its small ``McpClient``
protocol (tool items as dicts, call outputs as ``McpCallOutput``), while the Streamable-HTTP
client (``mcp_client``) speaks in ``McpTool`` / ``McpToolResult``.  This module makes one
fresh HTTP client per server per request or run -- nothing cached across runs -- over one
SSRF-guarded agent that reads the live settings at connect time (so the guard covers the URL
and every redirect, §1.3 step 6).  ``connector``-type servers run on a device as stdio
processes; when the run has no device they fail with the contract's message.
"""

from __future__ import annotations

from typing import Any

from twisted.web.iweb import IAgent

from gateway.assistant.mcp_client import McpClient, McpError
from gateway.assistant.mcp_servers import CONNECTOR
from gateway.assistant.mcp_toolbox import NO_DEVICE
from gateway.assistant.mcp_tools import McpCallOutput, McpClientFactory
from gateway.channels.safe_connect import guarded_agent

#: seconds to open the TCP connection of one exchange (the exchange itself has 30 s)
CONNECT_TIMEOUT = 10.0


class HttpMcpTools:
    """One ``http`` server's tools for the run loop, over a fresh Streamable-HTTP client."""

    def __init__(self, client: McpClient) -> None:
        self.client = client

    async def list_tools(self) -> list[dict[str, Any]]:
        return [{"name": tool.name, "description": tool.description,
                 "inputSchema": tool.input_schema} for tool in await self.client.list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpCallOutput:
        result = await self.client.call_tool(name, arguments)
        return McpCallOutput(result.text, result.is_error)


class NoDeviceMcpTools:
    """A ``connector`` server selected without a connector device: every use fails."""

    async def list_tools(self) -> list[dict[str, Any]]:
        raise McpError(NO_DEVICE)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpCallOutput:
        raise McpError(NO_DEVICE)


def http_mcp_factory(agent: IAgent, clock: Any) -> McpClientFactory:
    """Clients over ``agent`` (the outbound-safety agent) for the servers of one request."""

    def make(server: dict[str, Any]) -> HttpMcpTools | NoDeviceMcpTools:
        if server.get("type") == CONNECTOR:
            return NoDeviceMcpTools()
        return HttpMcpTools(McpClient.for_server(agent, clock, server))

    return make


def guarded_mcp_factory(reactor: Any, settings: Any, clock: Any) -> McpClientFactory:
    """The server's factory: one guarded agent under the live SSRF settings."""
    return http_mcp_factory(
        guarded_agent(reactor, settings, connect_timeout=CONNECT_TIMEOUT, clock=clock), clock)
