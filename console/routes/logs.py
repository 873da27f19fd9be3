"""``GET /api/logs`` and ``DELETE /api/logs`` (admin): every user's usage logs (§5.2).

GET takes the filters of ``console.services.log_query`` plus ``user_id``.  DELETE empties every
log table (decision D18; retention settings drive the periodic job instead, see
``gateway.retention``) and answers ``{"deleted": n}``.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.services import log_query
from gateway.store.usage_queries import delete_all_logs

log = Logger()


class LogRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def index(self, request: Any) -> Any:
        await self.ctx.sessions.admin(request)
        query = log_query.parse_log_query(request, admin=True)
        return await log_query.answer(self.ctx, query)

    @app.route("/", methods=["DELETE"])
    @json_route
    async def clear(self, request: Any) -> dict[str, Any]:
        admin = await self.ctx.sessions.admin(request)
        deleted = await self.ctx.db.transaction(delete_all_logs)
        log.info("admin {admin_id} deleted all logs ({deleted} rows)", admin_id=admin["id"],
                 deleted=deleted)
        return {"deleted": deleted}
