"""``/sessions``: upserts with client ids, whole message lists, ownership and the 409s, list
order and [P-6] pages, [P-7] aliases, and the §1.6 validation messages verbatim."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from gateway.store import devices, schema
from gateway.store.assistant import runs
from tests.console.assistant.assistant_case import AssistantCase

TABLES = ("assistant_sessions", "assistant_messages")
ADMIN_PATH = "/api/advanced-chat/settings"


class SessionRouteTests(AssistantCase):
    async def test_create_upsert_show_delete(self) -> None:
        created = await self.ok("POST", "/sessions", {
            "id": "chat-1", "model": "gpt-x", "metadata": {"pinned": True},
            "temperature": 3, "max_tokens": 2**62, "user_channel_id": "7", "reasoning_effort": "extreme",
            "connector_device_id": "acd-x",  # cleared in chat mode
            "messages": [{"id": "m1", "role": "user", "content": "Explain the ledger please"},
                         {"id": "m1", "role": "tool", "content": "dup id, odd role"},
                         {"role": "assistant", "content": "Sure",
                          "content_parts": [{"round": 1, "content": "Sure"}]}]})
        assert created["id"] == "chat-1" and created["run_mode"] == "chat"
        assert created["title"] == "dup id, odd role"  # first 28 runes of the last user message
        assert created["agent_id"] == "default" and created["model_name"] == "gpt-x"
        assert created["model"] == "gpt-x" and created["metadata"] == {"pinned": True}
        assert created["temperature"] == 2.0 and created["max_tokens"] == 200000
        assert created["user_channel_id"] == 7
        assert created["reasoning_effort"] == "" and created["connector_device_id"] == ""
        assert "latest_run" not in created
        first, second, third = created["messages"]
        assert first["id"] == "m1" and second["id"].startswith("acm-")
        assert second["role"] == "user" and third["role"] == "assistant"
        assert first["content_parts"] == [{"round": 1, "content": "Explain the ledger please"}]
        # PUT upserts with the path id and replaces the whole message list
        replaced = await self.ok("PUT", "/sessions/chat-1", {
            "title": "Ledger", "messages": [{"role": "user", "content": "again"}]})
        assert replaced["title"] == "Ledger" and len(replaced["messages"]) == 1
        assert replaced["created_at"] == created["created_at"]
        made = await self.ok("PUT", "/sessions/new-one", {})
        assert made["title"] == "New session" and made["messages"] == []
        generated = await self.ok("POST", "/sessions", {})
        assert generated["id"].startswith("acs-") and len(generated["id"]) == 20
        assert (await self.ok("GET", "/sessions/chat-1"))["title"] == "Ledger"
        deleted = await self.ok("DELETE", "/sessions/chat-1")
        assert deleted == {"message": "Session deleted"}
        await self.refused_with("GET", "/sessions/chat-1", None, 404, "Session not found")
        # deleting an unknown id is not an error
        assert await self.ok("DELETE", "/sessions/never") == {"message": "Session deleted"}

    async def test_list_order_and_pages(self) -> None:
        for name in ("a", "b", "c"):
            await self.ok("PUT", f"/sessions/{name}", {"title": name})
            self.clock.advance(1)
        await self.ok("PUT", "/sessions/a", {"title": "a again"})
        listed = await self.ok("GET", "/sessions")
        assert [s["id"] for s in listed] == ["a", "c", "b"]
        page = await self.ok("GET", "/sessions?page=2&page_size=2")
        assert [s["id"] for s in page] == ["b"]
        assert await self.ok("GET", "/sessions", token=self.bob) == []
        await self.refused_with("GET", "/sessions?page_size=101", None, 400,
                                "page_size must be between 1 and 100")

    async def test_ownership_and_conflicts(self) -> None:
        await self.ok("PUT", "/sessions/shared-id", {"title": "alice's"})
        await self.refused_with("GET", "/sessions/shared-id", None, 404, "Session not found",
                                token=self.bob)
        for method, path in (("PUT", "/sessions/shared-id"), ("POST", "/sessions")):
            await self.refused_with(method, path, {"id": "shared-id", "title": "bob's"}, 409,
                                    "Session id is already used", token=self.bob, tables=TABLES)
        await self.ok("DELETE", "/sessions/shared-id", token=self.bob)  # changes nothing
        assert (await self.ok("GET", "/sessions/shared-id"))["title"] == "alice's"
        user_id = (await self.ok_me())["id"]
        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        await self.ctx.db.transaction(runs.create_run, {
            "id": "acr-test", "user_id": user_id, "session_id": "shared-id",
            "assistant_message_id": "m", "mode": "assistant"}, now)
        await self.refused_with("PUT", "/sessions/shared-id", {"title": "x"}, 409,
                                "This session already has a running assistant run",
                                tables=TABLES)
        shown = await self.ok("GET", "/sessions/shared-id")
        assert shown["latest_run"]["id"] == "acr-test"
        assert shown["latest_run"]["status"] == "queued" and shown["latest_run"]["cost"] == "0"

    async def ok_me(self) -> Any:
        response = await self.call("GET", "/api/user/me", token=self.alice)
        assert response.status == 200, response
        body = response.json()
        return body.get("user", body)

    async def test_agents_are_merged_and_checked(self) -> None:
        await self.ok("PUT", "/mcp-servers", {"servers": [
            {"id": "web", "name": "Web", "url": "https://web.example/mcp"},
            {"id": "off", "name": "Off", "url": "https://off.example/mcp", "enabled": False}]})
        skill = await self.ok("POST", "/skills", {"name": "S"})
        agent = await self.ok("POST", "/agents", {"name": "A", "mcp_server_ids": ["web"],
                                                  "skill_ids": [skill["id"]]})
        saved = await self.ok("PUT", "/sessions/s1", {"agent_id": int(agent["id"]),
                                                      "run_mode": "assistant"})
        assert saved["agent_id"] == agent["id"] and saved["mcp_server_ids"] == ["web"]
        assert saved["skill_ids"] == [skill["id"]] and saved["run_mode"] == "assistant"
        hidden = await self.ok("POST", "/agents", {"name": "Hidden", "enabled": False})
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({"agent_id": "999"}, 400, "Agent not found"),
            ({"agent_id": ["default"]}, 400, "Agent not found"),
            ({"agent_id": hidden["id"]}, 400, "Agent is disabled"),
            ({"skill_ids": ["999"]}, 400, "Unknown skill"),
            ({"knowledge_base_ids": ["kb1"]}, 400, "Knowledge base is not vectorized"),
            ({"mcp_server_ids": ["off"]}, 400, "unknown or disabled MCP server: off"),
            ({"mcp_server_ids": ["ghost"]}, 400, "unknown or disabled MCP server: ghost"),
        ]
        for body, status, message in cases:
            await self.refused_with("PUT", "/sessions/s2", body, status, message,
                                    tables=TABLES)
        # bob cannot use alice's agent
        await self.refused_with("PUT", "/sessions/s3", {"agent_id": agent["id"]}, 400,
                                "Agent not found", token=self.bob, tables=TABLES)

    async def test_validation_messages(self) -> None:
        cases: list[tuple[str, dict[str, Any], int, str]] = [
            ("/sessions", {"id": "a/b"}, 400, "Invalid session id"),
            ("/sessions", {"id": "x" * 81}, 400, "Invalid session id"),
            ("/sessions", {"id": "   "}, 400, "Invalid session id"),
            ("/sessions/a%23b", {}, 400, "Invalid session id"),
            ("/sessions", {"model_name": "m" * 101}, 400, "Model name is too long"),
            ("/sessions", {"run_mode": "agent_group"}, 400, "Studio is required"),
            ("/sessions", {"run_mode": "assistant", "connector_workspace_path": "src"}, 400,
             "connector device is required"),
            ("/sessions", {"run_mode": "assistant", "cloud_sandbox_id": "acs-x",
                           "connector_workspace_path": "src"}, 400,
             "Cloud sandboxes do not accept a workspace path"),
            ("/sessions", {"run_mode": "assistant", "connector_device_id": "acd-x",
                           "connector_workspace_path": "w" * 1001}, 400,
             "workspace path is too long"),
            ("/sessions", {"metadata": {"k": "v" * 17000}}, 400,
             "metadata must be a JSON object of at most 16 KiB"),
            ("/sessions", {"messages": "hello"}, 400, "messages must be an array"),
            ("/sessions", {"messages": [{"content": "x", "tool_calls": [1]}]}, 400,
             "tool_calls must be an array of objects"),
            ("/sessions", {"user_channel_id": 2**40}, 400, "user_channel_id must be an integer"),
            ("/sessions", {"temperature": "hot"}, 400, "temperature must be a number"),
        ]
        for path, body, status, message in cases:
            await self.refused_with("POST" if path == "/sessions" else "PUT", path, body,
                                    status, message, tables=TABLES)

    async def test_admin_switches(self) -> None:
        await self.users()
        await self.api("PUT", ADMIN_PATH, {"assistant_mcp_tools_enabled": False})
        await self.ok("PUT", "/mcp-servers", {"servers": [
            {"id": "web", "name": "Web", "url": "https://web.example/mcp"}]})
        await self.refused_with("PUT", "/sessions/s", {"run_mode": "assistant",
                                                       "mcp_server_ids": ["web"]}, 400,
                                "MCP tools are disabled", tables=TABLES)
        # chat mode is not affected by the MCP switch
        await self.ok("PUT", "/sessions/s", {"mcp_server_ids": ["web"]})
        off = dict.fromkeys([
            "assistant_connector_list_files_enabled", "assistant_connector_read_file_enabled",
            "assistant_connector_write_file_enabled", "assistant_connector_replace_text_enabled",
            "assistant_connector_run_command_enabled", "assistant_connector_web_search_enabled",
            "assistant_connector_static_site_enabled"], False)
        await self.api("PUT", ADMIN_PATH, off)
        await self.refused_with("PUT", "/sessions/s", {"run_mode": "assistant",
                                                       "connector_device_id": "acd-x"}, 400,
                                "Workspace tools are disabled", tables=TABLES)
        await self.api("PUT", ADMIN_PATH, {"assistant_mode_enabled": False})
        await self.refused_with("PUT", "/sessions/s", {"run_mode": "assistant"}, 403,
                                "Assistant mode is disabled", tables=TABLES)


class SessionConnectorFieldTests(AssistantCase):
    async def device(self, device_id: str, username: str = "alice") -> None:
        """A device row of ``username``: never linked, so offline (saving needs no more)."""
        if not self.alice:
            await self.users()
        now = self.ctx.now()

        def create(conn: Any) -> None:
            user_id = conn.execute(select(schema.users.c.id).where(
                schema.users.c.username == username)).scalar_one()
            devices.create(conn, device_id=device_id, user_id=user_id, name=device_id,
                           remark="", mode="platform", listen_port=0, token_hash=device_id * 4,
                           hidden=False, now=now)

        await self.ctx.db.transaction(create)

    async def test_approval_modes_and_prefixes(self) -> None:
        await self.device("acd-1")
        legacy = await self.ok("PUT", "/sessions/a", {
            "run_mode": "assistant", "connector_device_id": "acd-1",
            "connector_workspace_path": "repo", "connector_auto_approve": True,
            "connector_command_prefixes": [" git status ", "git status", "", "ls"]})
        assert legacy["connector_approval_mode"] == "full_access"
        assert legacy["connector_auto_approve"] is True
        assert legacy["connector_command_prefixes"] == ["git status", "ls"]
        assert legacy["connector_workspace_path"] == "repo"
        chosen = await self.ok("PUT", "/sessions/b", {
            "run_mode": "assistant", "connector_device_id": "acd-1",
            "connector_workspace_path": "/srv/repo",
            "connector_approval_mode": "assistant", "connector_auto_approve": True})
        assert chosen["connector_approval_mode"] == "assistant"
        # §1.6: an unknown sandbox is refused (the forced ``full_access`` of a usable one:
        # tests/console/test_assistant_sandbox_runs.py)
        await self.refused_with("PUT", "/sessions/c", {
            "run_mode": "assistant", "cloud_sandbox_id": "acs-box",
            "connector_approval_mode": "manual"}, 400, "Cloud sandbox is unavailable")
        chat = await self.ok("PUT", "/sessions/d", {
            "connector_device_id": "acd-1", "connector_approval_mode": "full_access"})
        assert chat["connector_device_id"] == "" and chat["connector_approval_mode"] == "manual"

    async def test_a_saved_device_must_exist_and_be_the_users(self) -> None:
        """§2.5: saving a session only requires that the device exists (offline is fine);
        a missing or another user's device is 400 ``connector device not found`` (§1.6) and
        nothing is written."""
        await self.device("acd-mine")
        await self.device("acd-bobs", "bob")
        body = {"run_mode": "assistant", "connector_workspace_path": "/srv/repo"}
        for device_id in ("acd-nope", "acd-bobs"):
            for method, path in (("POST", "/sessions"), ("PUT", "/sessions/s1")):
                await self.refused_with(method, path, {**body, "id": "s1",
                                                       "connector_device_id": device_id},
                                        400, "connector device not found", tables=TABLES)
        saved = await self.ok("PUT", "/sessions/s1", {**body, "connector_device_id": "acd-mine"})
        assert saved["connector_device_id"] == "acd-mine"
        assert saved["connector_workspace_path"] == "/srv/repo"
        # the path length is checked first, whatever the device
        await self.refused_with("PUT", "/sessions/s1", {
            **body, "connector_device_id": "acd-nope",
            "connector_workspace_path": "/" + "w" * 1000}, 400, "workspace path is too long",
            tables=TABLES)
        await self.refused_with("PUT", "/sessions/s1", {**body, "connector_device_id": "acd-bobs"},
                                400, "connector device not found", tables=TABLES)
        # the stored session kept its device
        assert (await self.ok("GET", "/sessions/s1"))["connector_device_id"] == "acd-mine"

    async def test_a_saved_device_needs_a_workspace(self) -> None:
        """[P-22]: a web session that selects a device must name a workspace (unrestricted
        device access is for non-web channels); 400 ``Workspace path is required``, after the
        device's own checks, and nothing is written."""
        await self.device("acd-mine")
        body = {"run_mode": "assistant", "id": "s1", "connector_device_id": "acd-mine"}
        for method, path in (("POST", "/sessions"), ("PUT", "/sessions/s1")):
            await self.refused_with(method, path, body, 400, "Workspace path is required",
                                    tables=TABLES)
            await self.refused_with(method, path, {**body, "connector_workspace_path": "  "},
                                    400, "Workspace path is required", tables=TABLES)
        await self.refused_with("PUT", "/sessions/s1", {**body, "connector_device_id": "acd-no"},
                                400, "connector device not found", tables=TABLES)
        saved = await self.ok("PUT", "/sessions/s1", {**body, "connector_workspace_path": "/r"})
        assert saved["connector_workspace_path"] == "/r"

    async def test_internal_studio_sessions_are_immutable(self) -> None:
        await self.ok("PUT", "/sessions/pcw-1", {"title": "internal"})

        def mark_internal(conn: Any) -> None:
            conn.execute(schema.assistant_sessions.update().values(internal=True))
        await self.ctx.db.transaction(mark_internal)
        for method in ("PUT", "DELETE"):
            await self.refused_with(method, "/sessions/pcw-1", {"title": "x"}, 409,
                                    "Internal Studio sessions are immutable", tables=TABLES)
        assert (await self.ok("GET", "/sessions/pcw-1"))["title"] == "internal"


class PostgresSessionRouteTests(SessionRouteTests):
    backend = "postgresql"
