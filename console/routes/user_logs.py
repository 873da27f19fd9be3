"""``GET /api/user/logs``: the caller's own usage logs (console contract §4.4).

Same filters and dual-mode answer as the admin list, always scoped to the caller (a
``user_id`` parameter is ignored).
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.services import log_query


class UserLogRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> Any:
        user = await self.ctx.sessions.user(request)
        query = log_query.parse_log_query(request, user_id=user["id"])
        return await log_query.answer(self.ctx, query)
