"""The MCP toolbox against the real FastMCP server: names, function specs and dispatch across
two servers, the load-failure text, and connector servers without a device."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from gateway.assistant.mcp_client import McpTool, McpToolResult
from gateway.assistant.mcp_http import McpError
from gateway.assistant.mcp_toolbox import NO_DEVICE, McpLoadFailed, McpToolbox
from gateway.channels.safe_connect import guarded_agent
from gateway.settings.store import Settings
from tests.support.mcp_server import mcp_server

LOOPBACK_ONLY = Settings({"ssrf_protection_enabled": "true",
                          "ssrf_allowed_hosts": "127.0.0.1"})
STRICT = Settings({"ssrf_protection_enabled": "true"})


def http_server(server_id: str, name: str) -> dict[str, Any]:
    return {"id": server_id, "name": name, "type": "http", "enabled": True,
            "url": mcp_server().url, "headers": ""}


class FakeDevice:
    """A stand-in for the device link (that link is another module's job)."""

    async def list_tools(self, server: dict[str, Any]) -> list[McpTool]:
        return [McpTool("ls", "List files", {"type": "object", "properties": {}})]

    async def call_tool(self, server: dict[str, Any], name: str,
                        arguments: dict[str, Any]) -> McpToolResult:
        return McpToolResult(f"{server['command']} {name} {arguments}", False)


class ToolboxTests(TestCase):
    async def test_two_servers_named_and_dispatched(self) -> None:
        agent = guarded_agent(reactor, LOOPBACK_ONLY, connect_timeout=5)
        local = {"id": "local", "name": "Local", "type": "connector", "command": "fs",
                 "enabled": True}
        box = await McpToolbox.load([http_server("calc", "Calc"), http_server("calc!", "Again"),
                                     local], agent, reactor, connector=FakeDevice())
        names = [tool.function_name for tool in box.tools]
        assert "mcp_calc__add" in names and "mcp_calc__add_2" in names
        assert "mcp_local__ls" in names
        spec = next(s for s in box.specs() if s["function"]["name"] == "mcp_calc__add_2")
        assert spec["function"]["description"] == "MCP server Again: Add two integers."
        assert spec["function"]["parameters"]["required"] == ["a", "b"]
        assert (await box.call("mcp_calc__add_2", {"a": 1, "b": 2})).text == "3"
        assert (await box.call("mcp_local__ls", {"p": 1})).text == "fs ls {'p': 1}"
        assert box.find("mcp_nope") is None

    async def test_a_listing_failure_names_the_server(self) -> None:
        agent = guarded_agent(reactor, STRICT, connect_timeout=5)
        with self.assertRaises(McpLoadFailed) as caught:
            await McpToolbox.load([http_server("calc", "Calc")], agent, reactor)
        assert str(caught.exception).startswith(
            "Failed to load MCP tools: Calc: mcp server address is not allowed: 127.0.0.1")

    async def test_connector_servers_need_a_device(self) -> None:
        agent = guarded_agent(reactor, LOOPBACK_ONLY, connect_timeout=5)
        local = {"id": "local", "name": "Local", "type": "connector", "command": "fs",
                 "enabled": True}
        with self.assertRaises(McpLoadFailed) as caught:
            await McpToolbox.load([local], agent, reactor)
        assert str(caught.exception) == f"Failed to load MCP tools: Local: {NO_DEVICE}"
        assert isinstance(McpError(NO_DEVICE), Exception)
