"""``GET /api/public/settings``: the settings anyone may read (contract §3.1)."""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.services.settings.views import public_view


class PublicSettingsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def settings(self, request: Any) -> dict[str, Any]:
        return public_view(self.ctx.settings)
