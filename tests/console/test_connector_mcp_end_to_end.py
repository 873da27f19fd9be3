"""``connector``-type MCP servers end to end (agents contract §1.3, §1.13 [G]): a real stdio
MCP server (the official ``mcp`` package) started by the real ``lockgate-connector`` program
linked to a test app, called by a scripted model in assistant-mode runs.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tests.connector.runner_support import temp_dir
from tests.console.test_assistant_completions import cost_nanos
from tests.console.test_programs_end_to_end import DEVICES, ProgramCase
from tests.support.tool_upstream import tool_call

SERVER_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "support", "mcp_stdio_server.py")
SECRET = "s3cret-value"


def local_server(**fields: Any) -> dict[str, Any]:
    return {"id": "local", "name": "Local", "type": "connector", "command": sys.executable,
            "args": [SERVER_SCRIPT], "env": {"LOCKGATE_TEST_SECRET": SECRET}, **fields}


class ConnectorMcpTests(ProgramCase):
    async def linked(self) -> tuple[str, str]:
        """A provisioned user and a device linked by the real program (device id, workspace)."""
        await self.provision()
        device_id, token = await self.device()
        await self.program(token, transport="websocket")
        await self.online(device_id)
        return device_id, temp_dir(self, "lockgate-work-")

    async def run_to_end(self, device_id: str, workspace: str) -> dict[str, Any]:
        run_id = await self.start_run(device_id, workspace, mcp_servers=[local_server()])
        return await self.wait_for_run(run_id)

    async def processes(self, device_id: str) -> Any:
        return await self.call("GET", f"{DEVICES}/{device_id}/mcp-processes",
                               token=self.user_token)

    async def test_run_calls_the_stdio_server_on_the_device_without_approval(self) -> None:
        """The model calls two tools of the device's server (no approval in manual mode);
        the run completes with their results; the env reached the process unmasked, and
        the device-task listing masks it."""
        device_id, workspace = await self.linked()
        self.upstream.script(tool_call("mcp_local__add", {"a": 2, "b": 3}, "call_1"),
                             tool_call("mcp_local__secret", {"name": "LOCKGATE_TEST_SECRET"},
                                       "call_2"))
        finished = await self.run_to_end(device_id, workspace)
        assert finished["status"] == "completed", finished
        one, two = finished["tool_call_details"]
        assert (one["name"], one["server"], one["tool"], one["status"], one["result"]) == (
            "mcp_local__add", "Local", "add", "ok", "5"), one
        assert (two["status"], two["result"]) == ("ok", SECRET), two
        # the model was offered the server's tools under the §1.3 names and descriptions
        offered = {tool["function"]["name"]: tool["function"]["description"]
                   for tool in self.upstream.requests[0]["tools"]}
        assert offered["mcp_local__add"] == "MCP server Local: Add two integers."
        tasks = await self.device_tasks(device_id)
        assert sorted(task["action"] for task in tasks) == [
            "mcp_call_tool", "mcp_call_tool", "mcp_list_tools"]
        for task in tasks:
            assert task["status"] == "completed", task
            assert task["run_id"] == finished["id"]
            assert task["payload"]["server"]["env"] == {"LOCKGATE_TEST_SECRET": "********"}
            assert SECRET not in str(task["payload"])
        listed = next(t for t in tasks if t["action"] == "mcp_list_tools")
        assert '"name": "add"' in listed["result"]
        count, total = await self.usage_cost()
        assert count == 3 and cost_nanos(finished["cost"]) == total

    async def test_a_crashed_server_is_a_tool_error_and_restarts_on_the_next_call(self) -> None:
        device_id, workspace = await self.linked()
        self.upstream.script(tool_call("mcp_local__pid", {}, "call_1"),
                             tool_call("mcp_local__crash", {}, "call_2"),
                             tool_call("mcp_local__pid", {}, "call_3"))
        finished = await self.run_to_end(device_id, workspace)
        assert finished["status"] == "completed", finished
        first, crashed, after = finished["tool_call_details"]
        assert crashed["status"] == "error", crashed
        assert crashed["result"].startswith(
            "Connector tool failed: mcp server process exited (exit code 3)"), crashed
        assert first["status"] == after["status"] == "ok"
        assert first["result"].isdigit() and after["result"].isdigit()
        assert first["result"] != after["result"]  # a new process answered

    async def test_a_tool_error_result_is_mapped_like_http_mcp(self) -> None:
        device_id, workspace = await self.linked()
        self.upstream.script(tool_call("mcp_local__fail", {"reason": "disk full"}))
        finished = await self.run_to_end(device_id, workspace)
        [detail] = finished["tool_call_details"]
        assert detail["status"] == "error"
        assert detail["result"] == ("Tool returned an error: Error executing tool fail: "
                                    "disk full"), detail

    async def test_process_routes_list_and_stop_the_device_processes(self) -> None:
        device_id, workspace = await self.linked()
        self.upstream.script(tool_call("mcp_local__add", {"a": 1, "b": 1}))
        assert (await self.run_to_end(device_id, workspace))["status"] == "completed"
        listed = await self.processes(device_id)
        assert listed.status == 200, listed
        [process] = listed.json()["processes"]
        assert (process["key"], process["name"], process["running"]) == ("local", "Local", True)
        assert isinstance(process["pid"], int)
        stop = f"{DEVICES}/{device_id}/mcp-processes/stop"
        missing = await self.call("POST", stop, {}, token=self.user_token)
        assert missing.status == 400 and missing.json()["error"] == "key is required"
        stopped = await self.call("POST", stop, {"key": "local"}, token=self.user_token)
        assert stopped.status == 200 and stopped.json() == {"ok": True, "key": "local"}
        assert (await self.processes(device_id)).json() == {"processes": []}
        again = await self.call("POST", stop, {"key": "local"}, token=self.user_token)
        assert again.status == 502 and again.json()["error"] == "no MCP process with key local"
        unknown = await self.call("GET", f"{DEVICES}/dev-unknown/mcp-processes",
                                  token=self.user_token)
        assert unknown.status == 404

    async def test_process_routes_refuse_an_offline_device(self) -> None:
        await self.provision()
        device_id, _token = await self.device()
        listed = await self.processes(device_id)
        assert listed.status == 409 and listed.json()["error"] == "Connector device is offline"
        stopped = await self.call("POST", f"{DEVICES}/{device_id}/mcp-processes/stop",
                                  {"key": "local"}, token=self.user_token)
        assert stopped.status == 409
        assert await self.device_tasks(device_id) == []

    async def test_an_assistant_run_without_a_device_fails_with_the_contract_error(self
                                                                                 ) -> None:
        await self.provision()
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant", "mcp_servers": [local_server()]})
        assert started.status == 202, started
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert finished["status"] == "failed"
        assert finished["error_message"] == (
            "Failed to load MCP tools: Local: connector MCP server requires a selected "
            "connector device")
        assert self.upstream.requests == []

    async def test_stop_cancels_the_pending_mcp_call(self) -> None:
        device_id, workspace = await self.linked()
        self.upstream.script(tool_call("mcp_local__sleep", {"seconds": 30}))
        run_id = await self.start_run(device_id, workspace, mcp_servers=[local_server()])

        async def calling() -> list[dict[str, Any]]:
            return [t for t in await self.device_tasks(device_id)
                    if t["action"] == "mcp_call_tool" and t["status"] == "running"]

        [task] = await self.until(calling, "the MCP call running on the device")
        stopped = await self.call("POST", f"/api/user/advanced-chat/runs/{run_id}/stop",
                                  token=self.user_token)
        assert stopped.status == 200, stopped
        run = await self.wait_for_run(run_id, ("cancelled",))
        assert run["status"] == "cancelled"
        view = await self.task_view(task["id"])
        assert (view["status"], view["error_message"]) == ("failed", "cancelled by user")
