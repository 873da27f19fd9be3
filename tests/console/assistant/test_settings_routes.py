"""``/api/advanced-chat/settings`` (admin) and the user's ``/settings`` and ``/mcp-servers``:
defaults, partial PUTs validated as a whole, header visibility, and the [P-2] list rules."""

from __future__ import annotations

from typing import Any

from tests.console.assistant.assistant_case import AssistantCase

ADMIN_PATH = "/api/advanced-chat/settings"
DOCS = {"id": "docs", "name": "Docs", "url": "https://docs.example.com/mcp",
        "headers": "Authorization: Bearer secret"}


class AdminSettingsTests(AssistantCase):
    async def put(self, body: Any) -> Any:
        return await self.api("PUT", ADMIN_PATH, body)

    async def test_defaults_and_a_partial_update(self) -> None:
        shown = (await self.api("GET", ADMIN_PATH)).json()
        assert shown["enabled"] is True and shown["default_model"] == ""
        assert shown["attachment_max_mb"] == 10 and shown["assistant_run_timeout_seconds"] == 1800
        assert shown["attachment_allowed_types"][0] == "text/plain"
        assert shown["builtin_mcp_servers"] == [] and shown["message_channel_enabled"] is False
        assert shown["sandbox_storage_settle_interval_seconds"] == 3600
        updated = await self.put({
            "attachment_max_mb": "20", "default_model": "gpt-x", "enabled": False,
            "attachment_allowed_types": [" Text/Plain ", "text/plain", "x" * 101, "image/png"],
            "builtin_mcp_servers": [DOCS, {"name": "Tools", "url": "http://tools.example/mcp"}],
            "not_a_setting": 1})
        assert updated.status == 200, updated
        body = updated.json()
        assert body["attachment_max_mb"] == 20 and body["default_model"] == "gpt-x"
        assert body["enabled"] is False and body["assistant_mode_enabled"] is True
        assert body["attachment_allowed_types"] == ["text/plain", "image/png"]
        docs, tools = body["builtin_mcp_servers"]
        assert docs["headers"] == "Authorization: Bearer secret"  # the admin sees headers
        assert docs["request_mode"] == "backend" and docs["type"] == "http"
        assert tools["id"].startswith("mcp-") and tools["enabled"] is True
        assert (await self.api("GET", ADMIN_PATH)).json() == body

    async def test_a_bad_field_refuses_the_whole_body(self) -> None:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"attachment_max_mb": 0}, "Attachment size must be between 1 and 100 MB"),
            ({"attachment_max_mb": "many"}, "Attachment size must be between 1 and 100 MB"),
            ({"attachment_allowed_types": ["  "]}, "At least one attachment type is required"),
            ({"file_storage_total_mb": 102401},
             "File storage quota must be between 1 and 102400 MB"),
            ({"assistant_run_timeout_seconds": 299},
             "Assistant run timeout must be between 300 and 86400 seconds"),
            ({"agent_group_run_timeout_seconds": 86401},
             "Studio run timeout must be between 300 and 86400 seconds"),
            ({"sandbox_storage_settle_interval_seconds": 9},
             "Storage settle interval must be between 10 and 86400 seconds"),
            ({"builtin_mcp_servers": [{"name": "x", "url": "ftp://x"}]},
             "Invalid MCP server configuration"),
            ({"builtin_mcp_servers": [DOCS, DOCS]}, "Invalid MCP server configuration"),
            ({"builtin_mcp_servers": [{"name": "x", "type": "connector"}]},
             "Invalid MCP server configuration"),
            ({"builtin_mcp_servers": [{"name": "x", "url": "http://x", "headers": "{\"a\": 1}"}]},
             "Invalid MCP server configuration"),
            ({"builtin_mcp_servers": [{"name": f"s{i}", "url": "http://x"} for i in range(21)]},
             "Invalid MCP server configuration"),
            ({"default_model": "m" * 101}, "Default model is too long"),
            ({"enabled": "yes"}, "enabled must be a boolean"),
        ]
        await self.admin()
        for extra, message in cases:
            # a valid field first: the origin saved it before failing on the next one
            body = {"default_model": "changed", **extra}
            await self.assert_refused("PUT", ADMIN_PATH, body, 400, ("settings",),
                                      message=message)
        assert (await self.api("GET", ADMIN_PATH)).json()["default_model"] == ""

    async def test_only_an_admin(self) -> None:
        await self.users()
        for method in ("GET", "PUT"):
            response = await self.call(method, ADMIN_PATH, {}, token=self.alice)
            assert response.status == 403, response
            assert response.json()["error"] == "Admin permission required"
        assert (await self.call("GET", ADMIN_PATH)).status == 401

    async def test_generic_settings_routes_do_not_take_these_keys(self) -> None:
        await self.put({"default_model": "gpt-x"})
        admin_view = (await self.api("GET", "/api/settings")).json()
        assert not any(key.startswith("advanced_chat_") for key in admin_view)
        refused = await self.api("PUT", "/api/settings", {"advanced_chat_default_model": "x"})
        assert refused.status == 400, refused


class UserSettingsTests(AssistantCase):
    async def test_user_view_merges_servers_and_strips_builtin_headers(self) -> None:
        await self.admin()
        await self.api("PUT", ADMIN_PATH, {"builtin_mcp_servers": [DOCS],
                                           "default_model": "gpt-x"})
        shown = await self.ok("GET", "/settings")
        assert shown["enabled"] is True and shown["default_model"] == "gpt-x"
        assert shown["title_generation_scope"] == "recent"
        assert "title_user_channel_id" not in shown and shown["file_storage_used_bytes"] == 0
        assert shown["builtin_mcp_servers"] == [{
            "id": "docs", "name": "Docs", "type": "http", "url": "https://docs.example.com/mcp",
            "enabled": True, "request_mode": "backend"}]
        custom = {"id": "mine", "name": "Mine", "url": "https://mine.example/mcp",
                  "headers": '{"X-Key": "k"}'}
        connector = {"name": "Local", "type": "connector", "command": "npx",
                     "args": ["-y", "server"], "env": {"A": "1"}, "request_mode": "ignored"}
        replaced = await self.ok("PUT", "/mcp-servers", {"servers": [custom, connector]})
        assert [s["id"] for s in replaced["mcp_servers"]][:2] == ["docs", "mine"]
        assert all("headers" not in s for s in replaced["mcp_servers"])
        mine, local = replaced["custom_mcp_servers"]
        assert mine["headers"] == '{"X-Key": "k"}'  # the user's own headers are shown
        assert local["request_mode"] == "connector" and local["id"].startswith("mcp-")
        assert local["args"] == ["-y", "server"] and local["env"] == {"A": "1"}
        # bob sees none of alice's servers
        assert (await self.ok("GET", "/settings", token=self.bob))["custom_mcp_servers"] == []
        # the origin's key works too, and [] clears the list
        cleared = await self.ok("PUT", "/mcp-servers", {"custom_mcp_servers": []})
        assert cleared["custom_mcp_servers"] == []

    async def test_server_list_refusals(self) -> None:
        await self.admin()
        await self.api("PUT", ADMIN_PATH, {"builtin_mcp_servers": [DOCS]})
        tables = ("assistant_user_settings",)
        await self.refused_with("PUT", "/mcp-servers", {}, 400, "servers is required",
                                tables=tables)
        for servers in ([{**DOCS, "headers": ""}],  # shadows a builtin id
                        [{"name": "", "url": "http://x"}],
                        [{"name": "n", "type": "connector", "command": "c",
                          "env": {"A=B": "x"}}],
                        "not a list"):
            await self.refused_with("PUT", "/mcp-servers", {"servers": servers}, 400,
                                    "Invalid MCP server configuration", tables=tables)

    async def test_title_settings_and_the_approval_agent(self) -> None:
        await self.users()
        agent = await self.ok("POST", "/agents", {"name": "Checker"})
        saved = await self.ok("PUT", "/settings", {
            "title_model_name": "small", "title_user_channel_id": 3,
            "title_generation_scope": "all", "connector_approval_agent_id": agent["id"]})
        assert saved["title_model_name"] == "small" and saved["title_user_channel_id"] == 3
        assert saved["title_generation_scope"] == "all"
        assert saved["connector_approval_agent_id"] == agent["id"]
        # absent fields are overwritten with empty values; unknown scope -> recent
        reset = await self.ok("PUT", "/settings", {"title_generation_scope": "weekly"})
        assert reset["title_model_name"] == "" and reset["title_generation_scope"] == "recent"
        assert reset["connector_approval_agent_id"] == ""
        await self.refused_with("PUT", "/settings", {"title_model_name": "m" * 101}, 400,
                                "Title model is too long")
        # bob's agent id is not alice's agent
        bobs = await self.ok("POST", "/agents", {"name": "Bob's"}, token=self.bob)
        await self.refused_with("PUT", "/settings", {"connector_approval_agent_id": bobs["id"]},
                                400, "Approval agent not found",
                                tables=("assistant_user_settings",))
