"""``connector``-type MCP servers of a run, reached through its connector device (§1.3).

Why connector tasks: the server is a stdio process on the user's machine (or sandbox host), so
listing and calling go as ``mcp_list_tools`` / ``mcp_call_tool`` tasks through the links'
``ConnectorTasks`` service -- tied to the run (a stop fails them and wakes the wait), never
awaiting approval (raw internal tasks bypass the approval rule, §1.13), and the device's
JSON-RPC ``result`` mapped by the same ``result_text`` as the HTTP client's.  The payload
carries ``server.env`` unmasked: the process needs the real values (§1.13 [G]).
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.assistant.connector_tools import ConnectorTarget
from gateway.assistant.mcp_client import McpError, result_text
from gateway.assistant.mcp_tools import McpCallOutput
from gateway.assistant.tool_set import ToolFailed
from gateway.links.tasks import ConnectorTasks
from gateway.store import connector_tasks


def server_payload(server: dict[str, Any]) -> dict[str, Any]:
    """The ``server`` object a device gets: how to start the process, nothing else."""
    return {"id": server.get("id", ""), "name": server.get("name", ""), "type": "connector",
            "command": server.get("command", ""), "args": list(server.get("args") or []),
            "env": dict(server.get("env") or {}), "cwd": server.get("cwd", "")}


class ConnectorMcpTools:
    """One ``connector`` server's tools for the run loop (the ``McpClient`` protocol)."""

    def __init__(self, tasks: ConnectorTasks, target: ConnectorTarget,
                 server: dict[str, Any]) -> None:
        self.tasks = tasks
        self.target = target
        self.server = server_payload(server)

    async def _run(self, action: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The device's JSON ``result`` (``McpError`` for a failed or unusable task)."""
        target = self.target
        created = await self.tasks.create(
            user_id=target.user_id, device_id=target.device_id, action=action,
            payload=payload, workspace_path=target.workspace_path, run_id=target.run_id)
        task = await self.tasks.wait(created)
        if task is None:
            raise McpError("the connector task was deleted")
        if task.status == connector_tasks.FAILED:
            raise McpError(task.error_message or "connector task failed")
        try:
            result = orjson.loads(task.result)
        except orjson.JSONDecodeError:
            raise McpError("the device sent a result that is not JSON") from None
        if not isinstance(result, dict):
            raise McpError("the device sent a result that is not a JSON object")
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        result = await self._run("mcp_list_tools", {"server": self.server})
        tools = result.get("tools")
        return [item for item in tools if isinstance(item, dict)] \
            if isinstance(tools, list) else []

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpCallOutput:
        try:
            result = await self._run("mcp_call_tool", {
                "server": self.server, "name": name, "arguments": arguments})
        except McpError as exc:
            raise ToolFailed(f"Connector tool failed: {exc}") from None
        return McpCallOutput(result_text(result), result.get("isError") is True)
