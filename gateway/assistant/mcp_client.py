"""A Streamable-HTTP MCP client (agents contract §1.3 steps 1-4): handshake, tool listing and
tool calls for one ``http`` server, over the exchange in ``mcp_http``.

One client per server per request or run; nothing is cached across runs.  The handshake is
lazy and happens once: ``initialize``, then the ``notifications/initialized`` notification.
JSON-RPC ids count up from 1; the ``Mcp-Session-Id`` a server returns is sent on every later
message.  Tool results become text the model can read: the non-empty ``text`` blocks joined by
newlines, else the ``structuredContent`` as JSON; ``isError`` marks a failed call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from twisted.internet.defer import DeferredLock
from twisted.web.iweb import IAgent

from gateway.assistant.mcp_http import (
    EXCHANGE_TIMEOUT,
    MAX_RESPONSE_BYTES,
    Exchange,
    McpError,
)
from gateway.assistant.mcp_servers import parse_headers

PROTOCOL_VERSION = "2025-06-18"
CLIENT_NAME = "lockgate"
CLIENT_VERSION = "1.0.0"
#: ``tools/list`` pages followed at most (the origin reads only the first)
MAX_TOOL_PAGES = 10
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

__all__ = ["McpClient", "McpError", "McpTool", "McpToolResult"]


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class McpToolResult:
    text: str
    is_error: bool


def result_text(result: dict[str, Any]) -> str:
    blocks = result.get("content")
    texts = [block["text"] for block in blocks if isinstance(block, dict)
             and isinstance(block.get("text"), str) and block["text"]] \
        if isinstance(blocks, list) else []
    if texts:
        return "\n".join(texts)
    structured = result.get("structuredContent")
    return orjson.dumps(structured).decode() if structured is not None else ""


def _tool(item: Any) -> McpTool | None:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
        return None
    schema = item.get("inputSchema")
    description = item.get("description")
    return McpTool(item["name"], description if isinstance(description, str) else "",
                   schema if isinstance(schema, dict) else dict(EMPTY_SCHEMA))


class McpClient:
    """Talks to one MCP server at ``url``; ``agent`` is the outbound-safety agent."""

    def __init__(self, agent: IAgent, clock: Any, url: str, headers: str = "", *,
                 timeout: float = EXCHANGE_TIMEOUT, max_bytes: int = MAX_RESPONSE_BYTES,
                 client_name: str = CLIENT_NAME) -> None:
        self.url = url
        self._exchange = Exchange(agent, clock, timeout=timeout, max_bytes=max_bytes)
        self._extra = parse_headers(headers)
        self._client_name = client_name
        self._next_id = 1
        self._session_id: str | None = None
        self._initialized = False
        self._handshake = DeferredLock()

    @classmethod
    def for_server(cls, agent: IAgent, clock: Any, server: dict[str, Any],
                   **options: Any) -> McpClient:
        """A client for a stored ``http`` server item (``url`` and ``headers``)."""
        return cls(agent, clock, server["url"], server.get("headers") or "", **options)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def _headers(self) -> list[tuple[str, str]]:
        headers = [("Content-Type", "application/json"),
                   ("Accept", "application/json, text/event-stream"),
                   ("MCP-Protocol-Version", PROTOCOL_VERSION)]
        if self._session_id:
            headers.append(("Mcp-Session-Id", self._session_id))
        return headers + self._extra

    async def _send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        reply = await self._exchange.post(self.url, self._headers(), message)
        if reply.session_id:
            self._session_id = reply.session_id
        return reply.message

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self._next_id
        self._next_id += 1
        answer = await self._send({"jsonrpc": "2.0", "id": request_id, "method": method,
                                   "params": params})
        if answer is None:
            raise McpError("mcp server sent no response")
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise McpError(f"mcp error {code}: {message}")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def initialize(self) -> None:
        """The handshake, once (concurrent callers wait for the first)."""
        await self._handshake.acquire()
        try:
            if self._initialized:
                return
            await self._request("initialize", {
                "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                "clientInfo": {"name": self._client_name, "version": CLIENT_VERSION}})
            await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            self._initialized = True
        finally:
            self._handshake.release()

    async def list_tools(self) -> list[McpTool]:
        await self.initialize()
        tools: list[McpTool] = []
        params: dict[str, Any] = {}
        for _page in range(MAX_TOOL_PAGES):
            result = await self._request("tools/list", params)
            listed = result.get("tools")
            for item in listed if isinstance(listed, list) else []:
                tool = _tool(item)
                if tool is not None:
                    tools.append(tool)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
            params = {"cursor": cursor}
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> McpToolResult:
        await self.initialize()
        result = await self._request("tools/call", {"name": name, "arguments": arguments})
        return McpToolResult(result_text(result), result.get("isError") is True)
