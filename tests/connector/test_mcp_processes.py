"""The device's stdio MCP processes (agents contract §1.3, §2.7) with real server processes:
the task actions through ``TaskRunner``, cursors, limits, restarts and shutdown."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from connector.actions.mcp_processes import McpProcesses
from connector.actions.outcome import ActionError
from tests.connector.runner_support import device_runner, process_gone, temp_dir

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
FASTMCP = os.path.join(SUPPORT, "mcp_stdio_server.py")
RAW = os.path.join(SUPPORT, "raw_stdio_mcp.py")


def server(script: str = FASTMCP, *args: str, **fields: Any) -> dict[str, Any]:
    return {"id": "srv", "name": "Srv", "type": "connector", "command": sys.executable,
            "args": [script, *args], "env": {}, "cwd": "", **fields}


def task(action: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"act-{action}", "action": action, "workspace_path": "", "payload": payload}


class McpActionTests(TestCase):
    def setUp(self) -> None:
        self.runner = device_runner(self, temp_dir(self, "lockgate-mcp-"))
        self.addCleanup(self.runner.cancel_all, "test over")

    async def run_task(self, action: str, payload: dict[str, Any]) -> Any:
        result = await self.runner.start(task(action, payload), None)
        assert result.success, result
        return json.loads(result.result)

    async def pid(self, **fields: Any) -> int:
        answer = await self.run_task("mcp_call_tool", {"server": server(**fields), "name": "pid",
                                                       "arguments": {}})
        return int(answer["content"][0]["text"])

    async def test_list_call_list_processes_and_stop(self) -> None:
        listed = await self.run_task("mcp_list_tools", {"server": server()})
        names = {tool["name"] for tool in listed["tools"]}
        assert {"add", "secret", "pid", "crash"} <= names, names
        called = await self.run_task("mcp_call_tool", {"server": server(), "name": "add",
                                                       "arguments": {"a": 4, "b": 5}})
        assert called["content"] == [{"type": "text", "text": "9"}] and not called["isError"]
        pid = await self.pid()
        assert pid == await self.pid()  # one process per key, kept between tasks
        [process] = (await self.run_task("list_mcp_processes", {}))["processes"]
        assert (process["key"], process["pid"], process["running"]) == ("srv", pid, True)
        assert await self.run_task("stop_mcp_process", {"key": "srv"}) == {"ok": True,
                                                                           "key": "srv"}
        await deferLater(reactor, 0.3, lambda: None)
        assert process_gone(pid)
        assert (await self.run_task("list_mcp_processes", {})) == {"processes": []}
        assert await self.pid() != pid  # started again on the next call

    async def test_task_cancel_fails_the_call_at_once_and_keeps_the_process(self) -> None:
        pid = await self.pid()
        started = reactor.seconds()
        call = self.runner.start({"id": "act-slow", "action": "mcp_call_tool", "payload": {
            "server": server(), "name": "sleep", "arguments": {"seconds": 20}}}, None)
        assert not self.runner.cancel("act-unknown", "cancelled by user")
        for _ in range(500):
            if self.runner.cancel("act-slow", "cancelled by user"):
                break
            await deferLater(reactor, 0.01, lambda: None)
        result = await call
        assert (result.success, result.error) == (False, "cancelled by user")
        assert reactor.seconds() - started < 10
        [process] = (await self.run_task("list_mcp_processes", {}))["processes"]
        assert process["pid"] == pid

    async def test_a_changed_definition_replaces_the_process(self) -> None:
        first = await self.pid()
        second = await self.pid(env={"X": "1"})
        assert first != second
        await deferLater(reactor, 0.3, lambda: None)
        assert process_gone(first)

    async def test_shutdown_kills_every_process(self) -> None:
        one = await self.pid()
        two = await self.pid(id="other")
        self.runner.cancel_all("connector stopped")
        await deferLater(reactor, 0.3, lambda: None)
        assert process_gone(one) and process_gone(two)

    async def test_bad_payloads_are_clear_errors(self) -> None:
        cases = [
            ("mcp_list_tools", {}, "server is required"),
            ("mcp_list_tools", {"server": {"id": "x", "command": " "}},
             "mcp server command is required"),
            ("mcp_call_tool", {"server": server()}, "name is required"),
            ("mcp_call_tool", {"server": server(), "name": "add", "arguments": [1]},
             "arguments must be an object"),
            ("mcp_list_tools", {"server": server(cwd="/nonexistent/dir")},
             "mcp server cwd does not exist: /nonexistent/dir"),
            ("stop_mcp_process", {}, "key is required"),
            ("stop_mcp_process", {"key": "nope"}, "no MCP process with key nope"),
        ]
        for action, payload, error in cases:
            result = await self.runner.start(task(action, payload), None)
            assert (result.success, result.error) == (False, error), (action, result)

    async def test_a_command_that_cannot_start(self) -> None:
        result = await self.runner.start(task("mcp_list_tools", {"server": server(
            command="/nonexistent/mcp-server")}), None)
        assert (result.success, result.error) == (
            False, "could not start mcp server /nonexistent/mcp-server: No such file or "
                   "directory"), result


class McpLimitTests(TestCase):
    def setUp(self) -> None:
        self.processes = McpProcesses(reactor, timeout=2.0)
        self.addCleanup(self.processes.stop_all)

    async def test_tools_list_follows_cursors_and_skips_stray_lines(self) -> None:
        result = await self.processes.list_tools({"server": server(RAW, "paged")})
        assert json.loads(result.result) == {"tools": [{"name": "first"}, {"name": "second"}]}

    async def test_a_json_rpc_error_is_the_task_error(self) -> None:
        with self.assertRaises(ActionError) as caught:
            await self.processes.call_tool({"server": server(RAW, "paged"), "name": "x"})
        assert str(caught.exception) == "mcp error -32601: no method tools/call"

    async def test_a_reply_over_4_mib_fails_and_kills_the_process(self) -> None:
        with self.assertRaises(ActionError) as caught:
            await self.processes.list_tools({"server": server(RAW, "huge")})
        assert str(caught.exception) == "mcp server response exceeds 4 MiB"

    async def test_a_slow_call_times_out(self) -> None:
        with self.assertRaises(ActionError) as caught:
            await self.processes.call_tool({"server": server(), "name": "sleep",
                                            "arguments": {"seconds": 10}})
        assert str(caught.exception) == "mcp server timed out after 2s"
