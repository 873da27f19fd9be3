"""``GET /api/stats`` (admin): users, channels, calls, spend, revenue and a 7-day trend (§5.1).

Keeps the origin's four fields (``users``, ``channels``, ``total_cost``, ``today_requests``)
and adds ``total_requests``, ``today_cost``, ``revenue`` (paid orders) and ``trend``.  "Today"
and the trend days are UTC days, like the origin.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from gateway.billing.money import format_nanos
from gateway.store.usage_queries import admin_stats

TREND_DAYS = 7


def utc_midnight(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def trend_days(now: datetime, count: int = TREND_DAYS) -> list[tuple[str, datetime, datetime]]:
    """(``YYYY-MM-DD``, start, end) for the last ``count`` UTC days, oldest first, today last."""
    today = utc_midnight(now)
    days = []
    for back in range(count - 1, -1, -1):
        start = today - timedelta(days=back)
        days.append((start.date().isoformat(), start, start + timedelta(days=1)))
    return days


def trend_view(trend: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"date": day["date"], "requests": day["requests"],
             "cost": format_nanos(day["cost_nanos"])} for day in trend]


class StatsRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        now = self.ctx.now()
        stats = await self.ctx.db.transaction(admin_stats, utc_midnight(now), trend_days(now))
        return {
            "users": stats["users"],
            "channels": stats["channels"],
            "total_requests": stats["total_requests"],
            "total_cost": format_nanos(stats["total_cost_nanos"]),
            "today_requests": stats["today_requests"],
            "today_cost": format_nanos(stats["today_cost_nanos"]),
            "revenue": format_nanos(stats["revenue_nanos"]),
            "trend": trend_view(stats["trend"]),
        }
