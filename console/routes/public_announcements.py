"""``GET /api/public/announcements`` (no auth): enabled announcements in display order (§3.4)."""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.routes.announcements import announcement_view
from gateway.store import announcements as store


class PublicAnnouncementRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> list[dict[str, Any]]:
        rows = await self.ctx.db.transaction(store.list_announcements, enabled_only=True)
        return [announcement_view(row) for row in rows]
