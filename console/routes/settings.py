"""``GET/PUT /api/settings`` (admin): validated all-or-nothing, secrets write-only (§5.4).

PUT is a partial update: only the keys present change; the whole body is validated before the
one transaction that writes it, and every node reloads afterwards.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred

from console.context import ConsoleContext
from console.http import ApiError, json_route, make_app, read_object
from console.services.settings import transfer as settings_transfer
from console.services.settings.views import admin_view
from gateway.settings.spec import SettingError


class SettingsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        return admin_view(self.ctx.settings, self.ctx.node_name)

    @app.route("/", methods=["PUT"])
    @json_route
    async def update(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        body = read_object(request)
        try:
            rows = self.ctx.settings.validate_update(body, node_name=self.ctx.node_name)
        except SettingError as exc:
            raise ApiError(400, str(exc), field=exc.key) from None
        if rows:
            await self.ctx.live_settings.save(rows, self.ctx.now())
        return admin_view(self.ctx.settings, self.ctx.node_name)

    @app.route("/export", methods=["POST"])
    def export(self, request: Any) -> Any:
        """Configuration backup (§5.5): see ``console.services.settings_transfer``."""
        return ensureDeferred(settings_transfer.export_response(self.ctx, request))

    @app.route("/import", methods=["POST"])
    @json_route
    async def import_config(self, request: Any) -> dict[str, Any]:
        return await settings_transfer.import_request(self.ctx, request)
