"""``GET /api/channel-usage`` (admin): usage totals per user channel and upstream channel.

Console contract §5.3: all-time aggregates from the usage logs (optionally bounded by
``from``/``to`` and their aliases), every channel listed even without traffic; user channels by
name, upstream channels by priority DESC, weight DESC, name.  ``total_tokens`` = input + output.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.services.log_query import parse_time, query_value
from gateway.billing.money import format_nanos
from gateway.store.usage_queries import channel_usage

ZERO_USAGE = {"request_count": 0, "input_tokens": 0, "output_tokens": 0,
              "cached_input_tokens": 0, "cost_nanos": 0}


def _usage_fields(usage: dict[str, int]) -> dict[str, Any]:
    return {
        "request_count": usage["request_count"],
        "input_tokens": usage["input_tokens"],
        "output_tokens": usage["output_tokens"],
        "cached_input_tokens": usage["cached_input_tokens"],
        "total_tokens": usage["input_tokens"] + usage["output_tokens"],
        "total_cost": format_nanos(usage["cost_nanos"]),
    }


def usage_view(data: dict[str, Any]) -> dict[str, Any]:
    names = {uc["id"]: uc["name"] for uc in data["user_channels"]}
    user_channels = [{
        "id": uc["id"], "name": uc["name"], "description": uc["description"],
        "routing_algorithm": uc["routing_algorithm"],
        "multiplier": format_nanos(uc["multiplier_nanos"]),
        **_usage_fields(data["by_user_channel"].get(uc["id"], ZERO_USAGE)),
    } for uc in data["user_channels"]]
    channels = [{
        "id": ch["id"], "name": ch["name"], "type": ch["type"],
        "user_channel_id": ch["user_channel_id"],
        "user_channel_name": names.get(ch["user_channel_id"], ""),
        "priority": ch["priority"], "weight": ch["weight"],
        **_usage_fields(data["by_channel"].get(ch["id"], ZERO_USAGE)),
    } for ch in data["channels"]]
    return {"user_channels": user_channels, "upstream_channels": channels}


class ChannelUsageRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        await self.ctx.sessions.admin(request)
        start = query_value(request, "from", "start_time", "start_date")
        end = query_value(request, "to", "end_time", "end_date")
        data = await self.ctx.db.transaction(
            channel_usage, parse_time(start, end=False) if start else None,
            parse_time(end, end=True) if end else None)
        return usage_view(data)
