"""``GET /api/user/stats``: the caller's balance, primary group, calls, spend, rate and trend.

Console contract §4.3: ``balance``, ``group`` (the real primary group, where the origin sent an
empty object), ``total_requests``, ``today_requests`` (since UTC midnight), ``total_cost``,
``rpm`` / ``tpm`` (requests and input+output tokens in the last 60 s), plus ``trend`` for the
last 7 UTC days.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.routes.stats import trend_days, trend_view, utc_midnight
from console.user_view import group_view
from gateway.billing.money import format_nanos
from gateway.store.usage_queries import user_stats


class UserStatsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        user, relations = await self.ctx.sessions.user_with_relations(request)
        now = self.ctx.now()
        stats = await self.ctx.db.transaction(
            user_stats, user["id"], utc_midnight(now), now - timedelta(seconds=60),
            trend_days(now))
        group = relations.get("group")
        return {
            "balance": format_nanos(user["balance_nanos"]),
            "group": group_view(group) if group else None,
            "total_requests": stats["total_requests"],
            "today_requests": stats["today_requests"],
            "total_cost": format_nanos(stats["total_cost_nanos"]),
            "rpm": stats["rpm"],
            "tpm": stats["tpm"],
            "trend": trend_view(stats["trend"]),
        }
