"""``/api/user/advanced-chat/skills``: the user's editable skills (agents contract §1.5, [P-5]).

Deleting a skill also removes it from the user's agents (same transaction).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app, read_object
from console.services.assistant import tx
from console.services.assistant.settings_view import builtin_ids
from console.services.assistant.skill_input import read_skill
from console.services.assistant.views import skill_view
from gateway.store.assistant import skills as store

#: a skill's content may be up to 200000 characters (up to 4 bytes each in UTF-8)
BODY_LIMIT = 2 << 20


class AssistantSkillRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        user = await self.ctx.sessions.user(request)
        rows = await tx.run(self.ctx, store.list_skills, user["id"])
        return [skill_view(row) for row in rows]

    @app.route("/", methods=["POST"])
    @json_route
    async def create(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        values = read_skill(read_object(request, limit=BODY_LIMIT))
        row = await tx.run(self.ctx, store.create_skill, user["id"], values,
                           builtin_ids(self.ctx.settings), self.ctx.now())
        return skill_view(row)

    @app.route("/<skill_id>", methods=["GET"])
    @json_route
    async def show(self, request: Any, skill_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        return skill_view(await tx.run(self.ctx, store.get_skill, user["id"], skill_id))

    @app.route("/<skill_id>", methods=["PUT"])
    @json_route
    async def update(self, request: Any, skill_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        values = read_skill(read_object(request, limit=BODY_LIMIT))
        row = await tx.run(self.ctx, store.update_skill, user["id"], skill_id, values,
                           builtin_ids(self.ctx.settings), self.ctx.now())
        return skill_view(row)

    @app.route("/<skill_id>", methods=["DELETE"])
    @json_route
    async def delete(self, request: Any, skill_id: str) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        await tx.run(self.ctx, store.delete_skill, user["id"], skill_id, self.ctx.now())
        return {"message": "Skill deleted"}
