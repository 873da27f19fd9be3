"""``/skills`` ([P-5]): CRUD, ownership, names unique per user, the messages verbatim."""

from __future__ import annotations

from typing import Any

from tests.console.assistant.assistant_case import AssistantCase

TABLES = ("assistant_skills",)


class SkillRouteTests(AssistantCase):
    async def test_crud(self) -> None:
        created = await self.ok("POST", "/skills", {
            "name": "Release", "description": "ships", "prompt": "Check the changelog.",
            "content": "# SKILL\n" + "long body " * 1000})
        assert created["id"].isdigit() and created["enabled"] is True
        assert created["content"].startswith("# SKILL") and created["mcp_server_ids"] == []
        second = await self.ok("POST", "/skills", {"name": "Off", "enabled": False})
        assert [s["name"] for s in await self.ok("GET", "/skills")] == ["Release", "Off"]
        shown = await self.ok("GET", f"/skills/{created['id']}")
        assert shown == created
        updated = await self.ok("PUT", f"/skills/{created['id']}", {"name": "Release 2"})
        assert updated["name"] == "Release 2" and updated["prompt"] == ""
        # the same name is fine for another user; alice's skill is missing for bob
        await self.ok("POST", "/skills", {"name": "Off"}, token=self.bob)
        assert await self.ok("GET", "/skills", token=self.bob) != []
        await self.refused_with("GET", f"/skills/{second['id']}", None, 404, "Skill not found",
                                token=self.bob)
        await self.refused_with("DELETE", f"/skills/{second['id']}", None, 404,
                                "Skill not found", token=self.bob, tables=TABLES)
        assert await self.ok("DELETE", f"/skills/{second['id']}") == {"message": "Skill deleted"}
        for odd in ("x", "99999999999999", "9" * 40):
            await self.refused_with("GET", f"/skills/{odd}", None, 404, "Skill not found")

    async def test_validation_messages(self) -> None:
        await self.ok("POST", "/skills", {"name": "Taken"})
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({}, 400, "Skill name is required"),
            ({"name": "n" * 101}, 400, "Skill name is too long"),
            ({"name": "a", "description": "d" * 2001}, 400, "Skill description is too long"),
            ({"name": "a", "prompt": "p" * 20001}, 400, "Skill prompt is too long"),
            ({"name": "a", "content": "c" * 200001}, 400, "Skill content is too long"),
            ({"name": "a", "mcp_server_ids": ["ghost"]}, 400, "Unknown MCP server: ghost"),
            ({"name": "a", "enabled": "yes"}, 400, "enabled must be a boolean"),
            ({"name": "Taken"}, 409, "Skill name already exists"),
        ]
        for body, status, message in cases:
            await self.refused_with("POST", "/skills", body, status, message, tables=TABLES)


class PostgresSkillRouteTests(SkillRouteTests):
    backend = "postgresql"
