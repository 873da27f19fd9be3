"""The device's stdio MCP servers, one process per server key (agents contract §1.3, §2.7).

Why a registry: ``mcp_list_tools`` and ``mcp_call_tool`` tasks of a run (and of later runs)
reuse the process the first one started, after its ``initialize`` handshake.  A process that
died is started again on the next call; a changed server definition under the same key
replaces the old process.  ``list_mcp_processes`` / ``stop_mcp_process`` manage them, and
``stop_all`` kills every one when the connector stops.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred, DeferredLock, gatherResults

from connector.actions.mcp_stdio import PROTOCOL_VERSION, StdioMcpProcess
from connector.actions.outcome import ActionError, ActionResult

#: seconds one JSON-RPC exchange may take (the HTTP client's per-exchange limit)
REQUEST_SECONDS = 30.0
#: ``tools/list`` pages followed (§1.3 step 3 allows up to 10)
MAX_TOOL_PAGES = 10
CLIENT_INFO = {"name": "lockgate-connector", "version": "1.0.0"}


def _server(payload: dict[str, Any]) -> dict[str, Any]:
    server = payload.get("server")
    if not isinstance(server, dict):
        raise ActionError("server is required")
    if not isinstance(server.get("command"), str) or not server["command"].strip():
        raise ActionError("mcp server command is required")
    args = server.get("args") or []
    env = server.get("env") or {}
    if not isinstance(args, list) or not isinstance(env, dict):
        raise ActionError("mcp server args must be a list and env an object")
    return server


def server_key(server: dict[str, Any]) -> str:
    """The process key: the server's id, else its name, else its command."""
    for field in ("id", "name", "command"):
        value = server.get(field)
        if isinstance(value, str) and value:
            return value
    raise ActionError("mcp server command is required")


def _definition(server: dict[str, Any]) -> str:
    return json.dumps([server.get(k) for k in ("command", "args", "env", "cwd")],
                      sort_keys=True)


class McpProcesses:
    def __init__(self, reactor: Any, timeout: float = REQUEST_SECONDS) -> None:
        self._reactor = reactor
        self._timeout = timeout
        self._processes: dict[str, StdioMcpProcess] = {}
        self._locks: dict[str, DeferredLock] = {}
        #: task id -> (process, request id) of a ``tools/call`` in flight
        self._calls: dict[str, tuple[StdioMcpProcess, int]] = {}
        #: every started process until it has ended (replaced ones included)
        self._living: set[StdioMcpProcess] = set()

    async def _process(self, server: dict[str, Any]) -> StdioMcpProcess:
        key = server_key(server)
        lock = self._locks.setdefault(key, DeferredLock())
        await lock.acquire()
        try:
            running = self._processes.get(key)
            if running is not None and running.alive and running.initialized \
                    and _definition(running.server) == _definition(server):
                return running
            if running is not None:
                running.kill()
            process = StdioMcpProcess(self._reactor, key, server, self._timeout)
            process.start()
            self._processes[key] = process
            self._living.add(process)
            process.ended.addBoth(lambda _: self._living.discard(process))
            try:
                await process.request("initialize", {
                    "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                    "clientInfo": CLIENT_INFO})
                process.notify("notifications/initialized")
            except ActionError:
                process.kill()
                raise
            process.initialized = True
            return process
        finally:
            lock.release()

    async def list_tools(self, payload: dict[str, Any]) -> ActionResult:
        process = await self._process(_server(payload))
        tools: list[Any] = []
        params: dict[str, Any] = {}
        for _page in range(MAX_TOOL_PAGES):
            result = await process.request("tools/list", params)
            listed = result.get("tools")
            tools.extend(listed if isinstance(listed, list) else [])
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
            params = {"cursor": cursor}
        return ActionResult.ok(json.dumps({"tools": tools}))

    async def call_tool(self, payload: dict[str, Any], task_id: str = "") -> ActionResult:
        server = _server(payload)
        name = payload.get("name")
        if not isinstance(name, str) or not name:
            raise ActionError("name is required")
        arguments = payload.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise ActionError("arguments must be an object")
        process = await self._process(server)

        def track(request_id: int) -> None:
            if task_id:
                self._calls[task_id] = (process, request_id)

        try:
            result = await process.request("tools/call", {"name": name, "arguments": arguments},
                                           on_id=track)
        finally:
            self._calls.pop(task_id, None)
        return ActionResult.ok(json.dumps(result))

    def cancel(self, task_id: str, reason: str) -> bool:
        """A ``task_cancel`` for an MCP call in flight: cancelled on the server, the task fails
        with ``reason`` (the process stays up for the next call)."""
        call = self._calls.pop(task_id, None)
        return call is not None and call[0].cancel(call[1], reason)

    def listing(self) -> ActionResult:
        now = self._reactor.seconds()
        items = [{"key": key, "name": str(p.server.get("name") or ""),
                  "command": str(p.server.get("command") or ""),
                  "args": list(p.server.get("args") or []), "pid": p.pid,
                  "running": p.alive, "uptime_seconds": round(now - p.started_at, 3)}
                 for key, p in sorted(self._processes.items()) if p.alive]
        return ActionResult.ok(json.dumps({"processes": items}))

    def stop(self, payload: dict[str, Any]) -> ActionResult:
        key = payload.get("key")
        if not isinstance(key, str) or not key:
            raise ActionError("key is required")
        process = self._processes.pop(key, None)
        if process is None or not process.alive:
            raise ActionError(f"no MCP process with key {key}")
        process.kill()
        return ActionResult.ok(json.dumps({"ok": True, "key": key}))

    def stop_all(self) -> Deferred[Any]:
        """Kill every process; fires once all have ended."""
        self._processes = {}
        living = list(self._living)
        for process in living:
            process.kill()
        return gatherResults([process.ended for process in living])
