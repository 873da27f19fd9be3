"""``GET /api/user/me``: the signed-in user with group, memberships and inviter (§4.1)."""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.user_view import user_view


class MeRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def me(self, request: Any) -> dict[str, Any]:
        user, relations = await self.ctx.sessions.user_with_relations(request)
        return user_view(user, relations)
