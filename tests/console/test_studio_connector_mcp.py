"""``connector``-type MCP servers for delegated studio members and in chat mode (agents
contract §1.3, §1.7, §1.12).

A member whose servers include a ``connector`` server reaches it through the run's device, as
the chief's own run would: the real ``lockgate-connector`` program runs the real stdio MCP
server (the official ``mcp`` package) and the member's tool call travels member loop ->
connector task -> device -> stdio process and back.  Chat mode has no device (§1.7 forces the
connector fields empty), so a connector server there is the listing failure §1.3 names.
"""

from __future__ import annotations

from tests.connector.runner_support import temp_dir
from tests.console.test_assistant_completions import cost_nanos
from tests.console.test_connector_mcp_end_to_end import local_server
from tests.console.test_programs_end_to_end import ProgramCase
from tests.gateway.studio.test_agent_group_runs import delegate
from tests.gateway.studio.test_control_loop import STUDIO, StudioLoopCase
from tests.support.tool_upstream import tool_call

CUSTOM = "/api/user/advanced-chat/mcp-servers"
NO_DEVICE = ("Failed to load MCP tools: Local: connector MCP server requires a selected "
             "connector device")


class StudioConnectorMcpTests(ProgramCase, StudioLoopCase):
    async def test_a_delegated_member_calls_its_connector_server_on_the_runs_device(
            self) -> None:
        await self.studio(workers=("wrk",))
        # a paused studio's chat is the chief's own delegating run (§4.16)
        paused = await self.call("POST", f"/api/user/personal-company/pause?studio_id={STUDIO}",
                                 token=self.user_token)
        assert paused.status == 200, paused
        saved = await self.call("PUT", CUSTOM, {"servers": [local_server()]},
                                token=self.user_token)
        assert saved.status == 200, saved
        await self.equip_worker(mcp_server_ids=["local"])
        device_id, token = await self.device()
        await self.program(token, transport="websocket")
        await self.online(device_id)
        self.upstream.script(delegate("wrk", "add two and three"),
                             tool_call("mcp_local__add", {"a": 2, "b": 3}, "call_m"))
        started = await self.complete({
            "mode": "agent_group", "agent_group_id": STUDIO,
            "messages": [{"role": "user", "content": "add two and three"}],
            "connector_device_id": device_id,
            "connector_workspace_path": temp_dir(self, "lockgate-work-")})
        assert started.status == 202, started
        run = await self.wait_for_run(started.json()["run"]["id"])
        assert run["status"] == "completed", run
        chief, worker = self.upstream.requests[:2]
        # the chief gets no MCP tools (§1.8 step 4); the member is offered the device's server
        assert not any(t["function"]["name"].startswith("mcp_")
                       for t in chief.get("tools") or [])
        assert "mcp_local__add" in [t["function"]["name"] for t in worker["tools"]]
        assert self.upstream.requests[2]["messages"][-1] == {
            "role": "tool", "tool_call_id": "call_m", "content": "5"}
        [detail] = run["tool_call_details"]
        assert (detail["name"], detail["status"]) == ("agent_delegate", "ok")
        assert detail["result"] == "[Wrk] Done: 5"
        lines = [e["payload"] for e in await self.events(run["id"])
                 if e["event"] == "agent_message" and e["payload"]["role"] == "tool"]
        assert [(line["tool"], line["status"], line["content"]) for line in lines] == [
            ("mcp_local__add", "ok", "5")]
        tasks = await self.device_tasks(device_id)
        assert sorted(task["action"] for task in tasks) == ["mcp_call_tool", "mcp_list_tools"]
        assert all(task["run_id"] == run["id"] and task["status"] == "completed"
                   for task in tasks)
        count, total = await self.usage_cost()
        assert count == 4 and cost_nanos(run["cost"]) == total

    async def test_chat_mode_ignores_a_device_so_a_connector_server_cannot_load(self) -> None:
        await self.provision()
        device_id, token = await self.device()
        await self.program(token, transport="websocket")
        await self.online(device_id)
        body = {"messages": [{"role": "user", "content": "x"}],
                "mcp_servers": [local_server()], "connector_device_id": device_id}
        answer = await self.complete(body)
        assert (answer.status, answer.json()) == (502, {"error": NO_DEVICE})
        streamed = await self.complete({**body, "stream": True})
        assert streamed.status == 200
        assert streamed.body.endswith(
            b'event: error\ndata: {"error":"' + NO_DEVICE.encode() + b'"}\n\n')
        assert self.upstream.requests == []
        assert await self.device_tasks(device_id) == []
        assert (await self.usage_cost())[0] == 0
