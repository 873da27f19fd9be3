"""MCP tools in chat completions and assistant runs (agents contract §1.3, §1.7, §1.8).

The MCP server is a real FastMCP process (``tests.support.mcp_server``), the model is the
loopback tool-calling upstream, and Lockgate is the real application wired by ``tap``: the
tool call travels model -> run loop -> Streamable-HTTP client -> MCP server and back.
"""

from __future__ import annotations

from typing import Any

from tests.console.test_assistant_completions import AssistantCase, cost_nanos
from tests.support.mcp_server import mcp_server
from tests.support.tool_upstream import tool_call

CUSTOM = "/api/user/advanced-chat/mcp-servers"


def docs_server(**extra: Any) -> dict[str, Any]:
    return {"id": "docs", "name": "Docs", "url": mcp_server().url, **extra}


class McpChatTests(AssistantCase):
    async def test_chat_calls_a_real_mcp_tool_and_answers(self) -> None:
        await self.provision()
        self.upstream.script(tool_call("mcp_docs__add", {"a": 2, "b": 40}))
        answer = await self.complete({"messages": [{"role": "user", "content": "add"}],
                                      "mcp_servers": [docs_server()]})
        assert answer.status == 200, answer
        result = answer.json()
        assert result["message"]["content"] == "Done: 42"
        [detail] = result["tool_call_details"]
        assert detail == {"id": "call_1", "round": 1, "name": "mcp_docs__add",
                          "server": "Docs", "tool": "add", "status": "ok",
                          "arguments": {"a": 2, "b": 40}, "result": "42"}
        # the model was offered the server's tools under the contract's names
        offered = {tool["function"]["name"]: tool["function"]
                   for tool in self.upstream.requests[0]["tools"]}
        assert offered["mcp_docs__add"]["description"] == "MCP server Docs: Add two integers."
        assert offered["mcp_docs__add"]["parameters"]["properties"]["a"]["type"] == "integer"
        assert {"mcp_docs__echo", "mcp_docs__fail"} <= set(offered)
        assert self.upstream.requests[1]["messages"][-1] == {
            "role": "tool", "tool_call_id": "call_1", "content": "42"}
        count, total = await self.usage_cost()
        assert count == 2 and cost_nanos(result["cost"]) == total > 0

    async def test_a_saved_custom_server_and_a_tool_error(self) -> None:
        await self.provision()
        saved = await self.call("PUT", CUSTOM, {"servers": [
            {"id": "my docs!", "name": "Docs", "url": mcp_server(json_response=True).url}]},
            token=self.user_token)
        assert saved.status == 200, saved
        self.upstream.script(tool_call("mcp_my_docs__fail", {"reason": "disk full"}))
        answer = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                      "mcp_server_ids": ["my docs!"]})
        assert answer.status == 200, answer
        [detail] = answer.json()["tool_call_details"]
        assert detail["status"] == "error" and detail["server"] == "Docs"
        assert detail["result"].startswith("Tool returned an error: ")
        assert "disk full" in detail["result"]

    async def test_a_listing_failure_is_a_502_with_the_server_name(self) -> None:
        await self.provision()
        # nothing listens on port 9 of loopback: the listing cannot even connect
        answer = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                      "mcp_servers": [{"name": "Gone",
                                                       "url": "http://127.0.0.1:9/mcp"}]})
        assert answer.status == 502, answer
        assert answer.json()["error"].startswith("Failed to load MCP tools: Gone: ")
        assert self.upstream.requests == []
        assert (await self.usage_cost())[0] == 0

    async def test_a_connector_server_without_a_device(self) -> None:
        await self.provision()
        answer = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                      "mcp_servers": [{"name": "Local", "type": "connector",
                                                       "command": "docs-mcp"}]})
        assert answer.status == 502, answer
        assert answer.json()["error"] == ("Failed to load MCP tools: Local: connector MCP "
                                          "server requires a selected connector device")


class McpRunTests(AssistantCase):
    async def test_assistant_run_calls_a_real_mcp_tool_and_completes(self) -> None:
        await self.provision()
        self.upstream.script(tool_call("mcp_docs__echo", {"text": "hello mcp"}))
        started = await self.complete({"messages": [{"role": "user", "content": "echo"}],
                                       "mode": "assistant", "mcp_servers": [docs_server()]})
        assert started.status == 202, started
        run_id = started.json()["run"]["id"]
        finished = await self.wait_for_run(run_id)
        assert finished["status"] == "completed", finished
        [detail] = finished["tool_call_details"]
        assert (detail["name"], detail["server"], detail["tool"], detail["status"],
                detail["result"]) == ("mcp_docs__echo", "Docs", "echo", "ok", "hello mcp")
        events = await self.events(run_id)
        assert events[-1]["event"] == "done"
        assert events[-1]["payload"]["message"]["content"] == "Done: hello mcp"
        count, total = await self.usage_cost()
        assert count == 2 and cost_nanos(finished["cost"]) == total > 0

    async def test_a_listing_failure_fails_the_run(self) -> None:
        await self.provision()
        started = await self.complete({"messages": [{"role": "user", "content": "x"}],
                                       "mode": "assistant",
                                       "mcp_servers": [{"name": "Gone",
                                                        "url": "http://127.0.0.1:9/mcp"}]})
        assert started.status == 202, started
        finished = await self.wait_for_run(started.json()["run"]["id"])
        assert finished["status"] == "failed"
        assert finished["error_message"].startswith("Failed to load MCP tools: Gone: ")
        assert self.upstream.requests == []
