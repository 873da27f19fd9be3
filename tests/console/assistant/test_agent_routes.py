"""``/agents``: the default agent, [P-4] aliases on input and output, ownership, every
validation message verbatim, the 409 and the default agent's protections."""

from __future__ import annotations

from typing import Any

from tests.console.assistant.assistant_case import AssistantCase

TABLES = ("assistant_agents",)


class AgentRouteTests(AssistantCase):
    async def test_default_agent_crud_and_aliases(self) -> None:
        listed = await self.ok("GET", "/agents")
        assert [(a["id"], a["name"]) for a in listed] == [("default", "Default")]
        skill = await self.ok("POST", "/skills", {"name": "Docs"})
        await self.ok("PUT", "/mcp-servers", {"servers": [
            {"id": "web", "name": "Web", "url": "https://web.example/mcp"}]})
        created = await self.ok("POST", "/agents", {
            "name": " Coder ", "system_prompt": "Be terse.", "model": "gpt-x",
            "description": "writes code", "mcp_servers": [{"id": "web"}, "web"],
            "skill_ids": [skill["id"]], "tools": ["workspace", "web"], "user_channel_id": 4,
            "stream": True, "preset_messages": [{"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": "  "}]})
        assert created["id"].isdigit() and created["name"] == "Coder"
        assert created["prompt"] == created["system_prompt"] == "Be terse."
        assert created["default_model"] == created["model"] == "gpt-x"
        assert created["mcp_server_ids"] == created["mcp_servers"] == ["web"]
        assert created["skill_ids"] == [skill["id"]] and created["tools"] == ["workspace", "web"]
        assert created["preset_messages"] == [{"role": "user", "content": "hi"}]
        assert created["user_channel_id"] == 4 and created["stream"] is True
        assert created["enabled"] is True and created["visibility"] == "personal"
        assert "user_channel_id" not in listed[0]
        # PUT replaces every mutable field
        replaced = await self.ok("PUT", f"/agents/{created['id']}", {"name": "Coder 2"})
        assert replaced["prompt"] == "" and replaced["mcp_server_ids"] == []
        assert replaced["stream"] is False and "user_channel_id" not in replaced
        default = await self.ok("PUT", "/agents/default", {"name": "Renamed", "prompt": "P"})
        assert default["name"] == "Default" and default["prompt"] == "P"
        assert [a["id"] for a in await self.ok("GET", "/agents")] == ["default", created["id"]]
        deleted = await self.ok("DELETE", f"/agents/{created['id']}")
        assert deleted == {"message": "Agent deleted"}
        await self.refused_with("GET", f"/agents/{created['id']}", None, 404, "Agent not found")

    async def test_another_users_agent_is_missing(self) -> None:
        created = await self.ok("POST", "/agents", {"name": "Mine"})
        for method, body in (("GET", None), ("PUT", {"name": "x"}), ("DELETE", None)):
            await self.refused_with(method, f"/agents/{created['id']}", body, 404,
                                    "Agent not found", token=self.bob, tables=TABLES)
        for odd in ("not-a-number", "99999999999999", "9" * 40, "-1"):
            await self.refused_with("GET", f"/agents/{odd}", None, 404, "Agent not found")

    async def test_validation_messages(self) -> None:
        await self.ok("POST", "/agents", {"name": "Taken"})
        disabled = await self.ok("POST", "/skills", {"name": "Off", "enabled": False})
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({}, 400, "Agent name is required"),
            ({"name": "   "}, 400, "Agent name is required"),
            ({"name": "n" * 101}, 400, "Agent name is too long"),
            ({"name": "a", "model": "m" * 101}, 400, "Default model is too long"),
            ({"name": "a", "prompt": "p" * 20001}, 400, "Agent prompt is too long"),
            ({"name": "a", "skill_ids": ["999"]}, 400, "Unknown skill"),
            ({"name": "a", "skill_ids": [disabled["id"]]}, 400, "Unknown skill"),
            ({"name": "a", "mcp_server_ids": [f"s{i}" for i in range(21)]}, 400,
             "Too many MCP servers"),
            ({"name": "a", "mcp_server_ids": ["ghost"]}, 400, "Unknown MCP server: ghost"),
            ({"name": "a", "preset_messages": [{"role": "user", "content": "x"}] * 25}, 400,
             "Too many preset messages"),
            ({"name": "a", "preset_messages": [{"role": "tool", "content": "x"}]}, 400,
             "Preset message role must be system, user, or assistant"),
            ({"name": "a", "preset_messages": [{"role": "user", "content": "x" * 8001}]}, 400,
             "Preset message is too long"),
            ({"name": "a", "preset_messages": [{"role": "user", "content": "x" * 8000}] * 4},
             400, "Preset messages are too long"),
            ({"name": "Taken"}, 409, "Agent name already exists"),
        ]
        for body, status, message in cases:
            await self.refused_with("POST", "/agents", body, status, message, tables=TABLES)
        await self.refused_with("DELETE", "/agents/default", None, 400,
                                "Default agent cannot be deleted", tables=TABLES)
        response = await self.as_user("POST", "/agents", data=b"{not json")
        assert response.status == 400 and response.json()["error"], response

    async def test_deleting_a_skill_removes_it_from_agents(self) -> None:
        skill = await self.ok("POST", "/skills", {"name": "Docs"})
        agent = await self.ok("POST", "/agents", {"name": "A", "skill_ids": [skill["id"]]})
        assert await self.ok("DELETE", f"/skills/{skill['id']}") == {"message": "Skill deleted"}
        assert (await self.ok("GET", f"/agents/{agent['id']}"))["skill_ids"] == []


class PostgresAgentRouteTests(AgentRouteTests):
    backend = "postgresql"
