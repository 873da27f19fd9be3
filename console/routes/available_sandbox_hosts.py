"""``GET /api/user/advanced-chat/sandbox-hosts/available`` (agents contract §3.4).

The hosts a user may create sandboxes on: every enabled host, sorted by name, with its
``online`` state, prices, policy and ``available_range`` -- clients offer only the online ones
(creation refuses the others, [P-26]).  Disabled hosts are not listed.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.services.sandboxes.host_view import host_view
from gateway.store import sandbox_hosts


class AvailableSandboxHostRoutes:
    """Mounted at ``/api/user/advanced-chat/sandbox-hosts``."""

    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/available", methods=["GET"])
    @json_route
    async def available(self, request: Any) -> list[dict[str, Any]]:
        await self.ctx.sessions.user(request)
        pairs = await self.ctx.db.transaction(sandbox_hosts.list_enabled)
        now = self.ctx.now()
        return [host_view(host, device, now) for host, device in pairs]
