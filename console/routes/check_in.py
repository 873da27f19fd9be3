"""``/api/user/check-in``: status, records and the daily check-in itself (console contract §4.6).

A second check-in on the same local day -- concurrent or not -- answers 400 ``Already checked
in today`` and credits nothing (contract weakness 9).  After a reward the gateway's cached
balance of the user is dropped and ``USERS`` announced, so the new balance is spendable at once.
"""

from __future__ import annotations

import re
from typing import Any

from console.context import ConsoleContext
from console.http import ApiError, bad_request, json_route, make_app
from console.services.log_query import ENVELOPE_PARAMS, query_value
from console.services.wallet.check_in import (
    CheckInConfig,
    current_streak,
    dates,
    record_view,
)
from console.services.wallet.redeem import after_balance_change
from console.validation import page_value
from gateway.billing.money import format_decimal, format_nanos
from gateway.store import check_ins as store

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
PLAIN_LIMIT = 100


def _date_bound(value: str | None) -> str | None:
    if value is None:
        return None
    head = value[:10]
    if not _DATE.match(head):
        raise bad_request("invalid date format")
    return head




class CheckInRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/status", methods=["GET"])
    @json_route
    async def status(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        config = CheckInConfig.from_settings(self.ctx.settings)
        today, yesterday = dates(config, self.ctx.now())
        recent = await self.ctx.db.transaction(store.latest, user["id"], 7)
        streak = current_streak(recent[0] if recent else None, today, yesterday)
        view: dict[str, Any] = {
            "enabled": config.enabled,
            "checked_in_today": bool(recent) and recent[0]["check_in_date"] == today,
            "current_streak": streak,
            "today_reward_preview": format_decimal(config.preview()),
            "random_enabled": config.random_enabled,
            "random_min": format_decimal(config.random_min),
            "random_max": format_decimal(config.random_max),
            "currency_display_name": config.currency,
            "recent_records": [record_view(r) for r in recent],
        }
        upcoming = config.next_streak_reward(streak)
        if upcoming is not None:
            view["next_streak_reward"] = upcoming
        return view

    @app.route("/records", methods=["GET"])
    @json_route
    async def records(self, request: Any) -> Any:
        user = await self.ctx.sessions.user(request)
        start = _date_bound(query_value(request, "from", "start_date", "start_time"))
        end = _date_bound(query_value(request, "to", "end_date", "end_time"))
        envelope = any(query_value(request, name) is not None for name in ENVELOPE_PARAMS)
        page = page_value(query_value(request, "page"), 1, "page") if envelope else 1
        size = (min(page_value(query_value(request, "page_size"), DEFAULT_PAGE_SIZE, "page_size"),
                    MAX_PAGE_SIZE) if envelope else PLAIN_LIMIT)
        result = await self.ctx.db.transaction(store.records, user["id"], start, end, page, size)
        items = [record_view(r) for r in result["items"]]
        if not envelope:
            return items
        return {"items": items, "total": result["total"], "page": page, "page_size": size}

    @app.route("/", methods=["POST"])
    @json_route
    async def check_in(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user(request)
        config = CheckInConfig.from_settings(self.ctx.settings)
        if not config.enabled:
            raise bad_request("Check-in is disabled")
        now = self.ctx.now()
        today, yesterday = dates(config, now)
        try:
            result = await self.ctx.db.transaction(
                store.check_in, user["id"], today, yesterday, config.rule(), now)
        except store.AlreadyCheckedIn:
            raise ApiError(400, "Already checked in today", type="already_checked_in") from None
        if result["reward_amount_nanos"]:
            await after_balance_change(self.ctx, user["id"])
        return {"reward_amount": format_nanos(result["reward_amount_nanos"]),
                "reward_kind": result["reward_kind"], "streak_days": result["streak_days"],
                "check_in_date": result["check_in_date"],
                "balance": format_nanos(result["balance_nanos"]),
                "currency_display_name": config.currency}
