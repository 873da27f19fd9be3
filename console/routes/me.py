"""``GET /api/user/me``: the signed-in user with group, memberships and inviter (§4.1)."""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.user_view import user_view
from gateway.store import users as user_store


class MeRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def me(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        relations = await self.ctx.db.transaction(user_store.user_relations, user)
        return user_view(user, relations)
