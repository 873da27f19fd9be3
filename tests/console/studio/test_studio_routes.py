"""``/agent-groups``: studios (agents contract §4.1) -- member normalization, every validation
message verbatim, ownership 404s, and that nothing changes on a refusal."""

from __future__ import annotations

from typing import Any

from tests.console.studio.studio_case import STANDARD, StudioCase, team

TABLES = ("studios",)


class StudioRouteTests(StudioCase):
    async def test_create_list_update_delete(self) -> None:
        created = await self.ok("POST", "/agent-groups", {
            "id": "growth", "name": " Growth studio ", "description": "ships things",
            "agents": [
                {"id": "boss!", "name": "", "type": "CHIEF", "chat_agent_id": "default",
                 "prompt": "p" * 20010, "skill_ids": ["a", "a", 3], "user_channel_id": 4},
                {"id": "boss", "type": "oddball", "chat_agent_id": 12},
                {"name": "dropped: no chat agent", "type": "worker"},
                {"type": "checker", "chat_agent_id": "7", "default_model": "gpt-x"}]})
        agents = created["agents"]
        assert created["id"] == "growth" and created["name"] == "Growth studio"
        assert created["description"] == "ships things" and "updated_at" in created
        assert [(a["id"], a["name"], a["type"]) for a in agents] == [
            ("boss", "boss", "chief"), ("boss-2", "boss-2", "worker"),
            ("agent-7", "agent-7", "checker")]
        assert len(agents[0]["prompt"]) == 20000 and agents[0]["skill_ids"] == ["a", "3"]
        assert agents[0]["user_channel_id"] == 4 and agents[1]["chat_agent_id"] == "12"
        assert agents[2]["default_model"] == "gpt-x" and "default_model" not in agents[0]
        generated = await self.ok("POST", "/agent-groups", {"name": "Another",
                                                            "agents": team(*STANDARD)})
        assert generated["id"].startswith("agp-") and len(generated["id"]) == 20
        assert "description" not in generated
        listed = await self.ok("GET", "/agent-groups")
        assert [g["name"] for g in listed["groups"]] == ["Another", "Growth studio"]
        replaced = await self.ok("PUT", "/agent-groups/growth", {
            "id": "growth", "name": "Renamed", "agents": team("chief", "checker")})
        assert replaced["name"] == "Renamed" and len(replaced["agents"]) == 2
        assert (await self.ok("GET", "/agent-groups/growth"))["name"] == "Renamed"
        assert await self.ok("DELETE", "/agent-groups/growth") == {"message": "Studio deleted"}
        await self.refused_with("GET", "/agent-groups/growth", None, 404, "Studio not found")

    async def test_at_most_forty_members(self) -> None:
        many = team("chief", "checker", *(["worker"] * 50))
        created = await self.ok("POST", "/agent-groups", {"name": "Big", "agents": many})
        assert len(created["agents"]) == 40

    async def test_validation_messages(self) -> None:
        await self.studio()
        cases: list[tuple[str, str, dict[str, Any], str]] = [
            ("POST", "/agent-groups", {"id": "bad id", "name": "x", "agents": team(*STANDARD)},
             "studio id must be 1-80 characters of letters, numbers, underscore, or dash"),
            ("POST", "/agent-groups", {"id": "x" * 81, "name": "x", "agents": team(*STANDARD)},
             "studio id must be 1-80 characters of letters, numbers, underscore, or dash"),
            ("POST", "/agent-groups", {"name": "  ", "agents": team(*STANDARD)},
             "studio name is required"),
            ("POST", "/agent-groups", {"name": "x", "agents": [{"type": "chief"}]},
             "studio requires at least one member"),
            ("POST", "/agent-groups", {"name": "x", "agents": "nope"},
             "studio requires at least one member"),
            ("POST", "/agent-groups", {"name": "x", "agents": team("worker", "checker")},
             "studio must contain exactly one chief"),
            ("POST", "/agent-groups", {"name": "x", "agents": team("chief", "chief", "checker")},
             "studio must contain exactly one chief"),
            ("POST", "/agent-groups", {"name": "x", "agents": team("chief", "worker")},
             "studio must contain exactly one checker"),
            ("PUT", "/agent-groups/growth", {"id": "other", "name": "x",
                                             "agents": team(*STANDARD)},
             "studio id does not match path"),
            ("PUT", "/agent-groups/growth", {"name": "x", "agents": team("chief")},
             "studio must contain exactly one checker"),
        ]
        for method, path, body, message in cases:
            await self.refused_with(method, path, body, 400, message, tables=TABLES)
        for bad in (b"{", b"[]"):
            response = await self.as_user("POST", "/agent-groups", data=bad)
            assert response.status == 400, response

    async def test_another_users_studio_is_missing(self) -> None:
        await self.studio()
        for method, body in (("GET", None), ("PUT", {"name": "x", "agents": team(*STANDARD)}),
                             ("DELETE", None)):
            await self.refused_with(method, "/agent-groups/growth", body, 404,
                                    "Studio not found", token=self.bob, tables=TABLES)
        assert (await self.ok("GET", "/agent-groups", token=self.bob)) == {"groups": []}
        # the same id is free for another user: studios are unique per (user, id)
        theirs = await self.studio(token=self.bob)
        assert theirs["id"] == "growth"
        mine = await self.ok("GET", "/agent-groups/growth")
        assert mine["name"] == "Growth studio"
