"""``/api/advanced-chat/settings`` (admin): the assistant chat settings (agents contract §1.1).

A PUT is partial, but the whole body is checked before anything is written; the rows then go
to the settings table in one transaction and every node reloads its snapshot.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app, read_object
from console.services.assistant.settings_view import admin_view
from gateway.assistant.admin_settings import SettingsRefused, plan_update

log = Logger()
ADMIN_REQUIRED = "Admin permission required"


class AssistantAdminSettingsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    async def _admin(self, request: Any) -> None:
        """Agents contract §0 words the non-admin refusal differently from the console's."""
        try:
            await self.ctx.sessions.admin(request)
        except ApiError as refused:
            if refused.status == 403:
                raise ApiError(403, ADMIN_REQUIRED) from None
            raise

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        await self._admin(request)
        return admin_view(self.ctx.settings)

    @app.route("/", methods=["PUT"])
    @json_route
    async def update(self, request: Any) -> dict[str, Any]:
        await self._admin(request)
        body = read_object(request)
        try:
            rows = plan_update(body, int(self.ctx.clock.seconds() * 1_000_000_000))
        except SettingsRefused as refused:
            raise bad_request(str(refused), field=refused.field) from None
        if rows:
            try:
                await self.ctx.live_settings.save(rows, self.ctx.now())
            except Exception:
                log.failure("saving the assistant settings failed")
                raise ApiError(500, "Failed to update agent chat settings") from None
        return admin_view(self.ctx.settings)
