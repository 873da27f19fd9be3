"""``GET /api/user/referral``: the caller's invite code, link, invitees and commissions (§4.5).

Invitees appear as id + username only, never their email, balance or flags (contract weakness
16).  The link is ``base_url`` (or the request's scheme and host) + ``/?ref=<code>``.
"""

from __future__ import annotations

from typing import Any

from console.context import ConsoleContext
from console.http import json_route, make_app
from console.user_view import timestamp
from gateway.billing.money import format_decimal, format_nanos
from gateway.billing.referral import commission_rate
from gateway.store import referrals as store


def _origin(ctx: ConsoleContext, request: Any) -> str:
    base = ctx.settings.text("base_url").strip().rstrip("/")
    if base:
        return base
    host = (request.getHeader(b"host") or b"localhost").decode("latin-1")
    scheme = "https" if request.isSecure() else "http"
    return f"{scheme}://{host}"


def _log_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"], "referrer_id": row["referrer_id"],
        "referred_user_id": row["referred_user_id"], "token_log_id": row["token_log_id"],
        "request_id": row["request_id"], "base_cost": format_nanos(row["base_cost_nanos"]),
        "rate": format_nanos(row["rate_nanos"]), "amount": format_nanos(row["amount_nanos"]),
        "created_at": timestamp(row["created_at"]),
        "referred_user": {"id": row["referred_user_id"],
                          "username": row["referred_username"]},
    }


class ReferralRoutes:
    app = make_app()

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @app.route("/", methods=["GET"])
    @json_route
    async def show(self, request: Any) -> dict[str, Any]:
        user = await self.ctx.sessions.user_row(request)
        summary = await self.ctx.db.transaction(store.referral_summary, user["id"])
        settings = self.ctx.settings
        code = user["referral_code"]
        return {
            "enabled": settings.flag("referral_enabled"),
            "code": code, "link": f"{_origin(self.ctx, request)}/?ref={code}",
            "commission_rate": format_decimal(
                commission_rate(settings.text("referral_commission_rate"))),
            "invite_count": summary["invite_count"],
            "invitees": summary["invitees"],
            "total_commission": format_nanos(summary["total_commission_nanos"]),
            "recent_logs": [_log_view(r) for r in summary["recent"]],
        }
