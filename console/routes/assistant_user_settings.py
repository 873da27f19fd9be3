"""``/api/user/advanced-chat/settings`` and ``/mcp-servers`` (agents contract §1.2, §1.3).

The user's settings row is created the first time it is read.  ``PUT /mcp-servers`` replaces
the user's whole custom server list ([P-2]: ``servers`` or ``custom_mcp_servers``), refusing a
list with any bad item or an id that a builtin server already has.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from console.context import ConsoleContext
from console.http import bad_request, json_route, make_app, read_object
from console.services.assistant import tx
from console.services.assistant.settings_view import builtin_ids, user_view
from console.services.assistant.text_rules import text, whole_number
from gateway.assistant import mcp_servers
from gateway.assistant.ids import mcp_server_id
from gateway.store.assistant import agents
from gateway.store.assistant.refused import invalid
from gateway.store.assistant.rows import UserSettingsRow
from gateway.store.assistant.user_settings import save_user_settings, user_settings
from gateway.store.connection import Connection

#: a custom server list may carry long headers and connector env values
SERVERS_BODY_LIMIT = 4 << 20


def _save_title_settings(conn: Connection, user_id: int, values: dict[str, Any],
                         now: datetime) -> UserSettingsRow:
    agent_key = values["connector_approval_agent_id"]
    if agent_key and agents.find_agent(conn, user_id, agent_key, now) is None:
        raise invalid("Approval agent not found")
    return save_user_settings(conn, user_id, values, now)


class AssistantUserSettingsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await tx.run(self.ctx, user_settings, user["id"], self.ctx.now())
        return user_view(self.ctx.settings, row)

    @app.route("/", methods=["PUT"])
    @json_route
    async def update(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request)
        scope = body.get("title_generation_scope")
        values = {
            "title_model_name": text(body, ("title_model_name",), 100, "Title model is too long"),
            "title_user_channel_id": max(0, whole_number(body, ("title_user_channel_id",))),
            "title_generation_scope": "all" if scope == "all" else "recent",
            "connector_approval_agent_id": text(body, ("connector_approval_agent_id",), 32,
                                                "Approval agent not found"),
        }
        row = await tx.run(self.ctx, _save_title_settings, user["id"], values, self.ctx.now())
        return user_view(self.ctx.settings, row)


class AssistantMcpServerRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["PUT"])
    @json_route
    async def replace(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request, limit=SERVERS_BODY_LIMIT)
        key = next((k for k in ("servers", "custom_mcp_servers") if k in body), None)
        if key is None:
            raise bad_request("servers is required", field="servers")
        unix_nanos = int(self.ctx.clock.seconds() * 1_000_000_000)
        try:
            servers = mcp_servers.read_servers(body[key],
                                               lambda i: mcp_server_id(unix_nanos, i))
        except mcp_servers.InvalidServers:
            raise bad_request(mcp_servers.INVALID, field=key) from None
        builtin = set(builtin_ids(self.ctx.settings))
        if any(server["id"] in builtin for server in servers):
            raise bad_request(mcp_servers.INVALID, field=key)
        row = await tx.run(self.ctx, save_user_settings, user["id"],
                           {"custom_mcp_servers": servers}, self.ctx.now())
        return user_view(self.ctx.settings, row)
