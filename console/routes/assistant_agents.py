"""``/api/user/advanced-chat/agents``: the user's chat agents (agents contract §1.4).

Listing first makes sure the user's ``default`` agent exists.  Another user's agent id answers
exactly like a missing one (404 ``Agent not found``).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, read_object
from console.services.assistant import tx
from console.services.assistant.agent_input import read_agent
from console.services.assistant.settings_view import builtin_ids
from console.services.assistant.views import agent_view
from gateway.store.assistant import agents as store

BODY_LIMIT = 1 << 20


class AssistantAgentRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await tx.run(self.ctx, store.list_agents, user["id"], self.ctx.now())
        return [agent_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        values = read_agent(read_object(request, limit=BODY_LIMIT))
        row = await tx.run(self.ctx, store.create_agent, user["id"], values,
                           builtin_ids(self.ctx.settings), self.ctx.now())
        return agent_view(row)

    @app.route("/<agent_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, agent_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        row = await tx.run(self.ctx, store.get_agent, user["id"], agent_id, self.ctx.now())
        return agent_view(row)

    @app.route("/<agent_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, agent_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        body = read_object(request, limit=BODY_LIMIT)
        # the default agent keeps its name, so its body need not carry one
        if agent_id == store.DEFAULT_KEY and not str(body.get("name") or "").strip():
            body = {**body, "name": store.DEFAULT_NAME}
        values = read_agent(body)
        row = await tx.run(self.ctx, store.update_agent, user["id"], agent_id, values,
                           builtin_ids(self.ctx.settings), self.ctx.now())
        return agent_view(row)

    @app.route("/<agent_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, agent_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        await tx.run(self.ctx, store.delete_agent, user["id"], agent_id, self.ctx.now())
        return {"message": "Agent deleted"}
